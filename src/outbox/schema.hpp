#pragma once

#include <pqxx/pqxx>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/cluster_move.hpp"
#include "outbox/column_map.hpp"
#include "outbox/event_status.hpp"
#include "outbox/table.hpp"

namespace outbox {

// Number of key-hash shards when migrate is not told otherwise. Fixed at table
// creation: the shard is a stored generated column.
inline constexpr int kDefaultShardCount = 64;

// How the relay keeps track of what it published (docs/relay.md, "Two modes").
// Status: each row carries its own status, updated when sent (suits a table
// the relay does not own). Log: the table is insert-only, partitioned by
// transaction id; the relay remembers per shard how far it has read, failures
// live in "<table>_retry", and retention drops whole partitions. Fixed when
// the table is created.
enum class TableMode { kStatus, kLog };
std::string mode_name(TableMode mode);  // "status" or "log"
// Throws std::invalid_argument for anything but "status" or "log".
TableMode parse_mode(const std::string& text);

// The payload column's type, fixed when the table is created. Json (jsonb, the default):
// validated by PostgreSQL on insert. Text: any text. Bytes (bytea): Avro or Protobuf in
// Confluent's wire format, published byte for byte.
enum class PayloadType { kJson, kText, kBytes };
std::string payload_sql_type(PayloadType type);  // "jsonb", "text" or "bytea"
// From a column's type name: json/jsonb, text/varchar/bpchar, bytea; else nullopt.
std::optional<PayloadType> payload_type_of(const std::string& sql_type);
// From --payload: "json", "text" or "bytes"; throws std::invalid_argument otherwise.
PayloadType parse_payload_type(const std::string& text);

// Transaction ids per partition of a log-mode table when migrate is not told otherwise.
inline constexpr std::int64_t kDefaultPartitionXids = 10'000'000;

struct MigrationResult {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string> applied;  // one line per step applied
};

struct MigrateOptions {
  int shard_count = kDefaultShardCount;
  // Only for a new table; nullopt: log, or whatever an existing table has.
  std::optional<TableMode> mode;
  std::int64_t partition_xids = kDefaultPartitionXids;  // log mode only
  // Only for a new table; an existing table of another payload type is a SchemaError.
  std::optional<PayloadType> payload;
  // Log mode: what the table does when moved to another cluster; nullopt: rebase for a new
  // table, what an existing one has.
  std::optional<ClusterMovePolicy> on_cluster_move = std::nullopt;
};

// Creates or upgrades the outbox table, its indexes, NOTIFY trigger and enqueue
// function (and in log mode its partitions, progress and retry tables and the
// "<table>_status" view). Idempotent and versioned (schema "outbox_meta" table);
// concurrent calls are serialised with a transaction-scoped advisory lock. Asking
// an existing table for another mode throws SchemaError.
MigrationResult migrate(pqxx::connection& conn, const TableName& table,
                        const MigrateOptions& options);
inline MigrationResult migrate(pqxx::connection& conn, const TableName& table,
                               int shard_count = kDefaultShardCount) {
  return migrate(conn, table,
                 MigrateOptions{shard_count, std::nullopt, kDefaultPartitionXids, std::nullopt});
}

// Facts the relay reads at start-up; throws SchemaError naming what is missing.
struct TableInfo {
  int version = 0;
  int shard_count = 0;
  TableMode mode = TableMode::kStatus;
  std::int64_t partition_xids = 0;  // log mode: transaction ids per partition
  // Log mode: added to this cluster's transaction ids to give a row's position, so that
  // after a move to a cluster whose ids are lower (a rebase) new rows still sort after the
  // restored ones. 0 on the cluster the table was created on.
  std::int64_t position_offset = 0;
  ClusterMovePolicy on_cluster_move = ClusterMovePolicy::kRebase;  // log mode
  // Log mode: the rebase this inspection ran, having found the table on another cluster.
  std::optional<RebaseResult> rebased;
  // Log mode: the last move a rebase recorded (outbox_meta.moved_*), whoever ran it; nullopt
  // while the table never moved.
  std::optional<RecordedMove> last_move;
  bool headers = false;  // has the headers column (version 4)
  PayloadType payload = PayloadType::kJson;
  // An adopted table (migrate --adopt): the relay reads its copy, <table>_relay,
  // which the facts above describe; `columns` as the table was adopted.
  std::optional<TableName> adopted_into;
  std::optional<ColumnMap> columns;

  // The table the relay reads when asked for `asked`.
  const TableName& relay_table(const TableName& asked) const {
    return adopted_into ? *adopted_into : asked;
  }
};
// What the caller was told of the table (flags from the OutboxRelay's spec).
struct TableExpectations {
  // Adopted with these columns (--column, spec.database.columns).
  std::optional<ColumnMap> columns;
  int shards = 0;  // > 0: created with this many shards (--shards, spec.relay.shards)
};
// A table other than `expected` says is a SchemaError naming both and the fix.
TableInfo inspect_table(pqxx::connection& conn, const TableName& table,
                        const TableExpectations& expected = {});

// "<schema>"."outbox_meta": the schema version, mode and shards of each table in it.
std::string outbox_meta(const TableName& table);
// Serialises, until the transaction ends, every change to the schema's outbox_meta: the tables of
// one schema share it, and two migrations at once (two OutboxRelays' schema Jobs on a fresh
// database) would both try to create it. Taken after the table's own migration lock, never
// before, so the two locks are always taken in one order.
void lock_meta(pqxx::transaction_base& tx, const TableName& table);

class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A log-mode table whose progress does not belong to the database it is now in: it was
// relayed on another PostgreSQL cluster (dump and restore, a logical-replication
// cutover), or this cluster's transaction ids are behind its progress. Reading on would
// count unread rows as sent: under ClusterMovePolicy::kRefuse (or before schema version 6)
// every command refuses until `migrate --rebase`.
class DatabaseMoved : public SchemaError {
 public:
  using SchemaError::SchemaError;
};

// `migrate --rebase`: run_rebase (cluster_move.hpp) in a transaction of its own, for a
// log-mode table at schema version 6; whatever the table's policy. Run it once the move is
// complete (writers on the new cluster); idempotent.
RebaseResult rebase(pqxx::connection& conn, const TableName& table);

// The schema version this binary writes and expects.
inline constexpr int kSchemaVersion = 6;

}  // namespace outbox
