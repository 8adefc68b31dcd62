#include "outbox/cluster_move.hpp"

#include <optional>
#include <stdexcept>

#include "outbox/schema.hpp"

namespace outbox {
namespace {

// The session setting that remembers a session's first insert passed the move check; a
// plain identifier: the table's name hashed (FNV-1a, stable).
std::string checked_setting(const TableName& t) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : t.plain()) {
    h = (h ^ c) * 1099511628211ULL;
  }
  return "'outbox.position_checked_" + std::to_string(h) + "'";
}

std::string rebase_hint(const TableName& t) {
  return "run outbox-operator migrate --table " + t.plain() + " --rebase";
}

// A row's position (the "xid" column's default) is the newest transaction id that had ended
// when the row was inserted, or its own transaction's id if that is later, plus the table's
// position offset.
//
// Per-key commit order: a writer that takes its key's lock before inserting (updates the
// key's row, say) inserts after the key's previous writer has committed, so that writer's id
// is among those ended, and the later row's position is at least the earlier's; the id, drawn
// at the insert, breaks the tie. The transaction's own id would not do: it is assigned at its
// first write, which may come before another transaction on the same key takes, uses and
// releases the lock.
//
// Nothing skipped: a transaction still running has an id at or above the oldest running one,
// and so does the position of every row it inserts. The relay reads positions below that id
// (plus the offset): every row there is committed or never will be.
//
// In plpgsql and volatile, so that under READ COMMITTED the snapshot is taken as the row is
// inserted (after the lock), not when the statement began. Under REPEATABLE READ the
// transaction's snapshot serves, which is newer than the previous writer's commit when the
// lock is an UPDATE of the key's row (PostgreSQL refuses a concurrent update otherwise).
//
// The move check, at a session's first insert only (a session-level setting remembers it
// passed; a session never outlives a move, and its positions never decrease): the cluster is
// the one the offset was made for, and its ids are not behind the progress (a position at or
// below a shard's progress would count as sent). Otherwise the policy: rebase (then the
// position is taken again, after the rebase's lock: a writer that waited for another's rebase
// sorts after it) or refuse. @OFFSET@ and @CLUSTER@ are filled in by whoever creates it:
// migrate, or the rebase function (which holds this text as a template).
std::string position_template(const TableName& t, ClusterMovePolicy policy) {
  const std::string checked = checked_setting(t);
  const std::string now =
      "greatest(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1, "
      "pg_current_xact_id()::text::bigint)";
  const std::string on_move =
      policy == ClusterMovePolicy::kRebase
          ? "o := " + t.quoted_with_suffix("_rebase") + "(); p := " + now + ";"
          : "RAISE EXCEPTION 'outbox table " + t.plain() +
                ": this database''s transaction ids are behind the table''s progress, which "
                "comes from another PostgreSQL cluster; the event would count as sent' USING "
                "HINT = '" +
                rebase_hint(t) + " (spec.database.onClusterMove is Refuse)';";
  return "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_position") +
         "() RETURNS xid8 LANGUAGE plpgsql VOLATILE AS $f$ DECLARE p bigint; o bigint := "
         "@OFFSET@; BEGIN p := " +
         now + "; IF current_setting(" + checked + ", true) IS DISTINCT FROM 'on' THEN IF " +
         kClusterIdSql + " IS DISTINCT FROM @CLUSTER@ OR p + o <= (SELECT max(xid)::text::bigint " +
         "FROM " + t.quoted_with_suffix("_progress") + ") THEN " + on_move +
         " END IF; PERFORM set_config(" + checked +
         ", 'on', false); END IF; RETURN (p + o)::text::xid8; END $f$";
}

std::string fill(std::string text, const std::string& token, const std::string& value) {
  for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at)) {
    text.replace(at, token.size(), value);
    at += value.size();
  }
  return text;
}

std::string sql_literal(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    out += c == '\'' ? "''" : std::string(1, c);
  }
  return out + "'";
}

