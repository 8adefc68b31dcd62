// spec.deletionPolicy against a real kube-apiserver and PostgreSQL. The test bed runs no kubelet
// and no Job controller: the test runs a Job's command line itself, as its pod would, and
// writes the Job's outcome into its status.
#include <gtest/gtest.h>

#include <optional>

#include <pqxx/pqxx>

#include "../jobs/cli_runner.hpp"
#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "controller_e2e.hpp"
#include "kube/errors.hpp"
#include "outbox/schema.hpp"
#include "support/testbed.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class DropE2E : public ControllerE2E {
 protected:
  std::optional<Json> find(const kube::Resource& r, const std::string& name) {
    try {
      return get(r, name);
    } catch (const kube::ApiError& e) {
      if (e.is_not_found()) {
        return std::nullopt;
      }
      throw;
    }
  }

  bool has_finalizer(const std::string& name) {
    const auto r = find(kOutboxRelays, name);
    return r && has_drop_finalizer(*r);
  }

  // The Job's command line as its pod runs it; the DSN comes from OUTBOX_DSN here (run_cli).
  static std::string command_of(const Json& job) {
    std::string cmd = OUTBOX_BINARY;
    for (const Json& a : job.at("/spec/template/spec/containers/0/args"_json_pointer)) {
      cmd += " '" + a.get<std::string>() + "'";
    }
    return cmd;
  }

  // What the Job controller writes when the Job's pod ended: `type` Complete or Failed.
  void finish_job(const std::string& name, bool succeeded) {
    const std::string now = format_time(std::chrono::system_clock::now());
    auto cond = [&](const std::string& type, const std::string& reason) {
      return Json{{"type", type},
                  {"status", "True"},
                  {"reason", reason},
                  {"message", reason == "BackoffLimitExceeded" ? "Job has reached the specified "
                                                                 "backoff limit"
                                                               : "Reached expected number of "
                                                                 "succeeded pods"},
                  {"lastTransitionTime", now}};
    };
    Json status = {{"startTime", now}};
    if (succeeded) {
      status["succeeded"] = 1;
      status["completionTime"] = now;
      status["conditions"] = Json::array({cond("SuccessCriteriaMet", "CompletionsReached"),
                                          cond("Complete", "CompletionsReached")});
    } else {
      status["failed"] = 3;
      status["conditions"] = Json::array(
          {cond("FailureTarget", "BackoffLimitExceeded"), cond("Failed", "BackoffLimitExceeded")});
    }
    client.merge_patch(owned::jobs, ns, name, {{"status", status}}, "status");
  }

  // The Drop Job of `relay`, once the controller created it with another uid than `not_uid`.
  std::optional<Json> drop_job_of(const Json& relay, const std::string& not_uid = "") {
    std::optional<Json> job;
    eventually(
        [&] {
          job = find(owned::jobs, drop_job_name(relay));
          return job && job->at("metadata").at("uid") != not_uid;
        },
        20s);
    return job && job->at("metadata").at("uid") != not_uid ? job : std::nullopt;
  }

  void delete_job(const std::string& name) {
    testing::kubectl("-n " + ns + " delete job " + name + " --cascade=background --wait=false");
  }

  bool table_exists(pqxx::connection& conn, const TableName& t) {
    return pqxx::nontransaction(conn)
        .exec_params1("SELECT to_regclass($1) IS NOT NULL", t.quoted())[0]
        .as<bool>();
  }

  // Runs the rendered schema Job's command: the managed schema, as its pod would make it.
  void run_schema_job(const std::string& dsn, const std::string& relay) {
    Json job;
    ASSERT_TRUE(eventually(
        [&] {
          const Json jobs = client.list(owned::jobs, ns);
          for (const Json& j : jobs.at("items")) {
            if (j.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer) == "schema" &&
                j.at("/metadata/labels/app.kubernetes.io~1instance"_json_pointer) == relay) {
              job = j;
              return true;
            }
          }
          return false;
        },
        20s));
    const auto run = outbox::testing::run_cli(dsn, command_of(job));
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }

  Json drop_spec(const TableName& table) {
    Json spec = base_spec();
    spec["database"]["table"] = table.plain();
    spec["database"]["manageSchema"] = true;
    spec["deletionPolicy"] = "Drop";
    return spec;
  }
};

