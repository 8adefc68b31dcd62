#include "outbox/log_store.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "outbox/event_status.hpp"
#include "outbox/fixed_plans.hpp"
#include "outbox/log_partitions.hpp"

namespace outbox {
namespace {

const std::string kPending = sql(EventStatus::kPending);
const std::string kFailed = sql(EventStatus::kFailed);

// What a write-back does with one event (the "verdict" column of its statement).
enum Verdict : int { kDelivered = 0, kRetry = 1, kFailedForGood = 2, kPark = 3 };

}  // namespace

void LogCursor::follow(pqxx::transaction_base& tx, const TableName& table,
                       const std::vector<int>& owned) {
  const std::unordered_set<int> keep(owned.begin(), owned.end());
  std::erase_if(positions_, [&](const auto& p) { return keep.count(p.first) == 0; });
  std::vector<int> unknown;
  for (int shard : owned) {
    if (positions_.count(shard) == 0) {
      unknown.push_back(shard);
    }
  }
  if (unknown.empty()) {
    return;
  }
  empty_until_ = {};  // shards came: their rows in _retry are not known
  auto rows =
      tx.exec_params("SELECT shard, xid::text, id FROM " + table.quoted_with_suffix("_progress") +
                         " WHERE shard = ANY($1::int[])",
                     pg_int_array(unknown));
  for (const auto& r : rows) {
    positions_[r[0].as<int>()] = {r[1].as<std::uint64_t>(), r[2].as<std::int64_t>()};
  }
}

LogPosition LogCursor::lowest() const {
  LogPosition low{};
  bool first = true;
  for (const auto& [shard, pos] : positions_) {
    if (first || pos < low) {
      low = pos;
      first = false;
    }
  }
  return low;
}

void LogCursor::advance(LogPosition end) {
  for (auto& [shard, pos] : positions_) {
    pos = std::max(pos, end);
  }
}

void OwedProgress::add(LogPosition end, const std::vector<int>& shards, std::size_t events,
                       Clock::time_point now) {
  const std::lock_guard lock(mu_);
  if (owed_.empty()) {
    owed_.oldest = now;
  }
  owed_.newest = now;
  owed_.end = std::max(owed_.end, end);
  owed_.shards.insert(owed_.shards.end(), shards.begin(), shards.end());
  std::sort(owed_.shards.begin(), owed_.shards.end());
  owed_.shards.erase(std::unique(owed_.shards.begin(), owed_.shards.end()), owed_.shards.end());
  owed_.events += events;
}

OwedProgress::Owed OwedProgress::take() {
  const std::lock_guard lock(mu_);
  return std::exchange(owed_, Owed{});
}

OwedProgress::Owed OwedProgress::take_if_older(std::chrono::milliseconds age,
                                               Clock::time_point now) {
  const std::lock_guard lock(mu_);
  if (owed_.empty() || now - owed_.oldest < age) {
    return Owed{};
  }
  return std::exchange(owed_, Owed{});
}

std::size_t OwedProgress::events() const {
  const std::lock_guard lock(mu_);
  return owed_.events;
}

std::optional<EventStore::OwedTimes> OwedProgress::times() const {
  const std::lock_guard lock(mu_);
  if (owed_.empty()) {
    return std::nullopt;
  }
  return EventStore::OwedTimes{owed_.oldest, owed_.newest};
}

LogClaims::LogClaims(pqxx::connection& conn, const TableName& table, int shard_count,
                     std::int64_t position_offset, LogCursor& cursor, const ClaimOptions& options,
                     OwedProgress* owed, std::chrono::milliseconds ride_after)
    : conn_(conn),
      table_(table),
      shard_count_(shard_count),
      cursor_(cursor),
      owed_(owed),
      ride_after_(ride_after) {
  const std::string retry = table.quoted_with_suffix("_retry");
  const std::string watermark = position_bound_sql("xmin", position_offset);
  // Qualified: an unqualified ORDER BY xid would sort by the output column xid::text.
  const bool headers = options.headers;
  payload_hex_ = options.bytes;
  auto columns = [headers, &options](const std::string& a) {
    return a + ".id, " + a + ".event_id::text, " + a + ".biz_type, " + a + ".biz_id, " +
           payload_column(a, options.bytes) + ", to_char(" + a +
           ".created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), " +
           (headers ? a + ".headers::text, " : std::string("NULL::text, "));
  };
  // From _retry, in (xid, id) order, every due pending event that no earlier pending
  // event of its key holds back: an attempted one (a retry) goes alone for its key and
  // holds the key's later ones until it is settled, as in status mode; events parked
  // behind it (never attempted) go together, so a busy key catches up in a few batches.
  // The ids in flight ($3) are left out through a hashed subplan, as in status mode.
  const std::string due_retries =
      "(SELECT " + columns("h") + "h.retry_count, h.shard, h.xid::text, true, false FROM " + retry +
      " h WHERE h.status = " + kPending +
      " AND h.shard = ANY($1::int[]) AND h.next_retry_time <= now() AND h.id NOT IN (SELECT "
      "unnest($3::bigint[])) " +
      (options.per_key_order
           ? "AND NOT EXISTS (SELECT 1 FROM " + retry + " b WHERE b.biz_id = h.biz_id AND " +
                 "b.status = " + kPending +
                 " AND (b.xid, b.id) < (h.xid, h.id) AND (b.retry_count > 0 OR h.retry_count > "
                 "0)) "
           : std::string()) +
      "ORDER BY h.xid, h.id LIMIT $2)";
  // The log rows after the cursor (per shard: `xids`/`ids` are indexed by shard + 1),
  // positioned below the oldest running transaction (the column xid holds the position:
  // schema.cpp, version_5), in (xid, id) order from the primary key; `held`: the row's key
  // waits behind a pending row of _retry. The plain lower bound on xid (the row comparison
  // implies it) lets the executor drop the partitions below the cursor before it starts them.
  // Last, one row of NULLs if a committed row of ours waits above that bound: the end of the
  // transaction holding it back sends no NOTIFY, so the relay must look again soon. Such rows
  // are after every cursor (a cursor only passes rows below an earlier bound), and the bound
  // alone starts the index scan at them; beside the cursor's row comparison, the scan would
  // start at the cursor and step over the backlog.
  auto log_rows = [&](const std::string& low_xid, const std::string& low_id,
                      const std::string& xids, const std::string& ids, const std::string& held) {
    return "(SELECT " + columns("e") + "0, e.shard, e.xid::text, false, " + held + " FROM " +
           table.quoted() + " e WHERE e.xid >= " + low_xid + "::xid8 AND (e.xid, e.id) > (" +
           low_xid + "::xid8, " + low_id + "::bigint) AND e.xid < " + watermark +
           " AND e.shard = ANY($1::int[]) AND (e.xid, e.id) > ((" + xids +
           "::xid8[])[e.shard + 1], (" + ids +
           "::bigint[])[e.shard + 1]) ORDER BY e.xid, e.id LIMIT $2) UNION ALL (SELECT "
           "NULL::bigint, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, false, false FROM " +
           table.quoted() + " e WHERE e.xid >= " + watermark +
           " AND e.shard = ANY($1::int[]) LIMIT 1)";
  };
  const std::string held = options.per_key_order
                               ? "EXISTS (SELECT 1 FROM " + retry +
                                     " r WHERE r.biz_id = e.biz_id AND r.status = " + kPending + ")"
                               : std::string("false");
  // The full claim: due retries, then the log, then one more row of NULLs (shard -1) if any
  // pending row of the shards is in _retry, due or not. UNION ALL returns the _retry rows
  // first (claim_batch relies on it).
  const std::string full_sql =
      due_retries + " UNION ALL " + log_rows("$4", "$5", "$6", "$7", held) +
      " UNION ALL (SELECT NULL::bigint, NULL, NULL, NULL, NULL, NULL, NULL, 0, -1, NULL, false, "
      "false FROM " +
      retry + " h WHERE h.status = " + kPending + " AND h.shard = ANY($1::int[]) LIMIT 1)";
  // The log alone, for while _retry is known to hold no pending row of the shards
  // (LogCursor::retry_known_empty): no key then waits behind one. Half the plan, and most
  // claims at steady rates are this one.
  const std::string log_only_sql = log_rows("$3", "$4", "$5", "$6", "false");
  use_fixed_plans(conn_);
  full_statement_ = prepared(conn_, full_sql);
  log_only_statement_ = prepared(conn_, log_only_sql);
  if (owed_ != nullptr) {
    // The same claims, after moving the owed shards' progress (a data-modifying CTE runs
    // whether or not the query reads it). Every row at or below that position is settled,
    // so the claim's cursor is past it already.
    auto storing = [&](const std::string& xid, const std::string& id, const std::string& shards) {
      return "WITH stored AS (UPDATE " + table.quoted_with_suffix("_progress") +
             " p SET xid = " + xid + "::xid8, id = " + id +
             ", updated_at = now() WHERE p.shard = ANY(" + shards +
             "::int[]) AND (p.xid, p.id) < (" + xid + "::xid8, " + id + "::bigint)) ";
    };
    full_storing_statement_ = prepared(conn_, storing("$8", "$9", "$10") + full_sql);
    log_only_storing_statement_ = prepared(conn_, storing("$7", "$8", "$9") + log_only_sql);
  }
}

std::vector<OutboxEvent> LogClaims::claim_batch(const std::vector<int>& shards, int limit,
                                                const std::vector<std::int64_t>& exclude_ids) {
  std::vector<OutboxEvent> events;
  if (shards.empty() || limit <= 0) {
    return events;
  }
  pqxx::nontransaction tx(conn_);
  cursor_.follow(tx, table_, shards);
  cursor_.remember_before_claim();
  std::vector<std::uint64_t> xids(static_cast<std::size_t>(shard_count_), 0);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(shard_count_), 0);
  for (const auto& [shard, pos] : cursor_.positions()) {
    xids.at(static_cast<std::size_t>(shard)) = pos.xid;
    ids.at(static_cast<std::size_t>(shard)) = pos.id;
  }
  const LogPosition low = cursor_.lowest();
  const OwedProgress::Owed owed =
      owed_ != nullptr ? owed_->take_if_older(ride_after_) : OwedProgress::Owed{};
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t copies = cursor_.retry_copies();
  const bool full = !cursor_.retry_known_empty(start);
  const std::string shard_list = pg_int_array(shards);
  const std::string low_xid = std::to_string(low.xid);
  const std::string xid_list = pg_int_array(xids);
  const std::string id_list = pg_int_array(ids);
  pqxx::result rows;
  if (full && owed.empty()) {
    rows = tx.exec_prepared(full_statement_, shard_list, limit, pg_int_array(exclude_ids), low_xid,
                            low.id, xid_list, id_list);
  } else if (full) {
    rows = tx.exec_prepared(full_storing_statement_, shard_list, limit, pg_int_array(exclude_ids),
                            low_xid, low.id, xid_list, id_list, std::to_string(owed.end.xid),
                            owed.end.id, pg_int_array(owed.shards));
  } else if (owed.empty()) {
    rows = tx.exec_prepared(log_only_statement_, shard_list, limit, low_xid, low.id, xid_list,
                            id_list);
  } else {
    rows = tx.exec_prepared(log_only_storing_statement_, shard_list, limit, low_xid, low.id,
                            xid_list, id_list, std::to_string(owed.end.xid), owed.end.id,
                            pg_int_array(owed.shards));
  }
  std::size_t heads = 0;
  bool retry_pending = false;
  behind_watermark_ = false;
  for (const auto& r : rows) {
    if (r[0].is_null()) {
      const bool retry_marker = r[8].as<int>() == -1;
      retry_pending = retry_pending || retry_marker;
      behind_watermark_ = behind_watermark_ || !retry_marker;
      continue;
    }
    heads += r[10].as<bool>() ? 1 : 0;
  }
  if (full && !retry_pending) {
    cursor_.retry_found_empty(copies, start);
  }
  // Every due head, and log rows up to the limit: those past it stay after the cursor.
  const std::size_t log_room =
      static_cast<std::size_t>(limit) - std::min<std::size_t>(heads, limit);
  std::size_t log_kept = 0;
  events.reserve(std::min(rows.size(), static_cast<std::size_t>(limit)));
  LogPosition end{};
  for (const auto& r : rows) {
    if (r[0].is_null()) {
      continue;  // a marker
    }
    const bool parked = r[10].as<bool>();
    if (!parked && log_kept++ == log_room) {
      break;  // log rows come in order: the rest stay after the cursor too
    }
    OutboxEvent e = read_event(r, payload_hex_);
    e.xid = r[9].as<std::uint64_t>();
    e.parked = parked;
    e.held = r[11].as<bool>();
    if (!parked) {
      end = {e.xid, e.id};
    }
    events.push_back(std::move(e));
  }
  if (events.size() > heads) {
    cursor_.advance(end);
  }
  return events;
}

