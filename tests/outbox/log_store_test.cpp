// Log mode against a real PostgreSQL: rows that commit out of id order are never
// skipped (the transaction-id watermark), a long transaction holds reads back
// without losing anything, failures and the later events of their key wait in
// <table>_retry, progress moves per shard, partitions are made ahead and dropped
// only once every shard has passed them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include "outbox/log_partitions.hpp"
#include "outbox/log_store.hpp"
#include "outbox/operations.hpp"
#include "outbox/retention.hpp"
#include "outbox/schema.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

constexpr int kShards = 4;

std::vector<int> all_shards() {
  return {0, 1, 2, 3};
}

struct LogTable {
  explicit LogTable(std::int64_t partition_xids = 100'000,
                    ClusterMovePolicy on_move = ClusterMovePolicy::kRebase)
      : dsn(testbed::postgres_dsn()), table(TableName::parse(testbed::unique_name("log"))) {
    pqxx::connection conn(dsn);
    migrate(conn, table,
            MigrateOptions{kShards, TableMode::kLog, partition_xids, std::nullopt, on_move});
  }
  void insert(pqxx::transaction_base& tx, const std::string& key, int seq) {
    enqueue(tx, table, "order", key, "{\"seq\": " + std::to_string(seq) + "}");
  }
  void insert_committed(const std::string& key, int seq) {
    pqxx::connection conn(dsn);
    pqxx::work tx(conn);
    insert(tx, key, seq);
    tx.commit();
  }
  std::string dsn;
  TableName table;
};

// A relay's view: its own connection, cursor and store.
struct Reader {
  explicit Reader(const LogTable& t, bool per_key_order = true)
      : conn(t.dsn),
        info(inspect_table(conn, t.table)),
        store(open_store(conn, t.table, info, cursor, per_key_order)) {}
  std::vector<OutboxEvent> claim(int limit = 100) {
    return store->claims().claim_batch(all_shards(), limit, {});
  }
  // Claims until at least `n` events come back: any transaction open on the server
  // (another test's) holds the watermark back for a while.
  std::vector<OutboxEvent> claim_at_least(std::size_t n, int limit = 100) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      auto batch = claim(limit);
      if (batch.size() >= n || std::chrono::steady_clock::now() > until) {
        return batch;
      }
      store->unclaim(batch);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Claims and writes everything back as delivered.
  std::vector<OutboxEvent> drain_once(int limit = 100) { return deliver(claim(limit)); }
  std::vector<OutboxEvent> drain(std::size_t n, int limit = 100) {
    return deliver(claim_at_least(n, limit));
  }
  std::vector<OutboxEvent> deliver(std::vector<OutboxEvent> batch) {
    std::vector<std::int64_t> ids;
    for (const auto& e : batch) {
      ids.push_back(e.id);
    }
    store->write_back(batch, ids, {}, false);
    return batch;
  }
  pqxx::connection conn;
  TableInfo info;
  LogCursor cursor;
  std::unique_ptr<EventStore> store;
};

// The events a new reader would skip: read past in _progress.
int events_read_past(pqxx::connection& conn, const LogTable& t) {
  return pqxx::nontransaction(conn)
      .exec("SELECT count(*) FROM " + t.table.quoted() + " e JOIN " +
            t.table.quoted_with_suffix("_progress") +
            " p ON p.shard = e.shard WHERE (e.xid, e.id) <= (p.xid, p.id)")[0][0]
      .as<int>();
}

