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
  RenderOptions opts{"img:1", ""};
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
  RenderOptions opts{"img:1", ""};
  auto args = [&](const Json& patch) {
    return find(render_relay(relay(patch), opts), "Deployment", "orders-relay")
        ->at("/spec/template/spec/containers/0/args"_json_pointer)
        .dump();
  };
  EXPECT_NE(args({{"relay", {{"coalesceWindow", "200ms"}}}}).find("\"--coalesce-window=200ms\""),
            std::string::npos);
  EXPECT_NE(args(Json::object()).find("\"--coalesce-window=0s\""), std::string::npos);
}

TEST(RenderRelay, ConfigHashChangesWithRelaySettingsOnly) {
  RenderOptions opts{"img:1", ""};
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

// A rotated Secret (new resourceVersion) must change the relay pod template, so the pods roll
// and read the new value; nothing else about the Secrets may.
TEST(RenderRelay, SecretVersionsChangeThePodTemplateAndNothingElse) {
  auto rendered = [](const std::string& versions) {
    RenderOptions opts{"img:1", versions};
    return render_relay(relay(), opts);
  };
  auto annotations = [](const RenderedRelay& r) {
    return find(r, "Deployment", "orders-relay")
        ->at("/spec/template/metadata/annotations"_json_pointer);
  };
  RenderedRelay before = rendered("orders-db=100\n");
  RenderedRelay after = rendered("orders-db=101\n");
  EXPECT_NE(annotations(before).at(kSecretsHashAnnotation),
            annotations(after).at(kSecretsHashAnnotation));
  EXPECT_EQ(annotations(before).at(kConfigHashAnnotation),
            annotations(after).at(kConfigHashAnnotation));
  EXPECT_EQ(*find(before, "ConfigMap", "orders-config"),
            *find(after, "ConfigMap", "orders-config"));
}

}  // namespace
}  // namespace outbox::controller
