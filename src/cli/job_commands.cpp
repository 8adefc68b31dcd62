// The one-shot jobs the operator's CronJobs run: compensate and cleanup.
#include <iostream>
#include <optional>

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

Action add_compensate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compensate",
      "publish due events of shards no live relay holds (the safety-net CronJob); exit 0 "
      "when done, 3 when Kafka was unreachable");
  struct Options {
    DatabaseOptions db;
    PublishOptions publish;
    int batch_size = api::defaults::kCompensationBatchSize;
    std::string stale_after = api::defaults::kStaleAfter;
    std::string time_budget = "50s";
    StatusTarget status;
  };
  auto o = std::make_shared<Options>();
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
  return [o]() {
    controller::JobRun run;
    run.field = controller::kLastCompensationField;
    relay::CompensationReport r;
    try {
      relay::CompensationConfig c;
      c.dsn = o->db.resolve_dsn();
      c.table = o->db.table;
      c.columns = o->db.column_map();
      c.kafka = o->publish.producer_config();
      c.publish = o->publish.policy();
      c.batch_size = o->batch_size;
      c.stale_after =
          std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o->stale_after));
      c.time_budget = parse_duration(o->time_budget);
      r = relay::compensate(c);
    } catch (const std::exception& e) {
      // The run's events are committed per batch, so some may have gone out; how many is lost
      // with the exception, and a count from an earlier run must not stand beside "Failed".
      run.succeeded = false;
      run.counts = {{"resent", std::nullopt}, {"failed", std::nullopt}};
      run.message = std::string("compensation failed: ") + e.what();
      run.finished = std::chrono::system_clock::now();
      o->status.report(run);
      throw;
    }
    std::cout << r.summary_line() << "\n" << r.json() << std::endl;
    run.succeeded = !r.kafka_unreachable;
    run.counts = {{"resent", static_cast<std::int64_t>(r.resent)},
                  {"failed", static_cast<std::int64_t>(r.failed)}};
    if (r.kafka_unreachable) {
      run.message = "Kafka was unreachable; due events stay pending for the next run.";
    }
    run.finished = std::chrono::system_clock::now();
    o->status.report(run);
    return r.kafka_unreachable ? 3 : 0;
  };
}

Action add_cleanup_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "cleanup", "delete or archive sent events past their retention, in small batches");
  struct Options {
    DatabaseOptions db;
    std::string keep_sent = api::defaults::kKeepSent;
    int batch_size = api::defaults::kRetentionBatchSize;
    std::string archive_table;
    std::string pause = "0ms";
    StatusTarget status;
    std::string inbox;
    std::string keep = "336h";
  };
  // An inbox is not an OutboxRelay's table: nothing is reported to one's status.
  static const auto cleanup_inbox = [](const Options& o) {
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
              << " key marks older than " << o.keep << " from " << name.plain() << " in "
              << r.batches << " batch(es)\n"
              << R"({"ran":true,"removed":)" << r.records << R"(,"keys":)" << r.keys
              << R"(,"batches":)" << r.batches << "}" << std::endl;
    return 0;
  };
  auto o = std::make_shared<Options>();
  o->db.add_to(*cmd);
  cmd->add_option("--keep-sent", o->keep_sent, "keep sent events this long")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "rows per short transaction")
      ->check(CLI::Range(1, api::defaults::kMaxRetentionBatchSize))
      ->capture_default_str();
  cmd->add_option("--archive-table", o->archive_table,
                  "move rows to this table instead of deleting them");
  cmd->add_option("--pause", o->pause, "sleep between batches")->capture_default_str();
  auto* inbox_option =
      cmd->add_option("--inbox", o->inbox,
                      "clean this consumer inbox (schema.table) instead of the outbox table: "
                      "delete records and key marks older than --keep (docs/consuming.md)");
  cmd->add_option("--keep", o->keep,
                  "with --inbox: keep records this long; longer than any message can come back "
                  "late (a replay, a consumer group reset), or it is applied again")
      ->needs(inbox_option);
  inbox_option->excludes("--archive-table", "--keep-sent");
  o->status.add_to(*cmd, controller::kLastCleanupField);
  return [o]() {
    if (!o->inbox.empty()) {
      return cleanup_inbox(*o);
    }
    controller::JobRun run;
    run.field = controller::kLastCleanupField;
    std::optional<TableName> table;
    RetentionConfig c;
    RetentionReport r;
    try {
      table = TableName::parse(o->db.table);
      c.keep_sent = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o->keep_sent));
      c.batch_size = o->batch_size;
      c.pause = parse_duration(o->pause);
      if (!o->archive_table.empty()) {
        c.archive = TableName::parse(o->archive_table, "--archive-table");
      }
      pqxx::connection conn(o->db.resolve_dsn());
      // An adopted table: its copy.
      table = inspect_table(conn, *table, {o->db.column_map()}).relay_table(*table);
      r = run_retention(conn, *table, c);
    } catch (const std::exception& e) {
      // Earlier batches stay committed; their count is lost with the exception (see compensate).
      run.succeeded = false;
      run.counts = {{"removed", std::nullopt}, {"archived", std::nullopt}};
      run.message = std::string("cleanup failed: ") + e.what();
      run.finished = std::chrono::system_clock::now();
      o->status.report(run);
      throw;
    }
    const std::int64_t removed = r.removed;
    run.counts = {{"removed", removed}, {"archived", c.archive ? removed : 0}};
    if (!r.ran) {
      run.message = "another cleanup of " + table->plain() + " was running; nothing done";
    }
    run.finished = std::chrono::system_clock::now();
    o->status.report(run);
    if (!r.ran) {
      std::cout << "cleanup: another cleanup of " << table->plain() << " is running; nothing done\n"
                << R"({"ran":false,"removed":0,"batches":0})" << std::endl;
      return 0;
    }
    for (const auto& name : r.partitions_dropped) {
      std::cout << "cleanup: dropped partition " << name << "\n";
    }
    if (!r.held_back.empty()) {
      std::cout << "cleanup: kept " << r.held_back << "\n";
    }
    std::cout << "cleanup: " << (c.archive ? "archived " : "removed ") << r.removed
              << " sent events older than " << o->keep_sent << " in " << r.batches << " batch(es)\n"
              << R"({"ran":true,"removed":)" << r.removed << R"(,"batches":)" << r.batches << "}"
              << std::endl;
    return 0;
  };
}

}  // namespace outbox::cli