TEST(LogSchema, MigrateMakesAPartitionedTableWithProgressRetryAndAStatusView) {
  LogTable t;
  pqxx::connection conn(t.dsn);
  TableInfo info = inspect_table(conn, t.table);
  EXPECT_EQ(info.mode, TableMode::kLog);
  EXPECT_EQ(info.shard_count, kShards);
  EXPECT_EQ(info.partition_xids, 100'000);
  pqxx::work tx(conn);
  auto parts = list_log_partitions(tx, t.table);
  ASSERT_EQ(parts.size(), 2u) << "the current partition and the next";
  EXPECT_EQ(parts[0].to, parts[1].from);
  EXPECT_EQ(parts[0].to - parts[0].from, 100'000u);
  EXPECT_EQ(
      tx.exec("SELECT count(*) FROM " + t.table.quoted_with_suffix("_progress"))[0][0].as<int>(),
      kShards);
  tx.abort();
  MigrationResult again =
      migrate(conn, t.table, MigrateOptions{kShards, std::nullopt, 100'000, std::nullopt});
  EXPECT_TRUE(again.applied.empty()) << "idempotent";
  try {
    migrate(conn, t.table, MigrateOptions{kShards, TableMode::kStatus, 100'000, std::nullopt});
    FAIL() << "a table's mode is fixed";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("log mode"), std::string::npos) << e.what();
  }
}

// A version 3 log table (no headers, rows positioned by their own transaction id) is
// refused until migrated: its order is not commit order. Migrate adds the headers column
// to the partitioned table and to _retry, and the position function.
TEST(LogSchema, AVersion3TableIsRefusedUntilMigrateAddsHeadersAndPositions) {
  LogTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec(
      "ALTER TABLE " + t.table.quoted() + " DROP COLUMN headers; ALTER TABLE " +
      t.table.quoted_with_suffix("_retry") + " DROP COLUMN headers; ALTER TABLE " +
      t.table.quoted() + " ALTER COLUMN xid SET DEFAULT pg_current_xact_id(); UPDATE " +
      outbox_meta(t.table) + " SET version = 3, cluster_id = NULL WHERE table_name = '" +
      t.table.table() + "'");
  try {
    inspect_table(conn, t.table);
    FAIL() << "a version 3 log table is not read";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("run `outbox-operator migrate`"), std::string::npos)
        << e.what();
  }
  MigrationResult r =
      migrate(conn, t.table, MigrateOptions{kShards, TableMode::kLog, 100'000, std::nullopt});
  ASSERT_EQ(r.applied.size(), 3u);
  EXPECT_NE(r.applied[0].find("v4"), std::string::npos);
  EXPECT_NE(r.applied[1].find("v5"), std::string::npos);
  EXPECT_NE(r.applied[2].find("v6"), std::string::npos);
  EXPECT_TRUE(inspect_table(conn, t.table).headers);
  // Rows inserted into a partition directly get a position too.
  const auto defaults = pqxx::nontransaction(conn).exec_params(
      "SELECT c.relname, pg_get_expr(d.adbin, d.adrelid) FROM pg_inherits i JOIN pg_class c ON "
      "c.oid = i.inhrelid JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'xid' JOIN "
      "pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum WHERE i.inhparent = "
      "to_regclass($1)",
      t.table.quoted());
  ASSERT_EQ(defaults.size(), 3u) << "two partitions and the default one";
  for (const auto& row : defaults) {
    EXPECT_NE(row[1].as<std::string>().find("_position()"), std::string::npos)
        << row[0].as<std::string>() << ": " << row[1].as<std::string>();
  }
  auto retry_has = pqxx::nontransaction(conn).exec_params(
      "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = "
      "$2 AND column_name = 'headers'",
      t.table.schema(), t.table.table() + "_retry");
  EXPECT_EQ(retry_has[0][0].as<int>(), 1);
}

TEST(LogClaims, ARowThatCommitsLateWithALowerIdIsReadAfterItCommitsNeverSkipped) {
  LogTable t;
  Reader reader(t);
  pqxx::connection early_conn(t.dsn);
  pqxx::work early(early_conn);
  t.insert(early, "a", 1);  // takes the lower id and the lower transaction id; not committed
  t.insert_committed("b", 2);
  EXPECT_TRUE(reader.drain_once().empty())
      << "b's transaction is newer than a running one: not read yet, so it cannot be read "
         "past a";
  early.commit();
  auto got = reader.drain(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].biz_id, "a");
  EXPECT_EQ(got[1].biz_id, "b");
  EXPECT_LT(got[0].id, got[1].id);
  EXPECT_TRUE(reader.drain_once().empty()) << "nothing twice";
}

// A key whose row writers update before inserting its event (the lock they serialise on),
// with v, the row's value after the update, as the event's "seq": seq is commit order.
struct LockedKey {
  explicit LockedKey(LogTable& t) : table(t), keys(t.table.quoted_with_suffix("_keys")) {
    pqxx::connection conn(t.dsn);
    pqxx::nontransaction(conn).exec("CREATE TABLE " + keys +
                                    " (k text PRIMARY KEY, v bigint NOT NULL); INSERT INTO " +
                                    keys + " VALUES ('k', 0)");
  }
  // Takes a transaction id without touching the key (a write to another row).
  void write_elsewhere(pqxx::transaction_base& tx, const std::string& row) {
    tx.exec("INSERT INTO " + keys + " VALUES ('" + row + "', 0)");
  }
  void bump_and_insert(pqxx::transaction_base& tx) {
    table.insert(
        tx, "k",
        tx.exec1("UPDATE " + keys + " SET v = v + 1 WHERE k = 'k' RETURNING v")[0].as<int>());
  }
  LogTable& table;
  std::string keys;
};

// Reads `n` events and expects them in commit order (seq 1, 2, ...).
void expect_commit_order(Reader& reader, std::size_t n) {
  const auto got = reader.drain(n);
  ASSERT_EQ(got.size(), n);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].payload, "{\"seq\": " + std::to_string(i + 1) + "}")
        << "event " << i << " out of commit order";
  }
}

// The pair that broke log mode's order before version 5: B gets its transaction id first
// (it writes another table), A then locks the key, inserts and commits, then B locks the
// key, inserts and commits. Commit order A, B; B's transaction id is the lower.
TEST(LogClaims, AKeysEventsComeInCommitOrderWhenTheLaterCommitterGotItsTransactionIdFirst) {
  LogTable t;
  LockedKey key(t);
  pqxx::connection conn_a(t.dsn);
  pqxx::connection conn_b(t.dsn);
  Reader reader(t);
  for (int pair = 0; pair < 5; ++pair) {
    pqxx::work b(conn_b);
    key.write_elsewhere(b, "other" + std::to_string(pair));
    {
      pqxx::work a(conn_a);
      key.bump_and_insert(a);
      a.commit();
    }
    key.bump_and_insert(b);
    b.commit();
  }
  expect_commit_order(reader, 10);
}

// The same pair under REPEATABLE READ, the key's lock an UPDATE of its row: B's snapshot
// (taken at its first statement) predates A's commit, so PostgreSQL refuses B's update and
// B runs again, as such writers must; its retry inserts after A's commit, and comes after.
TEST(LogClaims, UnderRepeatableReadAnUpdatedKeysEventsComeInCommitOrder) {
  LogTable t;
  LockedKey key(t);
  pqxx::connection conn_a(t.dsn);
  pqxx::connection conn_b(t.dsn);
  Reader reader(t);
  int retries = 0;
  for (int pair = 0; pair < 5; ++pair) {
    const std::string row = "rr" + std::to_string(pair);
    pqxx::work b(conn_b);
    b.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    key.write_elsewhere(b, row);
    {
      pqxx::work a(conn_a);
      key.bump_and_insert(a);
      a.commit();
    }
    try {
      key.bump_and_insert(b);
      b.commit();
    } catch (const pqxx::serialization_failure&) {
      b.abort();
      ++retries;
      pqxx::work again(conn_b);
      again.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
      key.write_elsewhere(again, row);
      key.bump_and_insert(again);
      again.commit();
    }
  }
  EXPECT_EQ(retries, 5) << "each B saw A's commit only after running again";
  expect_commit_order(reader, 10);
}

TEST(LogClaims, ALongTransactionHoldsReadsBackAndLosesNothing) {
  LogTable t;
  Reader reader(t);
  pqxx::connection long_conn(t.dsn);
  pqxx::work long_tx(long_conn);
  long_tx.exec("SELECT pg_current_xact_id()");  // holds an xid, writes no event
  for (int i = 0; i < 5; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  EXPECT_TRUE(reader.drain_once().empty()) << "the watermark waits for the long transaction";
  EXPECT_TRUE(reader.store->claims().rows_wait_for_older_transaction())
      << "the claim says committed events wait (their release sends no NOTIFY)";
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_GE(reader.store->health().oldest_transaction_seconds, 1.0)
      << "the reason is visible in the health signals";
  EXPECT_EQ(reader.store->backlog(std::chrono::seconds(3600)).pending, 5);
  long_tx.commit();
  EXPECT_EQ(reader.drain(5).size(), 5u);
  EXPECT_EQ(reader.store->backlog(std::chrono::seconds(3600)).pending, 0);
  EXPECT_TRUE(reader.drain_once().empty());
  EXPECT_FALSE(reader.store->claims().rows_wait_for_older_transaction()) << "nothing left";
}

TEST(LogClaims, ConcurrentWritersCommittingOutOfOrderLoseAndRepeatNothing) {
  LogTable t;
  constexpr int kWriters = 6;
  constexpr int kPerWriter = 60;
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      pqxx::connection conn(t.dsn);
      std::mt19937 rng(static_cast<unsigned>(w));
      for (int i = 0; i < kPerWriter; ++i) {
        pqxx::work tx(conn);
        t.insert(tx, "w" + std::to_string(w), i);
        // Hold some transactions open while others commit: ids commit out of order.
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 15));
        tx.commit();
      }
    });
  }
  std::thread finisher([&] {
    for (auto& w : writers) {
      w.join();
    }
    done = true;
  });
  Reader reader(t);
  std::set<std::int64_t> seen;
  std::map<std::string, int> last_seq;
  int duplicates = 0, out_of_order = 0;
  auto take = [&] {
    for (const auto& e : reader.drain_once(7)) {
      duplicates += seen.insert(e.id).second ? 0 : 1;
      const int seq = std::stoi(e.payload.substr(e.payload.find(':') + 1));
      auto [it, first] = last_seq.try_emplace(e.biz_id, seq);
      if (!first) {
        out_of_order += seq < it->second ? 1 : 0;
        it->second = seq;
      }
    }
  };
  while (!done) {
    take();
  }
  finisher.join();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.size() < kWriters * kPerWriter && std::chrono::steady_clock::now() < until) {
    take();
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kWriters * kPerWriter)) << "none skipped";
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(out_of_order, 0) << "each writer's events in its commit order";
}

