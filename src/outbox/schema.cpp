#include "outbox/schema.hpp"

#include "outbox/adopt.hpp"
#include "outbox/log_partitions.hpp"

#include <algorithm>

namespace outbox {
namespace {

// Columns the relay reads or writes; migrate creates them, inspect_table checks them.
const std::vector<std::string> kRequiredColumns = {
    "id",          "event_id",        "biz_type",   "biz_id",     "payload",    "status",
    "retry_count", "next_retry_time", "last_error", "created_at", "updated_at", "sent_at",
    "shard"};

// The same for a log-mode table, which has no status columns. (Both may lack
// "headers", added by version 4: the relay then sends no headers of the row's own.)
const std::vector<std::string> kLogColumns = {"id",      "event_id",   "biz_type", "biz_id",
                                              "payload", "created_at", "xid",      "shard"};

// Key-hash shard: all events of one biz_id share a shard, so the replica that
// owns the shard alone publishes that key, in order.
std::string shard_column(int shard_count) {
  return "GENERATED ALWAYS AS ((hashtext(biz_id) & 2147483647) % " + std::to_string(shard_count) +
         ") STORED";
}

// Version 1: the outbox table (its columns: docs/relay.md).
std::vector<std::string> version_1(const TableName& t, int shard_count,
                                   const std::string& payload) {
  const std::string q = t.quoted();
  const std::string idx = "\"" + t.table();
  const std::string pending = sql(EventStatus::kPending);
  const std::string sent = sql(EventStatus::kSent);
  const std::string failed = sql(EventStatus::kFailed);
  return {
      "CREATE TABLE IF NOT EXISTS " + q +
          " ("
          "id bigserial PRIMARY KEY,"
          // The global identity consumers dedupe on; never the auto-increment id.
          "event_id uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,"
          "biz_type text NOT NULL,"
          "biz_id text NOT NULL,"
          // jsonb by default: validated on insert, and bench/ shows the insert cost is
          // close to json's.
          "payload " +
          payload +
          " NOT NULL,"
          "status smallint NOT NULL DEFAULT " +
          pending + " CHECK (status IN (" + pending + ", " + sent + ", " + failed +
          ")),"
          "retry_count integer NOT NULL DEFAULT 0,"
          "next_retry_time timestamptz NOT NULL DEFAULT now(),"
          "last_error text,"
          "created_at timestamptz NOT NULL DEFAULT now(),"
          "updated_at timestamptz NOT NULL DEFAULT now(),"
          "sent_at timestamptz,"
          "shard integer " +
          shard_column(shard_count) + ")",
      // Claims scan pending rows only: the index stays small however many sent rows remain.
      "CREATE INDEX IF NOT EXISTS " + idx + "_pending\" ON " + q +
          " (id) WHERE status = " + pending,
      // Vacuum by churn, not by table size: a 10M-row table would otherwise wait for
      // 2M dead tuples while claims step over dead entries of the pending index.
      "ALTER TABLE " + q +
          " SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000)",
      // Head-of-line check: an earlier event of the same key waiting for its retry.
      "CREATE INDEX IF NOT EXISTS " + idx + "_retrying\" ON " + q +
          " (biz_id, id) WHERE status = " + pending + " AND retry_count > 0",
      // Retention walks sent rows by age; the monitor counts FAILED rows.
      "CREATE INDEX IF NOT EXISTS " + idx + "_sent\" ON " + q +
          " (created_at) WHERE status = " + sent,
      "CREATE INDEX IF NOT EXISTS " + idx + "_failed\" ON " + q + " (id) WHERE status = " + failed,
      // One NOTIFY per inserting statement wakes the relays at once.
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_notify") +
          "() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN PERFORM pg_notify('" +
          t.notify_channel() + "', ''); RETURN NULL; END $f$",
  };
}

// The insert trigger (its function made before) and the enqueue function, in both modes.
std::vector<std::string> trigger_and_enqueue(const TableName& t, const std::string& payload) {
  const std::string q = t.quoted();
  const std::string idx = "\"" + t.table();
  return {
      "DROP TRIGGER IF EXISTS " + idx + "_notify\" ON " + q,
      "CREATE TRIGGER " + idx + "_notify\" AFTER INSERT ON " + q +
          " FOR EACH STATEMENT EXECUTE FUNCTION " + t.quoted_with_suffix("_notify") + "()",
      // Enqueue inside the caller's own transaction, from any language.
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_enqueue") +
          "(p_biz_type text, p_biz_id text, p_payload " + payload +
          ") RETURNS uuid LANGUAGE sql AS "
          "$f$ INSERT INTO " +
          q +
          " (biz_type, biz_id, payload) VALUES (p_biz_type, p_biz_id, p_payload) "
          "RETURNING event_id $f$",
  };
}

// Version 2: notify only while a relay waits. PostgreSQL commits notifying
// transactions one at a time (a cluster-wide lock held through the commit's WAL
// flush), so an unconditional trigger caps the services' own write rate
// (docs/benchmarks.md: 2,809 vs 5,332 commits/s). A relay that goes idle adds
// its session to "<table>_waiting"; the trigger notifies only then. Under load
// the relay never waits, so nobody notifies. Unlogged: the rows are
// per-session hints, worthless after a crash.
std::vector<std::string> version_2(const TableName& t) {
  const std::string waiting = t.quoted_with_suffix("_waiting");
  return {
      "CREATE UNLOGGED TABLE IF NOT EXISTS " + waiting +
          " (pid integer PRIMARY KEY, since timestamptz NOT NULL DEFAULT now())",
      // Every role that inserts events runs the trigger, so every role may read it.
      "GRANT SELECT ON " + waiting + " TO PUBLIC",
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_notify") +
          "() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN IF EXISTS (SELECT 1 FROM " + waiting +
          ") THEN PERFORM pg_notify('" + t.notify_channel() +
          "', ''); END IF; RETURN NULL; END $f$",
  };
}

// Version 4: an optional "headers" object per event, copied into Kafka headers
// (a service's W3C traceparent reaches its consumers), and an enqueue overload
// that takes it. ADD COLUMN without a default changes the catalog only; it takes
// an ACCESS EXCLUSIVE lock for that moment.
std::vector<std::string> version_4(const TableName& t, const std::string& payload) {
  const std::string q = t.quoted();
  return {
      "ALTER TABLE " + q + " ADD COLUMN IF NOT EXISTS headers jsonb",
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_enqueue") +
          "(p_biz_type text, p_biz_id text, p_payload " + payload +
          ", p_headers jsonb) RETURNS uuid "
          "LANGUAGE sql AS $f$ INSERT INTO " +
          q +
          " (biz_type, biz_id, payload, headers) VALUES (p_biz_type, p_biz_id, p_payload, "
          "p_headers) RETURNING event_id $f$",
  };
}

// Version 5 (log mode): a row's position, the value it is read in order of (the "xid"
// column), comes from <table>_position() (cluster_move.cpp says how it keeps per-key commit
// order and skips nothing); version 6 made it handle a move to another cluster. `cluster`:
// the system identifier the positions belong to, `offset` and `policy` as recorded.
std::vector<std::string> version_5(const TableName& t, const std::string& cluster,
                                   std::int64_t offset, ClusterMovePolicy policy) {
  std::vector<std::string> out = cluster_move_functions(t, offset, cluster, policy);
  // Every role that inserts events runs the move check.
  out.push_back("GRANT SELECT ON " + t.quoted_with_suffix("_progress") + " TO PUBLIC");
  // Recurses to the partitions (rows inserted into one directly get it too).
  out.push_back("ALTER TABLE " + t.quoted() + " ALTER COLUMN xid SET DEFAULT " +
                t.quoted_with_suffix("_position") + "()");
  return out;
}

// The log itself, partitioned by the inserting transaction's id, and its default partition.
void create_log(pqxx::dbtransaction& tx, const TableName& t, int shard_count,
                const std::string& payload) {
  const std::string q = t.quoted();
  tx.exec("CREATE TABLE " + q +
          " (id bigserial NOT NULL,"
          "event_id uuid NOT NULL DEFAULT gen_random_uuid(),"
          "biz_type text NOT NULL,"
          "biz_id text NOT NULL,"
          "payload " +
          payload +
          " NOT NULL,"
          "created_at timestamptz NOT NULL DEFAULT now(),"
          "headers jsonb,"
          // The top-level transaction: every row of one transaction shares it.
          "xid xid8 NOT NULL DEFAULT pg_current_xact_id(),"
          "shard integer " +
          shard_column(shard_count) + ", PRIMARY KEY (xid, id)) PARTITION BY RANGE (xid)");
  // Rows beyond the partitions made ahead land here rather than fail the insert.
  tx.exec("CREATE TABLE " + t.quoted_with_suffix("_pdefault") + " PARTITION OF " + q + " DEFAULT");
}

// <table>_progress: how far the relay has sent, one row per shard.
void create_progress_table(pqxx::dbtransaction& tx, const TableName& t, int shard_count) {
  // Updated in place once per batch: room on the page keeps the updates HOT.
  tx.exec("CREATE TABLE " + t.quoted_with_suffix("_progress") +
          " (shard integer PRIMARY KEY, xid xid8 NOT NULL DEFAULT '0', id bigint NOT NULL "
          "DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now()) WITH (fillfactor = 50)");
  tx.exec_params("INSERT INTO " + t.quoted_with_suffix("_progress") +
                     " (shard) SELECT generate_series(0, $1 - 1)",
                 shard_count);
}

// <table>_retry: failed events (copied whole, so retention never drops them) and the later
// events of their keys, parked behind them in order.
void create_retry_table(pqxx::dbtransaction& tx, const TableName& t, const std::string& payload) {
  tx.exec("CREATE TABLE " + t.quoted_with_suffix("_retry") +
          " (id bigint PRIMARY KEY, xid xid8 NOT NULL, event_id uuid NOT NULL, biz_type text NOT "
          "NULL, biz_id text NOT NULL, payload " +
          payload +
          " NOT NULL, created_at timestamptz NOT NULL, "
          "shard integer NOT NULL, status smallint NOT NULL, retry_count integer NOT NULL, "
          "next_retry_time timestamptz NOT NULL, last_error text, updated_at timestamptz NOT "
          "NULL DEFAULT now(), headers jsonb)");
  tx.exec("CREATE INDEX \"" + t.table() + "_retry_pending\" ON " + t.quoted_with_suffix("_retry") +
          " (biz_id, xid, id) WHERE status = " + sql(EventStatus::kPending));
}

// <table>_status: each event as status mode would show it, for on-call queries and tests.
void create_status_view(pqxx::dbtransaction& tx, const TableName& t) {
  const std::string pending = sql(EventStatus::kPending);
  tx.exec("CREATE VIEW " + t.quoted_with_suffix("_status") +
          " AS SELECT e.id, e.event_id, e.biz_type, e.biz_id, e.payload, e.created_at, e.shard, "
          "e.xid, (CASE WHEN r.status IS NOT NULL THEN r.status WHEN (e.xid, e.id) <= (p.xid, "
          "p.id) THEN " +
          sql(EventStatus::kSent) + " ELSE " + pending +
          " END)::smallint AS status, COALESCE(r.retry_count, 0) AS retry_count, "
          "r.next_retry_time, r.last_error FROM " +
          t.quoted() + " e JOIN " + t.quoted_with_suffix("_progress") +
          " p ON p.shard = e.shard LEFT JOIN " + t.quoted_with_suffix("_retry") +
          " r ON r.id = e.id");
}

// Log mode (schema version 3, created whole): the outbox is insert-only and
// partitioned by the inserting transaction's id, which the relay reads below the
// oldest running transaction (pg_snapshot_xmin), in (xid, id) order, so a row
// that commits late is never skipped. Its primary key serves that read.
// Progress per shard, failures beside the log, a view of each event's status.
void create_log_table(pqxx::dbtransaction& tx, const TableName& t, int shard_count,
                      std::int64_t partition_xids, const std::string& payload,
                      ClusterMovePolicy policy) {
  create_log(tx, t, shard_count, payload);
  create_progress_table(tx, t, shard_count);
  create_retry_table(tx, t, payload);
  create_status_view(tx, t);
  for (const auto& stmt : version_2(t)) {
    tx.exec(stmt);
  }
  for (const auto& stmt : trigger_and_enqueue(t, payload)) {
    tx.exec(stmt);
  }
  for (const auto& stmt : version_4(t, payload)) {
    tx.exec(stmt);
  }
  const auto here = tx.exec1(std::string("SELECT ") + kClusterIdSql)[0].as<std::string>();
  for (const auto& stmt : version_5(t, here, 0, policy)) {
    tx.exec(stmt);
  }
  ensure_log_partitions(tx, t, partition_xids, 0);
}

}  // namespace

std::string payload_sql_type(PayloadType type) {
  switch (type) {
    case PayloadType::kText:
      return "text";
    case PayloadType::kBytes:
      return "bytea";
    case PayloadType::kJson:
      break;
  }
  return "jsonb";
}

std::optional<PayloadType> payload_type_of(const std::string& sql_type) {
  if (sql_type == "json" || sql_type == "jsonb") {
    return PayloadType::kJson;
  }
  if (sql_type == "text" || sql_type == "varchar" || sql_type == "bpchar" ||
      sql_type == "character varying" || sql_type == "character") {
    return PayloadType::kText;
  }
  if (sql_type == "bytea") {
    return PayloadType::kBytes;
  }
  return std::nullopt;
}

PayloadType parse_payload_type(const std::string& text) {
  if (text == "json") {
    return PayloadType::kJson;
  }
  if (text == "text") {
    return PayloadType::kText;
  }
  if (text == "bytes") {
    return PayloadType::kBytes;
  }
  throw std::invalid_argument("payload type must be json, text or bytes, not '" + text + "'");
}

std::string outbox_meta(const TableName& t) {
  return "\"" + t.schema() + "\".\"outbox_meta\"";
}

void lock_meta(pqxx::transaction_base& tx, const TableName& table) {
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-meta:' || $1))", table.schema());
}

std::string mode_name(TableMode mode) {
  return mode == TableMode::kLog ? "log" : "status";
}

TableMode parse_mode(const std::string& text) {
  if (text == "status") {
    return TableMode::kStatus;
  }
  if (text == "log") {
    return TableMode::kLog;
  }
  throw std::invalid_argument("table mode must be status or log, not '" + text + "'");
}

namespace {

struct MetaRow {
  int version = 0;
  int shard_count = 0;
  TableMode mode = TableMode::kStatus;
  std::int64_t partition_xids = 0;
  bool adopted = false;  // a table the relay did not create, relayed through <table>_relay
  std::string adopted_into;
  std::string cluster_id;  // log mode, version 5: "" until recorded
  std::int64_t position_offset = 0;
  ClusterMovePolicy on_cluster_move = ClusterMovePolicy::kRebase;  // log mode, version 6
};

// The meta table, with the columns of every version (v3 added mode and partition_xids,
// v4 adopted_into and columns, v5 cluster_id and position_offset, v6 on_cluster_move and the
// last move a rebase recorded).
std::optional<MetaRow> read_meta(pqxx::transaction_base& tx, const TableName& table) {
  lock_meta(tx, table);
  tx.exec("CREATE TABLE IF NOT EXISTS " + outbox_meta(table) +
          " (table_name text PRIMARY KEY, version integer NOT NULL, shard_count integer NOT "
          "NULL, updated_at timestamptz NOT NULL DEFAULT now())");
  tx.exec("ALTER TABLE " + outbox_meta(table) +
          " ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'status', ADD COLUMN IF NOT "
          "EXISTS partition_xids bigint, ADD COLUMN IF NOT EXISTS adopted_into text, ADD COLUMN "
          "IF NOT EXISTS columns jsonb, ADD COLUMN IF NOT EXISTS cluster_id text, ADD COLUMN IF "
          "NOT EXISTS position_offset bigint NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS "
          "on_cluster_move text NOT NULL DEFAULT 'rebase', ADD COLUMN IF NOT EXISTS moved_from "
          "text, ADD COLUMN IF NOT EXISTS moved_to text, ADD COLUMN IF NOT EXISTS moved_at "
          "timestamptz");
  auto row = tx.exec_params(
      "SELECT version, shard_count, mode, COALESCE(partition_xids, 0), adopted_into IS NOT NULL, "
      "COALESCE(adopted_into, ''), COALESCE(cluster_id, ''), position_offset, on_cluster_move "
      "FROM " +
          outbox_meta(table) + " WHERE table_name = $1",
      table.table());
  if (row.empty()) {
    return std::nullopt;
  }
  return MetaRow{row[0][0].as<int>(),
                 row[0][1].as<int>(),
                 parse_mode(row[0][2].as<std::string>()),
                 row[0][3].as<std::int64_t>(),
                 row[0][4].as<bool>(),
                 row[0][5].as<std::string>(),
                 row[0][6].as<std::string>(),
                 row[0][7].as<std::int64_t>(),
                 parse_policy(row[0][8].as<std::string>())};
}

// An existing table asked for another payload type than it has: refused, the type
// is fixed at creation.
void require_payload_type(pqxx::transaction_base& tx, const TableName& table,
                          const std::optional<PayloadType>& wanted) {
  if (!wanted) {
    return;
  }
  auto r = tx.exec_params(
      "SELECT udt_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = "
      "$2 AND column_name = 'payload'",
      table.schema(), table.table());
  const std::string have = r.empty() ? "" : r[0][0].as<std::string>();
  if (payload_type_of(have) != wanted) {
    throw SchemaError("table " + table.plain() + " has a " + have +
                      " payload, fixed when it was created; migrate a new table for " +
                      payload_sql_type(*wanted));
  }
}

// `payload`: the new table's payload type; a table made before version 4 has jsonb.
void upgrade_status_table(pqxx::transaction_base& tx, const TableName& table, int shard_count,
                          const std::string& payload, int from_version, MigrationResult& result) {
  if (from_version < 1) {
    for (const auto& stmt : version_1(table, shard_count, payload)) {
      tx.exec(stmt);
    }
    for (const auto& stmt : trigger_and_enqueue(table, payload)) {
      tx.exec(stmt);
    }
    tx.exec_params("INSERT INTO " + outbox_meta(table) +
                       " (table_name, version, shard_count) VALUES ($1, 1, $2)",
                   table.table(), shard_count);
    result.applied.push_back("v1: created " + table.plain() + ", its indexes, trigger and " +
                             table.table() + "_enqueue()");
  }
  if (from_version < 2) {
    for (const auto& stmt : version_2(table)) {
      tx.exec(stmt);
    }
    result.applied.push_back("v2: the trigger notifies only while a relay waits (" + table.table() +
                             "_waiting)");
  }
  if (from_version < 3 && from_version > 0) {
    result.applied.push_back("v3: outbox_meta records the table's mode (status)");
  }
  if (from_version < 4) {
    for (const auto& stmt : version_4(table, from_version > 0 ? "jsonb" : payload)) {
      tx.exec(stmt);
    }
    if (from_version > 0) {
      result.applied.push_back("v4: a headers column copied into Kafka headers");
    }
  }
}

// A log-mode table of version 3 gains the headers column (on the parent, so every
// partition has it) and so does its _retry table.
void upgrade_log_table(pqxx::transaction_base& tx, const TableName& table, const MetaRow& meta,
                       ClusterMovePolicy policy, MigrationResult& result) {
  const int from_version = meta.version;
  // The positions belong to the cluster recorded, not necessarily this one: migrate on a
  // cluster the table moved to leaves the move for the move check to find.
  const std::string cluster =
      meta.cluster_id.empty()
          ? tx.exec1(std::string("SELECT ") + kClusterIdSql)[0].as<std::string>()
          : meta.cluster_id;
  if (from_version < 4) {
    for (const auto& stmt : version_4(table, "jsonb")) {  // made before version 4: jsonb
      tx.exec(stmt);
    }
    tx.exec("ALTER TABLE " + table.quoted_with_suffix("_retry") +
            " ADD COLUMN IF NOT EXISTS headers jsonb");
    result.applied.push_back("v4: a headers column copied into Kafka headers");
  }
  if (from_version < 5) {
    for (const auto& stmt : version_5(table, cluster, meta.position_offset, policy)) {
      tx.exec(stmt);
    }
    result.applied.push_back(
        "v5: rows are positioned after every transaction ended before them (per-key commit "
        "order), and the table records its cluster");
  } else {
    // At every migrate, not only when the version or the policy changes: the functions are
    // replaced in place (the same offset and cluster), and a release that improves the rebase
    // reaches tables already at this version (the operator's schema Job runs migrate on
    // every upgrade).
    for (const auto& stmt : cluster_move_functions(table, meta.position_offset, cluster, policy)) {
      tx.exec(stmt);
    }
  }
  if (from_version < 6) {
    result.applied.push_back(
        "v6: on a move to another PostgreSQL cluster, the first session "
        "that notices rebases the positions (" +
        policy_name(policy) + ")");
  } else if (policy != meta.on_cluster_move) {
    result.applied.push_back("on a move to another cluster: " + policy_name(policy) + " (was " +
                             policy_name(meta.on_cluster_move) + ")");
  }
  tx.exec_params("UPDATE " + outbox_meta(table) + " SET on_cluster_move = $2 WHERE table_name = $1",
                 table.table(), policy_name(policy));
}

void check_migrate_options(const MigrateOptions& options) {
  if (options.shard_count < 1 || options.shard_count > 1024) {
    throw std::invalid_argument("shard count must be between 1 and 1024");
  }
  if (options.partition_xids < 1000) {
    throw std::invalid_argument("partition size must be at least 1000 transaction ids");
  }
}

// The mode to migrate the table in: an existing table's own (asking for another mode or
// payload type is a SchemaError, and so is an adopted table), a new table's as asked, log
// by default (no dead tuple and a few bytes of WAL per event, docs/relay.md "Two modes"). Sets
// result.from_version, and notes when the existing shard count is kept.
TableMode table_mode(pqxx::transaction_base& tx, const TableName& table,
                     const std::optional<MetaRow>& meta, const MigrateOptions& options,
                     MigrationResult& result) {
  TableMode mode = options.mode.value_or(TableMode::kLog);
  if (meta && meta->adopted) {
    throw SchemaError("table " + table.plain() + " is adopted (relayed through " + table.table() +
                      "_relay): migrate it with --adopt and its columns");
  }
  if (meta) {
    result.from_version = meta->version;
    if (options.mode && *options.mode != meta->mode) {
      throw SchemaError("table " + table.plain() + " is in " + mode_name(meta->mode) +
                        " mode, fixed when it was created; migrate a new table for " +
                        mode_name(*options.mode) + " mode");
    }
    mode = meta->mode;
    require_payload_type(tx, table, options.payload);
    if (meta->shard_count != options.shard_count) {
      result.applied.push_back("kept the existing shard count " +
                               std::to_string(meta->shard_count) + " (fixed at creation)");
    }
  }
  if (result.from_version > kSchemaVersion) {
    throw SchemaError("table " + table.plain() + " is at schema version " +
                      std::to_string(result.from_version) + ", newer than this binary's " +
                      std::to_string(kSchemaVersion) + ": upgrade the operator");
  }
  return mode;
}

// A new log-mode table, created whole at the current version, and its outbox_meta row.
void create_new_log_table(pqxx::dbtransaction& tx, const TableName& table,
                          const MigrateOptions& options, const std::string& payload,
                          MigrationResult& result) {
  const ClusterMovePolicy policy = options.on_cluster_move.value_or(ClusterMovePolicy::kRebase);
  create_log_table(tx, table, options.shard_count, options.partition_xids, payload, policy);
  tx.exec_params("INSERT INTO " + outbox_meta(table) +
                     " (table_name, version, shard_count, mode, partition_xids, on_cluster_move) "
                     "VALUES ($1, $2, $3, 'log', $4, $5)",
                 table.table(), kSchemaVersion, options.shard_count, options.partition_xids,
                 policy_name(policy));
  result.applied.push_back("v3 (log mode): created " + table.plain() +
                           " partitioned by transaction id, " + table.table() + "_progress, " +
                           table.table() + "_retry, the " + table.table() +
                           "_status view, trigger and " + table.table() + "_enqueue()");
}

// outbox_meta records the table at this binary's version, and a log-mode table's cluster.
void record_version(pqxx::transaction_base& tx, const TableName& table, TableMode mode) {
  tx.exec_params("UPDATE " + outbox_meta(table) +
                     " SET version = $2, updated_at = now() WHERE table_name = $1",
                 table.table(), kSchemaVersion);
  if (mode == TableMode::kLog) {
    // Only where none is recorded: migrate on a cluster the table moved to (the schema Job
    // runs it on every operator upgrade) must not pass the move off as the table's home.
    tx.exec_params("UPDATE " + outbox_meta(table) + " SET cluster_id = " + kClusterIdSql +
                       " WHERE table_name = $1 AND cluster_id IS NULL",
                   table.table());
  }
}

}  // namespace

MigrationResult migrate(pqxx::connection& conn, const TableName& table,
                        const MigrateOptions& options) {
  check_migrate_options(options);
  pqxx::work tx(conn);
  // Serialise concurrent migrations of the same table (two pods starting at once).
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-migrate:' || $1))", table.plain());
  MigrationResult result;
  const std::optional<MetaRow> meta = read_meta(tx, table);
  const std::string payload = payload_sql_type(options.payload.value_or(PayloadType::kJson));
  const TableMode mode = table_mode(tx, table, meta, options, result);
  if (mode == TableMode::kStatus) {
    upgrade_status_table(tx, table, options.shard_count, payload, result.from_version, result);
  } else if (meta) {
    upgrade_log_table(tx, table, *meta, options.on_cluster_move.value_or(meta->on_cluster_move),
                      result);
    if (auto done = draw_ids_after_the_move_check(tx, table)) {
      result.applied.push_back(std::move(*done));
    }
  } else {
    create_new_log_table(tx, table, options, payload, result);
    draw_ids_after_the_move_check(tx, table);
  }
  record_version(tx, table, mode);
  tx.commit();
  result.to_version = kSchemaVersion;
  return result;
}

RebaseResult rebase(pqxx::connection& conn, const TableName& table) {
  pqxx::work tx(conn);
  std::optional<MetaRow> meta;
  {
    tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-migrate:' || $1))",
                   table.plain());
    meta = read_meta(tx, table);
  }
  if (!meta) {
    throw SchemaError("table " + table.plain() + " has no row in " + table.schema() +
                      ".outbox_meta: nothing to rebase (run `outbox-operator migrate` first)");
  }
  if (meta->adopted) {
    tx.commit();
    return rebase(conn, TableName::parse(table.schema() + "." + meta->adopted_into));
  }
  if (meta->mode != TableMode::kLog) {
    throw SchemaError("table " + table.plain() +
                      " is in status mode: each row carries its own status, so a move to "
                      "another cluster needs no rebase");
  }
  if (meta->version < 6) {
    throw SchemaError("table " + table.plain() + " is at schema version " +
                      std::to_string(meta->version) + ": run `outbox-operator migrate` first");
  }
  RebaseResult result = run_rebase(tx, table);
  tx.commit();
  return result;
}

