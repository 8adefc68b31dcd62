// The Secret checks against a real kube-apiserver: a missing Secret makes the resource
// Degraded until it exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "controller_e2e.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

TEST_F(ControllerE2E, DegradedForAMissingSecretThenReadyFromTheDeploymentStatus) {
  testing::ControllerProcess ctl(ns, {"--secret-recheck=1s"}, "degraded-" + ns);
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));

  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("status", "") == "True"; }, 20s));
  Json degraded = condition(relay("orders"), "Degraded");
  EXPECT_EQ(degraded.at("reason"), "SecretNotFound");
  EXPECT_NE(degraded.at("message").get<std::string>().find("\"orders-db\""), std::string::npos);
  EXPECT_NE(degraded.at("message").get<std::string>().find("create secret generic"),
            std::string::npos);
  EXPECT_EQ(condition(relay("orders"), "Ready").value("status", ""), "False");
  ASSERT_TRUE(eventually([&] { return warning_events("SecretNotFound").size() == 1; }, 10s));
  EXPECT_THROW(get(owned::deployments, "orders-relay"), kube::ApiError);

  // The Secret exists, even without the key the resource names: the operator reads Secrets'
  // metadata only, so it applies; a missing key is the kubelet's to report, and the Ready
  // condition quotes it (tests/cluster: ReadyConditionSaysWhyRelayPodsAreNotReady...).
  testing::create_secret(client, ns, "orders-db", {{"password", "x"}});
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("orders"), "Degraded").value("status", "") == "False" &&
               get(owned::deployments, "orders-relay").contains("spec");
      },
      20s));
  EXPECT_EQ(warning_events("SecretNotFound").size(), 1u) << "one Event for one transition";
  Json ready = condition(relay("orders"), "Ready");
  EXPECT_EQ(ready.at("status"), "False");
  EXPECT_EQ(ready.at("reason"), "RelaysNotReady");
  EXPECT_EQ(condition(relay("orders"), "Progressing").at("status"), "True");

  // What a kubelet and the Deployment controller would report.
  Json dep = get(owned::deployments, "orders-relay");
  client.merge_patch(owned::deployments, ns, "orders-relay",
                     {{"status",
                       {{"observedGeneration", dep.at("/metadata/generation"_json_pointer)},
                        {"replicas", 2},
                        {"updatedReplicas", 2},
                        {"readyReplicas", 2},
                        {"availableReplicas", 2}}}},
                     "status");
  ASSERT_TRUE(eventually(
      [&] {
        Json r = relay("orders");
        return r.at("/status/relay/readyReplicas"_json_pointer) == 2 &&
               condition(r, "Ready").value("status", "") == "True" &&
               condition(r, "Progressing").value("status", "") == "False";
      },
      20s));
  std::string out = testing::kubectl("-n " + ns + " get obr orders");
  EXPECT_NE(out.find("True"), std::string::npos) << out;
  // `kubectl scale` works through the scale subresource and status.relay.selector.
  testing::kubectl("-n " + ns + " scale obr/orders --replicas=3");
  ASSERT_TRUE(eventually(
      [&] {
        return get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer) == 3;
      },
      20s));
}

}  // namespace
}  // namespace outbox::controller