// <table>_rebase(): the one implementation of a rebase, whoever notices the move. Runs as its
// owner (the role that ran migrate, which may change the position function), so that a
// writer's role needs no more than it has; with a fixed search_path, every name qualified.
// Serialised with migrate on the table's lock, held to the caller's commit: a second caller
// waits, then finds the move done (the lock's waiters see the commit in READ COMMITTED).
// It also moves the id sequence past every id an event not yet read, a progress row or a
// retry row holds: logical replication copies no sequence, so on the new cluster ids would
// start again at 1, and a new event failing under an id <table>_retry holds already would fail
// the write-back that copies it there (a dump and restore keeps the sequence: then no change).
std::string rebase_function(const TableName& t, ClusterMovePolicy policy) {
  const std::string meta = outbox_meta(t);
  const std::string progress = t.quoted_with_suffix("_progress");
  const std::string retry = t.quoted_with_suffix("_retry");
  const std::string name = sql_literal(t.table());
  return "CREATE OR REPLACE FUNCTION " + t.quoted_with_suffix("_rebase") +
         "() RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, "
         "pg_temp AS $r$ DECLARE here text; rec text; o0 bigint; o bigint; base bigint; prog "
         "bigint; highest bigint; pol text; seq text; ids bigint; BEGIN PERFORM "
         "pg_advisory_xact_lock(hashtext("
         "'outbox-migrate:' || " +
         sql_literal(t.plain()) + ")); SELECT cluster_id, position_offset, on_cluster_move INTO " +
         "rec, o0, pol FROM " + meta + " WHERE table_name = " + name +
         "; here := " + kClusterIdSql +
         "; base := pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1; prog := (SELECT "
         "max(xid)::text::bigint FROM " +
         progress +
         "); IF rec IS NOT DISTINCT FROM here AND (prog IS NULL OR prog < base + o0) THEN "
         "RETURN o0; END IF; highest := greatest((SELECT max(xid) FROM " +
         t.quoted() + "), (SELECT max(xid) FROM " + progress + "), (SELECT max(xid) FROM " +
         t.quoted_with_suffix("_retry") +
         "), '0')::text::bigint; o := greatest(o0, highest + 1 - base); UPDATE " + meta +
         " SET cluster_id = here, position_offset = o, moved_from = rec, moved_to = here, "
         "moved_at = now(), updated_at = now() WHERE table_name = " +
         name + "; EXECUTE replace(replace($tpl$" + position_template(t, policy) +
         "$tpl$, '@OFFSET@', o::text), '@CLUSTER@', quote_literal(here)); seq := "
         "pg_get_serial_sequence(" +
         sql_literal(t.quoted()) + ", 'id'); ids := greatest((SELECT max(id) FROM " + t.quoted() +
         " WHERE xid > (SELECT min(xid) FROM " + progress + ")), (SELECT max(id) FROM " + progress +
         "), (SELECT max(id) FROM " + retry +
         ")); IF seq IS NOT NULL AND ids IS NOT NULL AND ids > coalesce(pg_sequence_last_value("
         "seq::regclass), 0) THEN PERFORM setval(seq, ids); END IF; RAISE WARNING "
         "'outbox table %: moved from PostgreSQL cluster % to %; positions continue after every "
         "restored row (offset % -> %)', " +
         sql_literal(t.plain()) +
         ", coalesce(rec, '(none recorded)'), here, o0, o; RETURN o; END $r$";
}

}  // namespace

std::string policy_name(ClusterMovePolicy policy) {
  return policy == ClusterMovePolicy::kRefuse ? "refuse" : "rebase";
}

ClusterMovePolicy parse_policy(const std::string& text) {
  if (text == "rebase" || text == "Rebase") {
    return ClusterMovePolicy::kRebase;
  }
  if (text == "refuse" || text == "Refuse") {
    return ClusterMovePolicy::kRefuse;
  }
  throw std::invalid_argument("on a cluster move: rebase or refuse, not '" + text + "'");
}

std::vector<std::string> cluster_move_functions(const TableName& t, std::int64_t offset,
                                                const std::string& cluster,
                                                ClusterMovePolicy policy) {
  return {
      // The rebase function first: the position function calls it. (Both executable by
      // every role, as functions are by default: a writer's role runs them on its inserts.)
      rebase_function(t, policy),
      fill(fill(position_template(t, policy), "@OFFSET@", std::to_string(offset)), "@CLUSTER@",
           sql_literal(cluster)),
  };
}

