#pragma once

#include <pqxx/pqxx>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
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

// The log-mode claim: due failures (and what is parked behind them) from
// <table>_retry, one per key, then the log after the cursor, only rows positioned below
// the oldest still running transaction (so a row that commits late is never skipped:
// it is not read before everything below it is final), in (position, id) order, which
// is commit order within a key. A log row whose key has an unresolved failure comes back
// held.
class LogClaims : public EventClaims {
 public:
  // Sets the session's planner to the claim's one plan (see log_store.cpp).
  LogClaims(pqxx::connection& conn, const TableName& table, int shard_count,
            std::int64_t position_offset, LogCursor& cursor, const ClaimOptions& options = {});
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
  bool behind_watermark_ = false;
};

// The log-mode store: a write-back changes no log row. It records failures and
// parks the events that must wait in <table>_retry (copies: retention may drop
// the log's partition) and moves each shard's progress, in one statement.
class LogStore : public EventStore {
 public:
  // `info`: the table as inspect_table found it (shards, partition size, position offset).
  LogStore(pqxx::connection& conn, TableName table, const TableInfo& info, LogCursor& cursor,
           const ClaimOptions& options = {});

  LogClaims& claims() override { return claims_; }
  void write_back(const std::vector<OutboxEvent>& batch, const std::vector<std::int64_t>& delivered,
                  const std::vector<RetryDecision>& decisions, bool delete_on_sent) override;
  void unclaim(const std::vector<OutboxEvent>& batch) override;
  void maintain(const std::vector<int>& owned) override;
  Backlog backlog(std::chrono::seconds stuck_after) override;
  TableHealth health() override { return table_health(conn_, table_, true); }

 private:
  pqxx::connection& conn_;
  TableName table_;
  std::int64_t partition_xids_;
  std::int64_t position_offset_;
  LogCursor& cursor_;
  LogClaims claims_;
  std::string write_back_sql_;
  std::string write_back_statement_;  // write_back_sql_'s prepared name
};

// The store and the claim for a table of either mode, as inspect_table found it
// (`cursor` serves log mode only; it must outlive both).
// `per_key_order` as ClaimOptions says; the headers column as `info` found it.
std::unique_ptr<EventStore> open_store(pqxx::connection& conn, const TableName& table,
                                       const TableInfo& info, LogCursor& cursor,
                                       bool per_key_order = true);
std::unique_ptr<EventClaims> open_claims(pqxx::connection& conn, const TableName& table,
                                         const TableInfo& info, LogCursor& cursor,
                                         bool per_key_order = true);

}  // namespace outbox
