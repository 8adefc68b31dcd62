#include "inbox/inbox.hpp"

#include <regex>
#include <stdexcept>

namespace outbox::inbox {
namespace {

std::string inbox_meta(const TableName& t) {
  return "\"" + t.schema() + "\".\"inbox_meta\"";
}

// A NULL or empty argument is refused by the function itself, so that every language
// gets the same clear error instead of a NULL consumer silently deduping nothing.
std::string refuse_null(const TableName& t, const std::string& arg, const std::string& what) {
  return "IF " + arg + " IS NULL" + (what == "consumer" ? " OR " + arg + " = ''" : "") +
         " THEN RAISE EXCEPTION 'inbox " + t.plain() + ": " + what +
         (what == "consumer" ? " must be a non-empty name" : " must not be NULL") +
         "' USING ERRCODE = 'invalid_parameter_value'; END IF; ";
}

// Version 1: the records, the per-key high-water marks and the two functions.
std::vector<std::string> version_1(const TableName& t) {
  const std::string q = t.quoted();
  const std::string keys = t.quoted_with_suffix("_keys");
  const std::string idx = "\"" + t.table();
  const std::string checks =
      refuse_null(t, "p_consumer", "consumer") + refuse_null(t, "p_event_id", "event_id");
  return {
      // The shape Inbox::migrate made before the functions existed, so such a table is
      // taken over as it is.
      "CREATE TABLE IF NOT EXISTS " + q +
          " (consumer text NOT NULL, event_id uuid NOT NULL, processed_at timestamptz NOT NULL "
          "DEFAULT now(), PRIMARY KEY (consumer, event_id))",
      // Retention deletes by age.
      "CREATE INDEX IF NOT EXISTS " + idx + "_age\" ON " + q + " (processed_at)",
      "CREATE TABLE IF NOT EXISTS " + keys +
          " (consumer text NOT NULL, key text NOT NULL, seq bigint NOT NULL, updated_at "
          "timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (consumer, key))",
      "CREATE INDEX IF NOT EXISTS " + idx + "_keys_age\" ON " + keys + " (updated_at)",
      // ON CONFLICT DO NOTHING: a racing insert of the same event waits for the first
      // one's transaction and then finds the row (false), or inserts it if that
      // transaction rolled back; a duplicate never aborts the caller's transaction.
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_record") +
          "(p_consumer text, p_event_id uuid) RETURNS boolean LANGUAGE plpgsql AS $f$ BEGIN " +
          checks + "INSERT INTO " + q +
          " (consumer, event_id) VALUES (p_consumer, p_event_id) ON CONFLICT DO NOTHING; "
          "RETURN FOUND; END $f$",
      // The event is recorded first (a duplicate ends there), then the key's high-water
      // mark moves up. ON CONFLICT DO UPDATE locks the key's row even when its WHERE is
      // false, and under READ COMMITTED a waiting call re-reads the row as the other
      // transaction committed it: of two events of one key applied concurrently, the
      // one that comes second sees the first's seq. A seq equal to the mark is not
      // stale: in log mode two events can share a position (one transaction's rows, or
      // a tie the row id breaks), and the relay delivers those in order.
      "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_apply") +
          "(p_consumer text, p_event_id uuid, p_key text, p_seq bigint) RETURNS text LANGUAGE "
          "plpgsql AS $f$ BEGIN " +
          checks + refuse_null(t, "p_key", "key") + refuse_null(t, "p_seq", "seq") +
          "INSERT INTO " + q +
          " (consumer, event_id) VALUES (p_consumer, p_event_id) ON CONFLICT DO NOTHING; IF "
          "NOT FOUND THEN RETURN 'duplicate'; END IF; INSERT INTO " +
          keys +
          " AS k (consumer, key, seq) VALUES (p_consumer, p_key, p_seq) ON CONFLICT (consumer, "
          "key) DO UPDATE SET seq = EXCLUDED.seq, updated_at = now() WHERE k.seq <= "
          "EXCLUDED.seq; IF FOUND THEN RETURN 'new'; END IF; RETURN 'stale'; END $f$",
  };
}

void require_uuid(const std::string& event_id) {
  static const std::regex uuid(
      "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
  if (!std::regex_match(event_id, uuid)) {
    throw std::invalid_argument("event_id \"" + event_id + "\" is not a UUID");
  }
}

}  // namespace

MigrationResult migrate_inbox(pqxx::connection& conn, const TableName& inbox) {
  pqxx::work tx(conn);
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-inbox-migrate:' || $1))",
                 inbox.plain());
  // inbox_meta is shared by the schema's inboxes: two first migrations at once would both
  // create it (a duplicate pg_type key for one of them).
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-inbox-meta:' || $1))",
                 inbox.schema());
  tx.exec("CREATE TABLE IF NOT EXISTS " + inbox_meta(inbox) +
          " (table_name text PRIMARY KEY, version integer NOT NULL, updated_at timestamptz NOT "
          "NULL DEFAULT now())");
  MigrationResult result;
  auto row = tx.exec_params("SELECT version FROM " + inbox_meta(inbox) + " WHERE table_name = $1",
                            inbox.table());
  result.from_version = row.empty() ? 0 : row[0][0].as<int>();
  if (result.from_version > kInboxSchemaVersion) {
    throw SchemaError("inbox " + inbox.plain() + " is at schema version " +
                      std::to_string(result.from_version) + ", newer than this binary's " +
                      std::to_string(kInboxSchemaVersion) + ": upgrade the operator");
  }
  // A table dropped by hand (its meta row left behind) is made again: version 1's statements
  // create only what is missing and replace the functions.
  const bool tables_present =
      tx.exec_params("SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL",
                     inbox.quoted(), inbox.quoted_with_suffix("_keys"))[0][0]
          .as<bool>();
  if (result.from_version < 1 || !tables_present) {
    for (const auto& stmt : version_1(inbox)) {
      tx.exec(stmt);
    }
    result.applied.push_back("v1: created " + inbox.plain() + ", " + inbox.table() + "_keys, " +
                             inbox.table() + "_record() and " + inbox.table() + "_apply()");
  }
  tx.exec_params("INSERT INTO " + inbox_meta(inbox) +
                     " (table_name, version) VALUES ($1, $2) ON CONFLICT (table_name) DO UPDATE "
                     "SET version = EXCLUDED.version, updated_at = now()",
                 inbox.table(), kInboxSchemaVersion);
  tx.commit();
  result.to_version = kInboxSchemaVersion;
  return result;
}

