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

// Strimzi-shaped credentials: each Secret spec.kafka.tls and spec.kafka.authentication name is
// checked like the DSN's (Degraded, naming the Secret and the field), and its version is part
// of the pod template's secrets-hash, so rotating a KafkaUser's password rolls the relay pods
// (at the next resync).
TEST_F(ControllerE2E, StrimziCredentialSecretsAreCheckedAndTheirRotationRollsThePods) {
  // The operator does not watch Secrets: a rotation is seen at the next resync (short here).
  testing::ControllerProcess ctl(ns, {"--secret-recheck=1s", "--resync-period=2s"},
                                 "strimzi-" + ns);
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  Json spec = base_spec();
  spec["kafka"]["tls"] = {{"trustedCertificates", Json::array({{{"secretName", "cluster-ca"}}})}};
  spec["kafka"]["authentication"] = {{"type", "scram-sha-512"},
                                     {"username", "orders-relay"},
                                     {"passwordSecret", {{"secretName", "orders-user"}}}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  auto degraded_message = [&] {
    Json c = condition(relay("orders"), "Degraded");
    return c.value("reason", "") == "SecretNotFound" ? c.value("message", "") : "";
  };
  ASSERT_TRUE(eventually(
      [&] { return degraded_message().find("\"cluster-ca\"") != std::string::npos; }, 20s));
  EXPECT_NE(degraded_message().find("spec.kafka.tls.trustedCertificates"), std::string::npos)
      << degraded_message();
  testing::create_secret(client, ns, "cluster-ca", {{"ca.crt", "PEM"}});
  ASSERT_TRUE(eventually(
      [&] {
        return degraded_message().find("spec.kafka.authentication.passwordSecret") !=
               std::string::npos;
      },
      20s))
      << degraded_message();
  testing::create_secret(client, ns, "orders-user", {{"password", "one"}});
  const auto hash = [&] {
    try {
      return get(owned::deployments, "orders-relay")
          .at("/spec/template/metadata/annotations"_json_pointer)
          .value(kSecretsHashAnnotation, "");
    } catch (const kube::ApiError&) {
      return std::string();
    }
  };
  ASSERT_TRUE(eventually([&] { return !hash().empty(); }, 20s));
  const std::string before = hash();
  const Json volumes =
      get(owned::deployments, "orders-relay").at("/spec/template/spec/volumes"_json_pointer);
  EXPECT_NE(volumes.dump().find("\"secretName\":\"orders-user\""), std::string::npos)
      << volumes.dump();
  client.merge_patch(kSecrets, ns, "orders-user", {{"stringData", {{"password", "two"}}}});
  EXPECT_TRUE(eventually([&] { return hash() != before; }, 20s))
      << "a rotated password rolls the pods";
}

}  // namespace
}  // namespace outbox::controller
