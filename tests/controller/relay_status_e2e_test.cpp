// The status against a real kube-apiserver and, for the backlog report and the jobs' last
// runs, the real binary against the test bed's PostgreSQL and Kafka.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <thread>
#include <tuple>

#include <pqxx/pqxx>

#include "../jobs/cli_runner.hpp"
#include "controller/relay_status.hpp"
#include "controller_e2e.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

// The relay's command line as the controller rendered it into `deployment`, for the real binary
// run here: listening on a free loopback port, reporting every second with the test bed's
// credentials.
std::vector<std::string> rendered_relay_args(const Json& deployment) {
  std::vector<std::string> args = {OUTBOX_BINARY};
  for (const Json& a : deployment.at("/spec/template/spec/containers/0/args"_json_pointer)) {
    std::string s = a;
    args.push_back(s.rfind("--listen=", 0) == 0 ? "--listen=127.0.0.1:0" : s);
  }
  args.push_back("--kubeconfig=" + testbed::kubeconfig_path());
  args.push_back("--report-interval=1s");
  return args;
}

// The backlog condition is BacklogStuck, not kstatus's Stalled (an old event is not a failed
// rollout); it turns Unknown by itself once the last report is older than kBacklogReportStale.
TEST_F(ControllerE2E, BacklogStuckFromTheReportedBacklogClearedWhenItDrainsUnknownWhenStale) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  testing::ControllerProcess ctl(ns, {}, "stalled-" + ns);
  Json spec = base_spec();
  spec["monitoring"] = {{"stuckAfter", "30s"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  EXPECT_EQ(condition(relay("orders"), "BacklogStuck").value("reason", ""), "NoBacklogReport");
  EXPECT_EQ(condition(relay("orders"), "BacklogStuck").value("status", ""), "Unknown");

  auto report = [&](double oldest, long long pending, const std::string& measured_at,
                    long long failed = 0) {
    client.apply_status(kOutboxRelays, ns,
                        {{"apiVersion", "outbox.dev/v1alpha1"},
                         {"kind", "OutboxRelay"},
                         {"metadata", {{"name", "orders"}}},
                         {"status",
                          {{"backlog",
                            {{"pending", pending},
                             {"failed", failed},
                             {"oldestPendingSeconds", oldest},
                             {"measuredAt", measured_at}}}}}},
                        kRelayFieldManager);
  };
  report(45.5, 120, format_time(std::chrono::system_clock::now()));
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "BacklogStuck").value("status", "") == "True"; },
      20s));
  EXPECT_EQ(condition(relay("orders"), "BacklogStuck").at("reason"), "EventsStuck");
  EXPECT_EQ(condition(relay("orders"), "Stalled").at("status"), "False");
  ASSERT_TRUE(eventually([&] { return warning_events("EventsStuck").size() == 1; }, 10s));
  // The operator's status applies leave the relay's field alone.
  EXPECT_EQ(relay("orders").at("/status/backlog/pending"_json_pointer), 120);

  // FAILED rising from 0: one Warning naming the commands, not one per report.
  report(45.5, 120, format_time(std::chrono::system_clock::now()), 2);
  ASSERT_TRUE(eventually([&] { return events("EventsFailed", "Warning").size() == 1; }, 10s));
  EXPECT_NE(events("EventsFailed", "Warning")[0]
                .value("message", "")
                .find("kubectl outbox inspect orders -n " + ns),
            std::string::npos);
  report(45.5, 120, format_time(std::chrono::system_clock::now()), 3);

  // A last report that turns stale in 3 s: nothing else happens, yet the condition follows.
  const auto measured = std::chrono::system_clock::now() - kBacklogReportStale + 3s;
  report(0.2, 0, format_time(measured));
  ASSERT_TRUE(eventually(
      [&] {
        Json c = condition(relay("orders"), "BacklogStuck");
        return c.value("status", "") == "False" && c.value("reason", "") == "BacklogFresh";
      },
      20s));
  ASSERT_TRUE(eventually([&] { return events("Recovered", "Normal").size() == 1; }, 10s));
  EXPECT_EQ(events("Recovered", "Normal")[0].value("message", "").rfind("BacklogStuck cleared", 0),
            0u);
  EXPECT_EQ(events("EventsFailed", "Warning").size(), 1u);
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "BacklogStuck").value("status", "") == "Unknown"; },
      20s));
  Json c = condition(relay("orders"), "BacklogStuck");
  EXPECT_EQ(c.at("reason"), "NoRecentReport");
  EXPECT_NE(c.at("message").get<std::string>().find("since " + format_time(measured)),
            std::string::npos)
      << c.dump();
}

