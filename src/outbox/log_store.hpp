#pragma once

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "outbox/table.hpp"

namespace outbox {

// A place in a log-mode table's read order: (position, id). The position is kept in the
// column "xid" (a transaction id; see schema.cpp, version_5).
struct LogPosition {
  std::uint64_t xid = 0;
  std::int64_t id = 0;
  auto operator<=>(const LogPosition&) const = default;
};

// How far one relay has read each shard it owns. Shared by the relay's two claim
// sessions (they never claim at the same time); positions can run ahead of
// <table>_progress by the batches not yet written back.
class LogCursor {
 public:
  // Loads the stored progress of owned shards it does not know yet and forgets the
  // shards no longer owned (another replica may move them on meanwhile).
  void follow(pqxx::transaction_base& tx, const TableName& table, const std::vector<int>& owned);
  LogPosition lowest() const;
  const std::map<int, LogPosition>& positions() const { return positions_; }
  // A claim read every owned shard up to `end`.
  void advance(LogPosition end);
  // Puts the positions back to before the last claim (its batch is not sent).
  void undo_last_claim() { positions_ = before_last_claim_; }
  void remember_before_claim() { before_last_claim_ = positions_; }
  // Forgets every position and what it knew of _retry: the next claim is a new reader's.
  void forget() {
    positions_.clear();
    before_last_claim_.clear();
    empty_until_ = {};
  }

  // Whether <table>_retry holds no pending row of the owned shards, as far as the claims know.
  // A claim leaves _retry out (and the check that holds a key behind one of its rows) only
  // while a full claim found none there, less than kRetryRecheck ago, and nothing was copied
  // into it since. The write-back (another thread) counts its copies before its statement
  // runs, so a claim that finds the count unchanged cannot have missed them; the settlement
  // being written is still held in memory then (the relay's held keys). Rows put there by hand
  // (requeue, replay) are seen by the next full claim, within kRetryRecheck.
  static constexpr std::chrono::milliseconds kRetryRecheck{1000};
  std::uint64_t retry_copies() const { return retry_copies_.load(); }
  void copying_into_retry() { retry_copies_.fetch_add(1); }
  // A full claim that began at `at`, when retry_copies() was `copies`, found no pending row.
  void retry_found_empty(std::uint64_t copies, std::chrono::steady_clock::time_point at) {
    empty_as_of_copies_ = copies;
    empty_until_ = at + kRetryRecheck;
  }
  bool retry_known_empty(std::chrono::steady_clock::time_point now) const {
    return empty_as_of_copies_ == retry_copies_.load() && now < empty_until_;
  }

 private:
  std::map<int, LogPosition> positions_;
  std::map<int, LogPosition> before_last_claim_;
  std::atomic<std::uint64_t> retry_copies_{0};
  std::uint64_t empty_as_of_copies_ = 0;
  std::chrono::steady_clock::time_point empty_until_{};  // the epoch: not known
};

// How long progress that only moves may wait (LogStore). `below_events`: a write-back that
// would only move progress is left for later while fewer events than that are owed (0: never
// left). `ride_after`: the lock session's claim carries what is owed once its oldest part is
// that old. A claim that stores is a write transaction (a transaction id, a commit record,
// WAL) and costs PostgreSQL several times a claim that only reads; at low rates nearly every
// claim found progress owed, so carrying it on each was most of the relay's database CPU.
struct ProgressDeferral {
  std::size_t below_events = 0;
  std::chrono::milliseconds ride_after{0};
};

// Progress a write-back left for later (ProgressDeferral). A batch Kafka took whole, with
// nothing to copy into <table>_retry, changes nothing but its shards' progress, and that write
// rides on a later claim or the next write-back on the lock session instead of costing a
// statement and a commit of its own: at low rates every batch is one event, and the write-back
// was half the relay's statements. Lost with the session or a crash, it only sends those events
// again; it is bounded in events (the store's limit) and in time (the relay stores it alone
// once events stop or it grows old: EventStore::owed_times).
// Shared by the write-back's thread and the relay's, which never use the lock session at once.
class OwedProgress {
 public:
  using Clock = std::chrono::steady_clock;
  struct Owed {
    LogPosition end;
    std::vector<int> shards;  // sorted, unique
    std::size_t events = 0;
    Clock::time_point oldest;  // when the first of it was left
    Clock::time_point newest;  // when the last of it was left
    bool empty() const { return shards.empty(); }
  };
  // Every shard of `shards` has been read and settled up to `end`, `events` more events.
  void add(LogPosition end, const std::vector<int>& shards, std::size_t events,
           Clock::time_point now = Clock::now());
  // What is owed, leaving nothing.
  Owed take();
  // What is owed if its oldest part was left at least `age` before `now`; else nothing, and
  // it stays owed.
  Owed take_if_older(std::chrono::milliseconds age, Clock::time_point now = Clock::now());
  std::size_t events() const;
  std::optional<EventStore::OwedTimes> times() const;

