// The relay Deployment and its ConfigMap (builders/deployment): the relay's own flags and the pod
// template's hashes.
#include <gtest/gtest.h>

#include <string>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

// spec.relay.shards reaches the relay as --shards (which then refuses a table of
// another count); unset, no flag: the relay takes the table's. ordering None
// reaches the relay and the compensation job as --ordering=none.
TEST(RenderRelay, ShardsAndOrderingReachTheRelay) {
  RenderOptions opts{"img:1"};
  auto args = [&](const Json& patch) {
    return find(render_relay(relay(patch), opts), "Deployment", "orders-relay")
        ->at("/spec/template/spec/containers/0/args"_json_pointer)
        .dump();
  };
  EXPECT_NE(args({{"relay", {{"shards", 128}}}}).find("\"--shards=128\""), std::string::npos);
  EXPECT_EQ(args(Json::object()).find("--shards"), std::string::npos);
  EXPECT_NE(args({{"relay", {{"ordering", "None"}}}}).find("\"--ordering=none\""),
            std::string::npos);
  EXPECT_EQ(args({{"relay", {{"ordering", "PerKey"}}}}).find("--ordering"), std::string::npos);
  const Json compensate =
      find(render_relay(relay({{"relay", {{"ordering", "None"}}}}), opts), "CronJob",
           "orders-compensate")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_NE(compensate.dump().find("\"--ordering=none\""), std::string::npos);
}

// spec.relay.coalesceWindow reaches the relay as --coalesce-window; left out (the API
// server defaults it to 0s), the relay gets the default: claim on every wake-up.
TEST(RenderRelay, TheCoalesceWindowReachesTheRelay) {
  RenderOptions opts{"img:1"};
  auto args = [&](const Json& patch) {
    return find(render_relay(relay(patch), opts), "Deployment", "orders-relay")
        ->at("/spec/template/spec/containers/0/args"_json_pointer)
        .dump();
  };
  EXPECT_NE(args({{"relay", {{"coalesceWindow", "200ms"}}}}).find("\"--coalesce-window=200ms\""),
            std::string::npos);
  EXPECT_NE(args(Json::object()).find("\"--coalesce-window=auto\""), std::string::npos);
}

TEST(RenderRelay, ConfigHashChangesWithRelaySettingsOnly) {
  RenderOptions opts{"img:1"};
  auto hash = [&](const Json& patch) {
    return find(render_relay(relay(patch.is_null() ? Json::object() : patch), opts), "Deployment",
                "orders-relay")
        ->at("/spec/template/metadata/annotations"_json_pointer)
        .at(kConfigHashAnnotation)
        .get<std::string>();
  };
  EXPECT_EQ(hash({}), hash({{"relay", {{"replicas", 5}}}}));
  EXPECT_NE(hash({}), hash({{"relay", {{"batchSize", 7}}}}));
  EXPECT_EQ(stable_hash("abc"), "e71fa2190541574b");
}

// The operator reads no Secret, so nothing of one but its name is in the pod template: a
// rotation rolls no pod (the relays notice their mounted files change), and the only template
// annotation is the settings' hash.
TEST(RenderRelay, ThePodTemplateHoldsOnlyTheSettingsHash) {
  const Json annotations =
      find(render_relay(relay(), RenderOptions{"img:1"}), "Deployment", "orders-relay")
          ->at("/spec/template/metadata/annotations"_json_pointer);
  EXPECT_EQ(annotations.size(), 1u) << annotations.dump();
  EXPECT_TRUE(annotations.contains(kConfigHashAnnotation)) << annotations.dump();
}

// Left out, spec.relay.resources is requests cpu and memory with a memory limit and no cpu
// limit (a Burstable pod, admitted where a ResourceQuota counts requests and memory limits), on
// the relay and on every job container; the relay pods, and only they, spread over nodes softly.
TEST(RenderRelay, RelayPodsAreBurstableAndSpreadOverNodesByDefault) {
  RenderedRelay r = render_relay(relay(), RenderOptions{"img:1"});
  const Json& relay_pod = find(r, "Deployment", "orders-relay")->at("/spec/template"_json_pointer);
  const Json& resources = relay_pod.at("/spec/containers/0/resources"_json_pointer);
  EXPECT_EQ(resources, Json::parse(R"({"requests": {"cpu": "50m", "memory": "64Mi"},
                                        "limits": {"memory": "128Mi"}})"));
  for (const char* cron_job : {"orders-compensate", "orders-cleanup"}) {
    const Json& pod =
        find(r, "CronJob", cron_job)->at("/spec/jobTemplate/spec/template"_json_pointer);
    EXPECT_EQ(pod.at("/spec/containers/0/resources"_json_pointer), resources) << cron_job;
    EXPECT_FALSE(pod.at("spec").contains("topologySpreadConstraints")) << cron_job;
  }
  const Json spread = relay_pod.at("/spec/topologySpreadConstraints"_json_pointer);
  ASSERT_EQ(spread.size(), 1u) << spread.dump();
  EXPECT_EQ(spread[0].at("maxSkew"), 1);
  EXPECT_EQ(spread[0].at("topologyKey"), "kubernetes.io/hostname");
  EXPECT_EQ(spread[0].at("whenUnsatisfiable"), "ScheduleAnyway");
  // It counts this resource's relay pods: every label it matches is on them.
  const Json& match = spread[0].at("/labelSelector/matchLabels"_json_pointer);
  ASSERT_FALSE(match.empty());
  for (const auto& [key, value] : match.items()) {
    EXPECT_EQ(relay_pod.at("metadata").at("labels").value(key, Json()), value) << key;
  }
  EXPECT_EQ(match,
            find(r, "Deployment", "orders-relay")->at("/spec/selector/matchLabels"_json_pointer));
}

// Both defaults give way to the spec: resources replace the default whole (`{}`: none), and the
// pod template's topologySpreadConstraints replace the spread (`[]`: none).
TEST(RenderRelay, TheSpecReplacesTheDefaultResourcesAndSpread) {
  auto relay_pod = [](const Json& patch) {
    return find(render_relay(relay(patch), RenderOptions{"img:1"}), "Deployment", "orders-relay")
        ->at("/spec/template/spec"_json_pointer);
  };
  const Json guaranteed = {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}},
                           {"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}};
  EXPECT_EQ(relay_pod({{"relay", {{"resources", guaranteed}}}})
                .at("/containers/0/resources"_json_pointer),
            guaranteed);
  EXPECT_EQ(relay_pod({{"relay", {{"resources", Json::object()}}}})
                .at("/containers/0/resources"_json_pointer),
            Json::object());
  const Json zones = Json::array({{{"maxSkew", 2},
                                   {"topologyKey", "topology.kubernetes.io/zone"},
                                   {"whenUnsatisfiable", "DoNotSchedule"}}});
  EXPECT_EQ(
      relay_pod({{"relay", {{"template", {{"pod", {{"topologySpreadConstraints", zones}}}}}}}})
          .at("topologySpreadConstraints"),
      zones);
  EXPECT_EQ(relay_pod({{"relay",
                        {{"template", {{"pod", {{"topologySpreadConstraints", Json::array()}}}}}}}})
                .at("topologySpreadConstraints"),
            Json::array());
  // Another template field leaves the spread as it is.
  EXPECT_EQ(relay_pod({{"relay", {{"template", {{"pod", {{"priorityClassName", "high"}}}}}}}})
                .at("topologySpreadConstraints")
                .size(),
            1u);
}

}  // namespace
}  // namespace outbox::controller
