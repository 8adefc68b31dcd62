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

Action add_migrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("migrate", "create or upgrade the outbox table (idempotent)");
  auto opts = std::make_shared<DatabaseOptions>();
  auto options = std::make_shared<MigrateOptions>();
  auto mode = std::make_shared<std::string>();
  auto adopt_table = std::make_shared<bool>(false);
  auto payload = std::make_shared<std::string>();
  opts->add_to(*cmd);
  cmd->add_option("--shards", options->shard_count,
                  "key-hash shards, fixed when the table is created")
      ->check(CLI::Range(1, api::defaults::kMaxShards))
      ->capture_default_str();
  cmd->add_option(
         "--mode", *mode,
         "status (each row marked when sent) or log (insert-only, partitioned by "
         "position, a transaction id; progress per shard); fixed when the table is created "
         "(default: status, or the existing table's)")
      ->check(CLI::IsMember({"status", "log"}));
  cmd->add_option("--partition-xids", options->partition_xids,
                  "log mode: transaction ids per partition (retention drops whole partitions)")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1'000'000'000}))
      ->capture_default_str();
  cmd->add_option("--payload", *payload,
                  "payload column type of a new table: json (jsonb, the default), text, or bytes "
                  "(bytea: Avro or Protobuf, published byte for byte); fixed at creation")
      ->check(CLI::IsMember({"json", "text", "bytes"}));
  cmd->add_flag("--adopt", *adopt_table,
                "the table is someone else's (a Debezium outbox table): leave it as it is, relay "
                "it through <table>_relay, which a trigger fills (docs/adopt.md)");
  auto rebase_table = std::make_shared<bool>(false);
  cmd->add_flag("--rebase", *rebase_table,
                "log mode, after the database moved to another PostgreSQL cluster (dump and "
                "restore, a logical-replication cutover): record this cluster and make new rows "
                "sort after the restored ones; nothing sent is sent again, nothing unsent is "
                "lost (docs/relay.md, \"Moving the database\")")
      ->excludes("--adopt", "--mode", "--payload");
  auto drop_table = std::make_shared<bool>(false);
  cmd->add_flag("--drop", *drop_table,
                "remove what migrate created for the table instead: the table and its rows, or "
                "for an adopted one (with --adopt) only its trigger and <table>_relay, never the "
                "table itself (the Job of an OutboxRelay deleted with deletionPolicy: Drop)")
      ->excludes("--mode", "--payload", "--rebase");
  auto inbox_table = std::make_shared<std::string>();
  cmd->add_option("--inbox", *inbox_table,
                  "create or upgrade this consumer inbox (schema.table) and its _record and "
                  "_apply functions instead of the outbox table (docs/consuming.md)")
      ->excludes("--adopt", "--mode", "--payload", "--rebase", "--drop");
  return [opts, options, mode, adopt_table, payload, rebase_table, drop_table, inbox_table]() {
    if (!inbox_table->empty()) {
      const TableName inbox_name = TableName::parse(*inbox_table, "--inbox");
      pqxx::connection conn(opts->resolve_dsn());
      const MigrationResult r = inbox::migrate_inbox(conn, inbox_name);
      for (const auto& line : r.applied) {
        std::cout << line << "\n";
      }
      std::cout << inbox_name.plain() << ": inbox schema version " << r.from_version << " -> "
                << r.to_version << (r.applied.empty() ? " (already current)" : "") << "\n";
      return 0;
    }
    TableName table = TableName::parse(opts->table);
    if (*drop_table) {
      pqxx::connection conn(opts->resolve_dsn());
      const DropResult r = drop(conn, table, DropOptions{*adopt_table});
      for (const auto& line : r.dropped) {
        std::cout << "dropped " << line << "\n";
      }
      std::cout << table.plain() << ": "
                << (r.dropped.empty() ? "nothing to drop (outbox_meta records no such table)"
                                      : "dropped what migrate created")
                << "\n";
      return 0;
    }
    if (*rebase_table) {
      pqxx::connection conn(opts->resolve_dsn());
      std::cout << table.plain() << ": " << rebase(conn, table).text() << "\n";
      return 0;
    }
    if (!mode->empty()) {
      options->mode = parse_mode(*mode);
    }
    if (!payload->empty()) {
      if (*adopt_table) {
        throw std::invalid_argument("--payload: an adopted table's payload column sets the type");
      }
      options->payload = parse_payload_type(*payload);
    }
    if (!opts->columns.empty() && !*adopt_table) {
      throw std::invalid_argument("--column maps an adopted table's columns: add --adopt");
    }
    pqxx::connection conn(opts->resolve_dsn());
    MigrationResult r =
        *adopt_table ? adopt(conn, table, AdoptOptions{ColumnMap::parse(opts->columns), *options})
                     : migrate(conn, table, *options);
    for (const auto& line : r.applied) {
      std::cout << line << "\n";
    }
    std::cout << table.plain() << ": schema version " << r.from_version << " -> " << r.to_version
              << (r.applied.empty() ? " (already current)" : "") << "\n";
    return 0;
  };
}

}  // namespace outbox::cli
