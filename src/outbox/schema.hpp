#pragma once

#include <pqxx/pqxx>

#include <string>
#include <vector>

#include "outbox/event_status.hpp"
#include "outbox/table.hpp"

namespace outbox {

// Number of key-hash shards when migrate is not told otherwise. Fixed at table
// creation: the shard is a stored generated column.
inline constexpr int kDefaultShardCount = 64;

struct MigrationResult {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string> applied;  // one line per step applied
};

// Creates or upgrades the outbox table, its indexes, NOTIFY trigger and enqueue
// function. Idempotent and versioned (schema "outbox_meta" table); concurrent
// calls are serialised with a transaction-scoped advisory lock.
MigrationResult migrate(pqxx::connection& conn, const TableName& table,
                        int shard_count = kDefaultShardCount);

// Facts the relay reads at start-up; throws SchemaError naming what is missing.
struct TableInfo {
  int version = 0;
  int shard_count = 0;
};
TableInfo inspect_table(pqxx::connection& conn, const TableName& table);

class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The schema version this binary writes and expects.
inline constexpr int kSchemaVersion = 2;

}  // namespace outbox
