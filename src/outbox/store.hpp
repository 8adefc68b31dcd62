#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outbox/table.hpp"

namespace outbox {

struct OutboxEvent {
  std::int64_t id = 0;
  std::string event_id;
  std::string biz_type;
  std::string biz_id;
  std::string payload;
  std::string created_at;  // RFC 3339, database clock
  std::string headers;     // the row's headers column as JSON text; empty when NULL
  int retry_count = 0;
  int shard = 0;
  // Log mode only: the inserting transaction's id; whether the event came from
  // <table>_retry (parked); whether its key has an unresolved failure there, so
  // that it must not be sent but parked behind it (held).
  std::uint64_t xid = 0;
  bool parked = false;
  bool held = false;
};

// What to do with one event after a failed delivery.
struct RetryDecision {
  std::int64_t id = 0;
  bool failed = false;                 // true: FAILED for good (poison or attempts used up)
  std::chrono::milliseconds delay{0};  // when !failed: wait this long before the next try
  std::string error;
};

struct Backlog {
  std::int64_t pending = 0;
  std::int64_t failed = 0;
  std::int64_t stuck = 0;             // pending and older than the stuck threshold
  double oldest_pending_seconds = 0;  // measured on the database clock
};

struct TableHealth {
  std::int64_t live_tuples = 0;
  std::int64_t dead_tuples = 0;
  double oldest_transaction_seconds = 0;  // the xmin horizon's age, database-wide
  // Unix time (database clock) of the last vacuum or autovacuum, and the time it was read;
  // none when not vacuumed since the statistics were reset.
  std::optional<double> last_vacuum_unix;
  double measured_unix = 0;
  std::optional<double> seconds_since_vacuum() const {
    return last_vacuum_unix ? std::optional(measured_unix - *last_vacuum_unix) : std::nullopt;
  }
};

// The claim, and nothing else. A claim only reads, so it may run on a session that
// holds no shard lock: the relay's claim session, whose claims overlap the
// write-back on the lock session. Every write stays with OutboxStore on the lock
// session; the caller must own the shards it names.
// The claim of either table mode: up to `limit` events of `shards` that are due,
// in the order they must be published, leaving out `exclude_ids` (a batch still
// in flight) and every event that would overtake an unresolved failure of its key.
class EventClaims {
 public:
  virtual ~EventClaims() = default;
  virtual std::vector<OutboxEvent> claim_batch(const std::vector<int>& shards, int limit,
                                               const std::vector<std::int64_t>& exclude_ids) = 0;
  // After a claim: committed events of the shards wait for an older transaction to
  // end (log mode's watermark). That end sends no NOTIFY; the caller looks again soon.
  virtual bool rows_wait_for_older_transaction() const { return false; }
};

// What the relay does with a table, whatever its mode. Every statement runs on the
// session that holds the shard locks (the fencing check), outside any transaction
// that would span a Kafka call.
class EventStore {
 public:
  virtual ~EventStore() = default;
  // The claim on this session.
  virtual EventClaims& claims() = 0;
  // Writes a settled batch back: `batch` is every event claimed for it (sent or
  // not), `delivered` the ids Kafka acknowledged, `decisions` the failures. An
  // event in neither stays due as it was (status mode: untouched; log mode:
  // parked behind its key's failure, or in line again).
  virtual void write_back(const std::vector<OutboxEvent>& batch,
                          const std::vector<std::int64_t>& delivered,
                          const std::vector<RetryDecision>& decisions, bool delete_on_sent) = 0;
  // A claimed batch that will not be sent at all (Kafka unreachable): its events
  // must come back in the next claims. Status mode: nothing to do.
  virtual void unclaim(const std::vector<OutboxEvent>& /*batch*/) {}
  // Between batches (nothing in flight): log mode records how far idle shards have
  // been read and makes partitions ahead. Status mode: nothing to do.
  virtual void maintain(const std::vector<int>& /*owned*/) {}
  // Stores what write-backs left for later (log mode's owed progress), before the caller
  // hands shards over or stops. Status mode: nothing to do.
  virtual void flush() {}
  // When the oldest and the newest of what flush() would store were left (none: nothing owed).
  // The relay stores it alone once events stop or it grows old, so that the status view and
  // other replicas lag no more.
  struct OwedTimes {
    std::chrono::steady_clock::time_point oldest;
    std::chrono::steady_clock::time_point newest;
  };
  virtual std::optional<OwedTimes> owed_times() const { return std::nullopt; }
  // Counts for the monitor (the backlog metrics): pending, failed, stuck past `stuck_after`.
  virtual Backlog backlog(std::chrono::seconds stuck_after) = 0;
  // Signals of a polling queue heading for trouble: dead tuples, the oldest open
  // transaction (in log mode it holds the reads back: latency, not loss), vacuum lag.
  virtual TableHealth health() = 0;
};

// How claims read a table, beside its name.
struct ClaimOptions {
  bool headers = true;  // the table has the headers column (version 4); else events carry none
  // false (spec.relay.ordering None): an event waiting for its retry holds back
  // nothing; later events of its key are claimed as if it were not there.
  bool per_key_order = true;
  bool bytes = false;  // a bytea payload: read hex-encoded, decoded to the bytes
};

// An event from a claim's first nine columns: id, event_id, biz_type, biz_id,
// payload, created_at (RFC 3339), headers, retry_count, shard (both modes select them so).
// `payload_hex`: column 4 is hex (a bytea payload's encode(payload, 'hex')).
OutboxEvent read_event(const pqxx::row& r, bool payload_hex = false);
// The SQL that selects a claim's payload column of alias `a` as text.
std::string payload_column(const std::string& a, bool bytes);

// The "<table>_waiting" entries of one session (the same in both modes).
class WaitingList {
 public:
  WaitingList(pqxx::connection& conn, const TableName& table);
  // Tells the insert trigger whether this session waits for a NOTIFY (schema v2: the
  // trigger notifies only while someone waits). One primary-key write: it sits on the
  // wake-up path.
  void set(bool waiting);
  // Drops the entries of sessions that no longer exist (a killed relay's), which would
  // otherwise make every insert notify.
  void forget_dead();