LogStore::LogStore(pqxx::connection& conn, TableName table, const TableInfo& info,
                   LogCursor& cursor, const ClaimOptions& options, ProgressDeferral deferral)
    : conn_(conn),
      table_(std::move(table)),
      partition_xids_(info.partition_xids),
      position_offset_(info.position_offset),
      cursor_(cursor),
      deferral_(deferral),
      claims_(conn, table_, info.shard_count, info.position_offset, cursor, options,
              deferral.below_events > 0 ? &owed_ : nullptr, deferral.ride_after) {
  const std::string retry = table_.quoted_with_suffix("_retry");
  const std::string status = "CASE WHEN v.verdict = " + std::to_string(kFailedForGood) + " THEN " +
                             kFailed + " ELSE " + kPending + " END";
  const std::string next_try = "now() + v.delay_ms * interval '1 millisecond'";
  // copied: failures and parked events of the log, whole (their partition may go);
  // sent / retried: events that came from _retry; then every shard of the batch
  // moves past it. One statement: all of it or nothing, on the lock session.
  write_back_sql_ =
      "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::xid8[], $3::int[], $4::int[], "
      "$5::bigint[], $6::text[]) AS v(id, xid, parked, verdict, delay_ms, error)), "
      "copied AS (INSERT INTO " +
      retry +
      " (id, xid, event_id, biz_type, biz_id, payload, created_at, shard, status, retry_count, "
      "next_retry_time, last_error" +
      std::string(options.headers ? ", headers" : "") +
      ") SELECT e.id, e.xid, e.event_id, e.biz_type, e.biz_id, e.payload, e.created_at, e.shard, " +
      status + ", CASE WHEN v.verdict = " + std::to_string(kPark) + " THEN 0 ELSE 1 END, " +
      next_try + ", NULLIF(v.error, '')" + (options.headers ? ", e.headers" : "") +
      " FROM v JOIN " + table_.quoted() +
      " e ON e.xid = v.xid AND e.id = v.id WHERE v.parked = 0 ON CONFLICT (id) DO NOTHING), "
      "sent AS (DELETE FROM " +
      retry + " r USING v WHERE v.parked = 1 AND v.verdict = " + std::to_string(kDelivered) +
      " AND r.id = v.id), retried AS (UPDATE " + retry +
      " r SET retry_count = r.retry_count + 1, status = " + status +
      ", next_retry_time = " + next_try +
      ", last_error = v.error, updated_at = now() FROM v WHERE v.parked = 1 AND v.verdict IN (" +
      std::to_string(kRetry) + ", " + std::to_string(kFailedForGood) +
      ") AND r.id = v.id AND r.status = " + kPending + ") UPDATE " +
      table_.quoted_with_suffix("_progress") +
      " p SET xid = $7::xid8, id = $8, updated_at = now() WHERE p.shard = ANY($9::int[]) AND "
      "(p.xid, p.id) < ($7::xid8, $8::bigint)";
  write_back_statement_ = prepared(conn_, write_back_sql_);
}

