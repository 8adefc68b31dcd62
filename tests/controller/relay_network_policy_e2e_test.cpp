// The opt-in NetworkPolicy against a real kube-apiserver: applied as an owned object when
// spec.networkPolicy.enabled, accepted by the API server's own validation, and deleted when
// turned off. (Whether traffic is blocked depends on a network plugin the test bed lacks.)
#include <gtest/gtest.h>

#include "controller_e2e.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

TEST_F(ControllerE2E, TheNetworkPolicyFollowsSpecNetworkPolicy) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {"--network-policy-api-server=192.168.7.1/32"},
                                 "netpol-" + ns);
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  EXPECT_THROW(get(owned::network_policies, "orders-relay"), kube::ApiError);

  const Json database = {{"to", Json::array({{{"ipBlock", {{"cidr", "10.0.3.7/32"}}}}})},
                         {"ports", Json::array({{{"port", 5432}, {"protocol", "TCP"}}})}};
  client.merge_patch(
      kOutboxRelays, ns, "orders",
      {{"spec",
        {{"networkPolicy",
          {{"enabled", true},
           {"metricsFrom",
            Json::array({{{"namespaceSelector",
                           {{"matchLabels", {{"kubernetes.io/metadata.name", "monitoring"}}}}}}})},
           {"egress", Json::array({database})}}}}}});
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  Json np;
  ASSERT_TRUE(eventually(
      [&] {
        np = get(owned::network_policies, "orders-relay");
        return true;
      },
      20s));
  EXPECT_EQ(np.at("/metadata/ownerReferences/0/name"_json_pointer), "orders");
  EXPECT_EQ(np.at("/spec/podSelector/matchLabels/app.kubernetes.io~1instance"_json_pointer),
            "orders");
  EXPECT_EQ(np.at("/spec/ingress/0/ports/0/port"_json_pointer), 8080);
  EXPECT_EQ(np.at("/spec/egress/1/to/0/ipBlock/cidr"_json_pointer), "192.168.7.1/32");
  EXPECT_EQ(np.at("/spec/egress/2"_json_pointer), database);
  EXPECT_EQ(condition(relay("orders"), "Degraded").value("status", ""), "False");

  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"spec", {{"networkPolicy", {{"enabled", false}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        try {
          get(owned::network_policies, "orders-relay");
          return false;
        } catch (const kube::ApiError& e) {
          return e.is_not_found();
        }
      },
      20s));
  EXPECT_TRUE(eventually([&] { return observed("orders"); }, 20s));
}

}  // namespace
}  // namespace outbox::controller
