// Log mode against a real PostgreSQL: rows that commit out of id order are never
// skipped (the transaction-id watermark), a long transaction holds reads back
// without losing anything, failures and the later events of their key wait in
// <table>_retry, progress moves per shard, partitions are made ahead and dropped
// only once every shard has passed them.
#include <gtest/gtest.h>

#include <atomic>
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
  explicit LogTable(std::int64_t partition_xids = 100'000)
      : dsn(testbed::postgres_dsn()), table(TableName::parse(testbed::unique_name("log"))) {
    pqxx::connection conn(dsn);
    migrate(conn, table, MigrateOptions{kShards, TableMode::kLog, partition_xids, std::nullopt});
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

// A version 3 log table (no headers) passes inspection, and migrate adds the column to
// the partitioned table and to _retry.
TEST(LogSchema, AVersion3TableNeedsNoHeadersAndMigrateAddsThem) {
  LogTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec(
      "ALTER TABLE " + t.table.quoted() + " DROP COLUMN headers; ALTER TABLE " +
      t.table.quoted_with_suffix("_retry") + " DROP COLUMN headers; UPDATE " +
      outbox_meta(t.table) + " SET version = 3 WHERE table_name = '" + t.table.table() + "'");
  EXPECT_FALSE(inspect_table(conn, t.table).headers);
  MigrationResult r =
      migrate(conn, t.table, MigrateOptions{kShards, TableMode::kLog, 100'000, std::nullopt});
  ASSERT_EQ(r.applied.size(), 1u);
  EXPECT_NE(r.applied[0].find("v4"), std::string::npos);
  EXPECT_TRUE(inspect_table(conn, t.table).headers);
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
    EXPECT_FALSE(ensure_log_partitions(tx, t.table, 1000).empty()) << "the next one ahead";
    tx.commit();
  }
  t.insert_committed("k", 2);
  PartitionCleanup before = drop_passed_partitions(conn, t.table, std::chrono::seconds(0));
  EXPECT_TRUE(before.dropped.empty()) << "no shard has read anything yet";
  EXPECT_NE(before.held_back.find("not passed"), std::string::npos) << before.held_back;
  Reader reader(t);
  EXPECT_EQ(reader.drain(2).size(), 2u);
  reader.store->maintain(all_shards());  // idle shards move on too
  PartitionCleanup after = drop_passed_partitions(conn, t.table, std::chrono::seconds(0));
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