 private:
  mutable std::mutex mu_;
  Owed owed_;
};

// The log-mode claim: due failures (and what is parked behind them) from
// <table>_retry, one per key, then the log after the cursor, only rows positioned below
// the oldest still running transaction (so a row that commits late is never skipped:
// it is not read before everything below it is final), in (position, id) order, which
// is commit order within a key. A log row whose key has an unresolved failure comes back
// held.
class LogClaims : public EventClaims {
 public:
  // Sets the session's planner to the claim's one plan (see log_store.cpp).
  // `owed`: the lock session's claim also stores the progress its store left for later, once
  // its oldest part is `ride_after` old (ProgressDeferral).
  LogClaims(pqxx::connection& conn, const TableName& table, int shard_count,
            std::int64_t position_offset, LogCursor& cursor, const ClaimOptions& options = {},
            OwedProgress* owed = nullptr, std::chrono::milliseconds ride_after = {});
  std::vector<OutboxEvent> claim_batch(const std::vector<int>& shards, int limit,
                                       const std::vector<std::int64_t>& exclude_ids) override;
  bool rows_wait_for_older_transaction() const override { return behind_watermark_; }

 private:
  pqxx::connection& conn_;
  TableName table_;
  int shard_count_;
  LogCursor& cursor_;
  bool payload_hex_ = false;  // ClaimOptions::bytes
  // Prepared names: the full claim (due retries, the log, whether _retry holds pending rows)
  // and the log alone; each also after storing owed progress.
  std::string full_statement_;
  std::string log_only_statement_;
  OwedProgress* owed_;
  std::chrono::milliseconds ride_after_;
  std::string full_storing_statement_;
  std::string log_only_storing_statement_;
  bool behind_watermark_ = false;
};

// The log-mode store: a write-back changes no log row. It records failures and
// parks the events that must wait in <table>_retry (copies: retention may drop
// the log's partition) and moves each shard's progress, in one statement.
class LogStore : public EventStore {
 public:
  // `info`: the table as inspect_table found it (shards, partition size, position offset).
  // `deferral`: what progress that only moves may wait for (OwedProgress); the caller then
  // calls flush() before it hands shards over, and when owed_times() says it is due.
  LogStore(pqxx::connection& conn, TableName table, const TableInfo& info, LogCursor& cursor,
           const ClaimOptions& options = {}, ProgressDeferral deferral = {});

  LogClaims& claims() override { return claims_; }
  void write_back(const std::vector<OutboxEvent>& batch, const std::vector<std::int64_t>& delivered,
                  const std::vector<RetryDecision>& decisions, bool delete_on_sent) override;
  void unclaim(const std::vector<OutboxEvent>& batch) override;
  void maintain(const std::vector<int>& owned) override;
  void flush() override;
  std::optional<OwedTimes> owed_times() const override { return owed_.times(); }
  Backlog backlog(std::chrono::seconds stuck_after) override;
  TableHealth health() override { return table_health(conn_, table_, true); }

 private:
  pqxx::connection& conn_;
  TableName table_;
  std::int64_t partition_xids_;
  std::int64_t position_offset_;
  LogCursor& cursor_;
  ProgressDeferral deferral_;
  OwedProgress owed_;
  LogClaims claims_;
  // The write-back statement: copies and verdicts by event, then `shards` to `end`.
  void store_progress(const std::vector<std::int64_t>& ids, const std::vector<std::uint64_t>& xids,
                      const std::vector<int>& parked, const std::vector<int>& verdicts,
                      const std::vector<std::int64_t>& delays,
                      const std::vector<std::string>& errors, LogPosition end,
                      const std::vector<int>& shards);

  std::string write_back_sql_;
  std::string write_back_statement_;  // write_back_sql_'s prepared name
};

// The store and the claim for a table of either mode, as inspect_table found it
// (`cursor` serves log mode only; it must outlive both).
// `per_key_order` as ClaimOptions says; the headers column as `info` found it.
// `deferral`: see LogStore (status mode ignores it).
std::unique_ptr<EventStore> open_store(pqxx::connection& conn, const TableName& table,
                                       const TableInfo& info, LogCursor& cursor,
                                       bool per_key_order = true, ProgressDeferral deferral = {});
std::unique_ptr<EventClaims> open_claims(pqxx::connection& conn, const TableName& table,
                                         const TableInfo& info, LogCursor& cursor,
                                         bool per_key_order = true);

}  // namespace outbox
