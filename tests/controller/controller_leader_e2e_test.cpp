// Two real controller processes with --leader-elect on one Lease: only the leader writes; after
// kill -9 of the leader the standby takes over and reconciles a change made in between.
#include <gtest/gtest.h>

#include "controller/relay_resources.hpp"
#include "controller_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using testing::eventually;

TEST(ControllerLeaderE2E, OnlyTheLeaderWritesAndTheStandbyTakesOverAfterKill9) {
  testing::install_crd();
  kube::Client client = testing::admin_client();
  const std::string ns = testing::make_namespace(client, "obr-leader");
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  // 4 s / 2 s / 1 s: renew deadline + retry period < lease duration, as client-go requires.
  std::vector<std::string> election = {
      "--leader-elect",      "--lease-namespace=" + ns, "--lease-name=outbox-operator-leader",
      "--lease-duration=4s", "--renew-deadline=2s",     "--retry-period=1s"};
  auto args = [&](const std::string& id) {
    auto a = election;
    a.push_back("--identity=" + id);
    return a;
  };
  auto a = std::make_unique<testing::ControllerProcess>(ns, args("ctl-a"), "leader-a-" + ns);
  ASSERT_TRUE(eventually(
      [&] { return testing::metric(a->metrics(), "outbox_controller_leader") == 1; }, 20s));
  testing::ControllerProcess b(ns, args("ctl-b"), "leader-b-" + ns);
  // The standby is ready (caches synced) without leading.
  ASSERT_TRUE(eventually([&] { return testing::http_get(b.port, "/readyz") == "ready\n"; }, 20s));
  EXPECT_EQ(testing::metric(b.metrics(), "outbox_controller_leader"), 0);

  client.create(kOutboxRelays, ns,
                {{"apiVersion", "outbox.dev/v1alpha1"},
                 {"kind", "OutboxRelay"},
                 {"metadata", {{"name", "orders"}}},
                 {"spec",
                  {{"database", {{"dsnSecretRef", {{"name", "orders-db"}, {"key", "dsn"}}}}},
                   {"kafka", {{"bootstrapServers", "kafka:9092"}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return client.get(owned::deployments, ns, "orders-relay")
                       .at("/spec/replicas"_json_pointer) == 2 &&
               client.get(kOutboxRelays, ns, "orders")
                   .value("status", Json::object())
                   .contains("observedGeneration");
      },
      20s));
  std::this_thread::sleep_for(2s);  // let any stray write of the standby happen
  const std::string bm = b.metrics();
  EXPECT_GT(testing::metric(a->metrics(), "outbox_controller_applies_total"), 0);
  EXPECT_EQ(testing::metric(bm, "outbox_controller_applies_total"), 0) << bm;
  EXPECT_EQ(testing::metric(bm, "outbox_controller_status_writes_total"), 0) << bm;
  EXPECT_EQ(testing::metric(bm, "outbox_controller_reconcile_total{result=\"success\"}"), 0);
  EXPECT_EQ(client.get(kube::resources::leases, ns, "outbox-operator-leader")
                .at("/spec/holderIdentity"_json_pointer),
            "ctl-a");

  // The leader dies without releasing the Lease; a change arrives while nobody leads.
  a->process.kill9();
  const auto killed = std::chrono::steady_clock::now();
  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"relay", {{"replicas", 4}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return client.get(owned::deployments, ns, "orders-relay")
                       .at("/spec/replicas"_json_pointer) == 4 &&
               client.get(kOutboxRelays, ns, "orders")
                       .at("/status/observedGeneration"_json_pointer) == 2;
      },
      20s));
  const double takeover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("standby reconciled the change %.1f s after kill -9 of the leader (lease 4s)\n",
              takeover);
  EXPECT_EQ(testing::metric(b.metrics(), "outbox_controller_leader"), 1);
  EXPECT_EQ(client.get(kube::resources::leases, ns, "outbox-operator-leader")
                .at("/spec/holderIdentity"_json_pointer),
            "ctl-b");
  EXPECT_GE(takeover, 1.5) << "the standby must wait for the dead leader's lease to expire";
  EXPECT_EQ(b.process.terminate(10s), 0) << "clean shutdown releases the Lease";
}

}  // namespace
}  // namespace outbox::controller