// Drop: the finalizer is set; deleting stops the relays and renders the Drop Job (the DSN as a
// mounted file, no owner); a failed Job keeps the resource, Degraded DropFailed with how to go
// on; deleting the Job runs it again; its command drops the table and the Job's success lets
// the resource go.
TEST_F(DropE2E, DropRunsAJobBehindAFinalizerAndTheResourceGoesOnceItSucceeded) {
  const std::string dsn = testbed::postgres_dsn();
  const TableName table = TableName::parse(testbed::unique_name("dropped"));
  testing::create_secret(client, ns, "orders-db", {{"dsn", dsn}});
  testing::ControllerProcess ctl(ns, {}, "drop-" + ns);
  client.create(kOutboxRelays, ns, relay_object("orders", drop_spec(table)));
  ASSERT_TRUE(eventually([&] { return observed("orders") && has_finalizer("orders"); }, 20s))
      << relay("orders").at("metadata").dump();
  run_schema_job(dsn, "orders");
  pqxx::connection conn(dsn);
  ASSERT_TRUE(table_exists(conn, table));
  pqxx::nontransaction(conn).exec("SELECT " + table.quoted_with_suffix("_enqueue") +
                                  "('order', 'k1', '{}'::jsonb)");

  testing::kubectl("-n " + ns + " delete obr orders --wait=false");
  const Json deleting = relay("orders");
  std::optional<Json> job = drop_job_of(deleting);
  ASSERT_TRUE(job.has_value()) << relay("orders").dump();
  EXPECT_FALSE(job->at("metadata").contains("ownerReferences"));
  const Json& container = job->at("/spec/template/spec/containers/0"_json_pointer);
  EXPECT_TRUE(has_arg(container, "--drop"));
  EXPECT_TRUE(has_arg(container, "--table=" + table.plain()));
  EXPECT_EQ(container.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_EQ(job->at("/spec/template/spec/volumes/1/secret/secretName"_json_pointer), "orders-db");
  EXPECT_EQ(container.dump().find(dsn), std::string::npos) << "no DSN in the pod spec";
  EXPECT_EQ(get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer), 0);
  EXPECT_TRUE(get(owned::cron_jobs, "orders-compensate").at("/spec/suspend"_json_pointer));
  EXPECT_TRUE(get(owned::cron_jobs, "orders-cleanup").at("/spec/suspend"_json_pointer));
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Reconciling").value("reason", "") == "Dropping"; },
      20s))
      << relay("orders").at("status").dump();

  // Failed: the resource stays, and says why and how to go on.
  finish_job(job->at("/metadata/name"_json_pointer), false);
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("reason", "") == "DropFailed"; },
      20s))
      << relay("orders").at("status").dump();
  const std::string message = condition(relay("orders"), "Degraded").value("message", "");
  EXPECT_NE(message.find("BackoffLimitExceeded"), std::string::npos) << message;
  EXPECT_NE(message.find("kubectl delete job " + drop_job_name(deleting)), std::string::npos);
  EXPECT_NE(message.find(kDropFinalizer), std::string::npos) << message;
  EXPECT_TRUE(eventually([&] { return warning_events("DropFailed").size() == 1; }, 10s));
  EXPECT_TRUE(has_finalizer("orders"));
  EXPECT_TRUE(table_exists(conn, table));

  // Deleted, the Job runs again; its command drops the table; its success lets the resource go.
  delete_job(drop_job_name(deleting));
  job = drop_job_of(deleting, job->at("/metadata/uid"_json_pointer));
  ASSERT_TRUE(job.has_value());
  const auto run = outbox::testing::run_cli(dsn, command_of(*job));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("dropped table " + table.plain()), std::string::npos) << run.output;
  EXPECT_FALSE(table_exists(conn, table));
  EXPECT_FALSE(table_exists(conn, TableName::parse(table.plain() + "_waiting")));
  EXPECT_TRUE(has_finalizer("orders")) << "held until the Job reports success";
  finish_job(job->at("/metadata/name"_json_pointer), true);
  EXPECT_TRUE(eventually([&] { return !find(kOutboxRelays, "orders").has_value(); }, 20s))
      << relay("orders").dump();
}

