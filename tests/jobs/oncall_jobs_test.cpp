// Retention, inspect, requeue and replay against a real PostgreSQL, and the CLI's
// handling of malformed input.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "outbox/operations.hpp"
#include "outbox/retention.hpp"
#include "outbox/store.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testing::OutboxTestTable;
using testing::run_cli;

// 30 sent rows two weeks old, 10 sent rows new, 5 pending and 5 FAILED rows two weeks old.
void seed_ages(OutboxTestTable& t) {
  t.insert(50, 10);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction tx(conn);
  const std::string q = t.table.quoted();
  tx.exec("UPDATE " + q + " SET status = 1, sent_at = now() WHERE id IN (SELECT id FROM " + q +
          " ORDER BY id LIMIT 40)");
  tx.exec("UPDATE " + q +
          " SET created_at = now() - interval '14 days' WHERE id IN (SELECT id FROM " + q +
          " ORDER BY id LIMIT 30)");
  tx.exec("UPDATE " + q +
          " SET status = 2, last_error = 'poison', created_at = now() - interval '14 days' "
          "WHERE id IN (SELECT id FROM " +
          q + " ORDER BY id DESC LIMIT 5)");
  tx.exec("UPDATE " + q + " SET created_at = now() - interval '14 days' WHERE status = 0");
}

TEST(Retention, RemovesOnlyOldSentRowsInBoundedBatches) {
  OutboxTestTable t;
  seed_ages(t);
  pqxx::connection conn(t.dsn);
  RetentionConfig c;
  c.keep_sent = std::chrono::hours(24 * 7);
  c.batch_size = 7;
  RetentionReport r = run_retention(conn, t.table, c);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.removed, 30);
  EXPECT_EQ(r.batches, 5) << "30 rows in batches of 7: 7+7+7+7+2";
  EXPECT_EQ(t.count("status = 1"), 10) << "new sent rows stay";
  EXPECT_EQ(t.count("status = 0"), 5) << "pending rows are never removed, however old";
  EXPECT_EQ(t.count("status = 2"), 5) << "FAILED rows are never removed";
}

TEST(Retention, ArchivesInsteadOfDeletingWhenAsked) {
  OutboxTestTable t;
  seed_ages(t);
  pqxx::connection conn(t.dsn);
  RetentionConfig c;
  c.keep_sent = std::chrono::hours(24 * 7);
  c.archive = TableName::parse(t.table.table() + "_arch");
  RetentionReport r = run_retention(conn, t.table, c);
  EXPECT_EQ(r.removed, 30);
  auto n = pqxx::nontransaction(conn).exec("SELECT count(*), count(DISTINCT event_id) FROM " +
                                           c.archive->quoted());
  EXPECT_EQ(n[0][0].as<int>(), 30);
  EXPECT_EQ(n[0][1].as<int>(), 30);
}

TEST(Retention, OnlyOneCleanupWorksOnATableAtATime) {
  OutboxTestTable t;
  seed_ages(t);
  pqxx::connection holder(t.dsn);
  pqxx::nontransaction(holder).exec_params("SELECT pg_advisory_lock(hashtext($1))",
                                           "outbox-cleanup:" + t.table.plain());
  auto r = run_cli(t.dsn, std::string(OUTBOX_BINARY) + " cleanup --table " + t.table.plain());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("another cleanup"), std::string::npos) << r.output;
  EXPECT_EQ(t.count("status = 1"), 40) << "the second cleanup removed nothing";
  pqxx::nontransaction(holder).exec("SELECT pg_advisory_unlock_all()");
  r = run_cli(t.dsn, std::string(OUTBOX_BINARY) + " cleanup --table " + t.table.plain() +
                         " --batch-size 10");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(R"("removed":30)"), std::string::npos) << r.output;
}

TEST(Inspect, ReportsCountsWorstTypesErrorsAndBlockedKeys) {
  OutboxTestTable t;
  seed_ages(t);
  pqxx::connection conn(t.dsn);
  OutboxStore store(conn, t.table);
  auto pending = store.claim_batch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 10);
  ASSERT_FALSE(pending.empty());
  store.record_failures({{pending[0].id, false, std::chrono::hours(1), "broker refused: policy"}});
  Inspection in = inspect(conn, t.table);
  EXPECT_EQ(in.pending, 5);
  EXPECT_EQ(in.sent, 40);
  EXPECT_EQ(in.failed, 5);
  EXPECT_GT(in.oldest_pending_seconds, 13 * 24 * 3600.0);
  ASSERT_FALSE(in.worst_biz_types.empty());
  EXPECT_EQ(in.worst_biz_types[0].biz_type, "order");
  EXPECT_EQ(in.worst_biz_types[0].failed, 5);
  ASSERT_FALSE(in.last_errors.empty());
  EXPECT_EQ(in.last_errors[0].last_error, "broker refused: policy");
  ASSERT_EQ(in.blocked_keys.size(), 1u);
  EXPECT_EQ(in.blocked_keys[0].biz_id, pending[0].biz_id);
  auto j = nlohmann::json::parse(
      run_cli(t.dsn, std::string(OUTBOX_BINARY) + " inspect --json --table " + t.table.plain())
          .output);
  EXPECT_EQ(j.at("failed"), 5);
  EXPECT_EQ(j.at("blockedKeys").size(), 1u);
}