TEST(LogStore, AFailureWaitsInRetryHoldingItsKeyWhileOtherKeysFlow) {
  LogTable t;
  Reader reader(t);
  t.insert_committed("bad", 1);
  t.insert_committed("good", 2);
  auto first = reader.claim_at_least(2);
  ASSERT_EQ(first.size(), 2u);
  const OutboxEvent bad = first[0].biz_id == "bad" ? first[0] : first[1];
  const OutboxEvent good = first[0].biz_id == "bad" ? first[1] : first[0];
  reader.store->write_back(first, {good.id},
                           {{bad.id, false, std::chrono::milliseconds(300), "boom"}}, false);
  t.insert_committed("bad", 3);
  t.insert_committed("good", 4);
  auto second = reader.claim_at_least(2);
  ASSERT_EQ(second.size(), 2u) << "the failure is not due yet: only the log rows";
  for (const auto& e : second) {
    EXPECT_EQ(e.held, e.biz_id == "bad") << e.biz_id << ": only the failed key is held";
    EXPECT_FALSE(e.parked);
  }
  std::vector<std::int64_t> delivered;
  for (const auto& e : second) {
    if (!e.held) {
      delivered.push_back(e.id);
    }
  }
  reader.store->write_back(second, delivered, {}, false);  // the held one is parked
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto retry = reader.claim_at_least(1);
  ASSERT_EQ(retry.size(), 1u) << "one head per key";
  EXPECT_TRUE(retry[0].parked);
  EXPECT_EQ(retry[0].id, bad.id);
  EXPECT_EQ(retry[0].retry_count, 1);
  reader.store->write_back(retry, {bad.id}, {}, false);
  auto parked = reader.claim_at_least(1);
  ASSERT_EQ(parked.size(), 1u) << "then the event parked behind it";
  EXPECT_EQ(parked[0].payload.find("3") != std::string::npos, true) << parked[0].payload;
  reader.store->write_back(parked, {parked[0].id}, {}, false);
  EXPECT_TRUE(reader.claim().empty());
  pqxx::connection conn(t.dsn);
  EXPECT_EQ(pqxx::nontransaction(conn)
                .exec("SELECT count(*) FROM " + t.table.quoted_with_suffix("_status") +
                      " WHERE status = 1")[0][0]
                .as<int>(),
            4)
      << "the status view shows every event sent";
}

