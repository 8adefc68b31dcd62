// Two real controller processes with --leader-elect on one Lease: only the leader writes; after
// kill -9 of the leader the standby takes over and reconciles a change made in between.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

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

std::string read_from(const std::string& path, std::streamoff offset) {
  std::ifstream in(path);
  in.seekg(offset);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// The lines of a controller's debug log that record a write sent to the apiserver (the client
// logs each one right before sending it), other than the leader election's own Lease requests.
std::vector<std::string> writes_in(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    for (const char* verb :
         {"sending POST /", "sending PUT /", "sending PATCH /", "sending DELETE /"}) {
      if (line.find(verb) != std::string::npos && line.find("/leases/") == std::string::npos) {
        out.push_back(line);
      }
    }
  }
  return out;
}

Json relay(const std::string& name, int replicas) {
  return {{"apiVersion", "outbox.dev/v1alpha1"},
          {"kind", "OutboxRelay"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"database", {{"dsnSecretRef", {{"name", "orders-db"}, {"key", "dsn"}}}}},
            {"kafka", {{"bootstrapServers", "kafka:9092"}}},
            {"relay", {{"replicas", replicas}}}}}};
}

// A leader frozen (SIGSTOP) past its renew deadline; the standby takes the Lease and is frozen
// in turn while new work arrives, so that the Lease names it but nobody has done that work.
// Thawed (SIGCONT), the old leader's informers hand its workers the new resources at once; it
// must not send one write while the Lease names the other, and it exits.
TEST(ControllerLeaderE2E, APausedLeaderWritesNothingAfterItResumes) {
  testing::install_crd();
  kube::Client client = testing::admin_client();
  const std::string ns = testing::make_namespace(client, "obr-pause");
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  std::vector<std::string> election = {
      "--leader-elect",      "--lease-namespace=" + ns, "--lease-name=outbox-operator-leader",
      "--lease-duration=4s", "--renew-deadline=2s",     "--retry-period=1s"};
  auto args = [&](const std::string& id) {
    auto a = election;
    a.push_back("--identity=" + id);
    return a;
  };
  auto holder = [&] {
    return client.get(kube::resources::leases, ns, "outbox-operator-leader")
        .at("/spec/holderIdentity"_json_pointer)
        .get<std::string>();
  };
  const std::string a_log = ::testing::TempDir() + "pause-a-" + ns + ".log";
  testing::ControllerProcess a(ns, args("ctl-a"), "pause-a-" + ns);
  ASSERT_TRUE(eventually(
      [&] { return testing::metric(a.metrics(), "outbox_controller_leader") == 1; }, 20s));
  testing::ControllerProcess b(ns, args("ctl-b"), "pause-b-" + ns);
  ASSERT_TRUE(eventually([&] { return testing::http_get(b.port, "/readyz") == "ready\n"; }, 20s));
  client.create(kOutboxRelays, ns, relay("orders", 2));
  ASSERT_TRUE(eventually(
      [&] {
        return client.get(kOutboxRelays, ns, "orders")
            .value("status", Json::object())
            .contains("observedGeneration");
      },
      20s));
  ASSERT_FALSE(writes_in(read_from(a_log, 0)).empty()) << "the leader's writes are logged";

  ASSERT_EQ(::kill(a.process.pid(), SIGSTOP), 0);
  ASSERT_TRUE(eventually(
      [&] {
        return holder() == "ctl-b" && testing::metric(b.metrics(), "outbox_controller_leader") == 1;
      },
      20s));
  ASSERT_EQ(::kill(b.process.pid(), SIGSTOP), 0);
  for (int i = 0; i < 8; ++i) {
    client.create(kOutboxRelays, ns, relay("r" + std::to_string(i), 1));
  }
  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"relay", {{"replicas", 3}}}}}});

  const auto offset = static_cast<std::streamoff>(read_from(a_log, 0).size());
  ASSERT_EQ(::kill(a.process.pid(), SIGCONT), 0);
  EXPECT_EQ(a.process.wait(20s), 1) << "the old leader exits: it lost its Lease";
  EXPECT_EQ(holder(), "ctl-b") << "the Lease named the other all along";
  const std::string after = read_from(a_log, offset);
  const std::vector<std::string> writes = writes_in(after);
  EXPECT_TRUE(writes.empty()) << writes.size() << " writes after SIGCONT, first: "
                              << (writes.empty() ? "" : writes.front()) << "\n"
                              << after;
  // Which comes first after the thaw is a race between two guards, and either is correct:
  // a worker's write refused right before sending (the Lease names another holder), or the
  // elector noticing its missed renew deadline and stopping the workers before they write.
  // Either way the old leader must say which one kept it quiet.
  const bool refused = after.find("does not hold the leader Lease") != std::string::npos;
  const bool stepped_down = after.find("stepping down") != std::string::npos;
  EXPECT_TRUE(refused || stepped_down)
      << "the old leader names the guard that kept it from writing: " << after;
}

}  // namespace
}  // namespace outbox::controller