InboxCleanup cleanup_inbox(pqxx::connection& conn, const TableName& inbox,
                           std::chrono::seconds keep, int batch_size) {
  if (batch_size < 1) {
    throw std::invalid_argument("batch size must be at least 1");
  }
  InboxCleanup report;
  const std::string lock_key = "outbox-inbox-cleanup:" + inbox.plain();
  pqxx::nontransaction session(conn);
  if (!session.exec_params("SELECT pg_try_advisory_lock(hashtext($1))", lock_key)[0][0]
           .as<bool>()) {
    return report;
  }
  report.ran = true;
  // Each batch is its own short autocommit statement; rows a consumer holds are skipped.
  auto drain = [&](const std::string& table, const std::string& columns, const std::string& age) {
    const std::string sql = "DELETE FROM " + table + " WHERE (" + columns + ") IN (SELECT " +
                            columns + " FROM " + table + " WHERE " + age +
                            " < now() - $1 * interval '1 second' LIMIT $2 FOR UPDATE SKIP LOCKED)";
    std::int64_t removed = 0;
    for (;;) {
      auto r = session.exec_params(sql, static_cast<std::int64_t>(keep.count()), batch_size);
      ++report.batches;
      removed += static_cast<std::int64_t>(r.affected_rows());
      if (r.affected_rows() < static_cast<std::size_t>(batch_size)) {
        return removed;
      }
    }
  };
  try {
    report.records = drain(inbox.quoted(), "consumer, event_id", "processed_at");
    report.keys = drain(inbox.quoted_with_suffix("_keys"), "consumer, key", "updated_at");
  } catch (...) {
    session.exec_params("SELECT pg_advisory_unlock(hashtext($1))", lock_key);
    throw;
  }
  session.exec_params("SELECT pg_advisory_unlock(hashtext($1))", lock_key);
  return report;
}

Inbox::Inbox(TableName table, std::string consumer)
    : table_(std::move(table)), consumer_(std::move(consumer)) {
  if (consumer_.empty()) {
    throw std::invalid_argument("inbox " + table_.plain() + ": consumer must be a non-empty name");
  }
}

void Inbox::migrate(pqxx::connection& conn) const {
  migrate_inbox(conn, table_);
}

bool Inbox::record(pqxx::transaction_base& tx, const std::string& event_id) const {
  require_uuid(event_id);
  return tx
      .exec_params("SELECT " + table_.quoted_with_suffix("_record") + "($1, $2::uuid)", consumer_,
                   event_id)[0][0]
      .as<bool>();
}

Inbox::Outcome Inbox::apply(pqxx::transaction_base& tx, const std::string& event_id,
                            const std::string& key, std::int64_t seq) const {
  require_uuid(event_id);
  const auto outcome =
      tx.exec_params("SELECT " + table_.quoted_with_suffix("_apply") + "($1, $2::uuid, $3, $4)",
                     consumer_, event_id, key, seq)[0][0]
          .as<std::string>();
  if (outcome == "new") {
    return Outcome::kNew;
  }
  if (outcome == "duplicate") {
    return Outcome::kDuplicate;
  }
  if (outcome == "stale") {
    return Outcome::kStale;
  }
  throw std::runtime_error("inbox " + table_.plain() + ": _apply returned \"" + outcome + "\"");
}

std::string outcome_name(Inbox::Outcome outcome) {
  switch (outcome) {
    case Inbox::Outcome::kNew:
      return "new";
    case Inbox::Outcome::kDuplicate:
      return "duplicate";
    case Inbox::Outcome::kStale:
      return "stale";
  }
  return "unknown";
}

}  // namespace outbox::inbox
