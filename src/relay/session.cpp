#include "relay/session.hpp"

#include <algorithm>

#include "outbox/connection.hpp"

namespace outbox::relay {
namespace {

// Before anything else on the lock session: that it is a session of its own (behind a pooler
// in transaction mode the statements below would fail for reasons that name no cause), then
// how its server was verified (Session::tls()).
std::string first_checks(pqxx::connection& conn, const std::string& dsn) {
  require_own_session(conn, dsn);
  const bool ssl = pqxx::nontransaction(conn)
                       .exec(
                           "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = "
                           "pg_backend_pid()), false)")[0][0]
                       .as<bool>();
  return tls_verification(sslmode_of(dsn), ssl);
}

}  // namespace

Session::Session(const std::string& dsn, const TableName& table, const TableExpectations& expected,
                 bool per_key_order, ProgressDeferral deferral)
    : lock_conn_(dsn),
      tls_(first_checks(lock_conn_, dsn)),
      info_(inspect_table(lock_conn_, table, expected)),
      table_(info_.relay_table(table)),
      shards_(lock_conn_, table_, info_.shard_count),
      store_(open_store(lock_conn_, table_, info_, cursor_, per_key_order, deferral)),
      claim_conn_(dsn),
      claims_(open_claims(claim_conn_, table_, info_, cursor_, per_key_order)),
      waiting_(claim_conn_, table_),
      wake_(claim_conn_, table_.notify_channel()) {
  // The lock session's writes record what Kafka already has (marks, progress, failures): a
  // commit lost with a server crash only sends those events again. So they do not wait for
  // the WAL flush (the WAL writer flushes within wal_writer_delay), which takes the flush off
  // every write-back and lets a claim carry the owed progress (LogStore) without one.
  pqxx::nontransaction(lock_conn_).exec("SET synchronous_commit = off");
  // A killed relay leaves its entry in <table>_waiting, and every insert would
  // notify until someone clears it.
  waiting_.forget_dead();
  shards_.join();
}

std::uint64_t Session::notifications() {
  claim_conn_.get_notifs();
  return wake_.count;
}

void Session::wait_for_notify(std::stop_token stop, std::chrono::milliseconds limit,
                              std::uint64_t seen, const std::function<void()>& beat) {
  using Clock = std::chrono::steady_clock;
  claim_conn_.get_notifs();
  const auto until = Clock::now() + limit;
  while (!stop.stop_requested() && wake_.count == seen && Clock::now() < until) {
    auto slice = std::min<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()),
        std::chrono::milliseconds(200));
    claim_conn_.await_notification(0,
                                   static_cast<long>(std::max<long long>(slice.count(), 1) * 1000));
    beat();
  }
}

}  // namespace outbox::relay
