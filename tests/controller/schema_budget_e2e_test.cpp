// The rollout budget (--max-rolling-relays) and the schema Jobs an operator upgrade re-runs,
// against a real kube-apiserver. The test bed runs no Job controller: the test writes a Job's
// outcome into its status, as the Job controller would once the pod ended.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "controller_e2e.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class SchemaBudgetE2E : public ControllerE2E {
 protected:
  // Schema Jobs by name, and whether each finished.
  std::map<std::string, bool> schema_jobs() {
    std::map<std::string, bool> out;
    const Json jobs = client.list(owned::jobs, ns);
    for (const Json& j : jobs.at("items")) {
      if (j.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer) == "schema") {
        out[j.at("/metadata/name"_json_pointer)] = j.contains("/status/succeeded"_json_pointer);
      }
    }
    return out;
  }

  int running() {
    int n = 0;
    for (const auto& [name, done] : schema_jobs()) {
      n += done ? 0 : 1;
    }
    return n;
  }

  void complete(const std::string& job) {
    const std::string now = format_time(std::chrono::system_clock::now());
    auto cond = [&](const std::string& type) {
      return Json{{"type", type},
                  {"status", "True"},
                  {"reason", "CompletionsReached"},
                  {"message", "Reached expected number of succeeded pods"},
                  {"lastTransitionTime", now}};
    };
    client.merge_patch(
        owned::jobs, ns, job,
        {{"status",
          {{"startTime", now},
           {"completionTime", now},
           {"succeeded", 1},
           {"conditions", Json::array({cond("SuccessCriteriaMet"), cond("Complete")})}}}},
        "status");
  }

  void complete_running() {
    for (const auto& [name, done] : schema_jobs()) {
      if (!done) {
        complete(name);
      }
    }
  }
};

// Four migrated tables and an operator upgrade (a new image, so new schema Jobs) with
// --max-rolling-relays=2: two Jobs run, the other two resources say Reconciling=True
// RolloutQueued and SchemaReady=True MigrationQueued; each finished Job lets the next one start,
// never more than two at once. New resources are never held: all four first migrations start at
// once. (Suspended resources: their relay Deployments, at zero replicas, take no budget.)
TEST_F(SchemaBudgetE2E, AnOperatorUpgradeReMigratesInWavesOfTheRolloutBudget) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  const std::vector<std::string> names = {"s1", "s2", "s3", "s4"};
  Json spec = base_spec();
  spec["database"]["manageSchema"] = true;
  spec["suspend"] = true;
  {
    testing::ControllerProcess old_release(ns, {"--max-rolling-relays=2"}, "schema-old-" + ns);
    for (const std::string& n : names) {
      client.create(kOutboxRelays, ns, relay_object(n, spec));
    }
    ASSERT_TRUE(eventually([&] { return running() == 4; }, 30s))
        << "first migrations are never held: " << schema_jobs().size();
    complete_running();
    ASSERT_TRUE(eventually(
        [&] {
          return std::all_of(names.begin(), names.end(), [&](const std::string& n) {
            return condition(relay(n), "SchemaReady").value("status", "") == "True";
          });
        },
        20s));
  }

  testing::ControllerProcess new_release(
      ns, {"--max-rolling-relays=2", "--relay-image=ghcr.io/outbox-operator/outbox-operator:next"},
      "schema-new-" + ns);
  std::size_t finished = 0;
  for (int wave = 0; finished < names.size(); ++wave) {
    ASSERT_LT(wave, 4) << "no progress";
    ASSERT_TRUE(eventually([&] { return running() == 2; }, 20s))
        << "wave " << wave << ": " << running() << " running";
    std::this_thread::sleep_for(2s);  // no more than the budget, even given time
    ASSERT_EQ(running(), 2) << "wave " << wave;
    std::vector<std::string> jobs_running_now;
    for (const auto& [name, done] : schema_jobs()) {
      if (!done) {
        jobs_running_now.push_back(name);
      }
    }
    if (wave == 0) {  // those without a new Job wait, saying so, on the last migration
      for (const std::string& n : names) {
        if (std::none_of(jobs_running_now.begin(), jobs_running_now.end(),
                         [&](const std::string& j) { return j.rfind(n + "-schema-", 0) == 0; })) {
          EXPECT_TRUE(eventually(
              [&] {
                const Json r = relay(n);
                return condition(r, "Reconciling").value("reason", "") == "RolloutQueued" &&
                       condition(r, "SchemaReady").value("reason", "") == "MigrationQueued" &&
                       condition(r, "SchemaReady").value("status", "") == "True";
              },
              10s))
              << n << ": " << relay(n).at("status").dump();
        }
      }
    }
    complete_running();
    finished += 2;
  }
  EXPECT_EQ(schema_jobs().size(), 8u) << "one new Job per resource";
  for (const std::string& n : names) {
    EXPECT_TRUE(eventually(
        [&] { return condition(relay(n), "SchemaReady").value("reason", "") == "Migrated"; }, 20s))
        << n << ": " << relay(n).at("status").dump();
  }
}

}  // namespace
}  // namespace outbox::controller
