#include <iostream>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include "api/defaults.hpp"
#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "inbox/inbox.hpp"
#include "outbox/adopt.hpp"
#include "outbox/drop.hpp"
#include "outbox/schema.hpp"

namespace outbox::cli {
namespace {

struct MigrateFlags {
  DatabaseOptions db;
  MigrateOptions options;
  std::string mode;
  std::string payload;
  std::string on_cluster_move;
  bool adopt = false;
  bool rebase = false;
  bool drop = false;
  std::string inbox;
};

// The shape of a new table, fixed when it is created: shards, mode, partition size, payload type.
void add_table_shape_flags(CLI::App* cmd, MigrateFlags* f) {
  cmd->add_option("--shards", f->options.shard_count,
                  "key-hash shards, fixed when the table is created")
      ->check(CLI::Range(1, api::defaults::kMaxShards))
      ->capture_default_str();
  cmd->add_option(
         "--mode", f->mode,
         "log (insert-only, partitioned by position, a transaction id; progress per shard: "
         "no dead tuple and a few bytes of WAL per event) or status (each row marked when "
         "sent); fixed when the table is created (default: log, or the existing table's)")
      ->check(CLI::IsMember({"status", "log"}));
  cmd->add_option("--partition-xids", f->options.partition_xids,
                  "log mode: transaction ids per partition (retention drops whole partitions)")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1'000'000'000}))
      ->capture_default_str();
  cmd->add_option("--on-cluster-move", f->on_cluster_move,
                  "log mode: when the table turns up on another PostgreSQL cluster (dump and "
                  "restore, a logical-replication cutover): rebase (the first insert or relay "
                  "that notices makes new rows sort after the restored ones; no write refused) "
                  "or refuse (inserts fail and relays stop until migrate --rebase) (default: "
                  "rebase, or the existing table's)")
      ->check(CLI::IsMember({"rebase", "refuse"}));
  cmd->add_option("--payload", f->payload,
                  "payload column type of a new table: json (jsonb, the default), text, or bytes "
                  "(bytea: Avro or Protobuf, published byte for byte); fixed at creation")
      ->check(CLI::IsMember({"json", "text", "bytes"}));
}

// What migrate does other than create or upgrade its own table: adopt someone else's, rebase
// it after a move to another cluster, drop it, or make a consumer inbox.
void add_task_flags(CLI::App* cmd, MigrateFlags* f) {
  cmd->add_flag("--adopt", f->adopt,
                "the table is someone else's (a Debezium outbox table): leave it as it is, relay "
                "it through <table>_relay, which a trigger fills (docs/adopt.md)");
  cmd->add_flag("--rebase", f->rebase,
                "log mode, after the database moved to another PostgreSQL cluster (dump and "
                "restore, a logical-replication cutover): record this cluster and make new rows "
                "sort after the restored ones; nothing sent is sent again, nothing unsent is "
                "lost (docs/relay.md, \"Moving the database\")")
      ->excludes("--adopt", "--mode", "--payload", "--on-cluster-move");
  cmd->add_flag("--drop", f->drop,
                "remove what migrate created for the table instead: the table and its rows, or "
                "for an adopted one (with --adopt) only its trigger and <table>_relay, never the "
                "table itself (the Job of an OutboxRelay deleted with deletionPolicy: Drop)")
      ->excludes("--mode", "--payload", "--rebase");
  cmd->add_option("--inbox", f->inbox,
                  "create or upgrade this consumer inbox (schema.table) and its _record and "
                  "_apply functions instead of the outbox table (docs/consuming.md)")
      ->excludes("--adopt", "--mode", "--payload", "--rebase", "--drop");
}

// Each step applied, then "<table>: <what> <from> -> <to>".
void print_migration(const TableName& table, const std::string& what, const MigrationResult& r) {
  for (const auto& line : r.applied) {
    std::cout << line << "\n";
  }
  std::cout << table.plain() << ": " << what << " " << r.from_version << " -> " << r.to_version
            << (r.applied.empty() ? " (already current)" : "") << "\n";
}

int migrate_inbox(const MigrateFlags& f) {
  const TableName inbox_name = TableName::parse(f.inbox, "--inbox");
  pqxx::connection conn(f.db.resolve_dsn());
  print_migration(inbox_name, "inbox schema version", inbox::migrate_inbox(conn, inbox_name));
  return 0;
}

int drop_table(const MigrateFlags& f, const TableName& table) {
  pqxx::connection conn(f.db.resolve_dsn());
  const DropResult r = drop(conn, table, DropOptions{f.adopt});
  for (const auto& line : r.dropped) {
    std::cout << "dropped " << line << "\n";
  }
  std::cout << table.plain() << ": "
            << (r.dropped.empty() ? "nothing to drop (outbox_meta records no such table)"
                                  : "dropped what migrate created")
            << "\n";
  return 0;
}

int rebase_table(const MigrateFlags& f, const TableName& table) {
  pqxx::connection conn(f.db.resolve_dsn());
  std::cout << table.plain() << ": " << rebase(conn, table).text() << "\n";
  return 0;
}

// Creates or upgrades the outbox table, or adopts it (--adopt).
int migrate_table(const MigrateFlags& f, const TableName& table) {
  MigrateOptions options = f.options;
  if (!f.mode.empty()) {
    options.mode = parse_mode(f.mode);
  }
  if (!f.on_cluster_move.empty()) {
    options.on_cluster_move = parse_policy(f.on_cluster_move);
  }
  if (!f.payload.empty()) {
    if (f.adopt) {
      throw std::invalid_argument("--payload: an adopted table's payload column sets the type");
    }
    options.payload = parse_payload_type(f.payload);
  }
  if (!f.db.columns.empty() && !f.adopt) {
    throw std::invalid_argument("--column maps an adopted table's columns: add --adopt");
  }
  pqxx::connection conn(f.db.resolve_dsn());
  print_migration(table, "schema version",
                  f.adopt
                      ? adopt(conn, table, AdoptOptions{ColumnMap::parse(f.db.columns), options})
                      : migrate(conn, table, options));
  return 0;
}

}  // namespace

Action add_migrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("migrate", "create or upgrade the outbox table (idempotent)");
  auto f = std::make_shared<MigrateFlags>();
  f->db.add_to(*cmd);
  add_table_shape_flags(cmd, f.get());
  add_task_flags(cmd, f.get());
  return [f]() {
    if (!f->inbox.empty()) {
      return migrate_inbox(*f);
    }
    const TableName table = TableName::parse(f->db.table);
    if (f->drop) {
      return drop_table(*f, table);
    }
    if (f->rebase) {
      return rebase_table(*f, table);
    }
    return migrate_table(*f, table);
  };
}

}  // namespace outbox::cli
