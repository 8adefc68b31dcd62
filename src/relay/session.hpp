#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include <pqxx/pqxx>

#include "outbox/log_store.hpp"
#include "outbox/schema.hpp"
#include "outbox/shards.hpp"
#include "outbox/store.hpp"
#include "outbox/table.hpp"

namespace outbox::relay {

// What lives for one database session of the relay: the lock session (shard and
// member locks, every write to the outbox, and the claims that no write-back
// overlaps) and the claim session (the other claims, so that a claim can overlap
// the write-back on the lock session, and the wake-up path: the listener and the
// <table>_waiting entry, which the relay's thread can then use whatever the
// write-back's thread is doing).
//
// Guarantees: constructed means connected, the table checked, listening for the
// insert trigger's NOTIFY and counted as a member; destroyed means both sessions
// closed, and so every advisory lock released.
// Caveats: a batch in flight when the session ends can no longer be written back:
// its events stay pending and are published again (at least once).
class Session {
 public:
  // Connects both sessions, checks the table, clears the waiting entries a killed
  // relay left, then joins the replicas. Throws pqxx::broken_connection,
  // SchemaError (no table, missing columns, a table other than `expected` says)
  // or pqxx::sql_error. `table` may be an adopted table: the
  // session then works on its copy, <table>_relay.
  // `per_key_order`: see ClaimOptions. `deferral`: see LogStore (the relay passes its batch
  // size, and flushes the store before it hands shards over).
  Session(const std::string& dsn, const TableName& table, const TableExpectations& expected = {},
          bool per_key_order = true, ProgressDeferral deferral = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int shard_count() const { return info_.shard_count; }
  // The rebase this session ran, having found a log-mode table on another PostgreSQL cluster.
  const std::optional<RebaseResult>& rebased() const { return info_.rebased; }
  // The last move of the table that a rebase recorded (this session's or an earlier one's).
  const std::optional<RecordedMove>& last_move() const { return info_.last_move; }
  // How the sessions' server was verified: tls_verification() of this connection.
  const std::string& tls() const { return tls_; }
  ShardOwnership& shards() { return shards_; }
  // The lock session's statements: a write-back that succeeds proves the shards
  // were still owned, since the locks die with this session.
  EventStore& store() { return *store_; }
  // The claim session: its type offers the claim and nothing else.
  EventClaims& claim_session() { return *claims_; }

  // NOTIFYs received on the claim session so far, reading the ones that wait on its
  // socket first (no round trip).
  std::uint64_t notifications();
  // Adds or removes this relay's entry in <table>_waiting: the insert trigger
  // notifies only while some entry exists.
  void set_waiting(bool waiting) { waiting_.set(waiting); }
  // Sleeps until more than `seen` NOTIFYs have arrived, `limit` passes or `stop`
  // is requested; calls `beat` at least every 200 ms meanwhile.
  void wait_for_notify(std::stop_token stop, std::chrono::milliseconds limit, std::uint64_t seen,
                       const std::function<void()>& beat);

 private:
  // Counts the insert trigger's NOTIFYs. It listens for the whole session, so a
  // NOTIFY sent while a batch is in flight is not lost.
  class WakeUp : public pqxx::notification_receiver {
   public:
    WakeUp(pqxx::connection_base& c, const std::string& channel)
        : pqxx::notification_receiver(c, channel) {}
    void operator()(const std::string&, int) override { ++count; }
    std::uint64_t count = 0;
  };

  // Declared in the order of connecting; destroyed in reverse, the lock session last.
  pqxx::connection lock_conn_;
  std::string tls_;
  TableInfo info_;
  TableName table_;  // the table the relay reads
  ShardOwnership shards_;
  LogCursor cursor_;  // log mode: how far the claims have read, shared by both sessions
  std::unique_ptr<EventStore> store_;
  pqxx::connection claim_conn_;
  std::unique_ptr<EventClaims> claims_;
  WaitingList waiting_;
  WakeUp wake_;
};

}  // namespace outbox::relay
