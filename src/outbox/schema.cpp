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
// column), is the newest transaction id that had ended when the row was inserted, or
// its own transaction's id if that is later, plus the table's position offset.
//
// Per-key commit order: a writer that takes its key's lock before inserting (updates the
// key's row, say) inserts after the key's previous writer has committed, so that
// writer's id is among those ended, and the later row's position is at least the
// earlier's; the id, drawn at the insert, breaks the tie. The transaction's own id would
// not do: it is assigned at its first write, which may come before another transaction
// on the same key takes, uses and releases the lock.
//
// Nothing skipped: a transaction still running has an id at or above the oldest running
// one, and so does the position of every row it inserts. The relay reads positions below
// that id (plus the offset): every row there is committed or never will be.
//
// In plpgsql and volatile, so that under READ COMMITTED the snapshot is taken as the row
// is inserted (after the lock), not when the statement began. Under REPEATABLE READ the
// transaction's snapshot serves, which is newer than the previous writer's commit when
// the lock is an UPDATE of the key's row (PostgreSQL refuses a concurrent update
// otherwise).
//
// The guard: a position at or below a shard's progress would count as sent. That happens
// only when the table moved to a cluster whose transaction ids are lower (a restore): the
// insert fails, saying so, rather than lose the event, until `migrate --rebase`. Checked
// at a session's first insert only (a session-level setting remembers it passed): a
// session never outlives a move, and its positions never decrease, so once one is above
// the progress every later one is. The check reads every shard's progress; skipping it
// keeps the function's cost near the plain default's.
std::string position_function(const TableName& t, std::int64_t offset) {
  const std::string progress = t.quoted_with_suffix("_progress");
  // A setting's name is a plain identifier: the table's name hashed (FNV-1a, stable).
  std::uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : t.plain()) {
    h = (h ^ c) * 1099511628211ULL;
  }
  const std::string checked = "'outbox.position_checked_" + std::to_string(h) + "'";
  return "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_position") +
         "() RETURNS xid8 LANGUAGE plpgsql VOLATILE AS $f$ DECLARE p bigint; BEGIN p := "
         "greatest(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1, "
         "pg_current_xact_id()::text::bigint) + " +
         std::to_string(offset) + "; IF current_setting(" + checked +
         ", true) IS DISTINCT FROM 'on' THEN IF p <= (SELECT max(xid)::text::bigint FROM " +
         progress + ") THEN RAISE EXCEPTION 'outbox table " + t.plain() +
         ": this database''s transaction ids are behind the table''s progress, which comes "
         "from another PostgreSQL cluster; the event would count as sent' USING HINT = 'run "
         "outbox-operator migrate --table " +
         t.plain() + " --rebase'; END IF; PERFORM set_config(" + checked +
         ", 'on', false); END IF; RETURN p::text::xid8; END $f$";
}

std::vector<std::string> version_5(const TableName& t) {
  return {
      position_function(t, 0),
      // Every role that inserts events runs the guard.
      "GRANT SELECT ON " + t.quoted_with_suffix("_progress") + " TO PUBLIC",
      // Recurses to the partitions (rows inserted into one directly get it too).
      "ALTER TABLE " + t.quoted() + " ALTER COLUMN xid SET DEFAULT " +
          t.quoted_with_suffix("_position") + "()",
  };
}

