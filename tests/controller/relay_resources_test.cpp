// Rendering as a whole (relay_resources: render_relay): every owned object of a spec, in apply
// order, pure; each object's own rules are tested beside its builder (builders/*_test.cpp).
#include <gtest/gtest.h>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

TEST(RenderRelay, NamesOwnersAndPdbFollowReplicas) {
  RenderOptions opts{"img:1"};
  RenderedRelay two = render_relay(relay(), opts);
  for (const char* kind :
       {"ServiceAccount", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget"}) {
    ASSERT_NE(find(two, kind, "orders-relay"), nullptr) << kind;
  }
  ASSERT_NE(find(two, "ConfigMap", "orders-config"), nullptr);
  ASSERT_NE(find(two, "CronJob", "orders-compensate"), nullptr);
  ASSERT_NE(find(two, "CronJob", "orders-cleanup"), nullptr);
  ASSERT_NE(find(two, "Service", "orders-metrics"), nullptr);
  for (const auto& o : two.objects) {
    EXPECT_EQ(o.object.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
    EXPECT_EQ(o.object.at("/metadata/namespace"_json_pointer), "shop");
  }
  EXPECT_TRUE(two.wants_pdb);
  RenderedRelay one = render_relay(relay({{"relay", {{"replicas", 1}}}}), opts);
  EXPECT_FALSE(one.wants_pdb);
  EXPECT_EQ(find(one, "PodDisruptionBudget", "orders-relay"), nullptr);
  RenderedRelay suspended = render_relay(relay({{"suspend", true}}), opts);
  EXPECT_EQ(find(suspended, "Deployment", "orders-relay")->at("/spec/replicas"_json_pointer), 0);
  EXPECT_TRUE(
      find(suspended, "CronJob", "orders-cleanup")->at("/spec/suspend"_json_pointer).get<bool>());
  EXPECT_THROW(render_relay(relay(), RenderOptions{}), std::invalid_argument);
  EXPECT_EQ(find(render_relay(relay({{"relay", {{"image", "own:2"}}}}), RenderOptions{}),
                 "Deployment", "orders-relay")
                ->at("/spec/template/spec/containers/0/image"_json_pointer),
            "own:2");
}

// A spec the renderer cannot read (the CRD should have refused it) is InvalidSpec, which the
// reconciler treats as terminal; before, a field of the wrong type escaped as a JSON error and
// was retried with backoff for ever.
TEST(RenderRelay, ASpecOfTheWrongShapeIsInvalidSpec) {
  const RenderOptions opts{"img:1"};
  EXPECT_THROW(render_relay(relay(), RenderOptions{}), InvalidSpec);
  EXPECT_THROW(render_relay(relay({{"kafka", {{"bootstrapServers", 9092}}}}), opts), InvalidSpec);
  EXPECT_THROW(
      render_relay(relay({{"kafka", {{"routes", Json::array({{{"bizType", "order"}}})}}}}), opts),
      InvalidSpec);
  EXPECT_THROW(render_relay(relay({{"relay", {{"replicas", "two"}}}}), opts), InvalidSpec);
}

}  // namespace
}  // namespace outbox::controller