// Most claims leave _retry out while it is known to hold no pending row of the shards. A
// failure copied there by a write-back ends that at once: the next claim holds the key's later
// event behind it (if it read the log alone, that event would go before the retry). Rows put
// there by hand are found by the recheck within LogCursor::kRetryRecheck.
TEST(LogStore, AClaimLeavesRetryOutOnlyWhileItHoldsNoPendingRow) {
  LogTable t;
  Reader reader(t);
  t.insert_committed("k", 1);
  ASSERT_EQ(reader.drain(1).size(), 1u);
  EXPECT_TRUE(reader.cursor.retry_known_empty(std::chrono::steady_clock::now()))
      << "the full claim found no pending row in _retry";
  t.insert_committed("k", 2);
  auto second = reader.claim_at_least(1);
  ASSERT_EQ(second.size(), 1u);
  reader.store->write_back(second, {}, {{second[0].id, false, std::chrono::hours(1), "boom"}},
                           false);
  EXPECT_FALSE(reader.cursor.retry_known_empty(std::chrono::steady_clock::now()))
      << "a write-back that copied into _retry";
  t.insert_committed("k", 3);
  auto third = reader.claim_at_least(1);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_TRUE(third[0].held) << "the key's later event waits behind its retry";
  reader.store->write_back(third, {}, {}, false);  // parked behind the retry

  // A failed event requeued by hand, while the claims know _retry holds nothing pending.
  t.insert_committed("other", 4);
  auto fourth = reader.claim_at_least(1);
  ASSERT_EQ(fourth.size(), 1u);
  reader.store->write_back(fourth, {}, {{fourth[0].id, true, {}, "too large"}}, false);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("DELETE FROM " + t.table.quoted_with_suffix("_retry") +
                                  " WHERE biz_id = 'k'");
  EXPECT_TRUE(reader.claim().empty());
  ASSERT_TRUE(reader.cursor.retry_known_empty(std::chrono::steady_clock::now()));
  Selection failed;
  failed.event_ids = {fourth[0].event_id};
  ASSERT_EQ(requeue_failed(conn, t.table, failed, false).event_ids.size(), 1u);
  const auto requeued_at = std::chrono::steady_clock::now();
  auto again = reader.claim_at_least(1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, fourth[0].id);
  EXPECT_LT(std::chrono::steady_clock::now() - requeued_at,
            LogCursor::kRetryRecheck + std::chrono::seconds(2))
      << "the recheck finds it";
}