// This cluster's identity, recorded beside a log-mode table's progress.
constexpr const char* kClusterIdSql = "(SELECT system_identifier::text FROM pg_control_system())";

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
                      std::int64_t partition_xids, const std::string& payload) {
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
  for (const auto& stmt : version_5(t)) {
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
};

// The meta table, with the columns of every version (v3 added mode and partition_xids,
// v4 adopted_into and columns, v5 cluster_id and position_offset).
std::optional<MetaRow> read_meta(pqxx::transaction_base& tx, const TableName& table) {
  lock_meta(tx, table);
  tx.exec("CREATE TABLE IF NOT EXISTS " + outbox_meta(table) +
          " (table_name text PRIMARY KEY, version integer NOT NULL, shard_count integer NOT "
          "NULL, updated_at timestamptz NOT NULL DEFAULT now())");
  tx.exec("ALTER TABLE " + outbox_meta(table) +
          " ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'status', ADD COLUMN IF NOT "
          "EXISTS partition_xids bigint, ADD COLUMN IF NOT EXISTS adopted_into text, ADD COLUMN "
          "IF NOT EXISTS columns jsonb, ADD COLUMN IF NOT EXISTS cluster_id text, ADD COLUMN IF "
          "NOT EXISTS position_offset bigint NOT NULL DEFAULT 0");
  auto row = tx.exec_params(
      "SELECT version, shard_count, mode, COALESCE(partition_xids, 0), adopted_into IS NOT NULL, "
      "COALESCE(adopted_into, ''), COALESCE(cluster_id, ''), position_offset FROM " +
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
                 row[0][7].as<std::int64_t>()};
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
void upgrade_log_table(pqxx::transaction_base& tx, const TableName& table, int from_version,
                       MigrationResult& result) {
  if (from_version < 4) {
    for (const auto& stmt : version_4(table, "jsonb")) {  // made before version 4: jsonb
      tx.exec(stmt);
    }
    tx.exec("ALTER TABLE " + table.quoted_with_suffix("_retry") +
            " ADD COLUMN IF NOT EXISTS headers jsonb");
    result.applied.push_back("v4: a headers column copied into Kafka headers");
  }
  if (from_version < 5) {
    for (const auto& stmt : version_5(table)) {
      tx.exec(stmt);
    }
    result.applied.push_back(
        "v5: rows are positioned after every transaction ended before them (per-key commit "
        "order), and the table records its cluster");
  }
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
// payload type is a SchemaError, and so is an adopted table), a new table's as asked, status
// by default. Sets result.from_version, and notes when the existing shard count is kept.
TableMode table_mode(pqxx::transaction_base& tx, const TableName& table,
                     const std::optional<MetaRow>& meta, const MigrateOptions& options,
                     MigrationResult& result) {
  TableMode mode = options.mode.value_or(TableMode::kStatus);
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
  create_log_table(tx, table, options.shard_count, options.partition_xids, payload);
  tx.exec_params("INSERT INTO " + outbox_meta(table) +
                     " (table_name, version, shard_count, mode, partition_xids) VALUES ($1, "
                     "$2, $3, 'log', $4)",
                 table.table(), kSchemaVersion, options.shard_count, options.partition_xids);
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
    upgrade_log_table(tx, table, result.from_version, result);
  } else {
    create_new_log_table(tx, table, options, payload, result);
  }
  record_version(tx, table, mode);
  tx.commit();
  result.to_version = kSchemaVersion;
  return result;
}

RebaseResult rebase(pqxx::connection& conn, const TableName& table) {
  pqxx::work tx(conn);
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-migrate:' || $1))", table.plain());
  const std::optional<MetaRow> meta = read_meta(tx, table);
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
  if (meta->version < 5) {
    throw SchemaError("table " + table.plain() + " is at schema version " +
                      std::to_string(meta->version) + ": run `outbox-operator migrate` first");
  }
  RebaseResult result;
  result.recorded_cluster = meta->cluster_id;
  result.offset_before = meta->position_offset;
  // The highest position anywhere in the table, and this cluster's position now without
  // an offset (a later insert's is at least that).
  const auto r = tx.exec1(std::string("SELECT ") + kClusterIdSql +
                          ", greatest((SELECT max(xid) FROM " + table.quoted() +
                          "), (SELECT max(xid) FROM " + table.quoted_with_suffix("_progress") +
                          "), (SELECT max(xid) FROM " + table.quoted_with_suffix("_retry") +
                          "), '0')::text, pg_snapshot_xmax(pg_current_snapshot())::text");
  result.cluster = r[0].as<std::string>();
  const auto highest = r[1].as<std::int64_t>();
  const auto base = r[2].as<std::int64_t>() - 1;
  result.offset = std::max(result.offset_before, highest + 1 - base);
  tx.exec_params("UPDATE " + outbox_meta(table) +
                     " SET cluster_id = $2, position_offset = $3, updated_at = now() WHERE "
                     "table_name = $1",
                 table.table(), result.cluster, result.offset);
  tx.exec(position_function(table, result.offset));
  tx.commit();
  return result;
}

std::string RebaseResult::text() const {
  std::string out = "recorded this cluster (system identifier " + cluster + ")";
  if (!recorded_cluster.empty() && recorded_cluster != cluster) {
    out += " in place of " + recorded_cluster;
  }
  out += offset == offset_before
             ? "; positions need no offset change (offset " + std::to_string(offset) + ")"
             : "; position offset " + std::to_string(offset_before) + " -> " +
                   std::to_string(offset) + ": new rows sort after every restored one";
  return out;
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
// transaction). Either failing means the table came from elsewhere: DatabaseMoved.
void check_cluster(pqxx::transaction_base& tx, const TableName& table,
                   const std::optional<std::string>& recorded, std::int64_t offset) {
  const auto r = tx.exec(std::string("SELECT ") + kClusterIdSql + ", (SELECT max(xid)::text FROM " +
                         table.quoted_with_suffix("_progress") +
                         "), pg_snapshot_xmax(pg_current_snapshot())::text")[0];
  const auto here = r[0].as<std::string>();
  if (recorded && *recorded != here) {
    throw DatabaseMoved("table " + table.plain() +
                        " was relayed on another PostgreSQL cluster (system identifier " +
                        *recorded + "; this one is " + here + ")" + rebase_hint(table));
  }
  const auto progress = r[1].as<std::int64_t>(0);
  const auto next = r[2].as<std::int64_t>() + offset;
  if (progress >= next) {
    throw DatabaseMoved(
        "table " + table.plain() + "'s progress (position " + std::to_string(progress) +
        ") is ahead of this database's transaction ids (next position " + std::to_string(next) +
        "): it was restored from another cluster" + rebase_hint(table));
  }
}

// What outbox_meta says of one table, read without a transaction of its own.
// to_jsonb: an older meta table lacks the later columns, and needs none.
pqxx::result meta_row(pqxx::transaction_base& tx, const TableName& table) {
  return tx.exec_params(
      "SELECT (m->>'version')::int, (m->>'shard_count')::int, COALESCE(m->>'mode', 'status'), "
      "COALESCE((m->>'partition_xids')::bigint, 0), m->>'adopted_into', (SELECT "
      "string_agg(key || '=' || value, ',') FROM jsonb_each_text(COALESCE(NULLIF(m->'columns', "
      "'null'), '{}'))), m->>'cluster_id', COALESCE((m->>'position_offset')::bigint, 0) FROM "
      "(SELECT to_jsonb(t) AS m FROM " +
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
        check_cluster(tx, table, meta[0][6].as<std::optional<std::string>>(), info.position_offset);
      }
      for (const auto& r : cols) {
        info.headers = info.headers || r[0].as<std::string>() == "headers";
        if (r[0].as<std::string>() == "payload") {
          info.payload = payload_type_of(r[1].as<std::string>()).value_or(PayloadType::kJson);
        }
      }
    }
  }
  return adopted ? inspect_adopted(conn, table, *adopted) : info;
}

}  // namespace

}  // namespace outbox
