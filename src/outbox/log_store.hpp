#pragma once

#include <pqxx/pqxx>

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

 private:
  std::map<int, LogPosition> positions_;
  std::map<int, LogPosition> before_last_claim_;
};

// Progress a write-back left for later (LogStore's `defer_progress_below`). A batch Kafka took
// whole, with nothing to copy into <table>_retry, changes nothing but its shards' progress, and
// that write rides on the next claim or write-back on the lock session instead of costing a
// statement and a commit of its own: at low rates every batch is one event, and the write-back
// was half the relay's statements. Lost with the session or a crash, it only sends those events
// again; it is bounded in events (the store's limit) and in time (the relay's idle maintain()).
// Shared by the write-back's thread and the relay's, which never use the lock session at once.
class OwedProgress {
 public:
  struct Owed {
    LogPosition end;
    std::vector<int> shards;  // sorted, unique
    std::size_t events = 0;
    std::chrono::steady_clock::time_point since;  // when the first of it was left
    bool empty() const { return shards.empty(); }
  };
  // Every shard of `shards` has been read and settled up to `end`, `events` more events.
  void add(LogPosition end, const std::vector<int>& shards, std::size_t events);
  // What is owed, leaving nothing.
  Owed take();
  std::size_t events() const;
  // When the oldest progress owed was left; none when nothing is owed.
  std::optional<std::chrono::steady_clock::time_point> since() const;

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
  // `owed`: the lock session's claim also stores the progress its store left for later.
  LogClaims(pqxx::connection& conn, const TableName& table, int shard_count,
            std::int64_t position_offset, LogCursor& cursor, const ClaimOptions& options = {},
            OwedProgress* owed = nullptr);
  std::vector<OutboxEvent> claim_batch(const std::vector<int>& shards, int limit,
                                       const std::vector<std::int64_t>& exclude_ids) override;
  bool rows_wait_for_older_transaction() const override { return behind_watermark_; }

 private:
  pqxx::connection& conn_;
  TableName table_;
  int shard_count_;
  LogCursor& cursor_;
  std::string claim_sql_;
  bool payload_hex_ = false;     // ClaimOptions::bytes
  std::string claim_statement_;  // claim_sql_'s prepared name
  OwedProgress* owed_;
  std::string claim_storing_statement_;  // the claim after storing owed progress (prepared)
  bool behind_watermark_ = false;
};

// The log-mode store: a write-back changes no log row. It records failures and
// parks the events that must wait in <table>_retry (copies: retention may drop
// the log's partition) and moves each shard's progress, in one statement.
class LogStore : public EventStore {
 public:
  // `info`: the table as inspect_table found it (shards, partition size, position offset).
  // `defer_progress_below` > 0: a write-back that would only move progress is left for
  // later (OwedProgress) while fewer events than that are owed; the caller then calls
  // flush() before it hands shards over, and maintain() when idle.
  LogStore(pqxx::connection& conn, TableName table, const TableInfo& info, LogCursor& cursor,
           const ClaimOptions& options = {}, std::size_t defer_progress_below = 0);

  LogClaims& claims() override { return claims_; }
  void write_back(const std::vector<OutboxEvent>& batch, const std::vector<std::int64_t>& delivered,
                  const std::vector<RetryDecision>& decisions, bool delete_on_sent) override;
  void unclaim(const std::vector<OutboxEvent>& batch) override;
  void maintain(const std::vector<int>& owned) override;
  void flush() override;
  std::optional<std::chrono::steady_clock::time_point> owed_since() const override {
    return owed_.since();
  }
  Backlog backlog(std::chrono::seconds stuck_after) override;
  TableHealth health() override { return table_health(conn_, table_, true); }

 private:
  pqxx::connection& conn_;
  TableName table_;
  std::int64_t partition_xids_;
  std::int64_t position_offset_;
  LogCursor& cursor_;
  std::size_t defer_progress_below_;
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
// `defer_progress_below`: see LogStore (status mode ignores it).
std::unique_ptr<EventStore> open_store(pqxx::connection& conn, const TableName& table,
                                       const TableInfo& info, LogCursor& cursor,
                                       bool per_key_order = true,
                                       std::size_t defer_progress_below = 0);
std::unique_ptr<EventClaims> open_claims(pqxx::connection& conn, const TableName& table,
                                         const TableInfo& info, LogCursor& cursor,
                                         bool per_key_order = true);

}  // namespace outbox