// An adopted table (Debezium's shape, spec.database.columns): the rendered Drop Job's command
// removes the copy trigger and <table>_relay; the service's table keeps its rows, and its
// inserts are no longer copied.
TEST_F(DropE2E, DroppingAnAdoptedTableLeavesTheServicesTableAndItsRows) {
  const std::string dsn = testbed::postgres_dsn();
  const TableName table = TableName::parse(testbed::unique_name("dbz_drop"));
  pqxx::connection conn(dsn);
  auto insert = [&] {
    pqxx::nontransaction(conn).exec(
        "INSERT INTO " + table.quoted() +
        " (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), 'order', "
        "'k1', 'Created', '{}')");
  };
  pqxx::nontransaction(conn).exec(
      "CREATE TABLE " + table.quoted() +
      " (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text "
      "NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now())");
  testing::create_secret(client, ns, "orders-db", {{"dsn", dsn}});
  testing::ControllerProcess ctl(ns, {}, "drop-adopted-" + ns);
  Json spec = drop_spec(table);
  spec["database"]["columns"] = {{"createdAt", "timestamp"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return has_finalizer("orders"); }, 20s));
  run_schema_job(dsn, "orders");
  const TableName copy = TableName::parse(table.plain() + "_relay");
  insert();
  ASSERT_TRUE(table_exists(conn, copy));

  testing::kubectl("-n " + ns + " delete obr orders --wait=false");
  const std::optional<Json> job = drop_job_of(relay("orders"));
  ASSERT_TRUE(job.has_value());
  const auto run = outbox::testing::run_cli(dsn, command_of(*job));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("dropped trigger " + table.table() + "_relay_copy"), std::string::npos)
      << run.output;
  EXPECT_FALSE(table_exists(conn, copy));
  insert();
  EXPECT_EQ(pqxx::nontransaction(conn).exec1("SELECT count(*) FROM " + table.quoted())[0].as<int>(),
            2)
      << "the service's rows stay, and its inserts no longer fail or copy";
  finish_job(job->at("/metadata/name"_json_pointer), true);
  EXPECT_TRUE(eventually([&] { return !find(kOutboxRelays, "orders").has_value(); }, 20s));
  pqxx::nontransaction(conn).exec("DROP TABLE " + table.quoted());
}

// Retain (the default) sets no finalizer and leaves the database as docs/install.md lists it;
// a resource set back from Drop to Retain loses the finalizer and goes at once too.
TEST_F(DropE2E, RetainSetsNoFinalizerAndLeavesTheTableAndItsObjects) {
  const std::string dsn = testbed::postgres_dsn();
  const TableName table = TableName::parse(testbed::unique_name("retained"));
  testing::create_secret(client, ns, "orders-db", {{"dsn", dsn}});
  testing::ControllerProcess ctl(ns, {}, "retain-" + ns);
  Json spec = drop_spec(table);
  spec.erase("deletionPolicy");
  client.create(kOutboxRelays, ns, relay_object("kept", spec));
  client.create(kOutboxRelays, ns, relay_object("switched", drop_spec(table)));
  ASSERT_TRUE(eventually([&] { return observed("kept") && has_finalizer("switched"); }, 20s));
  EXPECT_EQ(relay("kept").at("/spec/deletionPolicy"_json_pointer), "Retain") << "the default";
  EXPECT_FALSE(has_finalizer("kept"));
  run_schema_job(dsn, "kept");

  client.merge_patch(kOutboxRelays, ns, "switched", {{"spec", {{"deletionPolicy", "Retain"}}}});
  ASSERT_TRUE(eventually([&] { return !has_finalizer("switched"); }, 20s));
  testing::kubectl("-n " + ns + " delete obr kept switched --wait=false");
  EXPECT_TRUE(eventually(
      [&] {
        return !find(kOutboxRelays, "kept").has_value() &&
               !find(kOutboxRelays, "switched").has_value();
      },
      10s));
  const Json jobs = client.list(owned::jobs, ns);
  for (const Json& j : jobs.at("items")) {
    EXPECT_EQ(j.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer), "schema")
        << "no Drop Job: " << j.at("metadata").dump();
  }
  // What docs/install.md ("Decommission an OutboxRelay") says Retain leaves.
  pqxx::connection conn(dsn);
  EXPECT_TRUE(table_exists(conn, table));
  EXPECT_TRUE(table_exists(conn, TableName::parse(table.plain() + "_waiting")));
  pqxx::nontransaction tx(conn);
  EXPECT_EQ(tx.exec_params1("SELECT count(*) FROM public.outbox_meta WHERE table_name = $1",
                            table.table())[0]
                .as<int>(),
            1);
  EXPECT_EQ(tx.exec_params1("SELECT count(*) FROM pg_proc WHERE proname = $1",
                            table.table() + "_enqueue")[0]
                .as<int>(),
            2);
  // The table is log mode (migrate's default): its _status view, progress and retry tables go too.
  tx.exec("DROP TABLE IF EXISTS " + table.quoted() + ", " + table.quoted_with_suffix("_waiting") +
          ", " + table.quoted_with_suffix("_progress") + ", " + table.quoted_with_suffix("_retry") +
          " CASCADE");
}

}  // namespace
}  // namespace outbox::controller