// spec.relay.ordering None: a failure waiting in _retry holds nothing back; the
// key's later events are read as free, and the retry goes alone when due.
TEST(LogStore, WithoutPerKeyOrderAFailureHoldsNothingBack) {
  LogTable t;
  Reader reader(t, false);
  t.insert_committed("bad", 1);
  auto first = reader.claim_at_least(1);
  ASSERT_EQ(first.size(), 1u);
  reader.store->write_back(first, {},
                           {{first[0].id, false, std::chrono::milliseconds(300), "boom"}}, false);
  t.insert_committed("bad", 2);
  auto second = reader.claim_at_least(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_FALSE(second[0].held) << "nothing holds the key";
  reader.deliver(second);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto retry = reader.claim_at_least(1);
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_TRUE(retry[0].parked);
  EXPECT_EQ(retry[0].id, first[0].id);
  reader.deliver(retry);
  EXPECT_TRUE(reader.claim().empty());
}

TEST(LogStore, AFailedEventStopsHoldingItsKeyAndStaysInRetry) {
  LogTable t;
  Reader reader(t);
  t.insert_committed("k", 1);
  auto batch = reader.claim_at_least(1);
  ASSERT_EQ(batch.size(), 1u);
  reader.store->write_back(batch, {}, {{batch[0].id, true, {}, "poison"}}, false);
  t.insert_committed("k", 2);
  auto next = reader.claim_at_least(1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_FALSE(next[0].held) << "FAILED no longer blocks its key";
  Backlog b = reader.store->backlog(std::chrono::seconds(3600));
  EXPECT_EQ(b.failed, 1);
}

TEST(LogStore, AnUnsentClaimIsReadAgain) {
  LogTable t;
  Reader reader(t);
  t.insert_committed("k", 1);
  auto batch = reader.claim_at_least(1);
  ASSERT_EQ(batch.size(), 1u);
  reader.store->unclaim(batch);
  EXPECT_EQ(reader.claim().size(), 1u);
}

TEST(LogStore, ProgressIsStoredPerShardSoAnotherReaderStartsWhereTheFirstStopped) {
  LogTable t;
  for (int i = 0; i < 20; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  {
    Reader first(t);
    EXPECT_EQ(first.drain(12, 12).size(), 12u);
  }
  Reader second(t);
  EXPECT_EQ(second.drain(8).size(), 8u) << "the rest, nothing again";
}

// The relay's store (progress deferred below a batch's worth of events; here a claim may carry
// it at once): a write-back that only moves progress costs no statement; the next claim on the
// session stores it, and so does the
// next write-back that writes anything, or flush(). A reader that starts meanwhile reads the
// owed events again (at least once), never fewer.
TEST(LogStore, ProgressAloneRidesOnTheNextClaimOrFlushAndIsBoundedInEvents) {
  LogTable t;
  pqxx::connection watch(t.dsn);
  auto stored = [&] { return events_read_past(watch, t); };
  Reader reader(t);
  reader.store = open_store(reader.conn, t.table, reader.info, reader.cursor, true,
                            ProgressDeferral{5, std::chrono::milliseconds(0)});
  for (int i = 0; i < 3; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  ASSERT_EQ(reader.drain(3).size(), 3u);
  EXPECT_EQ(stored(), 0) << "owed, not written";
  {
    Reader other(t);
    EXPECT_EQ(other.claim_at_least(3).size(), 3u) << "owed events are read again by another";
  }
  EXPECT_TRUE(reader.claim().empty());
  EXPECT_EQ(stored(), 3) << "the claim stored what was owed";

  t.insert_committed("k3", 3);
  ASSERT_EQ(reader.drain(1).size(), 1u);
  EXPECT_EQ(stored(), 3);
  reader.store->flush();
  EXPECT_EQ(stored(), 4) << "flush stores what is owed";

  for (int i = 4; i < 10; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  // Two batches claimed before either is written back, as the relay's pipeline does.
  auto first = reader.claim_at_least(2, 2);
  auto second = reader.claim_at_least(4, 4);
  ASSERT_EQ(first.size() + second.size(), 6u);
  reader.deliver(first);
  EXPECT_EQ(stored(), 4) << "2 owed, below the bound of 5";
  reader.deliver(second);
  EXPECT_EQ(stored(), 10) << "6 would be owed: written with this batch's write-back";
}

// A claim that stores owed progress is a write transaction; at low rates nearly every claim
// found some owed. So a claim carries it only once its oldest part is ride_after old: younger,
// it stays owed (the claim only reads), and flush() still stores it.
TEST(LogStore, AClaimCarriesOwedProgressOnlyOnceItIsRideAfterOld) {
  LogTable t;
  pqxx::connection watch(t.dsn);
  auto stored = [&] { return events_read_past(watch, t); };
  Reader reader(t);
  reader.store = open_store(reader.conn, t.table, reader.info, reader.cursor, true,
                            ProgressDeferral{100, std::chrono::hours(1)});
  for (int i = 0; i < 3; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  ASSERT_EQ(reader.drain(3).size(), 3u);
  EXPECT_TRUE(reader.claim().empty());
  EXPECT_TRUE(reader.claim().empty());
  EXPECT_EQ(stored(), 0) << "claims before ride_after leave it owed";
  ASSERT_TRUE(reader.store->owed_times().has_value());
  reader.store->flush();
  EXPECT_EQ(stored(), 3) << "flush stores it whatever its age";
  EXPECT_FALSE(reader.store->owed_times().has_value());
}

TEST(OwedProgress, IsTakenForAClaimOnlyOnceItsOldestPartIsOldEnough) {
  using namespace std::chrono_literals;
  OwedProgress owed;
  const auto t0 = OwedProgress::Clock::time_point{} + 1h;
  owed.add(LogPosition{10, 1}, {2}, 1, t0);
  owed.add(LogPosition{12, 5}, {0, 2}, 2, t0 + 600ms);
  const auto times = owed.times();
  ASSERT_TRUE(times.has_value());
  EXPECT_EQ(times->oldest, t0);
  EXPECT_EQ(times->newest, t0 + 600ms);
  EXPECT_TRUE(owed.take_if_older(1s, t0 + 999ms).empty()) << "the oldest part is 999 ms old";
  EXPECT_EQ(owed.events(), 3u) << "still owed";
  const OwedProgress::Owed taken = owed.take_if_older(1s, t0 + 1s);
  EXPECT_EQ(taken.events, 3u);
  EXPECT_EQ(taken.end, (LogPosition{12, 5}));
  EXPECT_EQ(taken.shards, (std::vector<int>{0, 2}));
  EXPECT_FALSE(owed.times().has_value()) << "nothing is owed once taken";
}

// A table restored on another cluster: the identity recorded beside it differs. Under
// Refuse, every reader refuses it, naming the rebase; the rebase records this cluster.
TEST(LogMove, UnderRefuseATableRecordedForAnotherClusterIsRefusedUntilTheRebase) {
  LogTable t(100'000, ClusterMovePolicy::kRefuse);
  t.insert_committed("k", 1);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec_params(
      "UPDATE " + outbox_meta(t.table) + " SET cluster_id = '42' WHERE table_name = $1",
      t.table.table());
  try {
    inspect_table(conn, t.table);
    FAIL() << "a table from another cluster is refused";
  } catch (const DatabaseMoved& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("another PostgreSQL cluster (system identifier 42"), std::string::npos)
        << what;
    EXPECT_NE(what.find("migrate --table " + t.table.plain() + " --rebase"), std::string::npos)
        << what;
  }
  EXPECT_THROW(run_retention(conn, t.table, RetentionConfig{}), DatabaseMoved)
      << "cleanup drops nothing";
  const RebaseResult r = rebase(conn, t.table);
  EXPECT_EQ(r.recorded_cluster, "42");
  EXPECT_EQ(r.offset, 0) << "this cluster's ids are ahead of every position: no offset";
  EXPECT_NO_THROW(inspect_table(conn, t.table));
  Reader reader(t);
  EXPECT_EQ(reader.drain(1).size(), 1u) << "the unread event is read after the rebase";
}

// Progress restored ahead of this cluster's transaction ids (a dump of a busier cluster),
// under Refuse: inserts fail rather than count as sent, readers refuse, and after the rebase
// new rows sort after everything restored: read once, and nothing read before comes again.
TEST(LogMove, UnderRefuseProgressAheadOfThisClustersIdsFailsInsertsUntilTheRebaseAndLosesNothing) {
  LogTable t(100'000, ClusterMovePolicy::kRefuse);
  for (int i = 0; i < 3; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  {
    Reader before(t);
    ASSERT_EQ(before.drain(3).size(), 3u);
  }
  pqxx::connection conn(t.dsn);
  // As if the table had been relayed up to two million ids beyond this cluster's.
  pqxx::nontransaction(conn).exec(
      "UPDATE " + t.table.quoted_with_suffix("_progress") +
      " SET xid = (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 2000000)::text::xid8");
  try {
    t.insert_committed("lost?", 10);  // a new session, as after a move
    FAIL() << "an insert that would count as sent must fail";
  } catch (const pqxx::sql_error& e) {
    EXPECT_NE(std::string(e.what()).find("transaction ids are behind the table's progress"),
              std::string::npos)
        << e.what();
  }
  try {
    inspect_table(conn, t.table);
    FAIL() << "progress ahead of this cluster is refused";
  } catch (const DatabaseMoved& e) {
    EXPECT_NE(std::string(e.what()).find("is ahead of this database's transaction ids"),
              std::string::npos)
        << e.what();
  }
  const RebaseResult r = rebase(conn, t.table);
  EXPECT_GT(r.offset, 1'990'000) << "this cluster's ids lifted above the restored progress";
  EXPECT_EQ(rebase(conn, t.table).offset, r.offset) << "idempotent";
  t.insert_committed("new-a", 11);
  t.insert_committed("new-b", 12);
  Reader after(t);
  EXPECT_EQ(after.info.position_offset, r.offset);
  const auto got = after.drain(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].biz_id, "new-a");
  EXPECT_EQ(got[1].biz_id, "new-b");
  EXPECT_TRUE(after.drain_once().empty()) << "nothing restored is read again";
  // Partitions follow positions: the ones ahead of the offset exist after maintenance.
  after.store->maintain(all_shards());
  pqxx::work tx(conn);
  const auto parts = list_log_partitions(tx, t.table);
  ASSERT_FALSE(parts.empty());
  EXPECT_GT(parts.back().to, static_cast<std::uint64_t>(r.offset));
}

// Under the default policy, a reader that finds the table recorded for another cluster
// rebases it and reads on: the unread event is read, the move is recorded.
TEST(LogMove, ATableRecordedForAnotherClusterIsRebasedByTheFirstReader) {
  LogTable t;
  t.insert_committed("k", 1);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec_params(
      "UPDATE " + outbox_meta(t.table) + " SET cluster_id = '42' WHERE table_name = $1",
      t.table.table());
  Reader reader(t);
  ASSERT_TRUE(reader.info.rebased.has_value()) << "the reader rebased";
  EXPECT_EQ(reader.info.rebased->recorded_cluster, "42");
  EXPECT_TRUE(reader.info.rebased->moved());
  EXPECT_EQ(reader.drain(1).size(), 1u) << "the unread event is read";
  pqxx::work tx(conn);
  const RecordedMove move = recorded_move(tx, t.table);
  EXPECT_EQ(move.from, "42");
  EXPECT_EQ(move.to, reader.info.rebased->cluster);
  EXPECT_FALSE(move.at.empty());
  tx.commit();
  const TableInfo again = inspect_table(conn, t.table);
  EXPECT_FALSE(again.rebased.has_value()) << "once only";
  ASSERT_TRUE(again.last_move.has_value()) << "a later session sees the move recorded";
  EXPECT_EQ(again.last_move->from, "42");
  EXPECT_EQ(again.last_move->to, move.to);
  EXPECT_EQ(again.last_move->at.size(), std::string("2026-12-07T13:45:00Z").size())
      << again.last_move->at;
}

// Five events written to `t`, then its id sequence put back at its start, as a logical-
// replication cutover (which copies no sequence) leaves it. Returns the highest id in use.
long long five_events_and_a_restarted_sequence(LogTable& t, pqxx::transaction_base& tx) {
  for (int i = 0; i < 5; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  const auto highest = tx.exec1("SELECT max(id) FROM " + t.table.quoted())[0].as<long long>();
  tx.exec("SELECT setval(pg_get_serial_sequence(" + tx.quote(t.table.quoted()) +
          ", 'id'), 1, false)");
  return highest;
}

// Logical replication copies no sequence: on the new cluster the id sequence starts again at 1.
// The rebase moves it past every id an unread event, a progress row or a retry row holds, so
// the events inserted after it get ids above them (a failing one cannot collide with a
// <table>_retry row; the inserts that run the rebase too: the next test). A sequence already
// past them is left alone.
TEST(LogMove, ARebaseMovesARestartedIdSequencePastEveryIdStillInUse) {
  LogTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction tx(conn);
  const long long highest = five_events_and_a_restarted_sequence(t, tx);
  const std::string sequence = "pg_get_serial_sequence(" + tx.quote(t.table.quoted()) + ", 'id')";
  // What a reader finds after a logical-replication cutover: the table recorded for another
  // cluster, the sequence at its start.
  auto moved_from = [&](const std::string& cluster) {
    tx.exec_params("UPDATE " + outbox_meta(t.table) + " SET cluster_id = $2 WHERE table_name = $1",
                   t.table.table(), cluster);
    pqxx::connection reader(t.dsn);
    EXPECT_TRUE(inspect_table(reader, t.table).rebased.has_value()) << "the reader rebased";
  };
  const auto id_of = [&](const std::string& key) {
    return tx.exec_params1("SELECT id FROM " + t.table.quoted() + " WHERE biz_id = $1", key)[0]
        .as<long long>();
  };
  moved_from("42");
  t.insert_committed("after", 5);
  EXPECT_GT(id_of("after"), highest) << "the sequence started again below the ids in use";
  tx.exec("SELECT setval(" + sequence + ", 1000000)");
  moved_from("43");
  t.insert_committed("later", 6);
  EXPECT_EQ(id_of("later"), 1000001) << "a sequence past every id in use keeps its place";
}

// The inserts that notice the move themselves (no relay rebased first), eight new sessions at
// once after a logical-replication cutover: each row's id is drawn after the sequence moved
// past every id in use, the one inserting session that rebases and the ones waiting on it
// alike. (Column defaults run in column order and id comes before xid: an id drawn by the
// sequence's own default would be 1, 2, ..., below the ids of the restored rows.)
TEST(LogMove, TheInsertsThatRebaseDrawTheirIdsAfterTheSequenceMoved) {
  LogTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction tx(conn);
  const long long highest = five_events_and_a_restarted_sequence(t, tx);
  // The table, its functions included, as restored from cluster "42".
  tx.exec_params("UPDATE " + outbox_meta(t.table) + " SET cluster_id = '42' WHERE table_name = $1",
                 t.table.table());
  for (const auto& stmt : cluster_move_functions(t.table, 0, "42", ClusterMovePolicy::kRebase)) {
    tx.exec(stmt);
  }
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&t, i] { t.insert_committed("new-" + std::to_string(i), 10 + i); });
  }
  for (auto& w : writers) {
    w.join();
  }
  const auto r = tx.exec("SELECT biz_id, id FROM " + t.table.quoted() +
                         " WHERE biz_id LIKE 'new-%' ORDER BY biz_id");
  ASSERT_EQ(r.size(), 8u);
  for (const auto& row : r) {
    EXPECT_GT(row[1].as<long long>(), highest)
        << row[0].as<std::string>() << " drew an id the restored rows use";
  }
}

// A table made before ids were drawn after the move check gets it from migrate, once, and
// not at the cost of writers queued behind a long transaction.
TEST(LogMove, MigrateMakesAnOlderTableDrawItsIdsAfterTheMoveCheckWithoutWaitingLong) {
  LogTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec(
      "ALTER TABLE " + t.table.quoted() + " ALTER COLUMN id SET DEFAULT nextval(" +
      conn.quote(t.table.quoted_with_suffix("_id_seq")) + "::regclass)");
  const auto says = [](const MigrationResult& r) {
    return std::any_of(r.applied.begin(), r.applied.end(), [](const std::string& line) {
      return line.find("ids are drawn after the move check") != std::string::npos;
    });
  };
  const MigrateOptions options{kShards, TableMode::kLog, 100'000, std::nullopt, std::nullopt};
  {
    // A long transaction that read the table: the change waits for it 5 s at most, and
    // migrate carries on without it (writers never queue behind migrate for longer).
    pqxx::connection reader(t.dsn);
    pqxx::work open(reader);
    open.exec("SELECT count(*) FROM " + t.table.quoted());
    const MigrationResult waited = migrate(conn, t.table, options);
    EXPECT_FALSE(says(waited));
    EXPECT_TRUE(std::any_of(waited.applied.begin(), waited.applied.end(), [](const auto& line) {
      return line.find("not yet") != std::string::npos;
    }));
  }
  EXPECT_TRUE(says(migrate(conn, t.table, options)));
  EXPECT_FALSE(says(migrate(conn, t.table, options))) << "once";
  t.insert_committed("k", 1);
}

// Under the default policy, progress restored ahead of this cluster's ids: eight sessions'
// first inserts at once all commit (one rebases, the others wait for it and find it done),
// each new row sorts after everything restored, and nothing read before is read again.
TEST(LogMove, ProgressAheadOfThisClustersIdsIsRebasedByTheFirstInsertsAndNoneIsRefused) {
  LogTable t;
  for (int i = 0; i < 3; ++i) {
    t.insert_committed("k" + std::to_string(i), i);
  }
  {
    Reader before(t);
    ASSERT_EQ(before.drain(3).size(), 3u);
  }
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec(
      "UPDATE " + t.table.quoted_with_suffix("_progress") +
      " SET xid = (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 2000000)::text::xid8");
  std::vector<std::thread> writers;
  std::atomic<int> refused{0};
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&t, &refused, i] {
      try {
        t.insert_committed("new-" + std::to_string(i % 3), 10 + i);  // new sessions
      } catch (const std::exception& e) {
        ++refused;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& w : writers) {
    w.join();
  }
  EXPECT_EQ(refused.load(), 0);
  Reader after(t);
  EXPECT_FALSE(after.info.rebased.has_value()) << "the writers rebased already";
  EXPECT_GT(after.info.position_offset, 1'990'000) << "positions lifted above the progress";
  const auto got = after.drain(8);
  ASSERT_EQ(got.size(), 8u);
  for (const auto& e : got) {
    EXPECT_EQ(e.biz_id.rfind("new-", 0), 0u) << e.biz_id << " read again";
  }
  EXPECT_TRUE(after.drain_once().empty()) << "nothing restored is read again";
}

// A partitioned table has no statistics of its own: the health sums its partitions'.
TEST(LogHealth, TheTableStatisticsAreTheSumOfItsPartitions) {
  LogTable t;
  for (int i = 0; i < 20; ++i) {
    t.insert_committed("k" + std::to_string(i % 3), i);
  }
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("DELETE FROM " + t.table.quoted() + " WHERE id % 4 = 0");
  // Statistics reach the functions within about a second.
  const auto within_10s = [](const std::function<bool()>& done) {
    for (int i = 0; i < 100 && !done(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return done();
  };
  TableHealth h;
  EXPECT_TRUE(within_10s([&] {
    h = table_health(conn, t.table, true);
    return h.live_tuples == 15 && h.dead_tuples == 5;
  })) << h.live_tuples
      << " live, " << h.dead_tuples << " dead";
  EXPECT_FALSE(h.last_vacuum_unix);
  pqxx::nontransaction(conn).exec("VACUUM " + t.table.quoted());
  EXPECT_TRUE(
      within_10s([&] { return table_health(conn, t.table, true).last_vacuum_unix.has_value(); }));
}

TEST(LogPartitions, OnlyPartitionsEveryShardHasPassedAreDropped) {
  LogTable t(1000);
  pqxx::connection conn(t.dsn);
  t.insert_committed("k", 1);
  // Burn transaction ids until the next partition is current, then make the one after.
  pqxx::nontransaction(conn).exec("SET synchronous_commit = off");
  pqxx::nontransaction(conn).exec(
      "DO $$ BEGIN FOR i IN 1..1200 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$");
  {
    pqxx::work tx(conn);
    EXPECT_FALSE(ensure_log_partitions(tx, t.table, 1000, 0).empty()) << "the next one ahead";
    tx.commit();
  }
  t.insert_committed("k", 2);
  PartitionCleanup before = drop_passed_partitions(conn, t.table, std::chrono::seconds(0), 0);
  EXPECT_TRUE(before.dropped.empty()) << "no shard has read anything yet";
  EXPECT_NE(before.held_back.find("not passed"), std::string::npos) << before.held_back;
  Reader reader(t);
  EXPECT_EQ(reader.drain(2).size(), 2u);
  reader.store->maintain(all_shards());  // idle shards move on too
  PartitionCleanup after = drop_passed_partitions(conn, t.table, std::chrono::seconds(0), 0);
  ASSERT_FALSE(after.dropped.empty()) << after.held_back;
  pqxx::work tx(conn);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM " + t.table.quoted())[0][0].as<int>(), 1)
      << "the first event's partition is gone, the second's stays (current)";
}

TEST(LogOperations, RequeueReplayAndInspectWorkOnTheRetryTableAndTheStatusView) {
  LogTable t;
  Reader reader(t);
  t.insert_committed("poison", 1);
  t.insert_committed("fine", 2);
  auto batch = reader.claim_at_least(2);
  ASSERT_EQ(batch.size(), 2u);
  const OutboxEvent poison = batch[0].biz_id == "poison" ? batch[0] : batch[1];
  const OutboxEvent fine = batch[0].biz_id == "poison" ? batch[1] : batch[0];
  reader.store->write_back(batch, {fine.id}, {{poison.id, true, {}, "too large"}}, false);
  pqxx::connection conn(t.dsn);
  Inspection in = inspect(conn, t.table);
  EXPECT_EQ(in.failed, 1);
  EXPECT_EQ(in.sent, 1);
  ASSERT_EQ(in.last_errors.size(), 1u);
  EXPECT_EQ(in.last_errors[0].last_error, "too large");

  Selection failed;
  failed.event_ids = {poison.event_id};
  EXPECT_EQ(requeue_failed(conn, t.table, failed, true).event_ids.size(), 1u) << "dry run";
  EXPECT_EQ(requeue_failed(conn, t.table, failed, false).event_ids.size(), 1u);
  auto again = reader.claim_at_least(1);
  ASSERT_EQ(again.size(), 1u) << "the requeued event is due again";
  EXPECT_EQ(again[0].id, poison.id);
  EXPECT_EQ(again[0].retry_count, 0) << "a fresh attempt budget";
  reader.store->write_back(again, {poison.id}, {}, false);

  Selection sent;
  sent.event_ids = {fine.event_id};
  EXPECT_EQ(replay_sent(conn, t.table, sent, false).event_ids.size(), 1u);
  auto replayed = reader.claim_at_least(1);
  ASSERT_EQ(replayed.size(), 1u) << "a copy in _retry sends it again";
  EXPECT_EQ(replayed[0].event_id, fine.event_id);
}

TEST(LogOperations, CleanupDropsPassedPartitionsAndRefusesToArchive) {
  LogTable t(1000);
  pqxx::connection conn(t.dsn);
  RetentionConfig keep_nothing;
  keep_nothing.keep_sent = std::chrono::seconds(0);
  RetentionReport r = run_retention(conn, t.table, keep_nothing);
  EXPECT_TRUE(r.ran);
  EXPECT_TRUE(r.partitions_dropped.empty()) << "nothing passed yet";
  EXPECT_FALSE(r.held_back.empty());
  RetentionConfig archive = keep_nothing;
  archive.archive = TableName::parse(testbed::unique_name("archive"));
  EXPECT_THROW(run_retention(conn, t.table, archive), std::invalid_argument);
}

}  // namespace
}  // namespace outbox
