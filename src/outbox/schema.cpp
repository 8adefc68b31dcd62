#include "outbox/schema.hpp"

#include <algorithm>

namespace outbox {
namespace {

// Columns the relay reads or writes; migrate creates them, inspect_table checks them.
const std::vector<std::string> kRequiredColumns = {
    "id",          "event_id",        "biz_type",   "biz_id",     "payload",    "status",
    "retry_count", "next_retry_time", "last_error", "created_at", "updated_at", "sent_at",
    "shard"};

std::string meta_table(const TableName& t) {
  return "\"" + t.schema() + "\".\"outbox_meta\"";
}

// Version 1: the seed's outbox_event table (§2.1) translated to PostgreSQL.
std::vector<std::string> version_1(const TableName& t, int shard_count) {
  const std::string q = t.quoted();
  const std::string n = std::to_string(shard_count);
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
          // jsonb: validated on insert, and bench/ shows the insert cost is close to json.
          "payload jsonb NOT NULL,"
          "status smallint NOT NULL DEFAULT " +
          pending + " CHECK (status IN (" + pending + ", " + sent + ", " + failed +
          ")),"
          "retry_count integer NOT NULL DEFAULT 0,"
          "next_retry_time timestamptz NOT NULL DEFAULT now(),"
          "last_error text,"
          "created_at timestamptz NOT NULL DEFAULT now(),"
          "updated_at timestamptz NOT NULL DEFAULT now(),"
          "sent_at timestamptz,"
          // Key-hash shard: all events of one biz_id share a shard, so the replica
          // that owns the shard alone publishes that key, in id order.
          "shard integer GENERATED ALWAYS AS ((hashtext(biz_id) & 2147483647) % " +
          n + ") STORED)",
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
      "DROP TRIGGER IF EXISTS " + idx + "_notify\" ON " + q,
      "CREATE TRIGGER " + idx + "_notify\" AFTER INSERT ON " + q +
          " FOR EACH STATEMENT EXECUTE FUNCTION " + t.quoted_with_suffix("_notify") + "()",
      // Enqueue inside the caller's own transaction, from any language.
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_enqueue") +
          "(p_biz_type text, p_biz_id text, p_payload jsonb) RETURNS uuid LANGUAGE sql AS "
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

}  // namespace

MigrationResult migrate(pqxx::connection& conn, const TableName& table, int shard_count) {
  if (shard_count < 1 || shard_count > 1024) {
    throw std::invalid_argument("shard count must be between 1 and 1024");
  }
  pqxx::work tx(conn);
  // Serialise concurrent migrations of the same table (two pods starting at once).
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-migrate:' || $1))", table.plain());
  tx.exec("CREATE TABLE IF NOT EXISTS " + meta_table(table) +
          " (table_name text PRIMARY KEY, version integer NOT NULL, shard_count integer NOT "
          "NULL, updated_at timestamptz NOT NULL DEFAULT now())");
  MigrationResult result;
  auto row = tx.exec_params(
      "SELECT version, shard_count FROM " + meta_table(table) + " WHERE table_name = $1",
      table.table());
  if (!row.empty()) {
    result.from_version = row[0][0].as<int>();
    int existing_shards = row[0][1].as<int>();
    if (existing_shards != shard_count) {
      result.applied.push_back("kept the existing shard count " + std::to_string(existing_shards) +
                               " (fixed at creation)");
    }
  }
  if (result.from_version > kSchemaVersion) {
    throw SchemaError("table " + table.plain() + " is at schema version " +
                      std::to_string(result.from_version) + ", newer than this binary's " +
                      std::to_string(kSchemaVersion) + ": upgrade the operator");
  }
  if (result.from_version < 1) {
    for (const auto& stmt : version_1(table, shard_count)) {
      tx.exec(stmt);
    }
    tx.exec_params("INSERT INTO " + meta_table(table) +
                       " (table_name, version, shard_count) VALUES ($1, 1, $2)",
                   table.table(), shard_count);
    result.applied.push_back("v1: created " + table.plain() + ", its indexes, trigger and " +
                             table.table() + "_enqueue()");
  }
  if (result.from_version < 2) {
    for (const auto& stmt : version_2(table)) {
      tx.exec(stmt);
    }
    result.applied.push_back("v2: the trigger notifies only while a relay waits (" + table.table() +
                             "_waiting)");
  }
  tx.exec_params(
      "UPDATE " + meta_table(table) + " SET version = $2, updated_at = now() WHERE table_name = $1",
      table.table(), kSchemaVersion);
  tx.commit();
  result.to_version = kSchemaVersion;
  return result;
}

TableInfo inspect_table(pqxx::connection& conn, const TableName& table) {
  pqxx::nontransaction tx(conn);
  auto cols = tx.exec_params(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND "
      "table_name = $2",
      table.schema(), table.table());
  if (cols.empty()) {
    throw SchemaError("table " + table.plain() +
                      " does not exist: run `outbox-operator migrate --table " + table.plain() +
                      "` first");
  }
  std::vector<std::string> present;
  for (const auto& r : cols) {
    present.push_back(r[0].as<std::string>());
  }
  std::string missing;
  for (const auto& c : kRequiredColumns) {
    if (std::find(present.begin(), present.end(), c) == present.end()) {
      missing += (missing.empty() ? "" : ", ") + c;
    }
  }
  if (!missing.empty()) {
    throw SchemaError("table " + table.plain() + " lacks the columns the relay needs: " + missing +
                      " (create it with `outbox-operator migrate`)");
  }
  TableInfo info;
  auto meta = tx.exec_params(
      "SELECT version, shard_count FROM " + meta_table(table) + " WHERE table_name = $1",
      table.table());
  if (meta.empty()) {
    throw SchemaError("table " + table.plain() + " has no row in " + table.schema() +
                      ".outbox_meta: run `outbox-operator migrate`");
  }
  info.version = meta[0][0].as<int>();
  info.shard_count = meta[0][1].as<int>();
  if (info.version != kSchemaVersion) {
    throw SchemaError("table " + table.plain() + " is at schema version " +
                      std::to_string(info.version) + ", this binary needs " +
                      std::to_string(kSchemaVersion) + ": run `outbox-operator migrate`");
  }
  return info;
}

}  // namespace outbox