TEST(Requeue, DoesExactlyWhatItReportsAndDryRunChangesNothing) {
  OutboxTestTable t;
  seed_ages(t);
  pqxx::connection conn(t.dsn);
  auto failed = pqxx::nontransaction(conn).exec("SELECT event_id::text FROM " + t.table.quoted() +
                                                " WHERE status = 2 ORDER BY id");
  Selection one;
  one.event_ids = {failed[0][0].as<std::string>()};
  ChangeReport dry = requeue_failed(conn, t.table, one, true);
  EXPECT_EQ(dry.event_ids, one.event_ids);
  EXPECT_EQ(t.count("status = 2"), 5) << "a dry run changes nothing";
  ChangeReport done = requeue_failed(conn, t.table, one, false);
  EXPECT_EQ(done.event_ids, one.event_ids);
  EXPECT_EQ(t.count("status = 2"), 4);
  EXPECT_EQ(t.count("status = 0 AND retry_count = 0 AND event_id = '" + one.event_ids[0] + "'"), 1);
  Selection by_type;
  by_type.biz_type = "order";
  auto r = run_cli(
      t.dsn, std::string(OUTBOX_BINARY) + " requeue --biz-type order --table " + t.table.plain());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("requeued 4 event(s)"), std::string::npos) << r.output;
  EXPECT_EQ(t.count("status = 2"), 0);
}

// --all is the one way to say "every FAILED event" (what the requeue annotation's Job runs);
// pending and sent events stay as they are.
TEST(Requeue, AllRequeuesEveryFailedEventAndNothingElse) {
  OutboxTestTable t;
  seed_ages(t);
  auto dry = run_cli(
      t.dsn, std::string(OUTBOX_BINARY) + " requeue --all --dry-run --table " + t.table.plain());
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("would requeue 5 event(s)"), std::string::npos) << dry.output;
  EXPECT_EQ(t.count("status = 2"), 5);
  auto r = run_cli(t.dsn, std::string(OUTBOX_BINARY) + " requeue --all --table " + t.table.plain());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("requeued 5 event(s)"), std::string::npos) << r.output;
  EXPECT_EQ(t.count("status = 2"), 0);
  EXPECT_EQ(t.count("status = 0"), 10) << "5 pending + 5 requeued";
  EXPECT_EQ(t.count("status = 1"), 40) << "sent events are not touched";
}

TEST(Replay, SendsARangeAgainAndReportsIt) {
  OutboxTestTable t;
  seed_ages(t);
  pqxx::connection conn(t.dsn);
  auto ids =
      pqxx::nontransaction(conn).exec("SELECT min(id), min(id) + 9 FROM " + t.table.quoted());
  const std::string from = ids[0][0].as<std::string>(), to = ids[0][1].as<std::string>();
  auto dry = run_cli(t.dsn, std::string(OUTBOX_BINARY) + " replay --dry-run --from-id " + from +
                                " --to-id " + to + " --table " + t.table.plain());
  EXPECT_NE(dry.output.find("would replay 10 event(s)"), std::string::npos) << dry.output;
  EXPECT_EQ(t.count("status = 1"), 40);
  auto r = run_cli(t.dsn, std::string(OUTBOX_BINARY) + " replay --from-id " + from + " --to-id " +
                              to + " --table " + t.table.plain());
  EXPECT_NE(r.output.find("replayed 10 event(s)"), std::string::npos) << r.output;
  EXPECT_EQ(t.count("status = 1"), 30);
  EXPECT_EQ(t.count("status = 0 AND sent_at IS NULL"), 15);
}