void LogStore::write_back(const std::vector<OutboxEvent>& batch,
                          const std::vector<std::int64_t>& delivered,
                          const std::vector<RetryDecision>& decisions, bool /*delete_on_sent*/) {
  const std::unordered_set<std::int64_t> ok(delivered.begin(), delivered.end());
  std::unordered_map<std::int64_t, const RetryDecision*> decided;
  for (const auto& d : decisions) {
    decided[d.id] = &d;
  }
  std::vector<std::int64_t> ids, delays;
  std::vector<std::uint64_t> xids;
  std::vector<int> parked, verdicts;
  std::vector<std::string> errors;
  std::vector<int> shards;
  LogPosition end{};
  for (const OutboxEvent& e : batch) {
    const auto d = decided.find(e.id);
    const int verdict = ok.count(e.id) != 0  ? kDelivered
                        : d == decided.end() ? kPark
                        : d->second->failed  ? kFailedForGood
                                             : kRetry;
    if (!e.parked) {
      shards.push_back(e.shard);
      end = std::max(end, LogPosition{e.xid, e.id});
    }
    if ((!e.parked && verdict == kDelivered) || (e.parked && verdict == kPark)) {
      continue;  // nothing to record: read past, or still waiting in _retry
    }
    ids.push_back(e.id);
    xids.push_back(e.xid);
    parked.push_back(e.parked ? 1 : 0);
    verdicts.push_back(verdict);
    delays.push_back(d == decided.end() ? 0 : d->second->delay.count());
    errors.push_back(d == decided.end() ? "" : d->second->error.substr(0, 2000));
  }
  if (ids.empty() && shards.empty()) {
    return;
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  if (ids.empty() && owed_.events() + batch.size() < deferral_.below_events) {
    owed_.add(end, shards, batch.size());  // only progress: it rides on the next statement
    return;
  }
  // What earlier write-backs left for later goes with this one: every shard it names was
  // read and settled up to its end, and this batch's end is later.
  if (const OwedProgress::Owed owed = owed_.take(); !owed.empty()) {
    end = std::max(end, owed.end);
    shards.insert(shards.end(), owed.shards.begin(), owed.shards.end());
    std::sort(shards.begin(), shards.end());
    shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  }
  if (!ids.empty()) {
    cursor_.copying_into_retry();  // before the statement: see LogCursor::retry_copies
  }
  store_progress(ids, xids, parked, verdicts, delays, errors, end, shards);
}

void LogStore::store_progress(const std::vector<std::int64_t>& ids,
                              const std::vector<std::uint64_t>& xids,
                              const std::vector<int>& parked, const std::vector<int>& verdicts,
                              const std::vector<std::int64_t>& delays,
                              const std::vector<std::string>& errors, LogPosition end,
                              const std::vector<int>& shards) {
  pqxx::nontransaction tx(conn_);
  tx.exec_prepared(write_back_statement_, pg_int_array(ids), pg_int_array(xids),
                   pg_int_array(parked), pg_int_array(verdicts), pg_int_array(delays),
                   pg_text_array(errors), std::to_string(end.xid), end.id, pg_int_array(shards));
}

void LogStore::unclaim(const std::vector<OutboxEvent>& batch) {
  if (std::any_of(batch.begin(), batch.end(), [](const OutboxEvent& e) { return !e.parked; })) {
    cursor_.undo_last_claim();
  }
}

void LogStore::flush() {
  if (const OwedProgress::Owed owed = owed_.take(); !owed.empty()) {
    store_progress({}, {}, {}, {}, {}, {}, owed.end, owed.shards);
  }
}

void LogStore::maintain(const std::vector<int>& owned) {
  owed_.take();  // the positions below are at least as far: nothing is in flight
  {
    pqxx::work tx(conn_);
    ensure_log_partitions(tx, table_, partition_xids_, position_offset_);
    tx.commit();
  }
  // Shards without events move on too, so that a replica taking one over does not
  // read from far back. Only called with nothing in flight: every position is
  // written back.
  std::vector<int> shards;
  std::vector<std::uint64_t> xids;
  std::vector<std::int64_t> ids;
  const std::unordered_set<int> mine(owned.begin(), owned.end());
  for (const auto& [shard, pos] : cursor_.positions()) {
    if (mine.count(shard) != 0) {
      shards.push_back(shard);
      xids.push_back(pos.xid);
      ids.push_back(pos.id);
    }
  }
  if (shards.empty()) {
    return;
  }
  pqxx::nontransaction tx(conn_);
  tx.exec_params("UPDATE " + table_.quoted_with_suffix("_progress") +
                     " p SET xid = v.xid, id = v.id, updated_at = now() FROM unnest($1::int[], "
                     "$2::xid8[], $3::bigint[]) AS v(shard, xid, id) WHERE p.shard = v.shard AND "
                     "(p.xid, p.id) < (v.xid, v.id)",
                 pg_int_array(shards), pg_int_array(xids), pg_int_array(ids));
}

Backlog LogStore::backlog(std::chrono::seconds stuck_after) {
  pqxx::nontransaction tx(conn_);
  const std::string progress = table_.quoted_with_suffix("_progress");
  const std::string stuck = "created_at < now() - $1 * interval '1 second'";
  // Unread log rows (from the lowest progress on, through the primary key), plus
  // the failures and parked events waiting in _retry; one round trip.
  auto r = tx.exec_params(
      "WITH l AS (SELECT count(*) AS n, count(*) FILTER (WHERE e." + stuck +
          ") AS stuck, min(e.created_at) AS oldest FROM " + table_.quoted() + " e JOIN " +
          progress + " p ON p.shard = e.shard WHERE e.xid >= (SELECT min(xid) FROM " + progress +
          ") AND (e.xid, e.id) > (p.xid, p.id)), r AS (SELECT count(*) FILTER (WHERE status = " +
          kPending + ") AS n, count(*) FILTER (WHERE status = " + kFailed +
          ") AS failed, count(*) FILTER (WHERE status = " + kPending + " AND " + stuck +
          ") AS stuck, min(created_at) FILTER (WHERE status = " + kPending + ") AS oldest FROM " +
          table_.quoted_with_suffix("_retry") +
          ") SELECT l.n + r.n, r.failed, l.stuck + r.stuck, COALESCE(EXTRACT(EPOCH FROM now() - "
          "least(l.oldest, r.oldest)), 0) FROM l, r",
      static_cast<std::int64_t>(stuck_after.count()));
  Backlog b;
  b.pending = r[0][0].as<std::int64_t>();
  b.failed = r[0][1].as<std::int64_t>();
  b.stuck = r[0][2].as<std::int64_t>();
  b.oldest_pending_seconds = r[0][3].as<double>();
  return b;
}

std::unique_ptr<EventStore> open_store(pqxx::connection& conn, const TableName& table,
                                       const TableInfo& info, LogCursor& cursor, bool per_key_order,
                                       ProgressDeferral deferral) {
  const ClaimOptions options{info.headers, per_key_order, info.payload == PayloadType::kBytes};
  if (info.mode == TableMode::kLog) {
    return std::make_unique<LogStore>(conn, table, info, cursor, options, deferral);
  }
  return std::make_unique<OutboxStore>(conn, table, options);
}

std::unique_ptr<EventClaims> open_claims(pqxx::connection& conn, const TableName& table,
                                         const TableInfo& info, LogCursor& cursor,
                                         bool per_key_order) {
  const ClaimOptions options{info.headers, per_key_order, info.payload == PayloadType::kBytes};
  if (info.mode == TableMode::kLog) {
    return std::make_unique<LogClaims>(conn, table, info.shard_count, info.position_offset, cursor,
                                       options);
  }
  return std::make_unique<ClaimQueries>(conn, table, options);
}

}  // namespace outbox
