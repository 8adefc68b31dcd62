// The engine against a real kube-apiserver (Deployments get no pods): resync, the result
// switch (an invalid spec is terminal) and cancelling a reconcile in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stop_token>
#include <thread>

#include "common/version.hpp"
#include "controller/controller.hpp"
#include "controller_e2e.hpp"
#include "kube/errors.hpp"
#include "metrics/registry.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

// Resync reconciles every resource although nothing changed, without writing anything; an
// ownerReference someone removed comes back (without it the object would outlive its owner);
// a restarted controller finds nothing to apply.
TEST_F(ControllerE2E, ResyncRepairsARemovedOwnerReferenceAndWritesNothingWhenIdle) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {"--resync-period=1s"}, "resync-" + ns);
  Json created = client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  const std::string uid = created.at("metadata").at("uid");
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  std::this_thread::sleep_for(1500ms);  // the first passes settle

  // No kubelet here, so the relay pods never become ready: each pass ends "requeue" (look
  // again for why) rather than "success"; both are passes that wrote nothing.
  auto passes = [](const std::string& metrics) {
    return testing::metric(metrics, "outbox_controller_reconcile_total{result=\"success\"}") +
           testing::metric(metrics, "outbox_controller_reconcile_total{result=\"requeue\"}");
  };
  std::string before = ctl.metrics();
  std::this_thread::sleep_for(3500ms);
  std::string after = ctl.metrics();
  EXPECT_GE(passes(after) - passes(before), 2) << "one reconcile per resync period";
  EXPECT_EQ(testing::metric(after, "outbox_controller_applies_total"),
            testing::metric(before, "outbox_controller_applies_total"));
  EXPECT_EQ(testing::metric(after, "outbox_controller_status_writes_total"),
            testing::metric(before, "outbox_controller_status_writes_total"));

  for (const auto& [kind, name] :
       {std::pair{"deployment", "orders-relay"}, std::pair{"cronjob", "orders-cleanup"}}) {
    testing::kubectl(
        "-n " + ns + " patch " + kind + " " + name +
        " --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/ownerReferences\"}]'");
  }
  auto owned_by_relay = [&](const kube::Resource& r, const std::string& name) {
    Json refs = get(r, name).at("metadata").value("ownerReferences", Json::array());
    return refs.size() == 1 && refs[0].at("uid") == uid && refs[0].at("controller") == true;
  };
  EXPECT_TRUE(eventually([&] { return owned_by_relay(owned::deployments, "orders-relay"); }, 10s));
  EXPECT_TRUE(eventually([&] { return owned_by_relay(owned::cron_jobs, "orders-cleanup"); }, 10s));

  // A new process (a restart, a failover) finds every object as it would apply it: no write.
  ctl.process.kill9();
  testing::ControllerProcess again(ns, {"--resync-period=1s"}, "resync-again-" + ns);
  ASSERT_TRUE(eventually([&] { return passes(again.metrics()) >= 2; }, 20s));
  const std::string m = again.metrics();
  EXPECT_EQ(testing::metric(m, "outbox_controller_applies_total"), 0) << m;
  EXPECT_EQ(testing::metric(m, "outbox_controller_status_writes_total"), 0) << m;
}

// The controller's /metrics carry what every process of the project exports: the kernel's
// figures for it (read at each scrape) and the build it is.
TEST_F(ControllerE2E, MetricsCarryTheProcessFiguresAndTheBuild) {
  testing::ControllerProcess ctl(ns, {}, "process-metrics-" + ns);
  std::string m;
  ASSERT_TRUE(eventually([&] { return !(m = ctl.metrics()).empty(); }, 20s)) << "no /metrics";
  EXPECT_GT(testing::metric(m, "process_resident_memory_bytes"), 1 << 20) << m;
  EXPECT_GT(testing::metric(m, "process_open_fds"), 3) << m;
  EXPECT_GE(testing::metric(m, "process_cpu_seconds_total"), 0) << m;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double started = testing::metric(m, "process_start_time_seconds");
  EXPECT_GT(started, now - 300) << m;
  EXPECT_LE(started, now + 1) << m;
  EXPECT_EQ(testing::metric(m, std::string("outbox_build_info{version=\"") + kVersion + "\"}"), 1)
      << m;
}

// An in-process controller on the test bed's apiserver, for what the binary cannot show: its
// registry read directly, reconcile() called with a stop token of the test's own.
ControllerOptions in_process_options(const std::string& ns, const std::string& image, int workers) {
  ControllerOptions options;
  options.namespaces = {ns};
  options.render.relay_image = image;
  options.workers = workers;
  options.identity = "in-process-" + ns;
  return options;
}

// An invalid spec (here: no image, neither in the spec nor the controller's) is reported and
// then left alone: no retry with backoff, which would reconcile it about ten times in 3 s. The
// edit that fixes it is a watch event, so it is reconciled at once.
TEST_F(ControllerE2E, AnInvalidSpecIsReportedAndNotRetriedUntilTheObjectChanges) {
  create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  metrics::Registry registry;
  kube::Client controller_client = admin_client();
  Controller controller(controller_client, in_process_options(ns, "", 1), registry);
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));

  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("reason", "") == "InvalidSpec"; },
      20s));
  EXPECT_NE(condition(relay("orders"), "Degraded").value("message", "").find("no relay image"),
            std::string::npos);
  const std::string errors = "outbox_controller_reconcile_total{result=\"error\"}";
  // The status write is itself a watch event: one more pass, which writes nothing.
  std::this_thread::sleep_for(1s);
  const double settled = metric(registry.render(), errors);
  EXPECT_GE(settled, 1);
  EXPECT_LE(settled, 2);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(metric(registry.render(), errors), settled);
  EXPECT_THROW(get(owned::deployments, "orders-relay"), kube::ApiError);

  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"relay", {{"image", "img:1"}}}}}});
  EXPECT_TRUE(eventually([&] { return get(owned::deployments, "orders-relay").is_object(); }, 20s));
  EXPECT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("status", "") == "False"; }, 20s));
}

// Losing leadership (or shutting down) stops the workers through their stop token: a reconcile
// in flight sends nothing after its current request. Here the token is stopped by the pass's
// first write (the ServiceAccount), so the Role after it is never applied.
TEST_F(ControllerE2E, AStopTokenCancelsAReconcileBeforeItsNextWrite) {
  create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  metrics::Registry registry;
  kube::Client controller_client = admin_client();
  std::stop_source cancel;
  std::atomic<int> writes{0};
  controller_client.set_write_guard([&](const std::string&, const std::string&) {
    if (++writes == 1) {
      cancel.request_stop();
    }
  });
  // No worker: the test runs the one reconcile itself, once the caches are synced.
  Controller controller(controller_client, in_process_options(ns, "img:1", 0), registry);
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  ASSERT_TRUE(eventually([&] { return controller.synced(); }, 20s));

  const std::string key = ns + "/orders";
  EXPECT_THROW(controller.reconcile(key, cancel.get_token()), ReconcileCancelled);
  EXPECT_EQ(writes.load(), 1);
  EXPECT_NO_THROW(get(owned::service_accounts, "orders-relay"));
  EXPECT_THROW(get(owned::roles, "orders-relay"), kube::ApiError);
  EXPECT_THROW(get(owned::deployments, "orders-relay"), kube::ApiError);

  // The same pass, not cancelled, applies everything.
  controller.reconcile(key);
  EXPECT_NO_THROW(get(owned::roles, "orders-relay"));
  EXPECT_NO_THROW(get(owned::deployments, "orders-relay"));
}

}  // namespace
}  // namespace outbox::controller
