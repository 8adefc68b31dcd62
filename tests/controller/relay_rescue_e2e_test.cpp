// The compensation CronJob's switch to every minute once no relay of its OutboxRelay is alive,
// against a real kube-apiserver while the controller is busy with a few hundred other
// OutboxRelays: the switch comes within its stated bound of the moment the relays stop counting
// as alive, not whenever the controller gets round to it.
#include <gtest/gtest.h>

#include <thread>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "controller/schedules.hpp"
#include "controller_e2e.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;
using SystemClock = std::chrono::system_clock;

// How late the switch may come after the relays stop counting as alive (docs/install.md, "A
// fleet of databases"): the controller looks a second later, the passes in flight finish, then
// this resource's pass applies the CronJob.
constexpr auto kSwitchBound = 10s;
// Other OutboxRelays, created a minute before the switch falls due. Their first passes are ten
// requests each, so at --qps 20 the controller needs over two minutes for them; the keys their
// owned objects' events queue again wait behind those not yet reconciled. Hundreds of keys are
// queued when the switch falls due.
constexpr int kOthers = 300;
constexpr auto kOthersBeforeDue = 60s;

// A resource whose relays never report (replicas 0): they count as alive while it is younger
// than kBacklogReportStale, then its compensation CronJob runs every minute. No watch event
// marks that moment.
TEST_F(ControllerE2E, RescueScheduleSwitchesWithinItsBoundWhileTheControllerIsBusy) {
  create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  ControllerProcess ctl(ns, {"--qps=20", "--burst=40"}, "rescue-" + ns);
  Json spec = base_spec();
  spec["relay"]["replicas"] = 0;
  spec["compensation"] = {{"staleAfter", "5s"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  const auto created = parse_time(relay("orders").at("/metadata/creationTimestamp"_json_pointer));
  ASSERT_TRUE(created);
  // creationTimestamp has whole seconds, as the controller reads it too.
  const auto due = *created + kBacklogReportStale;

  auto schedule = [&] {
    return get(owned::cron_jobs, "orders-compensate").at("/spec/schedule"_json_pointer);
  };
  const std::string spread = spread_compensation_schedule(ns, "orders");
  ASSERT_TRUE(eventually([&] { return schedule() == spread; }, 20s))
      << "a new resource's relays are starting: the rare schedule first";

  // Suspended: their CronJobs never start a Job, wherever this namespace ends up.
  Json other = base_spec();
  other["suspend"] = true;
  std::this_thread::sleep_until(due - kOthersBeforeDue);
  for (int i = 0; i < kOthers; ++i) {
    client.create(kOutboxRelays, ns, relay_object("other-" + std::to_string(i), other));
  }
  ASSERT_LT(SystemClock::now(), due - 10s) << "the other resources took too long to create";

  std::this_thread::sleep_until(due - 2s);
  EXPECT_EQ(schedule(), spread) << "switched before the relays stopped counting as alive";
  std::this_thread::sleep_until(due + 1s);
  const double queued = metric(ctl.metrics(), "outbox_controller_queue_depth");
  EXPECT_GE(queued, 100) << "the controller was to be busy when the switch fell due";

  const bool switched = eventually(
      [&] { return schedule() == "*/1 * * * *"; },
      std::chrono::ceil<std::chrono::milliseconds>(due + kSwitchBound - SystemClock::now()));
  const auto late = SystemClock::now() - due;
  std::cout << "switch seen " << std::chrono::duration_cast<std::chrono::milliseconds>(late).count()
            << " ms after the relays stopped counting as alive, " << queued << " keys queued then"
            << std::endl;
  EXPECT_TRUE(switched) << "still " << schedule() << " " << kSwitchBound.count()
                        << " s after the relays stopped counting as alive; "
                        << metric(ctl.metrics(), "outbox_controller_queue_depth")
                        << " keys queued now";

  // Three thousand objects, a request per kind: nothing of them is left for a later phase's
  // controller-manager to act on (the test bed has none to collect them).
  ctl.process.kill9();
  client.request("DELETE", kOutboxRelays.collection_path(ns));
  for (const kube::Resource* kind :
       {&owned::service_accounts, &owned::roles, &owned::role_bindings, &owned::config_maps,
        &owned::deployments, &owned::cron_jobs, &owned::services, &owned::pod_disruption_budgets,
        &owned::network_policies}) {
    client.request("DELETE", kind->collection_path(ns) + "?labelSelector=" + kManagedByLabel +
                                 "%3Doutbox-operator");
  }
}

}  // namespace
}  // namespace outbox::controller
