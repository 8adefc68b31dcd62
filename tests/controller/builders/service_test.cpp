// The metrics Service and the PodDisruptionBudget (builders/service).
#include <gtest/gtest.h>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

// One ClusterIP per resource would exhaust a /24 service range at ~250 resources.
TEST(RenderRelay, MetricsServiceIsHeadless) {
  RenderedRelay r = render_relay(relay(), RenderOptions{"img:1"});
  EXPECT_EQ(find(r, "Service", "orders-metrics")->at("/spec/clusterIP"_json_pointer), "None");
}

}  // namespace
}  // namespace outbox::controller
