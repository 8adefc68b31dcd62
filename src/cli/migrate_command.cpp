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
  auto shards = std::make_shared<int>(kDefaultShardCount);
  opts->add_to(*cmd);
  cmd->add_option("--shards", *shards, "key-hash shards, fixed when the table is created")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  return [opts, shards]() {
    TableName table = TableName::parse(opts->table);
    pqxx::connection conn(opts->resolve_dsn());
    MigrationResult r = migrate(conn, table, *shards);
    for (const auto& line : r.applied) {
      std::cout << line << "\n";
    }
    std::cout << table.plain() << ": schema version " << r.from_version << " -> " << r.to_version
              << (r.applied.empty() ? " (already current)" : "") << "\n";
    return 0;
  };
}

}  // namespace outbox::cli
