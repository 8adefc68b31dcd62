// A missing Secret, told from what the kubelet reports of the relay pods (the operator reads
// no Secret): the pods' FailedMount Events and container waiting reasons.
#include "controller/relay_secrets.hpp"

#include <gtest/gtest.h>

namespace outbox::controller {
namespace {

Json relay() {
  return Json::parse(R"({"metadata": {"name": "orders", "namespace": "shop"},
    "spec": {"database": {"dsnSecretRef": {"name": "orders-db", "key": "dsn"},
                          "tls": {"ca": {"secretRef": {"name": "pg-ca", "key": "ca.crt"}}}},
             "kafka": {"bootstrapServers": "kafka:9092",
                       "authentication": {"type": "scram-sha-512", "username": "orders",
                                          "passwordSecret": {"secretName": "orders-user"}}}}})");
}

// A relay pod as the kubelet reports it while its volumes are not mounted.
Json waiting_pod(const std::string& uid) {
  return {{"metadata", {{"name", "orders-relay-" + uid}, {"uid", uid}}},
          {"status",
           {{"phase", "Pending"},
            {"containerStatuses",
             Json::array({{{"name", "relay"},
                           {"state", {{"waiting", {{"reason", "ContainerCreating"}}}}}}})}}}};
}

// A list object ({"items": [...]}) of `items`.
Json list_of(std::initializer_list<Json> items) {
  Json out = {{"items", Json::array()}};
  for (const Json& item : items) {
    out["items"].push_back(item);
  }
  return out;
}

Json pods(std::initializer_list<Json> items) {
  return list_of(items);
}

Json failed_mount(const std::string& uid, const std::string& message) {
  return {{"reason", "FailedMount"},
          {"involvedObject", {{"kind", "Pod"}, {"uid", uid}}},
          {"message", message}};
}

Json events(std::initializer_list<Json> items) {
  return list_of(items);
}

TEST(MissingSecret, AFailedMountOfAWaitingPodNamesTheSecretItsFieldAndHowToCreateIt) {
  const std::optional<Problem> p = missing_secret(
      relay(), pods({waiting_pod("a")}),
      events({failed_mount("a",
                           "MountVolume.SetUp failed for volume \"database\" : secret "
                           "\"orders-db\" not found")}));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->reason, "SecretNotFound");
  EXPECT_NE(p->message.find("Secret \"orders-db\" named by spec.database.dsnSecretRef does not "
                            "exist in namespace shop"),
            std::string::npos)
      << p->message;
  EXPECT_NE(p->message.find("kubectl -n shop create secret generic orders-db "
                            "--from-literal=dsn='postgresql://...'"),
            std::string::npos)
      << p->message;
}

TEST(MissingSecret, EachVolumeIsTheSpecFieldThatNamesIt) {
  auto field_for = [](const std::string& volume, const std::string& secret) {
    const auto p =
        missing_secret(relay(), pods({waiting_pod("a")}),
                       events({failed_mount("a", "MountVolume.SetUp failed for volume \"" + volume +
                                                     "\" : secret \"" + secret + "\" not found")}));
    return p ? p->message : std::string("none");
  };
  EXPECT_NE(field_for("database-ca", "pg-ca").find("spec.database.tls.ca.secretRef"),
            std::string::npos);
  EXPECT_NE(field_for("kafka-user", "orders-user").find("spec.kafka.authentication.passwordSecret"),
            std::string::npos);
  EXPECT_EQ(field_for("someone-elses", "other"), "none") << "a volume the spec does not name";
}

TEST(MissingSecret, AKeyTheSecretLacksIsSecretKeyNotFound) {
  const auto p = missing_secret(
      relay(), pods({waiting_pod("a")}),
      events({failed_mount("a",
                           "MountVolume.SetUp failed for volume \"database\" : references "
                           "non-existent secret key: no-such-key")}));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->reason, "SecretKeyNotFound");
  EXPECT_NE(p->message.find("Secret \"orders-db\" named by spec.database.dsnSecretRef has no key "
                            "\"no-such-key\""),
            std::string::npos)
      << p->message;
}

TEST(MissingSecret, AContainerConfigErrorNamesTheSecretToo) {
  Json pod = waiting_pod("a");
  pod["status"]["containerStatuses"][0]["state"]["waiting"] = {
      {"reason", "CreateContainerConfigError"}, {"message", "secret \"orders-user\" not found"}};
  const auto p = missing_secret(relay(), pods({pod}), events({}));
  ASSERT_TRUE(p);
  EXPECT_NE(p->message.find("spec.kafka.authentication.passwordSecret"), std::string::npos);
}

// Events outlive the problem (an hour by default): one of a pod that has mounted its volumes
// since, or of another pod, is not believed.
TEST(MissingSecret, AnEventOfAPodThatIsNoLongerWaitingOrOfAnotherPodIsNotBelieved) {
  const Json event = failed_mount("a",
                                  "MountVolume.SetUp failed for volume \"database\" : secret "
                                  "\"orders-db\" not found");
  Json started = waiting_pod("a");
  started["status"]["phase"] = "Running";
  started["status"]["containerStatuses"][0]["state"] = {{"running", Json::object()}};
  EXPECT_FALSE(missing_secret(relay(), pods({started}), events({event})));
  Json sandbox_ready = waiting_pod("a");  // mounted; now pulling the image, say
  sandbox_ready["status"]["conditions"] =
      Json::array({{{"type", "PodReadyToStartContainers"}, {"status", "True"}}});
  EXPECT_FALSE(missing_secret(relay(), pods({sandbox_ready}), events({event})));
  EXPECT_FALSE(missing_secret(relay(), pods({waiting_pod("b")}), events({event})));
  EXPECT_TRUE(missing_secret(relay(), pods({waiting_pod("b"), waiting_pod("a")}), events({event})));
  EXPECT_FALSE(missing_secret(relay(), pods({}), Json::object()));
}

// The spec fixed, the new pods start (and may not become ready for another reason), while the
// old template's pods still wait for what the old spec named: they no longer speak for it.
TEST(MissingSecret, PodsOfAnOlderTemplateAreNotBelieved) {
  const Json event = failed_mount("old",
                                  "MountVolume.SetUp failed for volume \"database\" : secret "
                                  "\"orders-db\" not found");
  Json old_pod = waiting_pod("old");
  old_pod["metadata"]["labels"] = {{"pod-template-hash", "aaa"}};
  old_pod["metadata"]["creationTimestamp"] = "2026-12-07T08:00:00Z";
  Json new_pod = waiting_pod("new");
  new_pod["metadata"]["labels"] = {{"pod-template-hash", "bbb"}};
  new_pod["metadata"]["creationTimestamp"] = "2026-12-07T08:01:00Z";
  new_pod["status"]["phase"] = "Running";
  new_pod["status"]["containerStatuses"][0]["state"] = {{"running", Json::object()}};
  EXPECT_TRUE(missing_secret(relay(), pods({old_pod}), events({event})));
  EXPECT_FALSE(missing_secret(relay(), pods({old_pod, new_pod}), events({event})));
  EXPECT_FALSE(missing_secret(relay(), pods({new_pod, old_pod}), events({event})));
}

}  // namespace
}  // namespace outbox::controller
