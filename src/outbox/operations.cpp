#include "outbox/operations.hpp"

#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "outbox/event_status.hpp"
#include "outbox/schema.hpp"
#include "outbox/store.hpp"

namespace outbox {
namespace {

const std::string kPending = sql(EventStatus::kPending);
const std::string kSent = sql(EventStatus::kSent);
const std::string kFailed = sql(EventStatus::kFailed);

std::string ts(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')";
}

// The selection as a WHERE fragment over fixed text parameters $2..$7, where an
// empty string means "not set". Values never enter the SQL text.
const char* kSelectionWhere =
    " AND (NULLIF($2, '') IS NULL OR event_id = ANY(NULLIF($2, '')::uuid[]))"
    " AND (NULLIF($3, '') IS NULL OR biz_type = $3)"
    " AND (NULLIF($4, '') IS NULL OR created_at >= NULLIF($4, '')::timestamptz)"
    " AND (NULLIF($5, '') IS NULL OR created_at < NULLIF($5, '')::timestamptz)"
    " AND (NULLIF($6, '') IS NULL OR id >= NULLIF($6, '')::bigint)"
    " AND (NULLIF($7, '') IS NULL OR id <= NULLIF($7, '')::bigint)";

// Where the on-call commands look: a status-mode table holds everything; a log-mode
// table's events are seen through its "_status" view and its failures live in "_retry".
struct Relations {
  std::string events;
  std::string failures;
  bool log = false;
};

Relations relations_of(pqxx::connection& conn, const TableName& table) {
  if (inspect_table(conn, table).mode == TableMode::kLog) {
    return {table.quoted_with_suffix("_status"), table.quoted_with_suffix("_retry"), true};
  }
  return {table.quoted(), table.quoted(), false};
}

// Runs `change_sql` (ending in a WHERE that the selection completes, RETURNING
// event_id) or, in a dry run, selects the same rows of `relation`.
ChangeReport change(pqxx::connection& conn, const std::string& relation, const Selection& s,
                    bool dry_run, EventStatus from_status, const std::string& change_sql) {
  s.validate();
  pqxx::work tx(conn);
  for (const auto& t : {s.created_from, s.created_to}) {
    if (t) {
      try {
        pqxx::subtransaction check(tx);
        check.exec_params("SELECT $1::timestamptz", *t);
        check.commit();
      } catch (const pqxx::sql_error&) {
        throw std::invalid_argument("invalid time \"" + *t +
                                    "\" (use RFC 3339, e.g. 2026-12-01T10:00:00Z)");
      }
    }
  }
  // "" (not "{}") when no id is given: the WHERE fragment reads "" as "not set".
  const std::string ids = s.event_ids.empty() ? "" : pg_text_array(s.event_ids);
  const std::string where = " WHERE status = $1" + std::string(kSelectionWhere);
  const std::string sql = dry_run
                              ? "SELECT event_id::text FROM " + relation + where + " ORDER BY id"
                              : change_sql + where + " RETURNING event_id::text";
  auto rows = tx.exec_params(sql, static_cast<int>(from_status), ids, s.biz_type.value_or(""),
                             s.created_from.value_or(""), s.created_to.value_or(""),
                             s.id_from ? std::to_string(*s.id_from) : "",
                             s.id_to ? std::to_string(*s.id_to) : "");
  ChangeReport report;
  report.dry_run = dry_run;
  for (const auto& r : rows) {
    report.event_ids.push_back(r[0].as<std::string>());
  }
  tx.commit();
  return report;
}

}  // namespace

bool Selection::empty() const {
  return event_ids.empty() && !biz_type && !created_from && !created_to && !id_from && !id_to;
}

void Selection::validate() const {
  static const std::regex uuid(
      "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
  if (all && !empty()) {
    throw std::invalid_argument("--all selects every event: give it without another selector");
  }
  if (!all && empty()) {
    throw std::invalid_argument(
        "select the events: --event-id, --biz-type, --from/--to or --from-id/--to-id");
  }
  for (const auto& id : event_ids) {
    if (!std::regex_match(id, uuid)) {
      throw std::invalid_argument("\"" + id + "\" is not an event_id (a UUID)");
    }
  }
  if (biz_type && biz_type->empty()) {
    throw std::invalid_argument("--biz-type is empty");
  }
  if (id_from && id_to && *id_from > *id_to) {
    throw std::invalid_argument("--from-id is greater than --to-id");
  }
}

ChangeReport requeue_failed(pqxx::connection& conn, const TableName& table, const Selection& s,
                            bool dry_run) {
  const Relations r = relations_of(conn, table);
  return change(conn, r.failures, s, dry_run, EventStatus::kFailed,
                "UPDATE " + r.failures + " SET status = " + kPending +
                    ", retry_count = 0, next_retry_time = now(), updated_at = now()");
}

ChangeReport replay_sent(pqxx::connection& conn, const TableName& table, const Selection& s,
                         bool dry_run) {
  const Relations r = relations_of(conn, table);
  if (r.log) {
    // Log rows are never changed: a copy in _retry makes the relay send them again.
    return change(conn, r.events, s, dry_run, EventStatus::kSent,
                  "INSERT INTO " + r.failures +
                      " (id, xid, event_id, biz_type, biz_id, payload, created_at, shard, status, "
                      "retry_count, next_retry_time) SELECT id, xid, event_id, biz_type, biz_id, "
                      "payload, created_at, shard, " +
                      kPending + ", 0, now() FROM " + r.events);
  }
  return change(conn, r.events, s, dry_run, EventStatus::kSent,
                "UPDATE " + r.events + " SET status = " + kPending +
                    ", retry_count = 0, next_retry_time = now(), sent_at = NULL, "
                    "updated_at = now()");
}

std::string ChangeReport::text(const std::string& verb, const std::string& verb_past) const {
  std::ostringstream os;
  os << (dry_run ? "dry run: would " + verb + " " : verb_past + " ") << event_ids.size()
     << " event(s)";
  for (std::size_t i = 0; i < event_ids.size() && i < 50; ++i) {
    os << (i == 0 ? ": " : ", ") << event_ids[i];
  }
  if (event_ids.size() > 50) {
    os << ", ... (" << event_ids.size() - 50 << " more)";
  }
  return os.str();
}

Inspection inspect(pqxx::connection& conn, const TableName& table, int top,
                   std::optional<std::chrono::milliseconds> statement_timeout) {
  const Relations rel = relations_of(conn, table);
  const std::string& q = rel.events;
  pqxx::read_transaction tx(conn);  // one snapshot for every figure; READ ONLY
  if (statement_timeout) {
    // SET LOCAL: ends with the transaction, so a pooled server session keeps its own setting.
    std::string set = "SET LOCAL statement_timeout = ";
    set += std::to_string(statement_timeout->count());
    tx.exec(set);
  }
  Inspection in;
  auto c = tx.exec(
      "SELECT count(*) FILTER (WHERE status = " + kPending + "), count(*) FILTER (WHERE status = " +
      kSent + "), count(*) FILTER (WHERE status = " + kFailed +
      "), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE status = " + kPending +
      ")), 0) FROM " + q);
  in.pending = c[0][0].as<std::int64_t>();
  in.sent = c[0][1].as<std::int64_t>();
  in.failed = c[0][2].as<std::int64_t>();
  in.oldest_pending_seconds = c[0][3].as<double>();
  for (const auto& r :
       tx.exec_params("SELECT biz_type, count(*) FILTER (WHERE status = " + kPending +
                          "), count(*) FILTER (WHERE status = " + kFailed + ") FROM " + q +
                          " WHERE status IN (" + kPending + ", " + kFailed +
                          ") GROUP BY biz_type ORDER BY count(*) DESC, biz_type LIMIT $1",
                      top)) {
    in.worst_biz_types.push_back(
        {r[0].as<std::string>(), r[1].as<std::int64_t>(), r[2].as<std::int64_t>()});
  }
  for (const auto& r : tx.exec_params("SELECT event_id::text, biz_type, biz_id, last_error, " +
                                          ts("updated_at") + ", retry_count FROM " + rel.failures +
                                          " WHERE status IN (" + kPending + ", " + kFailed +
                                          ") AND last_error IS NOT NULL "
                                          "ORDER BY updated_at DESC LIMIT $1",
                                      top)) {
    in.last_errors.push_back({r[0].as<std::string>(), r[1].as<std::string>(),
                              r[2].as<std::string>(), r[3].as<std::string>(),
                              r[4].as<std::string>(), r[5].as<int>()});
  }
  for (const auto& r :
       tx.exec_params("SELECT h.biz_id, " + ts("h.next_retry_time") + ", (SELECT count(*) FROM " +
                          rel.failures + " e WHERE e.status = " + kPending +
                          " AND e.biz_id = h.biz_id AND e.id > h.id) FROM " + rel.failures +
                          " h WHERE h.status = " + kPending +
                          " AND h.retry_count > 0 "
                          "ORDER BY h.next_retry_time DESC LIMIT $1",
                      top)) {
    in.blocked_keys.push_back(
        {r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::int64_t>()});
  }
  tx.commit();
  in.health = table_health(conn, table, rel.log);
  return in;
}

std::string Inspection::text() const {
  std::ostringstream os;
  os << "pending " << pending << ", sent " << sent << ", FAILED " << failed << ", oldest pending "
     << oldest_pending_seconds << " s\n";
  os << "table health: " << health.live_tuples << " live / " << health.dead_tuples
     << " dead tuples, oldest open transaction " << health.oldest_transaction_seconds
     << " s, last vacuum "
     << (health.seconds_since_vacuum()
             ? std::to_string(static_cast<long>(*health.seconds_since_vacuum())) + " s ago"
             : std::string("never"))
     << "\n";
  if (!worst_biz_types.empty()) {
    os << "biz_types with the most unsent events:\n";
    for (const auto& t : worst_biz_types) {
      os << "  " << t.biz_type << ": pending " << t.pending << ", FAILED " << t.failed << "\n";
    }
  }
  if (!last_errors.empty()) {
    os << "latest errors:\n";
    for (const auto& f : last_errors) {
      os << "  " << f.updated_at << " " << f.event_id << " " << f.biz_type << "/" << f.biz_id
         << " attempts " << f.retry_count << ": " << f.last_error << "\n";
    }
  }
  if (!blocked_keys.empty()) {
    os << "keys held behind a retrying event:\n";
    for (const auto& b : blocked_keys) {
      os << "  " << b.biz_id << ": " << b.waiting << " waiting, next try " << b.next_retry_time
         << "\n";
    }
  }
  return os.str();
}

std::string Inspection::json() const {
  nlohmann::json j = {{"pending", pending},
                      {"sent", sent},
                      {"failed", failed},
                      {"oldestPendingSeconds", oldest_pending_seconds},
                      {"worstBizTypes", nlohmann::json::array()},
                      {"lastErrors", nlohmann::json::array()},
                      {"blockedKeys", nlohmann::json::array()},
                      {"health",
                       {{"liveTuples", health.live_tuples},
                        {"deadTuples", health.dead_tuples},
                        {"oldestTransactionSeconds", health.oldest_transaction_seconds},
                        // null: not vacuumed since the statistics were reset
                        {"secondsSinceVacuum", health.seconds_since_vacuum()
                                                   ? nlohmann::json(*health.seconds_since_vacuum())
                                                   : nlohmann::json(nullptr)}}}};
  for (const auto& t : worst_biz_types) {
    j["worstBizTypes"].push_back(
        {{"bizType", t.biz_type}, {"pending", t.pending}, {"failed", t.failed}});
  }
  for (const auto& f : last_errors) {
    j["lastErrors"].push_back({{"eventId", f.event_id},
                               {"bizType", f.biz_type},
                               {"bizId", f.biz_id},
                               {"attempts", f.retry_count},
                               {"error", f.last_error},
                               {"at", f.updated_at}});
  }
  for (const auto& b : blocked_keys) {
    j["blockedKeys"].push_back(
        {{"bizId", b.biz_id}, {"waiting", b.waiting}, {"nextRetry", b.next_retry_time}});
  }
  return j.dump();
}

}  // namespace outbox
