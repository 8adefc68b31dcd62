#include "outbox/shards.hpp"

#include <algorithm>
#include <chrono>

namespace outbox {
namespace {
constexpr int kMaxMembers = 1024;

struct SessionProbe {
  int pid;
  std::string marker;
};

// The backend's pid and the session-level marker setting, in a transaction of its own.
SessionProbe probe(pqxx::connection& conn, const std::string& set_marker = "") {
  pqxx::work tx(conn);
  const pqxx::row r =
      set_marker.empty()
          ? tx.exec1(
                "SELECT pg_backend_pid(), coalesce(current_setting('outbox.session_marker', "
                "true), '')")
          : tx.exec_params1(
                "SELECT pg_backend_pid(), set_config('outbox.session_marker', $1, "
                "false)",
                set_marker);
  tx.commit();
  return {r[0].as<int>(), r[1].as<std::string>()};
}

}  // namespace

void require_own_session(pqxx::connection& conn, const std::string& dsn) {
  // Appended, not `"m" + std::to_string(...)`: GCC 12 at -O3 warns falsely (-Wrestrict) there.
  std::string marker = "m";
  marker += std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const SessionProbe first = probe(conn, marker);
  SessionProbe other{};
  {
    pqxx::connection second(dsn);
    other = probe(second);
  }
  const SessionProbe again = probe(conn);
  std::string why;
  if (other.pid == first.pid || other.marker == marker) {
    why = "a second connection was given the same server session (backend pid " +
          std::to_string(first.pid) + ")";
  } else if (again.pid != first.pid || again.marker != marker) {
    why = "two transactions of one connection ran in different server sessions (backend pids " +
          std::to_string(first.pid) + " and " + std::to_string(again.pid) + ")";
  }
  if (!why.empty()) {
    throw PooledConnection(
        "the database connection goes through a pooler in transaction mode (" + why +
        "): the relay's session advisory locks (shard ownership and its fencing) and LISTEN "
        "need a session of their own. Connect to PostgreSQL directly, or through a pooler in "
        "session mode (PgBouncer pool_mode=session, a CloudNativePG Pooler with poolMode: "
        "session)");
  }
}

ShardOwnership::ShardOwnership(pqxx::connection& conn, const TableName& table, int shard_count)
    : conn_(conn), shard_count_(shard_count) {
  pqxx::nontransaction tx(conn_);
  // Positive int4 keys, so pg_locks.classid (an oid) compares without sign games.
  auto r = tx.exec_params(
      "SELECT hashtext('outbox-shard:' || $1) & 2147483647, "
      "hashtext('outbox-member:' || $1) & 2147483647",
      table.plain());
  shard_key_ = r[0][0].as<std::int64_t>();
  member_key_ = r[0][1].as<std::int64_t>();
}

bool ShardOwnership::try_lock(std::int64_t key1, int key2) {
  pqxx::nontransaction tx(conn_);
  return tx.exec_params("SELECT pg_try_advisory_lock($1::int, $2::int)", key1, key2)[0][0]
      .as<bool>();
}

void ShardOwnership::unlock(std::int64_t key1, int key2) {
  pqxx::nontransaction tx(conn_);
  tx.exec_params("SELECT pg_advisory_unlock($1::int, $2::int)", key1, key2);
}

std::vector<int> ShardOwnership::held_by_anyone(std::int64_t key1) {
  pqxx::nontransaction tx(conn_);
  auto rows = tx.exec_params(
      "SELECT objid::int FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
      "AND classid = $1::bigint::oid AND database = (SELECT oid FROM pg_database WHERE datname = "
      "current_database()) ORDER BY 1",
      key1);
  std::vector<int> out;
  for (const auto& r : rows) {
    out.push_back(r[0].as<int>());
  }
  return out;
}

void ShardOwnership::join() {
  for (int slot = 0; slot < kMaxMembers && member_slot_ < 0; ++slot) {
    if (try_lock(member_key_, slot)) {
      member_slot_ = slot;
    }
  }
  if (member_slot_ < 0) {
    throw std::runtime_error("no free relay member slot (more than 1024 replicas?)");
  }
}

bool ShardOwnership::rebalance() {
  std::vector<int> members = held_by_anyone(member_key_);
  live_members_ = static_cast<int>(members.size());
  auto me = std::find(members.begin(), members.end(), member_slot_);
  if (me == members.end()) {
    // Our session lost its slot: it must have been reset; the caller reconnects.
    throw std::runtime_error("relay member slot lost: the database session was reset");
  }
  const int rank = static_cast<int>(me - members.begin());
  const int n = live_members_;
  const int target = shard_count_ / n + (rank < shard_count_ % n ? 1 : 0);
  const std::vector<int> before = owned_;

  while (static_cast<int>(owned_.size()) > target) {
    unlock(shard_key_, owned_.back());
    owned_.pop_back();
  }
  if (static_cast<int>(owned_.size()) < target) {
    std::vector<int> taken = held_by_anyone(shard_key_);
    // Start from this member's own region of the shard space so that members
    // rarely race for the same free shard.
    const int start = rank * shard_count_ / n;
    for (int i = 0; i < shard_count_ && static_cast<int>(owned_.size()) < target; ++i) {
      int shard = (start + i) % shard_count_;
      if (std::binary_search(taken.begin(), taken.end(), shard)) {
        continue;
      }
      if (try_lock(shard_key_, shard)) {
        owned_.push_back(shard);
      }
    }
  }
  std::sort(owned_.begin(), owned_.end());
  return owned_ != before;
}

void ShardOwnership::acquire_unowned() {
  std::vector<int> taken = held_by_anyone(shard_key_);
  for (int shard = 0; shard < shard_count_; ++shard) {
    if (!std::binary_search(taken.begin(), taken.end(), shard) &&
        !std::binary_search(owned_.begin(), owned_.end(), shard) && try_lock(shard_key_, shard)) {
      owned_.push_back(shard);
      std::sort(owned_.begin(), owned_.end());
    }
  }
}

void ShardOwnership::release_all() {
  pqxx::nontransaction tx(conn_);
  // Only this session's locks: other relays on other sessions keep theirs.
  tx.exec("SELECT pg_advisory_unlock_all()");
  owned_.clear();
  member_slot_ = -1;
}

}  // namespace outbox
