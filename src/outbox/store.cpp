#include "outbox/store.hpp"

#include "outbox/event_status.hpp"
#include "outbox/fixed_plans.hpp"

namespace outbox {
namespace {
const std::string kPending = sql(EventStatus::kPending);
const std::string kSent = sql(EventStatus::kSent);
const std::string kFailed = sql(EventStatus::kFailed);

}  // namespace

ClaimQueries::ClaimQueries(pqxx::connection& conn, const TableName& table,
                           const ClaimOptions& options)
    : conn_(conn), payload_hex_(options.bytes) {
  const std::string q = table.quoted();
  // blocked: the earliest retrying event of each key, due or not; computed once
  // per claim from the tiny "_retrying" index (MATERIALIZED keeps the planner from
  // re-probing it per candidate row). Every later event of such a key waits: while
  // the retry is not due, and also once it is, since the retry may fail again and
  // a later event sent beside it could be delivered meanwhile (to another topic
  // or partition, where nothing orders the two). So a due retry is claimed alone for its key, and
  // its key's later events are claimed once it is marked sent or FAILED. Only an attempted
  // event waits for its next_retry_time: a new row's is its transaction's start (the column's
  // default), which under contention is not its commit order, and the claim's now() is taken
  // before its snapshot, so a row committed in time but started after the claim's now() would
  // be left out while a later commit of its key went ahead. e: candidates in id order
  // from the "_pending" index, which stays small however many sent rows the table holds. The
  // ids of the batch in flight ($3, up to a batch) are left out through a hashed subplan: the
  // generic plan cannot hash `<> ALL($3)` as a custom plan hashes a constant array, and
  // comparing each candidate with every id in flight made a claim beside a full batch twice as
  // slow (3.1 vs 1.1 ms at 500 ids, docs/benchmarks.md).
  const std::string select =
      "SELECT e.id, e.event_id::text, e.biz_type, e.biz_id, " + payload_column("e", options.bytes) +
      ", "
      "to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), " +
      std::string(options.headers ? "e.headers::text" : "NULL::text") +
      ", e.retry_count, e.shard FROM " + q + " e WHERE e.status = " + kPending +
      " AND e.shard = ANY($1::int[]) AND (e.retry_count = 0 OR e.next_retry_time <= now()) AND "
      "e.id NOT IN (SELECT unnest($3::bigint[]))";
  claim_sql_ = options.per_key_order
                   ? "WITH blocked AS MATERIALIZED (SELECT biz_id, min(id) AS head FROM " + q +
                         " WHERE status = " + kPending + " AND retry_count > 0 GROUP BY biz_id) " +
                         select +
                         " AND NOT EXISTS (SELECT 1 FROM blocked b WHERE b.biz_id = e.biz_id AND "
                         "b.head < e.id) ORDER BY e.id LIMIT $2"
                   : select + " ORDER BY e.id LIMIT $2";
  use_fixed_plans(conn_);
  claim_statement_ = prepared(conn_, claim_sql_);
}

WaitingList::WaitingList(pqxx::connection& conn, const TableName& table) : conn_(conn) {
  const std::string waiting = table.quoted_with_suffix("_waiting");
  wait_sql_ = "INSERT INTO " + waiting +
              " (pid) VALUES (pg_backend_pid()) ON CONFLICT (pid) DO UPDATE SET since = now()";
  unwait_sql_ = "DELETE FROM " + waiting + " WHERE pid = pg_backend_pid()";
  forget_sql_ = "DELETE FROM " + waiting + " WHERE pid NOT IN (SELECT pid FROM pg_stat_activity)";
}

void WaitingList::set(bool waiting) {
  pqxx::nontransaction tx(conn_);
  tx.exec(waiting ? wait_sql_ : unwait_sql_);
}

void WaitingList::forget_dead() {
  pqxx::nontransaction tx(conn_);
  tx.exec(forget_sql_);
}

OutboxStore::OutboxStore(pqxx::connection& conn, TableName table, const ClaimOptions& options)
    : conn_(conn), table_(std::move(table)), claims_(conn, table_, options) {
  const std::string q = table_.quoted();
  mark_sql_ = "UPDATE " + q + " SET status = " + kSent +
              ", sent_at = now(), updated_at = now(), last_error = NULL "
              "WHERE id = ANY($1::bigint[]) AND status = " +
              kPending;
  delete_sql_ = "DELETE FROM " + q + " WHERE id = ANY($1::bigint[]) AND status = " + kPending;
}

void OutboxStore::write_back(const std::vector<OutboxEvent>& /*batch*/,
                             const std::vector<std::int64_t>& delivered,
                             const std::vector<RetryDecision>& decisions, bool delete_on_sent) {
  mark_sent(delivered, delete_on_sent);
  record_failures(decisions);
}

std::vector<OutboxEvent> ClaimQueries::claim_batch(const std::vector<int>& shards, int limit,
                                                   const std::vector<std::int64_t>& exclude_ids) {
  std::vector<OutboxEvent> events;
  if (shards.empty() || limit <= 0) {
    return events;
  }
  pqxx::nontransaction tx(conn_);
  auto rows =
      tx.exec_prepared(claim_statement_, pg_int_array(shards), limit, pg_int_array(exclude_ids));
  events.reserve(rows.size());
  for (const auto& r : rows) {
    events.push_back(read_event(r, payload_hex_));
  }
  return events;
}

std::string payload_column(const std::string& a, bool bytes) {
  return bytes ? "encode(" + a + ".payload, 'hex')" : a + ".payload::text";
}

namespace {

int hex_digit(char c) {
  return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

// PostgreSQL's encode(..., 'hex'): two lower-case digits per byte.
std::string from_hex(const std::string& hex) {
  std::string bytes(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>(hex_digit(hex[2 * i]) * 16 + hex_digit(hex[2 * i + 1]));
  }
  return bytes;
}

}  // namespace

OutboxEvent read_event(const pqxx::row& r, bool payload_hex) {
  OutboxEvent e;
  e.id = r[0].as<std::int64_t>();
  e.event_id = r[1].as<std::string>();
  e.biz_type = r[2].as<std::string>();
  e.biz_id = r[3].as<std::string>();
  e.payload = payload_hex ? from_hex(r[4].as<std::string>()) : r[4].as<std::string>();
  e.created_at = r[5].as<std::string>();
  e.headers = r[6].as<std::string>("");
  e.retry_count = r[7].as<int>();
  e.shard = r[8].as<int>();
  return e;
}

std::int64_t OutboxStore::mark_sent(const std::vector<std::int64_t>& ids, bool delete_rows) {
  if (ids.empty()) {
    return 0;
  }
  pqxx::nontransaction tx(conn_);
  auto res = tx.exec_params(delete_rows ? delete_sql_ : mark_sql_, pg_int_array(ids));
  return static_cast<std::int64_t>(res.affected_rows());
}

void OutboxStore::record_failures(const std::vector<RetryDecision>& decisions) {
  if (decisions.empty()) {
    return;
  }
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> delays_ms;
  std::vector<int> failed;
  std::vector<std::string> errors;
  for (const auto& d : decisions) {
    ids.push_back(d.id);
    delays_ms.push_back(d.delay.count());
    failed.push_back(d.failed ? 1 : 0);
    errors.push_back(d.error.substr(0, 2000));
  }
  pqxx::nontransaction tx(conn_);
  tx.exec_params("UPDATE " + table_.quoted() +
                     " AS t SET retry_count = t.retry_count + 1, "
                     "status = CASE WHEN d.failed = 1 THEN " +
                     kFailed + " ELSE " + kPending +
                     " END, "
                     "next_retry_time = now() + d.delay_ms * interval '1 millisecond', "
                     "last_error = d.error, updated_at = now() "
                     "FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[]) "
                     "AS d(id, delay_ms, failed, error) WHERE t.id = d.id AND t.status = " +
                     kPending,
                 pg_int_array(ids), pg_int_array(delays_ms), pg_int_array(failed),
                 pg_text_array(errors));
}

Backlog OutboxStore::backlog(std::chrono::seconds stuck_after) {
  pqxx::nontransaction tx(conn_);
  // Pending rows are few (partial index); FAILED rows are counted through the
  // "_failed" partial index. Ages use the database clock, not the relay's.
  auto r = tx.exec_params(
      "SELECT count(*) FILTER (WHERE status = " + kPending +
          "), count(*) FILTER (WHERE status = " + kPending +
          " AND created_at < now() - $1 * interval '1 second'), COALESCE(EXTRACT(EPOCH FROM now() "
          "- min(created_at) FILTER (WHERE status = " +
          kPending + ")), 0) FROM " + table_.quoted() + " WHERE status = " + kPending,
      static_cast<std::int64_t>(stuck_after.count()));
  Backlog b;
  b.pending = r[0][0].as<std::int64_t>();
  b.stuck = r[0][1].as<std::int64_t>();
  b.oldest_pending_seconds = r[0][2].as<double>();
  auto f = tx.exec("SELECT count(*) FROM " + table_.quoted() + " WHERE status = " + kFailed);
  b.failed = f[0][0].as<std::int64_t>();
  return b;
}

TableHealth OutboxStore::health() {
  return table_health(conn_, table_, false);
}

TableHealth table_health(pqxx::connection& conn, const TableName& table, bool partitioned) {
  pqxx::nontransaction tx(conn);
  // A partitioned table has no statistics of its own: its partitions have. The statistics
  // functions by oid rather than pg_stat_user_tables, which computes a row for every table of
  // the database before it filters (4.8 ms per relay report beside 1,000 tables).
  const std::string table_oid = "to_regclass(quote_ident($1) || '.' || quote_ident($2))";
  const std::string rels =
      partitioned ? "SELECT inhrelid AS oid FROM pg_inherits WHERE inhparent = " + table_oid
                  : "SELECT " + table_oid + "::oid AS oid";
  auto r = tx.exec_params(
      "SELECT COALESCE(sum(pg_stat_get_live_tuples(t.oid)), 0)::bigint, "
      "COALESCE(sum(pg_stat_get_dead_tuples(t.oid)), 0)::bigint, "
      "EXTRACT(EPOCH FROM min(greatest(pg_stat_get_last_vacuum_time(t.oid), "
      "pg_stat_get_last_autovacuum_time(t.oid))))::float8, "
      "EXTRACT(EPOCH FROM now())::float8, "
      "(SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(xact_start)), 0) FROM pg_stat_activity "
      " WHERE backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) "
      "FROM (" +
          rels + ") t WHERE t.oid IS NOT NULL",
      table.schema(), table.table());
  TableHealth h;
  if (!r.empty()) {
    h.live_tuples = r[0][0].as<std::int64_t>();
    h.dead_tuples = r[0][1].as<std::int64_t>();
    if (!r[0][2].is_null()) {
      h.last_vacuum_unix = r[0][2].as<double>();
    }
    h.measured_unix = r[0][3].as<double>();
    h.oldest_transaction_seconds = r[0][4].as<double>();
  }
  return h;
}

std::string pg_text_array(const std::vector<std::string>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += i > 0 ? ",\"" : "\"";
    for (char c : values[i]) {
      if (c == '"' || c == '\\') {
        out += '\\';
      }
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string enqueue(pqxx::transaction_base& tx, const TableName& table, const std::string& biz_type,
                    const std::string& biz_id, const std::string& payload_json,
                    const std::string& headers_json) {
  if (headers_json.empty()) {
    return tx
        .exec_params1("INSERT INTO " + table.quoted() +
                          " (biz_type, biz_id, payload) VALUES ($1, $2, $3::jsonb) "
                          "RETURNING event_id::text",
                      biz_type, biz_id, payload_json)[0]
        .as<std::string>();
  }
  return tx
      .exec_params1("INSERT INTO " + table.quoted() +
                        " (biz_type, biz_id, payload, headers) VALUES ($1, $2, $3::jsonb, "
                        "$4::jsonb) RETURNING event_id::text",
                    biz_type, biz_id, payload_json, headers_json)[0]
      .as<std::string>();
}

}  // namespace outbox