 private:
  pqxx::connection& conn_;
  std::string wait_sql_;
  std::string unwait_sql_;
  std::string forget_sql_;
};

// Table health from the statistics views; `partitioned` sums the partitions.
TableHealth table_health(pqxx::connection& conn, const TableName& table, bool partitioned);

// The status-mode claim, and nothing else.
class ClaimQueries : public EventClaims {
 public:
  ClaimQueries(pqxx::connection& conn, const TableName& table, const ClaimOptions& options = {});

  // Up to `limit` due pending events of `shards`, in id order, leaving out every
  // event whose key has an earlier pending event that already failed once, due
  // or not (per-key order: a retry is claimed alone for its key, and the key's
  // later events only after it is settled). `exclude_ids` holds the events of a
  // batch still in flight.
  std::vector<OutboxEvent> claim_batch(const std::vector<int>& shards, int limit,
                                       const std::vector<std::int64_t>& exclude_ids = {}) override;

 private:
  pqxx::connection& conn_;
  std::string claim_sql_;
  std::string claim_statement_;  // prepared; see use_fixed_plans
  bool payload_hex_ = false;     // ClaimOptions::bytes
};

// The SQL side of the relay: mark, reschedule, measure (and claim, for callers with
// a single session). All statements run outside explicit transactions (autocommit),
// so no transaction ever spans a Kafka call. Call it on the session that holds the
// shard locks: the locks die with that session, so a write-back that succeeds
// proves the shards were still owned (the fencing check). Its claim sets the session's
// planner up (use_fixed_plans), so the marks and measurements run under those settings
// too; none of them needs a sort or a scan of the table.
class OutboxStore : public EventStore {
 public:
  OutboxStore(pqxx::connection& conn, TableName table, const ClaimOptions& options = {});

  // The claim on this session (ClaimQueries::claim_batch).
  std::vector<OutboxEvent> claim_batch(const std::vector<int>& shards, int limit,
                                       const std::vector<std::int64_t>& exclude_ids = {}) {
    return claims_.claim_batch(shards, limit, exclude_ids);
  }
  ClaimQueries& claims() override { return claims_; }
  // mark_sent + record_failures.
  void write_back(const std::vector<OutboxEvent>& batch, const std::vector<std::int64_t>& delivered,
                  const std::vector<RetryDecision>& decisions, bool delete_on_sent) override;

  // Marks delivered events sent (or deletes them) in one statement. Returns rows changed.
  std::int64_t mark_sent(const std::vector<std::int64_t>& ids, bool delete_rows);

  // Records failed deliveries: retry_count + 1 with a backoff, or FAILED.
  void record_failures(const std::vector<RetryDecision>& decisions);

  Backlog backlog(std::chrono::seconds stuck_after) override;
  TableHealth health() override;

  const TableName& table() const { return table_; }

 private:
  pqxx::connection& conn_;
  TableName table_;
  ClaimQueries claims_;
  std::string mark_sql_;
  std::string delete_sql_;
};

// Writes one event inside the caller's transaction (the C++ enqueue helper).
// Returns the event_id. The caller commits: a rollback leaves no trace.
// `headers_json`: a JSON object of Kafka header names to values (a W3C
// traceparent, say), or empty for none.
std::string enqueue(pqxx::transaction_base& tx, const TableName& table, const std::string& biz_type,
                    const std::string& biz_id, const std::string& payload_json,
                    const std::string& headers_json = "");

// Renders a PostgreSQL array literal of strings ({"a","b\"c"}) for a ::text[]
// parameter; every element is quoted and escaped, so any text is safe.
std::string pg_text_array(const std::vector<std::string>& values);

// Renders a PostgreSQL array literal of integers ({1,2,3}) for a ::bigint[] parameter.
template <typename Int>
std::string pg_int_array(const std::vector<Int>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += std::to_string(values[i]);
  }
  out += '}';
  return out;
}

}  // namespace outbox