// The relay binary, started with the arguments the controller rendered into the Deployment,
// reports the backlog it measures; it shows in `kubectl get obr`; events stuck behind an
// unreachable broker make the backlog stuck; a relay with the real broker drains them.
TEST_F(ControllerE2E, BacklogFromARealRelayShowsInKubectlAndGetsStuckAndDrains) {
  outbox::testing::OutboxTestTable table;
  testing::create_secret(client, ns, "orders-db", {{"dsn", table.dsn}});
  testing::ControllerProcess ctl(ns, {}, "backlog-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table.table.plain();
  spec["kafka"] = {{"bootstrapServers", "127.0.0.1:1"}, {"topic", table.topic}};
  spec["monitoring"] = {{"stuckAfter", "3s"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  auto relay_args = [&] {
    std::vector<std::string> args = rendered_relay_args(get(owned::deployments, "orders-relay"));
    args.push_back("--message-timeout=2s");
    return args;
  };
  table.insert(5, 2);
  auto stuck = std::make_unique<testing::Process>(
      relay_args(), std::map<std::string, std::string>{{"OUTBOX_DSN", table.dsn}},
      ::testing::TempDir() + "relay-stuck-" + ns + ".log");
  ASSERT_TRUE(eventually(
      [&] {
        Json r = relay("orders");
        return r.value("status", Json::object()).contains("backlog") &&
               r.at("/status/backlog/pending"_json_pointer) == 5 &&
               condition(r, "BacklogStuck").value("status", "") == "True";
      },
      40s));
  std::string out = testing::kubectl("-n " + ns + " get obr orders");
  EXPECT_NE(out.find("PENDING"), std::string::npos) << out;
  std::string row = out.substr(out.find('\n') + 1);
  EXPECT_NE(row.find(" 5 "), std::string::npos) << out;
  Json managers = relay("orders").at("/metadata/managedFields"_json_pointer);
  bool relay_manager = false;
  for (const Json& m : managers) {
    relay_manager |=
        m.value("manager", "") == kRelayFieldManager && m.value("subresource", "") == "status";
  }
  EXPECT_TRUE(relay_manager) << managers.dump();

  // Point the resource at the real broker; run the relay with the new arguments.
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"spec", {{"kafka", {{"bootstrapServers", testbed::kafka_bootstrap()}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return has_arg(get(owned::deployments, "orders-relay")
                           .at("/spec/template/spec/containers/0"_json_pointer),
                       "--brokers=" + testbed::kafka_bootstrap());
      },
      20s));
  stuck->kill9();
  testing::Process draining(relay_args(), {{"OUTBOX_DSN", table.dsn}},
                            ::testing::TempDir() + "relay-drain-" + ns + ".log");
  ASSERT_TRUE(eventually(
      [&] {
        Json r = relay("orders");
        return r.at("/status/backlog/pending"_json_pointer) == 0 &&
               condition(r, "BacklogStuck").value("status", "") == "False";
      },
      60s));
  EXPECT_EQ(table.count("status = 1"), 5);
}

// spec.database.tls against the test bed's second PostgreSQL, which serves TLS with a certificate
// for "localhost" signed by the test bed's CA: the real relay, run with what the controller
// rendered (the mounted CA's path swapped for the test bed's file), connects with verify-full
// although the DSN says sslmode=require and reports it (`-o wide` shows it); a wrong CA and a
// wrong host name are refused and become Degraded DatabaseTLSRefused with libpq's words; the DSN
// alone (require, no CA) still connects and shows as unverified.
TEST_F(ControllerE2E, DatabaseTlsIsVerifiedReportedAndARefusalIsACondition) {
  const std::string pg2 = testbed::postgres2_dsn();  // postgresql://outbox:pw@127.0.0.1:port/outbox
  const std::string by_name =
      std::regex_replace(pg2, std::regex("@127\\.0\\.0\\.1:"), "@localhost:") +
      "?hostaddr=127.0.0.1&sslmode=require";
  const std::string by_ip = pg2 + "?sslmode=require";
  const std::string table = "public." + testbed::unique_name("tls");
  const std::string ca = testbed::require_env("OUTBOX_TEST_PG2_CA");
  const std::string other_ca = testbed::require_env("OUTBOX_TEST_PG2_OTHER_CA");
  const outbox::testing::CliResult migrated =
      outbox::testing::run_cli(by_ip, std::string(OUTBOX_BINARY) + " migrate --table " + table);
  ASSERT_EQ(migrated.exit_code, 0) << migrated.output;

  testing::create_secret(client, ns, "orders-db", {{"dsn", "unused: the test runs the relay"}});
  testing::create_secret(client, ns, "pg-ca", {{"ca.crt", "unused"}});
  testing::ControllerProcess ctl(ns, {}, "tls-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table;
  spec["database"]["tls"] = {{"ca", {{"secretRef", {{"name", "pg-ca"}}}}}};
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", "tls-probe"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  // The rendered container: its arguments, and its environment with the mounted CA's path
  // replaced by `ca_file` (and the TLS variables left out when `with_tls` is false).
  auto run_relay = [&](const std::string& dsn, const std::string& ca_file, bool with_tls) {
    const Json deployment = get(owned::deployments, "orders-relay");
    const Json c = deployment.at("/spec/template/spec/containers/0"_json_pointer);
    const std::vector<std::string> args = rendered_relay_args(deployment);
    std::map<std::string, std::string> env = {{"OUTBOX_DSN", dsn}};
    for (const Json& e : c.at("env")) {
      const std::string name = e.at("name");
      if (with_tls && name.rfind("OUTBOX_DATABASE_", 0) == 0) {
        env[name] = name == "OUTBOX_DATABASE_CA_FILE" ? ca_file : e.at("value").get<std::string>();
      }
    }
    EXPECT_TRUE(!with_tls || env.at("OUTBOX_DATABASE_SSLMODE") == "verify-full") << c.dump();
    return std::make_unique<testing::Process>(
        args, env,
        ::testing::TempDir() + "relay-tls-" + ns + "-" + std::to_string(env.size()) + ".log");
  };
  auto reported_tls = [&] {
    return relay("orders").value("/status/database/tls"_json_pointer, "");
  };

  {
    auto verified = run_relay(by_name, ca, true);
    ASSERT_TRUE(eventually([&] { return reported_tls() == "verify-full"; }, 40s))
        << relay("orders").value("status", Json::object()).dump();
    const std::string wide = testing::kubectl("-n " + ns + " get obr orders -o wide");
    EXPECT_NE(wide.find("TLS"), std::string::npos) << wide;
    EXPECT_NE(wide.find("verify-full"), std::string::npos) << wide;
  }
  for (const auto& [dsn, ca_file, says] :
       {std::tuple{by_name, other_ca, std::string("certificate verify failed")},
        std::tuple{by_ip, ca, std::string("does not match host name \"127.0.0.1\"")}}) {
    auto refused = run_relay(dsn, ca_file, true);
    ASSERT_TRUE(eventually(
        [&] {
          const Json d = condition(relay("orders"), "Degraded");
          return d.value("reason", "") == "DatabaseTLSRefused" &&
                 d.value("message", "").find(says) != std::string::npos;
        },
        40s))
        << says << ": " << relay("orders").value("status", Json::object()).dump();
    EXPECT_EQ(relay("orders").value("/status/relayProblem/reason"_json_pointer, ""),
              "DatabaseTLSRefused");
  }
  {
    auto unverified = run_relay(by_ip, "", false);
    ASSERT_TRUE(eventually([&] { return reported_tls() == "unverified"; }, 40s))
        << relay("orders").value("status", Json::object()).dump();
    EXPECT_NE(testing::kubectl("-n " + ns + " get obr orders -o wide").find("unverified"),
              std::string::npos);
  }
}

// The compensation and retention jobs, run by the real binary with the arguments the controller
// rendered into their CronJobs, write status.lastCompensation and status.lastCleanup with the
// right counts; a failed database run exits non-zero and says Failed, which the controller turns
// into JobFailed=True until a run succeeds; the controller's status writes keep both fields; a
// status report that cannot be written leaves the exit code alone.
TEST_F(ControllerE2E, JobsReportTheirLastRunsAndTheControllerKeepsThem) {
  outbox::testing::OutboxTestTable table;
  testing::create_secret(client, ns, "orders-db", {{"dsn", table.dsn}});
  testing::ControllerProcess ctl(ns, {}, "jobs-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table.table.plain();
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", table.topic}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  // The command line of a CronJob's pod, run here with the admin kubeconfig in place of the
  // ServiceAccount token; each argument single-quoted for the shell.
  auto job_command = [&](const std::string& cron_job,
                         const std::map<std::string, std::string>& replace = {}) {
    Json c = get(owned::cron_jobs, cron_job)
                 .at("/spec/jobTemplate/spec/template/spec/containers/0"_json_pointer);
    std::string cmd = OUTBOX_BINARY;
    for (const Json& a : c.at("args")) {
      std::string s = a;
      for (const auto& [prefix, value] : replace) {
        if (s.rfind(prefix, 0) == 0) {
          s = prefix + value;
        }
      }
      cmd += " '" + s + "'";
    }
    return cmd + " '--kubeconfig=" + testbed::kubeconfig_path() + "'";
  };

  table.insert(10, 3);  // no relay runs: the compensation run publishes all of them
  auto comp = outbox::testing::run_cli(table.dsn, job_command("orders-compensate"));
  ASSERT_EQ(comp.exit_code, 0) << comp.output;
  EXPECT_EQ(table.count("status = 1"), 10);
  Json r = relay("orders");
  ASSERT_TRUE(r.contains("/status/lastCompensation"_json_pointer)) << r.at("status").dump();
  Json comp_status = r.at("/status/lastCompensation"_json_pointer);
  EXPECT_EQ(comp_status.at("outcome"), "Succeeded");
  EXPECT_EQ(comp_status.at("resent"), 10);
  EXPECT_EQ(comp_status.at("failed"), 0);
  EXPECT_FALSE(comp_status.contains("message"));
  EXPECT_TRUE(comp_status.at("time").is_string());
  EXPECT_FALSE(condition(r, "Ready").empty()) << "the controller's conditions are still there";

  // Six of the ten sent events are past spec.retention.keepSent (24h; retention ages events by
  // created_at).
  {
    pqxx::connection conn(table.dsn);
    pqxx::work tx(conn);
    tx.exec("UPDATE " + table.table.quoted() +
            " SET created_at = now() - interval '2 days' WHERE id IN (SELECT id FROM " +
            table.table.quoted() + " ORDER BY id LIMIT 6)");
    tx.commit();
  }
  auto clean = outbox::testing::run_cli(table.dsn, job_command("orders-cleanup"));
  ASSERT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_EQ(table.count("true"), 4);
  r = relay("orders");
  ASSERT_TRUE(r.contains("/status/lastCleanup"_json_pointer)) << r.at("status").dump();
  Json clean_status = r.at("/status/lastCleanup"_json_pointer);
  EXPECT_EQ(clean_status.at("outcome"), "Succeeded");
  EXPECT_EQ(clean_status.at("removed"), 6);
  EXPECT_EQ(clean_status.at("archived"), 0);
  EXPECT_EQ(r.at("/status/lastCompensation"_json_pointer), comp_status)
      << "the cleanup job left the compensation's field alone";

  // A spec change makes the controller write its status again (observedGeneration): a
  // server-side apply of only its own fields, which keeps the jobs' fields.
  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"relay", {{"replicas", 3}}}}}});
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  r = relay("orders");
  EXPECT_EQ(r.at("/status/lastCompensation"_json_pointer), comp_status);
  EXPECT_EQ(r.at("/status/lastCleanup"_json_pointer), clean_status);

  // A run whose database is unreachable exits non-zero and reports Failed with the reason; the
  // counts of the previous run do not stay beside it.
  auto failed = outbox::testing::run_cli("postgresql://outbox@127.0.0.1:1/none?connect_timeout=2",
                                         job_command("orders-compensate"));
  EXPECT_NE(failed.exit_code, 0) << failed.output;
  r = relay("orders");
  Json failed_status = r.at("/status/lastCompensation"_json_pointer);
  EXPECT_EQ(failed_status.at("outcome"), "Failed") << failed_status.dump();
  EXPECT_NE(failed_status.value("message", "").find("compensation failed"), std::string::npos)
      << failed_status.dump();
  EXPECT_FALSE(failed_status.contains("resent")) << failed_status.dump();
  EXPECT_EQ(r.at("/status/lastCleanup"_json_pointer), clean_status);
  EXPECT_FALSE(condition(r, "Ready").empty());
  EXPECT_TRUE(eventually(
      [&] {
        Json c = condition(relay("orders"), "JobFailed");
        return c.value("status", "") == "True" && c.value("reason", "") == "CompensationFailed";
      },
      20s))
      << relay("orders").at("status").dump();
  EXPECT_EQ(relay("orders").at("/status/lastCompensation/outcome"_json_pointer), "Failed")
      << "the controller's write kept the failed run";

  // The next good run clears the message again.
  comp = outbox::testing::run_cli(table.dsn, job_command("orders-compensate"));
  ASSERT_EQ(comp.exit_code, 0) << comp.output;
  comp_status = relay("orders").at("/status/lastCompensation"_json_pointer);
  EXPECT_EQ(comp_status.at("outcome"), "Succeeded");
  EXPECT_EQ(comp_status.at("resent"), 0);
  EXPECT_FALSE(comp_status.contains("message")) << comp_status.dump();
  EXPECT_TRUE(eventually(
      [&] { return condition(relay("orders"), "JobFailed").value("status", "") == "False"; }, 20s))
      << relay("orders").at("status").dump();

  // A status report that cannot be written (no such OutboxRelay) is logged; the exit code stays
  // the database run's.
  auto orphan = outbox::testing::run_cli(
      table.dsn, job_command("orders-cleanup", {{"--report-status=", ns + "/missing"}}));
  EXPECT_EQ(orphan.exit_code, 0) << orphan.output;
  EXPECT_NE(orphan.output.find("could not report status.lastCleanup"), std::string::npos)
      << orphan.output;
}