TEST(Cli, MalformedInputGetsAClearErrorAndChangesNothing) {
  OutboxTestTable t;
  seed_ages(t);
  const std::string bin = OUTBOX_BINARY;
  const std::string table = " --table " + t.table.plain();
  struct Case {
    std::string args;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"requeue" + table, "select the events"},
      {"requeue" + table, "or --all"},
      {"requeue --all --biz-type order" + table, "--all selects every event"},
      {"replay --all" + table, "--all"},
      // The requeue Job's own flags: a token only as the annotation allows it, and only with a
      // status to write it to; a dry run answers no request.
      {"requeue --all --report-status shop/orders --request 'a b'" + table,
       "--request: the request token has a character"},
      {"requeue --all --request 2026-12-04" + table, "--request requires --report-status"},
      {"requeue --all --dry-run --report-status shop/orders" + table,
       "--dry-run excludes --report-status"},
      {"requeue --event-id not-a-uuid" + table, "is not an event_id"},
      {"requeue --from yesterday-ish" + table, "invalid time"},
      {"replay --from-id 10 --to-id 2" + table, "--from-id is greater than --to-id"},
      {"replay --biz-type order --table 'x;drop table y'", "invalid character"},
      {"cleanup --keep-sent 5x" + table, "invalid duration"},
      {"cleanup --archive-table Bad-Name" + table, "--archive-table"},
      {"migrate --shards 0" + table, "--shards"},
      {"relay --brokers 127.0.0.1:1 --max-backoff 1s --initial-backoff 1m" + table,
       "--max-backoff"},
      {"relay --brokers 127.0.0.1:1 --kafka-property novalue" + table, "key=value"},
      {"relay --brokers 127.0.0.1:1 --dead-letter-topic 'dlq.{biz_type}'" + table,
       "--dead-letter-topic: topic name"},
      {"compensate --brokers 127.0.0.1:1 --dead-letter-topic 'a b'" + table,
       "--dead-letter-topic: topic name"},
      {"relay --brokers 127.0.0.1:1 --listen 127.0.0.1:80x" + table, "--listen port \"80x\""},
      {"--config /nonexistent/outbox.toml inspect" + table, "not readable"},
      // A missing table gets the relay's words, not SQL with a caret.
      {"inspect --table " + t.table.table() + "_missing",
       "does not exist: run `outbox-operator migrate --table public." + t.table.table() +
           "_missing` first"},
      {"requeue --biz-type order --table " + t.table.table() + "_missing",
       "does not exist: run `outbox-operator migrate --table public." + t.table.table() +
           "_missing` first"},
      {"replay --biz-type order --table " + t.table.table() + "_missing",
       "run `outbox-operator migrate"},
      {"no-such-command", "unknown command \"no-such-command\""},
  };
  for (const auto& c : cases) {
    auto r = run_cli(t.dsn, bin + " " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("password"), std::string::npos) << "no secret in: " << r.output;
    EXPECT_EQ(r.output.find("LINE 1"), std::string::npos) << "raw SQL error: " << r.output;
  }
  EXPECT_EQ(t.count("status = 1"), 40);
  EXPECT_EQ(t.count("status = 2"), 5);
  EXPECT_EQ(t.count("status = 0"), 5);
}

std::string write_file(const std::string& text) {
  const std::string path = "/tmp/" + testbed::unique_name("config") + ".toml";
  std::ofstream(path) << text;
  return path;
}

TEST(Cli, AConfigFileSuppliesFlagsAndTheCommandLineWins) {
  OutboxTestTable t;
  const std::string bin = std::string(OUTBOX_BINARY) + " --config ";
  const std::string missing = t.table.plain() + "_missing";
  const std::string file = write_file("[inspect]\ntable = \"" + missing + "\"\n");
  auto r = run_cli(t.dsn, bin + file + " inspect");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(missing + " does not exist"), std::string::npos)
      << "the table came from the file: " << r.output;
  r = run_cli(t.dsn, bin + file + " inspect --table " + t.table.plain());
  EXPECT_EQ(r.exit_code, 0) << "the command line wins: " << r.output;

  // Relay settings live in a [relay] section and are checked like flags.
  const std::string relay_file = write_file("[relay]\nbrokers = \"127.0.0.1:1\"\nbatch-size = 0\n");
  r = run_cli(t.dsn, bin + relay_file + " relay --table " + t.table.plain());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--batch-size: Value 0 not in range"), std::string::npos) << r.output;

  // Credentials never come from the settings file.
  const std::string with_dsn = write_file("[inspect]\ndsn = \"postgresql://u:pw@h/db\"\n");
  r = run_cli(t.dsn, bin + with_dsn + " inspect --table " + t.table.plain());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dsn"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("pw@"), std::string::npos) << "no secret echoed: " << r.output;

  // A key that no command knows is an error, not silently ignored.
  const std::string typo = write_file("[relay]\nbatch-sise = 100\n");
  r = run_cli(t.dsn, bin + typo + " relay --table " + t.table.plain());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("batch-sise"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace outbox
