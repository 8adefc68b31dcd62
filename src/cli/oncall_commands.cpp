// On-call tools: inspect the backlog, requeue FAILED events, replay sent ones.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "cli/status_target.hpp"
#include "controller/job_status.hpp"
#include "controller/relay_resources.hpp"
#include "outbox/operations.hpp"
#include "outbox/schema.hpp"

namespace outbox::cli {
namespace {

struct SelectionOptions {
  DatabaseOptions db;
  Selection selection;
  std::string biz_type, from, to;
  bool dry_run = false;
  bool offers_all = false;

  // `all_help`: what --all selects; nullptr offers no --all (replay: every sent event is the
  // whole table's history, too much to ask for by one short flag).
  void add_to(CLI::App& cmd, const char* all_help) {
    db.add_to(cmd);
    if (all_help != nullptr) {
      offers_all = true;
      cmd.add_flag("--all", selection.all, all_help);
    }
    cmd.add_option("--event-id", selection.event_ids, "event_id (repeatable)");
    cmd.add_option("--biz-type", biz_type, "only this biz_type");
    cmd.add_option("--from", from, "created at or after (RFC 3339)");
    cmd.add_option("--to", to, "created before (RFC 3339)");
    cmd.add_option("--from-id", selection.id_from, "id at or above");
    cmd.add_option("--to-id", selection.id_to, "id at or below");
    cmd.add_flag("--dry-run", dry_run, "report what would change, change nothing");
  }

  Selection resolved() const {
    Selection s = selection;
    if (!biz_type.empty()) {
      s.biz_type = biz_type;
    }
    if (!from.empty()) {
      s.created_from = from;
    }
    if (!to.empty()) {
      s.created_to = to;
    }
    if (offers_all && !s.all && s.empty()) {
      throw std::invalid_argument(
          "select the events: --event-id, --biz-type, --from/--to, --from-id/--to-id, or --all");
    }
    s.validate();  // before connecting: bad input changes nothing
    return s;
  }
};

}  // namespace

Action add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect",
                                 "backlog: counts, oldest pending, worst biz_types, "
                                 "latest errors, keys held behind a retry");
  auto db = std::make_shared<DatabaseOptions>();
  auto json = std::make_shared<bool>(false);
  auto top = std::make_shared<int>(5);
  db->add_to(*cmd);
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->add_option("--top", *top, "rows per list")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return [db, json, top]() {
    TableName table = TableName::parse(db->table);
    pqxx::connection conn(db->resolve_dsn());
    // A missing table: "run migrate first", as the relay says; an adopted one: its copy.
    table = inspect_table(conn, table, {db->column_map()}).relay_table(table);
    Inspection in = inspect(conn, table, *top);
    std::cout << (*json ? in.json() + "\n" : in.text());
    return 0;
  };
}

namespace {

// requeue and replay differ only in which rows move and what the report says.
using ChangeFn = ChangeReport (*)(pqxx::connection&, const TableName&, const Selection&, bool);

ChangeReport run_change(const SelectionOptions& o, ChangeFn change) {
  Selection s = o.resolved();
  TableName table = TableName::parse(o.db.table);
  pqxx::connection conn(o.db.resolve_dsn());
  // A missing table: "run migrate first", as the relay says; an adopted one: its copy.
  table = inspect_table(conn, table, {o.db.column_map()}).relay_table(table);
  return change(conn, table, s, o.dry_run);
}

// The Job of an outbox.dev/requeue-failed (outbox.dev/replay) request runs `requeue` (`replay`)
// with the request's selectors, --request=<token> and --report-status=<ns>/<name>; the token it
// writes back as status.lastRequeue.request (status.lastReplay.request) tells the operator that
// the request was answered.
struct ChangeRunOptions {
  explicit ChangeRunOptions(const controller::ChangeKind& kind) : kind(kind) {}
  const controller::ChangeKind& kind;
  SelectionOptions select;
  controller::JobRun run;
  StatusTarget status;

  void add_to(CLI::App& cmd, const char* all_help) {
    select.add_to(cmd, all_help);
    status.add_to(cmd, kind.field);
    cmd.add_option("--request", run.request,
                   std::string("the request token (of the ") + kind.annotation +
                       " annotation) this run answers, written as status." + kind.field +
                       ".request")
        ->check([](const std::string& token) { return controller::requeue_token_problem(token); })
        ->needs(cmd.get_option("--report-status"));
    // A dry run changes nothing, so it answers no request and reports no run.
    cmd.get_option("--dry-run")->excludes(cmd.get_option("--report-status"));
  }

  void report_done(const ChangeReport& r) {
    run.succeeded = true;
    run.counts = {{kind.count, static_cast<std::int64_t>(r.event_ids.size())}};
    run.message.clear();
    report();
  }

  // The change is one transaction, but a connection lost at commit leaves open whether it
  // happened: a failed run's count is unknown.
  void report_failed(const std::string& error) {
    run.succeeded = false;
    run.counts = {{kind.count, std::nullopt}};
    run.message = std::string(kind.verb) + " failed: " + error;
    report();
  }

 private:
  void report() {
    run.field = kind.field;
    run.finished = std::chrono::system_clock::now();
    status.report(run);
  }
};

Action change_action(std::shared_ptr<ChangeRunOptions> o, ChangeFn change, const char* verb,
                     const char* verb_past) {
  return [o, change, verb, verb_past]() {
    ChangeReport r;
    try {
      r = run_change(o->select, change);
    } catch (const std::exception& e) {
      o->report_failed(e.what());
      throw;
    }
    std::cout << r.text(verb, verb_past) << std::endl;
    o->report_done(r);
    return 0;
  };
}

}  // namespace

Action add_requeue_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("requeue", "move FAILED events back to pending");
  auto o = std::make_shared<ChangeRunOptions>(controller::kRequeueKind);
  o->add_to(*cmd, "every FAILED event");
  return change_action(o, requeue_failed, "requeue", "requeued");
}

Action add_replay_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("replay", "publish sent events again (consumers dedupe on event_id)");
  auto o = std::make_shared<ChangeRunOptions>(controller::kReplayKind);
  o->add_to(*cmd, nullptr);
  return change_action(o, replay_sent, "replay", "replayed");
}

}  // namespace outbox::cli
