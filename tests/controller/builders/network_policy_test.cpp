// Rendering of the opt-in NetworkPolicy (builders/network_policy.cpp) through render_relay, pure.
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/relay_resources.hpp"
#include "controller/relay_sample.hpp"

namespace outbox::controller {
namespace {

const Json kPrometheus = {
    {"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", "monitoring"}}}}}};
const Json kDatabase = {{"to", Json::array({{{"ipBlock", {{"cidr", "10.0.3.7/32"}}}}})},
                        {"ports", Json::array({{{"port", 5432}}})}};
const Json kBrokers = {
    {"to", Json::array({{{"namespaceSelector", {{"matchLabels", {{"team", "kafka"}}}}}}})},
    {"ports", Json::array({{{"port", 9092}, {"protocol", "TCP"}}})}};

Json relay_with_policy(const Json& policy) {
  return testing::sample_relay({{"networkPolicy", policy}});
}

std::vector<std::string> kinds(const RenderedRelay& r) {
  std::vector<std::string> out;
  for (const auto& o : r.objects) {
    out.push_back(o.object.at("kind"));
  }
  return out;
}

const OwnedObject* find_policy(const RenderedRelay& r) {
  for (const auto& o : r.objects) {
    if (o.resource == &owned::network_policies) {
      return &o;
    }
  }
  return nullptr;
}

TEST(NetworkPolicy, NoneUnlessEnabledAndTheOldOneIsPruned) {
  RenderOptions opts{"img:1"};
  for (const Json& r : {testing::sample_relay(), relay_with_policy({{"enabled", false}})}) {
    RenderedRelay rendered = render_relay(r, opts);
    EXPECT_EQ(find_policy(rendered), nullptr);
    EXPECT_FALSE(rendered.wants_network_policy);
    EXPECT_EQ(rendered.network_policy_name, "orders-relay");
  }
}

TEST(NetworkPolicy, EveryPodOfTheResourceMetricsFromThePeersEgressToDnsApiServerAndTheRules) {
  RenderOptions opts{"img:1"};
  RenderedRelay rendered =
      render_relay(relay_with_policy({{"enabled", true},
                                      {"metricsFrom", Json::array({kPrometheus})},
                                      {"egress", Json::array({kDatabase, kBrokers})}}),
                   opts);
  EXPECT_TRUE(rendered.wants_network_policy);
  const OwnedObject* np = find_policy(rendered);
  ASSERT_NE(np, nullptr);
  const Json& o = np->object;
  EXPECT_EQ(o.at("apiVersion"), "networking.k8s.io/v1");
  EXPECT_EQ(o.at("kind"), "NetworkPolicy");
  EXPECT_EQ(o.at("/metadata/name"_json_pointer), "orders-relay");
  EXPECT_EQ(o.at("/metadata/namespace"_json_pointer), "shop");
  EXPECT_EQ(o.at("/metadata/labels/app.kubernetes.io~1managed-by"_json_pointer), "outbox-operator");
  EXPECT_EQ(o.at("/metadata/ownerReferences/0/kind"_json_pointer), "OutboxRelay");
  EXPECT_EQ(o.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
  EXPECT_TRUE(o.at("/metadata/ownerReferences/0/controller"_json_pointer).get<bool>());
  // The relay, CronJob and Job pods all carry these two labels (and only they, with this
  // instance).
  EXPECT_EQ(o.at("/spec/podSelector"_json_pointer),
            Json({{"matchLabels",
                   {{"app.kubernetes.io/name", "outbox-relay"},
                    {"app.kubernetes.io/instance", "orders"}}}}));
  for (const auto& other : rendered.objects) {
    const Json labels = other.object.value(
        "/spec/template/metadata/labels"_json_pointer,
        other.object.value("/spec/jobTemplate/spec/template/metadata/labels"_json_pointer, Json()));
    if (!labels.is_null()) {
      EXPECT_EQ(labels.at("app.kubernetes.io/instance"), "orders") << other.object.at("kind");
      EXPECT_EQ(labels.at("app.kubernetes.io/name"), "outbox-relay") << other.object.at("kind");
    }
  }
  EXPECT_EQ(o.at("/spec/policyTypes"_json_pointer), Json::array({"Ingress", "Egress"}));
  EXPECT_EQ(o.at("/spec/ingress"_json_pointer),
            Json::array({{{"from", Json::array({kPrometheus})},
                          {"ports", Json::array({{{"port", 8080}, {"protocol", "TCP"}}})}}}));
  const Json& egress = o.at("/spec/egress"_json_pointer);
  ASSERT_EQ(egress.size(), 4U);
  EXPECT_EQ(egress[0], Json({{"ports", Json::array({{{"port", 53}, {"protocol", "UDP"}},
                                                    {{"port", 53}, {"protocol", "TCP"}}})}}));
  EXPECT_EQ(egress[1], Json({{"ports", Json::array({{{"port", 443}, {"protocol", "TCP"}},
                                                    {{"port", 6443}, {"protocol", "TCP"}}})}}));
  EXPECT_EQ(egress[2], kDatabase);
  EXPECT_EQ(egress[3], kBrokers);
  // Applied before the workloads, so their pods start confined.
  const std::vector<std::string> order = kinds(rendered);
  const auto at = [&](const char* kind) {
    return std::find(order.begin(), order.end(), kind) - order.begin();
  };
  EXPECT_GT(at("NetworkPolicy"), at("ConfigMap"));
  EXPECT_LT(at("NetworkPolicy"), at("Deployment"));
  EXPECT_LT(at("NetworkPolicy"), at("CronJob"));
}

TEST(NetworkPolicy, NoMetricsPeersMeansNoIngressRuleNotAnOpenOne) {
  RenderOptions opts{"img:1"};
  RenderedRelay rendered = render_relay(
      relay_with_policy({{"enabled", true}, {"egress", Json::array({kDatabase})}}), opts);
  const OwnedObject* np = find_policy(rendered);
  ASSERT_NE(np, nullptr);
  EXPECT_EQ(np->object.at("/spec/ingress"_json_pointer), Json::array());
}

TEST(NetworkPolicy, ApiServerEgressNarrowedToTheOperatorsCidrs) {
  RenderOptions opts{"img:1"};
  opts.api_server_cidrs = {"192.168.1.10/32", "192.168.1.11/32"};
  RenderedRelay rendered = render_relay(
      relay_with_policy({{"enabled", true}, {"egress", Json::array({kDatabase})}}), opts);
  const OwnedObject* np = find_policy(rendered);
  ASSERT_NE(np, nullptr);
  EXPECT_EQ(np->object.at("/spec/egress/1/to"_json_pointer),
            Json::array({{{"ipBlock", {{"cidr", "192.168.1.10/32"}}}},
                         {{"ipBlock", {{"cidr", "192.168.1.11/32"}}}}}));
}

}  // namespace
}  // namespace outbox::controller
