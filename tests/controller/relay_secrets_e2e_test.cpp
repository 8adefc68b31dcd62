// A missing Secret against a real kube-apiserver, told as the kubelet tells it (the operator
// reads no Secret): the relay pods wait in ContainerCreating and their FailedMount Events name
// the Secret; the resource is Degraded until the pods start. There is no kubelet here, so the
// test writes what one would: the pod, its status, its Event, the Deployment's status.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "api/outbox_relay.hpp"
#include "controller_e2e.hpp"
#include "support/testbed.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;
using api::format_time;

const kube::Resource kPods{"", "v1", "pods", true};

// The relay container's status as the kubelet reports it, in `state` (waiting, running).
Json relay_container_status(const Json& state) {
  return Json::array({{{"name", "relay"},
                       {"ready", false},
                       {"restartCount", 0},
                       {"image", "relay:test"},
                       {"imageID", ""},
                       {"state", state}}});
}

class SecretsE2E : public ControllerE2E {
 protected:
  // A relay pod of `relay` as the Deployment controller would create it, and as the kubelet
  // reports it while it cannot mount a volume; returns its uid.
  std::string waiting_relay_pod(const std::string& relay, const std::string& pod) {
    const Json tmpl = get(owned::deployments, relay + "-relay").at("/spec/template"_json_pointer);
    Json object = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", pod}, {"labels", tmpl.at("/metadata/labels"_json_pointer)}}},
        {"spec",
         {{"serviceAccountName", relay + "-relay"},
          {"automountServiceAccountToken", false},
          {"containers", Json::array({{{"name", "relay"}, {"image", "relay:test"}}})}}}};
    const std::string uid = client.create(kPods, ns, object).at("/metadata/uid"_json_pointer);
    client.merge_patch(
        kPods, ns, pod,
        {{"status",
          {{"phase", "Pending"},
           {"containerStatuses",
            relay_container_status({{"waiting", {{"reason", "ContainerCreating"}}}})}}}},
        "status");
    return uid;
  }

  // The kubelet's Event for a volume it cannot mount, said last `ago` before now.
  void failed_mount(const std::string& pod, const std::string& uid, const std::string& message,
                    std::chrono::seconds ago = 0s) {
    const std::string now = format_time(std::chrono::system_clock::now() - ago);
    client.create(
        kEvents, ns,
        {{"apiVersion", "v1"},
         {"kind", "Event"},
         {"metadata", {{"name", pod + "." + testbed::unique_name("mount")}}},
         {"involvedObject",
          {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", pod}, {"namespace", ns}, {"uid", uid}}},
         {"reason", "FailedMount"},
         {"message", message},
         {"type", "Warning"},
         {"source", {{"component", "kubelet"}, {"host", "node-1"}}},
         {"firstTimestamp", now},
         {"lastTimestamp", now},
         {"count", 1}});
  }

  // What the Deployment controller reports of `relay`'s pods.
  void deployment_status(const std::string& relay, int replicas, int ready) {
    const Json dep = get(owned::deployments, relay + "-relay");
    client.merge_patch(owned::deployments, ns, relay + "-relay",
                       {{"status",
                         {{"observedGeneration", dep.at("/metadata/generation"_json_pointer)},
                          {"replicas", replicas},
                          {"updatedReplicas", replicas},
                          {"readyReplicas", ready},
                          {"availableReplicas", ready},
                          {"unavailableReplicas", replicas - ready}}}},
                       "status");
  }

  bool has_deployment(const std::string& relay) {
    try {
      return get(owned::deployments, relay + "-relay").contains("spec");
    } catch (const kube::ApiError&) {
      return false;
    }
  }

  std::string degraded_message(const std::string& reason) {
    const Json c = condition(relay("orders"), "Degraded");
    return c.value("status", "") == "True" && c.value("reason", "") == reason
               ? c.value("message", "")
               : "";
  }
};

TEST_F(SecretsE2E, DegradedForAMissingSecretTheKubeletReportsThenReadyFromTheDeploymentStatus) {
  testing::ControllerProcess ctl(ns, {"--not-ready-recheck=1s"}, "degraded-" + ns);
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));

  // Nothing to check before rendering: the Deployment is applied, its pods would mount the
  // Secret, and only their kubelet can say it is missing.
  ASSERT_TRUE(eventually([&] { return has_deployment("orders"); }, 20s));
  const std::string uid = waiting_relay_pod("orders", "orders-relay-7d9f-abcde");
  deployment_status("orders", 2, 0);
  failed_mount("orders-relay-7d9f-abcde", uid,
               "MountVolume.SetUp failed for volume \"database\" : secret \"orders-db\" not found");

  ASSERT_TRUE(eventually([&] { return !degraded_message("SecretNotFound").empty(); }, 20s))
      << relay("orders").value("status", Json::object()).dump();
  const std::string message = degraded_message("SecretNotFound");
  EXPECT_NE(message.find("Secret \"orders-db\" named by spec.database.dsnSecretRef does not exist "
                         "in namespace " +
                         ns),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("create secret generic orders-db"), std::string::npos) << message;
  EXPECT_EQ(condition(relay("orders"), "Ready").value("reason", ""), "SecretNotFound");
  EXPECT_EQ(condition(relay("orders"), "Ready").value("status", ""), "False");
  ASSERT_TRUE(eventually([&] { return warning_events("SecretNotFound").size() == 1; }, 10s));

  // The Secret created: the kubelet mounts it and starts the container (the Event stays).
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  client.merge_patch(
      kPods, ns, "orders-relay-7d9f-abcde",
      {{"status",
        {{"phase", "Running"},
         {"conditions", Json::array({{{"type", "PodReadyToStartContainers"}, {"status", "True"}}})},
         {"containerStatuses",
          relay_container_status(
              {{"running", {{"startedAt", format_time(std::chrono::system_clock::now())}}}})}}}},
      "status");
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("status", "") == "False"; }, 20s))
      << relay("orders").value("status", Json::object()).dump();
  EXPECT_EQ(warning_events("SecretNotFound").size(), 1u) << "one Event for one transition";
  EXPECT_EQ(condition(relay("orders"), "Ready").value("reason", ""), "RelaysNotReady");

  deployment_status("orders", 2, 2);
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
// mounted whole-key as the DSN's is; a missing one is reported from the kubelet's words, naming
// the spec field (by the volume that mounts it), and a missing key as SecretKeyNotFound. Nothing
// of a Secret is in the pod template, so a rotated KafkaUser password rolls no pod: the relay
// notices its mounted file change and restarts its process (relay/relay.hpp, CredentialFiles).
TEST_F(SecretsE2E, StrimziCredentialSecretsMissingAreNamedAndTheirRotationRollsNoPod) {
  testing::ControllerProcess ctl(ns, {"--not-ready-recheck=1s", "--resync-period=2s"},
                                 "strimzi-" + ns);
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  Json spec = base_spec();
  spec["kafka"]["tls"] = {{"trustedCertificates", Json::array({{{"secretName", "cluster-ca"}}})}};
  spec["kafka"]["authentication"] = {{"type", "scram-sha-512"},
                                     {"username", "orders-relay"},
                                     {"passwordSecret", {{"secretName", "orders-user"}}}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return has_deployment("orders"); }, 20s));
  const Json volumes =
      get(owned::deployments, "orders-relay").at("/spec/template/spec/volumes"_json_pointer);
  EXPECT_NE(volumes.dump().find("\"secretName\":\"orders-user\""), std::string::npos)
      << volumes.dump();

  const std::string uid = waiting_relay_pod("orders", "orders-relay-7d9f-fghij");
  deployment_status("orders", 2, 0);
  failed_mount("orders-relay-7d9f-fghij", uid,
               "MountVolume.SetUp failed for volume \"kafka-ca\" : secret \"cluster-ca\" not found",
               5s);
  ASSERT_TRUE(eventually(
      [&] {
        return degraded_message("SecretNotFound").find("spec.kafka.tls.trustedCertificates") !=
               std::string::npos;
      },
      20s))
      << relay("orders").value("status", Json::object()).dump();

  // The CA created, the kubelet mounts it and now fails on the KafkaUser's Secret, which lacks
  // the key: its Event is the latest, the CA's stays (an hour, by default) and is not believed.
  testing::create_secret(client, ns, "cluster-ca", {{"ca.crt", "PEM"}});
  testing::create_secret(client, ns, "orders-user", {{"pass", "one"}});
  failed_mount("orders-relay-7d9f-fghij", uid,
               "MountVolume.SetUp failed for volume \"kafka-user\" : references non-existent "
               "secret key: password");
  ASSERT_TRUE(eventually(
      [&] {
        return degraded_message("SecretKeyNotFound")
                   .find(
                       "Secret \"orders-user\" named by "
                       "spec.kafka.authentication.passwordSecret has no key \"password\"") !=
               std::string::npos;
      },
      20s))
      << relay("orders").value("status", Json::object()).dump();

  // A rotation: the Secret changes, the pod template does not (the operator never sees it).
  client.merge_patch(kSecrets, ns, "orders-user", {{"stringData", {{"password", "two"}}}});
  const Json before = get(owned::deployments, "orders-relay").at("/spec/template"_json_pointer);
  EXPECT_EQ(before.at("/metadata/annotations"_json_pointer).size(), 1u)
      << "only the settings' hash: " << before.at("/metadata/annotations"_json_pointer).dump();
  std::this_thread::sleep_for(5s);  // two resyncs
  EXPECT_EQ(get(owned::deployments, "orders-relay").at("/spec/template"_json_pointer), before);
}

}  // namespace
}  // namespace outbox::controller
