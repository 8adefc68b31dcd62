#pragma once

#include <pqxx/pqxx>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/table.hpp"

namespace outbox {

// Thrown by require_own_session: the connection reaches PostgreSQL through a pooler in
// transaction (or statement) mode, where consecutive transactions of one client may run in
// different server sessions and several clients share one. Session advisory locks, and so shard
// ownership and its fencing, would not hold there, nor would LISTEN.
class PooledConnection : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Proves that `conn` is a session of its own: a session-level setting made in one transaction
// is seen by the next one with the same backend, and a second connection to `dsn` (opened and
// closed here) gets another backend and does not see it. A pooler in session mode passes; one
// in transaction mode fails at once, as it hands the idle server session to the next client.
// Throws PooledConnection naming the cause.
void require_own_session(pqxx::connection& conn, const std::string& dsn);

// Key-hash shard ownership shared by N relay replicas without an external lock
// service. Each replica holds session-level advisory locks: one "member slot" lock
// that makes it visible to the others, and one lock per shard it publishes. The
// locks die with the session, so a killed replica's shards become free as soon as
// PostgreSQL notices the closed connection, and no two sessions ever hold one shard.
//
// Guarantees: a shard is owned by at most one session at a time. Assumption: the
// caller publishes a shard only between rebalance() calls that keep it owned, on
// this same connection (so a write-back after the session died fails).
class ShardOwnership {
 public:
  ShardOwnership(pqxx::connection& conn, const TableName& table, int shard_count);

  // Takes a member slot, making this session count in everyone's fair share.
  void join();
  // One step toward this member's fair share: releases extras, takes free shards.
  // Returns true when the owned set changed.
  bool rebalance();
  // Takes every shard no live session holds, without joining (compensation job).
  void acquire_unowned();
  // Releases every shard and the member slot (clean shutdown).
  void release_all();

  const std::vector<int>& owned() const { return owned_; }
  int member_slot() const { return member_slot_; }
  int shard_count() const { return shard_count_; }
  // Live members seen at the last rebalance.
  int live_members() const { return live_members_; }

 private:
  std::vector<int> held_by_anyone(std::int64_t key1);
  bool try_lock(std::int64_t key1, int key2);
  void unlock(std::int64_t key1, int key2);

  pqxx::connection& conn_;
  int shard_count_;
  std::int64_t shard_key_ = 0;   // advisory lock key1 for shards of this table
  std::int64_t member_key_ = 0;  // advisory lock key1 for member slots of this table
  int member_slot_ = -1;
  int live_members_ = 0;
  std::vector<int> owned_;
};

}  // namespace outbox
