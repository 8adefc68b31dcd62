#include <iostream>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "outbox/schema.hpp"

namespace outbox::cli {

Action add_migrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("migrate", "create or upgrade the outbox table (idempotent)");
  auto opts = std::make_shared<DatabaseOptions>();
  auto options = std::make_shared<MigrateOptions>();
  auto mode = std::make_shared<std::string>();
  opts->add_to(*cmd);
  cmd->add_option("--shards", options->shard_count,
                  "key-hash shards, fixed when the table is created")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--mode", *mode,
                  "status (each row marked when sent) or log (insert-only, partitioned by "
                  "transaction id, progress per shard); fixed when the table is created "
                  "(default: status, or the existing table's)")
      ->check(CLI::IsMember({"status", "log"}));
  cmd->add_option("--partition-xids", options->partition_xids,
                  "log mode: transaction ids per partition (retention drops whole partitions)")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1'000'000'000}))
      ->capture_default_str();
  return [opts, options, mode]() {
    TableName table = TableName::parse(opts->table);
    if (!mode->empty()) {
      options->mode = parse_mode(*mode);
    }
    pqxx::connection conn(opts->resolve_dsn());
    MigrationResult r = migrate(conn, table, *options);
    for (const auto& line : r.applied) {
      std::cout << line << "\n";
    }
    std::cout << table.plain() << ": schema version " << r.from_version << " -> " << r.to_version
              << (r.applied.empty() ? " (already current)" : "") << "\n";
    return 0;
  };
}

}  // namespace outbox::cli