// Issue 42: a Secret whose password holds a bare % makes libpq quote the password (`invalid
// percent-encoded token: "..."`). The real relay, run with the arguments the controller rendered
// and that Secret as its DSN file, and the real compensation job report why they cannot connect;
// the password is in none of what they and the controller emit: the relay's log and /readyz,
// status.relayProblem, the Ready, Stalled and Degraded conditions, the Warning Event,
// status.lastCompensation and the JobFailed condition.
TEST_F(ControllerE2E, APasswordLibpqQuotesBackReachesNoStatusConditionEventOrLog) {
  const std::string dsn = "postgresql://outbox:Hunter2%zzSecret@127.0.0.1:1/outbox";
  auto shows_password = [](const std::string& text) {
    return text.find("Hunter2") != std::string::npos || text.find("zzSecret") != std::string::npos;
  };
  testing::create_secret(client, ns, "orders-db", {{"dsn", dsn}});
  testing::ControllerProcess ctl(ns, {}, "redact-" + ns);
  Json spec = base_spec();
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", "redact-probe"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  const std::string dsn_file = ::testing::TempDir() + "redact-" + ns + ".dsn";
  std::ofstream(dsn_file) << dsn << "\n";
  const std::string log = ::testing::TempDir() + "redact-relay-" + ns + ".log";
  const unsigned short port = free_port();
  std::vector<std::string> args = rendered_relay_args(get(owned::deployments, "orders-relay"));
  std::replace(args.begin(), args.end(), std::string("--listen=127.0.0.1:0"),
               "--listen=127.0.0.1:" + std::to_string(port));
  std::string readyz;
  {
    testing::Process relay_pod(args, {{"OUTBOX_DSN_FILE", dsn_file}}, log);
    ASSERT_TRUE(eventually(
        [&] {
          return condition(relay("orders"), "Degraded")
                     .value("message", "")
                     .find("invalid percent-encoded token") != std::string::npos;
        },
        40s))
        << relay("orders").value("status", Json::object()).dump();
    readyz = http_get(port, "/readyz");
  }
  EXPECT_NE(readyz.find("invalid percent-encoded token"), std::string::npos) << readyz;
  EXPECT_FALSE(shows_password(readyz)) << readyz;
  const Json r = relay("orders");
  const std::string reported = r.value("/status/relayProblem/message"_json_pointer, "");
  EXPECT_NE(reported.find("invalid percent-encoded token"), std::string::npos) << reported;
  EXPECT_FALSE(shows_password(r.at("status").dump())) << r.at("status").dump();
  // Ready quotes the relays' reports only when the Deployment has pods (a real node's
  // cluster test); here it says how many are ready, and nothing of the password either.
  EXPECT_FALSE(shows_password(condition(r, "Ready").dump()));
  for (const char* type : {"Stalled", "Degraded"}) {
    const std::string message = condition(r, type).value("message", "");
    EXPECT_NE(message.find("invalid percent-encoded token"), std::string::npos)
        << type << ": " << message;
  }
  ASSERT_TRUE(eventually([&] { return !client.list(kEvents, ns).at("items").empty(); }, 10s));
  const std::string events = client.list(kEvents, ns).at("items").dump();
  EXPECT_NE(events.find("invalid percent-encoded token"), std::string::npos) << events;
  EXPECT_FALSE(shows_password(events)) << events;
  std::ifstream in(log);
  const std::string logged((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(logged.find("invalid percent-encoded token"), std::string::npos) << logged;
  EXPECT_FALSE(shows_password(logged)) << logged;

  // The compensation CronJob's command, run here with the admin kubeconfig.
  std::string cmd = OUTBOX_BINARY;
  const Json cron_job = get(owned::cron_jobs, "orders-compensate");  // outlives the loop
  for (const Json& a :
       cron_job.at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer)) {
    cmd += " '" + a.get<std::string>() + "'";
  }
  cmd += " '--kubeconfig=" + testbed::kubeconfig_path() + "'";
  const outbox::testing::CliResult comp = outbox::testing::run_cli(dsn, cmd);
  EXPECT_NE(comp.exit_code, 0) << comp.output;
  EXPECT_NE(comp.output.find("invalid percent-encoded token"), std::string::npos) << comp.output;
  EXPECT_FALSE(shows_password(comp.output)) << comp.output;
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "JobFailed").value("status", "") == "True"; }, 20s));
  const Json after = relay("orders");
  EXPECT_NE(after.value("/status/lastCompensation/message"_json_pointer, "")
                .find("invalid percent-encoded token"),
            std::string::npos)
      << after.at("status").dump();
  EXPECT_FALSE(shows_password(after.at("status").dump())) << after.at("status").dump();
}

