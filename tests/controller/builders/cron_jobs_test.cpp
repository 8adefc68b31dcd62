// The compensation and retention CronJobs (builders/cron_jobs).
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

// Both jobs write their outcome into the OutboxRelay's status, so their pods carry the relay's
// ServiceAccount token and name the resource; the relay's Role lets exactly that through.
TEST(RenderRelay, CronJobPodsGetTheRelayTokenAndReportStatus) {
  RenderOptions opts{"img:1"};
  RenderedRelay r = render_relay(relay({{"retention", {{"archiveTable", "public.old"}}}}), opts);
  for (const char* name : {"orders-compensate", "orders-cleanup"}) {
    const Json* cron = find(r, "CronJob", name);
    ASSERT_NE(cron, nullptr) << name;
    const Json pod = cron->at("/spec/jobTemplate/spec/template/spec"_json_pointer);
    EXPECT_EQ(pod.at("serviceAccountName"), "orders-relay") << name;
    EXPECT_TRUE(pod.at("automountServiceAccountToken").get<bool>()) << name;
    EXPECT_EQ(pod.at("restartPolicy"), "Never") << name;
    const Json& args = pod.at("/containers/0/args"_json_pointer);
    EXPECT_EQ(std::count(args.begin(), args.end(), "--report-status=shop/orders"), 1)
        << name << ": " << args.dump();
  }
  const Json cleanup_args =
      find(r, "CronJob", "orders-cleanup")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(cleanup_args.at(0), "cleanup");
  EXPECT_NE(std::find(cleanup_args.begin(), cleanup_args.end(), "--archive-table=public.old"),
            cleanup_args.end());
  EXPECT_EQ(find(r, "CronJob", "orders-compensate")
                ->at("/spec/jobTemplate/spec/template/spec/containers/0/args/0"_json_pointer),
            "compensate");

  const Json* role = find(r, "Role", "orders-relay");
  ASSERT_NE(role, nullptr);
  bool may_patch_status = false;
  for (const Json& rule : role->at("rules")) {
    const Json& verbs = rule.at("verbs");
    if (rule.at("resources") == Json::array({"outboxrelays/status"})) {
      EXPECT_EQ(rule.at("resourceNames"), Json::array({"orders"}));
      may_patch_status = std::find(verbs.begin(), verbs.end(), "patch") != verbs.end();
    }
  }
  EXPECT_TRUE(may_patch_status) << role->dump();
}

}  // namespace
}  // namespace outbox::controller