namespace {

void require_columns(const TableName& table, const pqxx::result& columns,
                     const std::vector<std::string>& required) {
  std::vector<std::string> present;
  for (const auto& r : columns) {
    present.push_back(r[0].as<std::string>());
  }
  std::string missing;
  for (const auto& c : required) {
    if (std::find(present.begin(), present.end(), c) == present.end()) {
      missing += (missing.empty() ? "" : ", ") + c;
    }
  }
  if (!missing.empty()) {
    throw SchemaError("table " + table.plain() + " lacks the columns the relay needs: " + missing +
                      " (create it with `outbox-operator migrate`)");
  }
}

}  // namespace

namespace {

TableInfo inspect_unchecked(pqxx::connection& conn, const TableName& table);

std::string rebase_hint(const TableName& table) {
  return "; its progress does not apply here, and reading on would count unread events as sent. "
         "Once the move is complete, run `outbox-operator migrate --table " +
         table.plain() + " --rebase` (docs/relay.md, \"Moving the database\")";
}

// A log-mode table's progress belongs to the cluster recorded beside it, and is below
// this cluster's next position (a claim only passes positions below the oldest running
// transaction). Either failing means the table came from elsewhere: says how, or "".
std::string cluster_move_seen(pqxx::transaction_base& tx, const TableName& table,
                              const std::optional<std::string>& recorded, std::int64_t offset) {
  const auto r = tx.exec(std::string("SELECT ") + kClusterIdSql + ", (SELECT max(xid)::text FROM " +
                         table.quoted_with_suffix("_progress") +
                         "), pg_snapshot_xmax(pg_current_snapshot())::text")[0];
  const auto here = r[0].as<std::string>();
  if (recorded && *recorded != here) {
    return "table " + table.plain() +
           " was relayed on another PostgreSQL cluster (system identifier " + *recorded +
           "; this one is " + here + ")";
  }
  const auto progress = r[1].as<std::int64_t>(0);
  const auto next = r[2].as<std::int64_t>() + offset;
  if (progress >= next) {
    return "table " + table.plain() + "'s progress (position " + std::to_string(progress) +
           ") is ahead of this database's transaction ids (next position " + std::to_string(next) +
           "): it was restored from another cluster";
  }
  return "";
}

// A log-mode table found on another cluster than its progress's (`moved` says how): rebased
// here under the Rebase policy, so that the relay publishes on at once; DatabaseMoved under
// Refuse, or before schema version 6 (no rebase function yet: the schema Job's migrate, or
// `migrate` by hand, makes it).
void follow_move(pqxx::connection& conn, const TableName& table, const std::string& moved,
                 TableInfo& info) {
  if (info.version < 6) {
    throw DatabaseMoved(moved +
                        "; its progress does not apply here, and reading on would count "
                        "unread events as sent: run `outbox-operator migrate --table " +
                        table.plain() + "` (schema version 6 rebases by itself)");
  }
  if (info.on_cluster_move == ClusterMovePolicy::kRefuse) {
    throw DatabaseMoved(moved + rebase_hint(table) + " (spec.database.onClusterMove is Refuse)");
  }
  pqxx::work tx(conn);
  info.rebased = run_rebase(tx, table);
  tx.commit();
  info.position_offset = info.rebased->offset;
}

// What outbox_meta says of one table, read without a transaction of its own.
// to_jsonb: an older meta table lacks the later columns, and needs none.
pqxx::result meta_row(pqxx::transaction_base& tx, const TableName& table) {
  return tx.exec_params(
      "SELECT (m->>'version')::int, (m->>'shard_count')::int, COALESCE(m->>'mode', 'status'), "
      "COALESCE((m->>'partition_xids')::bigint, 0), m->>'adopted_into', (SELECT "
      "string_agg(key || '=' || value, ',') FROM jsonb_each_text(COALESCE(NULLIF(m->'columns', "
      "'null'), '{}'))), m->>'cluster_id', COALESCE((m->>'position_offset')::bigint, 0), "
      "COALESCE(m->>'on_cluster_move', 'rebase') FROM (SELECT to_jsonb(t) AS m FROM " +
          outbox_meta(table) + " t WHERE table_name = $1) s",
      table.table());
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(',', start);
    end = end == std::string::npos ? text.size() : end;
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The adopted table, its columns as adopted: checked, then the relay's own table inspected.
TableInfo inspect_adopted(pqxx::connection& conn, const TableName& table, const pqxx::row& meta) {
  const ColumnMap columns = ColumnMap::parse(split_commas(meta[5].as<std::string>("")));
  {
    pqxx::nontransaction tx(conn);
    check_adopted(tx, table, columns);
  }
  const TableName relay = TableName::parse(table.schema() + "." + meta[4].as<std::string>());
  TableInfo info = inspect_table(conn, relay);
  info.adopted_into = relay;
  info.columns = columns;
  return info;
}

}  // namespace

TableInfo inspect_table(pqxx::connection& conn, const TableName& table,
                        const TableExpectations& expected) {
  TableInfo info = inspect_unchecked(conn, table);
  if (expected.shards > 0 && expected.shards != info.shard_count) {
    throw SchemaError("shards is " + std::to_string(expected.shards) + " but table " +
                      table.plain() + " was created with " + std::to_string(info.shard_count) +
                      " (fixed at creation): set " + std::to_string(info.shard_count) +
                      ", or migrate a new table with --shards " + std::to_string(expected.shards));
  }
  if (!expected.columns) {
    return info;
  }
  const std::string adopt = "`outbox-operator migrate --table " + table.plain() + " --adopt`";
  if (!info.columns) {
    throw SchemaError("columns are set but table " + table.plain() + " is not adopted: run " +
                      adopt + " with them, or set none for a table made by migrate");
  }
  if (*info.columns != *expected.columns) {
    throw SchemaError("columns are " + expected.columns->describe() + " but table " +
                      table.plain() + " was adopted as " + info.columns->describe() + ": run " +
                      adopt + " with the new columns");
  }
  return info;
}

namespace {

TableInfo inspect_unchecked(pqxx::connection& conn, const TableName& table) {
  std::optional<pqxx::row> adopted;
  TableInfo info;
  std::string moved;  // how the table was found moved to this cluster, if it was
  {
    pqxx::nontransaction tx(conn);
    auto cols = tx.exec_params(
        "SELECT column_name, udt_name FROM information_schema.columns WHERE table_schema = $1 "
        "AND table_name = $2",
        table.schema(), table.table());
    if (cols.empty()) {
      throw SchemaError("table " + table.plain() +
                        " does not exist: run `outbox-operator migrate --table " + table.plain() +
                        "` first");
    }
    auto meta =
        tx.exec_params(
              "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = "
              "'outbox_meta'",
              table.schema())
                .empty()
            ? pqxx::result{}
            : meta_row(tx, table);
    if (meta.empty()) {
      require_columns(table, cols, kRequiredColumns);  // a hand-made table: say what it lacks
      throw SchemaError("table " + table.plain() + " has no row in " + table.schema() +
                        ".outbox_meta: run `outbox-operator migrate` (or, for a table the relay "
                        "did not create, `migrate --adopt`)");
    }
    if (!meta[0][4].is_null()) {
      adopted = meta[0];
    } else {
      info.version = meta[0][0].as<int>();
      info.shard_count = meta[0][1].as<int>();
      info.mode = parse_mode(meta[0][2].as<std::string>());
      info.partition_xids = meta[0][3].as<std::int64_t>();
      // Status mode works from version 2 on (version 3 only records the mode, and
      // version 4 adds the optional headers column); log mode from version 5 (before it,
      // rows were read in the order of their transaction ids, not their commits).
      const int needed = info.mode == TableMode::kLog ? 5 : 2;
      if (info.version < needed || info.version > kSchemaVersion) {
        throw SchemaError("table " + table.plain() + " is at schema version " +
                          std::to_string(info.version) + ", this binary needs " +
                          std::to_string(needed) + " to " + std::to_string(kSchemaVersion) +
                          ": run `outbox-operator migrate`");
      }
      require_columns(table, cols, info.mode == TableMode::kLog ? kLogColumns : kRequiredColumns);
      if (info.mode == TableMode::kLog) {
        info.position_offset = meta[0][7].as<std::int64_t>();
        info.on_cluster_move = parse_policy(meta[0][8].as<std::string>());
        moved = cluster_move_seen(tx, table, meta[0][6].as<std::optional<std::string>>(),
                                  info.position_offset);
      }
      for (const auto& r : cols) {
        info.headers = info.headers || r[0].as<std::string>() == "headers";
        if (r[0].as<std::string>() == "payload") {
          info.payload = payload_type_of(r[1].as<std::string>()).value_or(PayloadType::kJson);
        }
      }
    }
  }
  if (!moved.empty()) {
    follow_move(conn, table, moved, info);
  }
  if (!adopted && info.mode == TableMode::kLog) {
    pqxx::nontransaction tx(conn);
    if (RecordedMove move = recorded_move(tx, table); !move.to.empty()) {
      info.last_move = std::move(move);
    }
  }
  return adopted ? inspect_adopted(conn, table, *adopted) : info;
}

}  // namespace

}  // namespace outbox
