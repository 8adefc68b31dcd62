// The one-shot jobs the operator's CronJobs run: compensate and cleanup.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include "api/defaults.hpp"
#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "cli/publish_options.hpp"
#include "cli/status_target.hpp"
#include "common/duration.hpp"
#include "controller/job_status.hpp"
#include "inbox/inbox.hpp"
#include "outbox/retention.hpp"
#include "outbox/schema.hpp"
#include "relay/compensator.hpp"

namespace outbox::cli {

namespace {

// A run that failed before it could count: its events are committed per batch, so some may
// have been done; how many is lost with the exception, and a count from an earlier run must
// not stand beside "Failed". Each of `count_names` is sent as null.
void report_failure(const StatusTarget& status, const std::string& field,
                    const std::vector<std::string>& count_names, const std::string& message) {
  controller::JobRun run;
  run.field = field;
  run.succeeded = false;
  for (const auto& name : count_names) {
    run.counts.emplace_back(name, std::nullopt);
  }
  run.message = message;
  run.finished = std::chrono::system_clock::now();
  status.report(run);
}

struct CompensateOptions {
  DatabaseOptions db;
  PublishOptions publish;
  int batch_size = api::defaults::kCompensationBatchSize;
  std::string stale_after = api::defaults::kStaleAfter;
  std::string time_budget = "50s";
  StatusTarget status;
};

void add_compensate_flags(CLI::App* cmd, CompensateOptions* o) {
  o->db.add_to(*cmd);
  o->publish.add_to(*cmd);
  cmd->add_option("--batch-size", o->batch_size, "events per claim")
      ->check(CLI::Range(1, api::defaults::kMaxCompensationBatchSize))
      ->capture_default_str();
  cmd->add_option("--stale-after", o->stale_after, "pending age reported as stuck")
      ->capture_default_str();
  cmd->add_option("--time-budget", o->time_budget, "stop claiming after this long")
      ->capture_default_str();
  o->status.add_to(*cmd, controller::kLastCompensationField);
}

relay::CompensationConfig compensation_config(const CompensateOptions& o) {
  relay::CompensationConfig c;
  c.dsn = o.db.resolve_dsn();
  c.table = o.db.table;
  c.columns = o.db.column_map();
  c.kafka = o.publish.producer_config();
  c.publish = o.publish.policy();
  c.batch_size = o.batch_size;
  c.stale_after = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o.stale_after));
  c.time_budget = parse_duration(o.time_budget);
  return c;
}

// What a compensation that ran reports: Failed when Kafka was unreachable.
controller::JobRun compensation_run(const relay::CompensationReport& r) {
  controller::JobRun run;
  run.field = controller::kLastCompensationField;
  run.succeeded = !r.kafka_unreachable;
  run.counts = {{"resent", static_cast<std::int64_t>(r.resent)},
                {"failed", static_cast<std::int64_t>(r.failed)}};
  if (r.kafka_unreachable) {
    run.message = "Kafka was unreachable; due events stay pending for the next run.";
  }
  run.finished = std::chrono::system_clock::now();
  return run;
}

int run_compensation(const CompensateOptions& o) {
  relay::CompensationReport r;
  try {
    r = relay::compensate(compensation_config(o));
  } catch (const std::exception& e) {
    report_failure(o.status, controller::kLastCompensationField, {"resent", "failed"},
                   std::string("compensation failed: ") + e.what());
    throw;
  }
  std::cout << r.summary_line() << "\n" << r.json() << std::endl;
  o.status.report(compensation_run(r));
  return r.kafka_unreachable ? 3 : 0;
}

struct CleanupOptions {
  DatabaseOptions db;
  std::string keep_sent = api::defaults::kKeepSent;
  int batch_size = api::defaults::kRetentionBatchSize;
  std::string archive_table;
  std::string pause = "0ms";
  StatusTarget status;
  std::string inbox;
  std::string keep = "336h";
};

// How the outbox table's sent events go: their age, batch size, archive table, pause.
void add_retention_flags(CLI::App* cmd, CleanupOptions* o) {
  cmd->add_option("--keep-sent", o->keep_sent, "keep sent events this long")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "rows per short transaction")
      ->check(CLI::Range(1, api::defaults::kMaxRetentionBatchSize))
      ->capture_default_str();
  cmd->add_option("--archive-table", o->archive_table,
                  "move rows to this table instead of deleting them");
  cmd->add_option("--pause", o->pause, "sleep between batches")->capture_default_str();
}

// A consumer inbox to clean instead, and how long its records stay.
void add_inbox_flags(CLI::App* cmd, CleanupOptions* o) {
  auto* inbox_option =
      cmd->add_option("--inbox", o->inbox,
                      "clean this consumer inbox (schema.table) instead of the outbox table: "
                      "delete records and key marks older than --keep (docs/consuming.md)");
  cmd->add_option("--keep", o->keep,
                  "with --inbox: keep records this long; longer than any message can come back "
                  "late (a replay, a consumer group reset), or it is applied again")
      ->needs(inbox_option);
  inbox_option->excludes("--archive-table", "--keep-sent");
}