// A log-mode table found on another PostgreSQL cluster is rebased by the relay (the default
// policy), which reports the move outbox_meta records in status.database.clusterMove; the
// controller turns it into ClusterMoved=True naming both clusters, with one Warning Event per
// move (a second move, another). Nothing else changes: the relay stays ready.
TEST_F(ControllerE2E, ARebasedClusterMoveIsAConditionAndOneWarningEventPerMove) {
  const std::string dsn = testbed::postgres_dsn();
  const std::string table = "public." + testbed::unique_name("moved");
  const outbox::testing::CliResult migrated =
      outbox::testing::run_cli(dsn, std::string(OUTBOX_BINARY) + " migrate --table " + table);
  ASSERT_EQ(migrated.exit_code, 0) << migrated.output;
  pqxx::connection conn(dsn);
  const std::string here = pqxx::nontransaction(conn)
                               .exec1("SELECT system_identifier::text FROM pg_control_system()")[0]
                               .as<std::string>();
  // What a restore into another cluster looks like to the relay: the table recorded for a
  // cluster that is not this one.
  auto recorded_for = [&](const std::string& cluster) {
    pqxx::nontransaction(conn).exec_params(
        "UPDATE public.outbox_meta SET cluster_id = $1 WHERE table_name = $2", cluster,
        table.substr(table.find('.') + 1));
  };
  recorded_for("4242");

  testing::create_secret(client, ns, "orders-db", {{"dsn", "unused: the test runs the relay"}});
  testing::ControllerProcess ctl(ns, {}, "moved-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table;
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", "moved-probe"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  const std::vector<std::string> args =
      rendered_relay_args(get(owned::deployments, "orders-relay"));
  auto moved_message = [&] {
    return condition(relay("orders"), "ClusterMoved").value("message", "");
  };

  {
    testing::Process relay_pod(args, {{"OUTBOX_DSN", dsn}},
                               ::testing::TempDir() + "moved-relay-" + ns + "-1.log");
    ASSERT_TRUE(eventually([&] { return !moved_message().empty(); }, 40s))
        << relay("orders").value("status", Json::object()).dump();
  }
  Json r = relay("orders");
  EXPECT_EQ(r.value("/status/database/clusterMove/from"_json_pointer, ""), "4242");
  EXPECT_EQ(r.value("/status/database/clusterMove/to"_json_pointer, ""), here);
  EXPECT_TRUE(std::regex_match(r.value("/status/database/clusterMove/at"_json_pointer, ""),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << r.at("status").dump();
  const Json moved = condition(r, "ClusterMoved");
  EXPECT_EQ(moved.value("status", ""), "True");
  EXPECT_EQ(moved.value("reason", ""), "TableRebased");
  EXPECT_NE(moved_message().find("from PostgreSQL cluster 4242 to " + here), std::string::npos)
      << moved_message();
  EXPECT_NE(moved_message().find(table), std::string::npos) << moved_message();
  EXPECT_NE(condition(r, "Degraded").value("status", ""), "True") << "a rebase needs nobody";
  ASSERT_TRUE(eventually([&] { return warning_events("TableRebased").size() == 1; }, 10s));
  EXPECT_EQ(warning_events("TableRebased")[0].at("message"), moved.at("message"));

  // Seconds later, still the one Event: the controller's resyncs write nothing new.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(warning_events("TableRebased").size(), 1u);

  // A second move: another Event, naming the new one.
  recorded_for("4343");
  {
    testing::Process relay_pod(args, {{"OUTBOX_DSN", dsn}},
                               ::testing::TempDir() + "moved-relay-" + ns + "-2.log");
    ASSERT_TRUE(eventually(
        [&] { return moved_message().find("cluster 4343 to") != std::string::npos; }, 40s))
        << relay("orders").value("status", Json::object()).dump();
  }
  ASSERT_TRUE(eventually([&] { return warning_events("TableRebased").size() == 2; }, 10s));
}

}  // namespace
}  // namespace outbox::controller