// Column defaults are evaluated in column order and id comes before xid: with the sequence's
// own default, a session's first insert after a logical-replication cutover (which copies no
// sequence) would draw its id from the restarted sequence before the move check in
// <table>_position() moved the sequence past the ids in use, and so would every insert waiting
// on that rebase. Ids are keys: in <table>_retry, and to the relay within a batch. So the id's
// default runs the check first until it has passed in the session; after that it reads a
// setting and calls nextval. One function call and not a CASE around nextval: the default is
// planned with every insert, and the CASE added about four times the function's cost.
std::optional<std::string> draw_ids_after_the_move_check(pqxx::dbtransaction& tx,
                                                         const TableName& t) {
  const auto column = tx.exec_params1(
      "SELECT pg_get_serial_sequence($1, 'id'), a.attidentity <> '', coalesce(pg_get_expr("
      "d.adbin, d.adrelid), '') FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = "
      "a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = $1::regclass AND a.attname = 'id'",
      t.quoted());
  if (column[0].is_null() || column[1].as<bool>()) {
    // Not a table migrate made (an identity column, or no sequence of its own): left as it is.
    return "ids: " + t.plain() +
           ".id has no sequence of its own that migrate set (an identity column or none): a "
           "session's first insert after a cluster move draws its id before the rebase";
  }
  const std::string function = t.quoted_with_suffix("_next_id");
  tx.exec("CREATE OR REPLACE FUNCTION " + function +
          "() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $f$ BEGIN IF current_setting(" +
          checked_setting(t) + ", true) IS DISTINCT FROM 'on' THEN PERFORM " +
          t.quoted_with_suffix("_position") + "(); END IF; RETURN nextval(" +
          sql_literal(column[0].as<std::string>()) + "::regclass); END $f$");
  if (column[2].as<std::string>().find(t.table() + "_next_id") != std::string::npos) {
    return std::nullopt;
  }
  // Recurses to the partitions: an ACCESS EXCLUSIVE lock for the catalog change, once. Behind
  // a long transaction on the table every insert would queue behind it: it waits 5 s at most,
  // and the next migrate (the operator's schema Job runs one on every upgrade) tries again.
  try {
    pqxx::subtransaction sub(tx, "next_id");
    const std::string before = sub.exec1("SHOW lock_timeout")[0].as<std::string>();
    sub.exec("SET LOCAL lock_timeout = '5s'");
    sub.exec("ALTER TABLE " + t.quoted() + " ALTER COLUMN id SET DEFAULT " + function + "()");
    sub.exec_params("SELECT set_config('lock_timeout', $1, true)", before);
    sub.commit();
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() != "55P03") {  // lock_not_available
      throw;
    }
    return "ids: not yet drawn after the move check (a transaction held " + t.plain() +
           " for 5 s; the next migrate tries again)";
  }
  return "ids are drawn after the move check: a session's first insert on a cluster the table "
         "moved to gets an id past every id in use";
}

RebaseResult run_rebase(pqxx::transaction_base& tx, const TableName& t) {
  RebaseResult result;
  const auto before = tx.exec_params1("SELECT COALESCE(cluster_id, ''), position_offset FROM " +
                                          outbox_meta(t) + " WHERE table_name = $1",
                                      t.table());
  result.recorded_cluster = before[0].as<std::string>();
  result.offset_before = before[1].as<std::int64_t>();
  result.offset =
      tx.exec1("SELECT " + t.quoted_with_suffix("_rebase") + "()")[0].as<std::int64_t>();
  result.cluster = tx.exec1(std::string("SELECT ") + kClusterIdSql)[0].as<std::string>();
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

RecordedMove recorded_move(pqxx::transaction_base& tx, const TableName& t) {
  const auto r = tx.exec_params(
      "SELECT COALESCE(m->>'moved_from', ''), COALESCE(m->>'moved_to', ''), "
      "COALESCE(to_char((m->>'moved_at')::timestamptz AT TIME ZONE 'UTC', "
      "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''), COALESCE((m->>'position_offset')::bigint, 0) "
      "FROM (SELECT "
      "to_jsonb(x) AS m FROM " +
          outbox_meta(t) + " x WHERE table_name = $1) s",
      t.table());
  if (r.empty()) {
    return {};
  }
  return {r[0][0].as<std::string>(), r[0][1].as<std::string>(), r[0][2].as<std::string>(),
          r[0][3].as<std::int64_t>()};
}

}  // namespace outbox