// An inbox is not an OutboxRelay's table: nothing is reported to one's status.
int cleanup_inbox_table(const CleanupOptions& o) {
  const TableName name = TableName::parse(o.inbox, "--inbox");
  const auto keep = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o.keep));
  pqxx::connection conn(o.db.resolve_dsn());
  const inbox::InboxCleanup r = inbox::cleanup_inbox(conn, name, keep, o.batch_size);
  if (!r.ran) {
    std::cout << "cleanup: another cleanup of " << name.plain() << " is running; nothing done\n"
              << R"({"ran":false,"removed":0,"batches":0})" << std::endl;
    return 0;
  }
  std::cout << "cleanup: removed " << r.records << " inbox records and " << r.keys
            << " key marks older than " << o.keep << " from " << name.plain() << " in " << r.batches
            << " batch(es)\n"
            << R"({"ran":true,"removed":)" << r.records << R"(,"keys":)" << r.keys
            << R"(,"batches":)" << r.batches << "}" << std::endl;
  return 0;
}

RetentionConfig retention_config(const CleanupOptions& o) {
  RetentionConfig c;
  c.keep_sent = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o.keep_sent));
  c.batch_size = o.batch_size;
  c.pause = parse_duration(o.pause);
  if (!o.archive_table.empty()) {
    c.archive = TableName::parse(o.archive_table, "--archive-table");
  }
  return c;
}

// What a cleanup that ran reports: how many rows went, and whether another cleanup held the
// table.
controller::JobRun cleanup_run(const TableName& table, const RetentionConfig& c,
                               const RetentionReport& r) {
  controller::JobRun run;
  run.field = controller::kLastCleanupField;
  const std::int64_t removed = r.removed;
  run.counts = {{"removed", removed}, {"archived", c.archive ? removed : 0}};
  if (!r.ran) {
    run.message = "another cleanup of " + table.plain() + " was running; nothing done";
  }
  run.finished = std::chrono::system_clock::now();
  return run;
}

void print_cleanup(const TableName& table, const RetentionConfig& c, const RetentionReport& r,
                   const std::string& keep_sent) {
  if (!r.ran) {
    std::cout << "cleanup: another cleanup of " << table.plain() << " is running; nothing done\n"
              << R"({"ran":false,"removed":0,"batches":0})" << std::endl;
    return;
  }
  for (const auto& name : r.partitions_dropped) {
    std::cout << "cleanup: dropped partition " << name << "\n";
  }
  if (!r.held_back.empty()) {
    std::cout << "cleanup: kept " << r.held_back << "\n";
  }
  std::cout << "cleanup: " << (c.archive ? "archived " : "removed ") << r.removed
            << " sent events older than " << keep_sent << " in " << r.batches << " batch(es)\n"
            << R"({"ran":true,"removed":)" << r.removed << R"(,"batches":)" << r.batches << "}"
            << std::endl;
}

int cleanup_outbox_table(const CleanupOptions& o) {
  std::optional<TableName> table;
  RetentionConfig c;
  RetentionReport r;
  try {
    table = TableName::parse(o.db.table);
    c = retention_config(o);
    pqxx::connection conn(o.db.resolve_dsn());
    // An adopted table: its copy.
    table = inspect_table(conn, *table, {o.db.column_map()}).relay_table(*table);
    r = run_retention(conn, *table, c);
  } catch (const std::exception& e) {
    // Earlier batches stay committed; their count is lost with the exception (report_failure).
    report_failure(o.status, controller::kLastCleanupField, {"removed", "archived"},
                   std::string("cleanup failed: ") + e.what());
    throw;
  }
  o.status.report(cleanup_run(*table, c, r));
  print_cleanup(*table, c, r, o.keep_sent);
  return 0;
}

}  // namespace

Action add_compensate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compensate",
      "publish due events of shards no live relay holds (the safety-net CronJob); exit 0 "
      "when done, 3 when Kafka was unreachable");
  auto o = std::make_shared<CompensateOptions>();
  add_compensate_flags(cmd, o.get());
  return [o]() { return run_compensation(*o); };
}

Action add_cleanup_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "cleanup", "delete or archive sent events past their retention, in small batches");
  auto o = std::make_shared<CleanupOptions>();
  o->db.add_to(*cmd);
  add_retention_flags(cmd, o.get());
  add_inbox_flags(cmd, o.get());
  o->status.add_to(*cmd, controller::kLastCleanupField);
  return [o]() { return o->inbox.empty() ? cleanup_outbox_table(*o) : cleanup_inbox_table(*o); };
}

}  // namespace outbox::cli
