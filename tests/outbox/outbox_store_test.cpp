// The SQL side against a real PostgreSQL: schema, claim, mark, retry bookkeeping,
// per-key head-of-line blocking and shard ownership.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "outbox/schema.hpp"
#include "outbox/shards.hpp"
#include "outbox/store.hpp"
#include "relay_fixture.hpp"
#include "support/at_once.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using testing::OutboxTestTable;

std::vector<int> all_shards(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    v[static_cast<std::size_t>(i)] = i;
  }
  return v;
}

TEST(Schema, MigrateIsIdempotentAndVersioned) {
  OutboxTestTable t;  // migrated once already
  pqxx::connection conn(t.dsn);
  MigrationResult again = migrate(conn, t.table, 16);
  EXPECT_EQ(again.from_version, kSchemaVersion);
  EXPECT_TRUE(again.applied.empty());
  TableInfo info = inspect_table(conn, t.table);
  EXPECT_EQ(info.shard_count, 16);
  EXPECT_EQ(info.version, kSchemaVersion);
}

// Two OutboxRelays on one database run their schema Jobs at once: their tables share the
// schema's outbox_meta, which neither finds on a fresh database. Eight migrations of eight
// tables in a new schema start together; every one must succeed and be recorded.
TEST(Schema, TablesOfOneSchemaMigratedAtOnceAllSucceed) {
  const std::string dsn = testbed::postgres_dsn();
  const std::string schema = testbed::unique_name("meta");
  pqxx::connection admin(dsn);
  pqxx::nontransaction(admin).exec("CREATE SCHEMA \"" + schema + "\"");
  constexpr int kTables = 8;
  const std::vector<std::string> errors =
      testbed::at_once_on_sessions(dsn, kTables, [&](pqxx::connection& session, int i) {
        migrate(session, TableName::parse(schema + ".t" + std::to_string(i)), 4);
      });
  for (int i = 0; i < kTables; ++i) {
    EXPECT_EQ(errors[i], "") << "migration of table t" << i;
  }
  EXPECT_EQ(pqxx::nontransaction(admin)
                .exec1("SELECT count(*) FROM \"" + schema + "\".outbox_meta")[0]
                .as<int>(),
            kTables);
  pqxx::nontransaction(admin).exec("DROP SCHEMA \"" + schema + "\" CASCADE");
}

// Counts NOTIFYs on a table's channel.
class NotifyCounter : public pqxx::notification_receiver {
 public:
  NotifyCounter(pqxx::connection& c, const TableName& t)
      : pqxx::notification_receiver(c, t.notify_channel()) {}
  void operator()(const std::string&, int) override { ++count; }
  int count = 0;
};

// Waits up to `limit` for notifications; returns how many arrived.
int notifications_within(pqxx::connection& listener, NotifyCounter& counter,
                         std::chrono::milliseconds limit) {
  counter.count = 0;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    listener.await_notification(0, 50'000);
  }
  return counter.count;
}

TEST(Schema, TheTriggerNotifiesOnlyWhileARelayWaits) {
  OutboxTestTable t;
  pqxx::connection listener(t.dsn);
  NotifyCounter counter(listener, t.table);
  pqxx::connection relay_session(t.dsn);
  WaitingList waiting(relay_session, t.table);

  t.insert(1, 1);
  EXPECT_EQ(notifications_within(listener, counter, std::chrono::milliseconds(300)), 0)
      << "nobody waits, so an insert must not notify (it would serialise commits)";
  waiting.set(true);
  t.insert(1, 1);
  EXPECT_EQ(notifications_within(listener, counter, std::chrono::milliseconds(2000)), 1);
  waiting.set(false);
  t.insert(1, 1);
  EXPECT_EQ(notifications_within(listener, counter, std::chrono::milliseconds(300)), 0);

  // A waiter that died (a killed relay) is dropped by the next relay to connect.
  {
    pqxx::connection doomed(t.dsn);
    WaitingList(doomed, t.table).set(true);
  }
  auto waiters = [&] {
    return pqxx::nontransaction(relay_session)
        .exec("SELECT count(*) FROM " + t.table.quoted_with_suffix("_waiting"))[0][0]
        .as<long long>();
  };
  EXPECT_EQ(waiters(), 1);
  // The closed session's backend exits a moment later; then the sweep drops it.
  EXPECT_TRUE(testing::eventually(
      [&] {
        waiting.forget_dead();
        return waiters() == 0;
      },
      std::chrono::seconds(5)));
}

TEST(Schema, MigrateUpgradesAVersion1Table) {
  OutboxTestTable t;
  pqxx::connection conn(t.dsn);
  {
    // Put the table back to what version 1 left: no waiting table, version 1.
    pqxx::work tx(conn);
    tx.exec("DROP TABLE " + t.table.quoted_with_suffix("_waiting"));
    tx.exec("ALTER TABLE " + t.table.quoted() + " DROP COLUMN headers");
    tx.exec_params(
        "UPDATE \"" + t.table.schema() + "\".outbox_meta SET version = 1 WHERE table_name = $1",
        t.table.table());
    tx.commit();
  }
  EXPECT_THROW(inspect_table(conn, t.table), SchemaError);
  MigrationResult r = migrate(conn, t.table, 16);
  EXPECT_EQ(r.from_version, 1);
  EXPECT_EQ(r.to_version, kSchemaVersion);
  ASSERT_EQ(r.applied.size(), 3u);
  EXPECT_NE(r.applied[0].find("v2"), std::string::npos);
  EXPECT_NE(r.applied[1].find("v3"), std::string::npos);
  EXPECT_NE(r.applied[2].find("v4"), std::string::npos);
  EXPECT_EQ(inspect_table(conn, t.table).version, kSchemaVersion);
  EXPECT_TRUE(inspect_table(conn, t.table).headers);
  EXPECT_EQ(inspect_table(conn, t.table).mode, TableMode::kStatus);
  WaitingList(conn, t.table).set(true);  // the waiting table is back
}

// The payload column's type is fixed at creation: asking again for another is refused,
// asking for the same (or nothing) is not.
TEST(Schema, AnotherPayloadTypeForAnExistingTableIsRefused) {
  OutboxTestTable t;  // jsonb
  pqxx::connection conn(t.dsn);
  EXPECT_EQ(inspect_table(conn, t.table).payload, PayloadType::kJson);
  try {
    migrate(conn, t.table,
            MigrateOptions{16, std::nullopt, kDefaultPartitionXids, PayloadType::kBytes});
    FAIL() << "a jsonb table accepted --payload bytes";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("has a jsonb payload"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(migrate(
      conn, t.table, MigrateOptions{16, std::nullopt, kDefaultPartitionXids, PayloadType::kJson}));
}

TEST(Schema, AStatusTableAtVersion2WithoutHeadersNeedsNoMigrationToRun) {
  OutboxTestTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec_params(
      "UPDATE \"" + t.table.schema() + "\".outbox_meta SET version = 2 WHERE table_name = $1",
      t.table.table());
  pqxx::nontransaction(conn).exec("ALTER TABLE " + t.table.quoted() + " DROP COLUMN headers");
  TableInfo info = inspect_table(conn, t.table);  // version 3 only records the mode
  EXPECT_EQ(info.version, 2);
  EXPECT_EQ(info.mode, TableMode::kStatus);
  EXPECT_FALSE(info.headers) << "version 4's column is optional";
  t.insert(1, 1);
  ClaimQueries claims(conn, t.table, {info.headers});
  auto batch = claims.claim_batch(all_shards(16), 10);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].headers, "");
}

TEST(Schema, ATableWithoutTheExpectedColumnsIsNamedInOneError) {
  pqxx::connection conn(testbed::postgres_dsn());
  auto name = TableName::parse(testbed::unique_name("legacy"));
  pqxx::nontransaction(conn).exec("CREATE TABLE " + name.quoted() +
                                  " (id bigserial primary key, biz_id text, payload jsonb)");
  try {
    inspect_table(conn, name);
    FAIL() << "expected SchemaError";
  } catch (const SchemaError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("event_id"), std::string::npos) << msg;
    EXPECT_NE(msg.find("retry_count"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("payload"), std::string::npos) << "payload exists: " << msg;
  }
  auto missing = TableName::parse(testbed::unique_name("absent"));
  EXPECT_THROW(inspect_table(conn, missing), SchemaError);
}

TEST(Enqueue, ARolledBackTransactionLeavesNoEvent) {
  OutboxTestTable t;
  pqxx::connection conn(t.dsn);
  {
    pqxx::work tx(conn);
    enqueue(tx, t.table, "ORDER_CREATED", "o-1", R"({"amount": 10})");
    tx.abort();
  }
  EXPECT_EQ(t.count("true"), 0);
  pqxx::work tx(conn);
  std::string id = enqueue(tx, t.table, "ORDER_CREATED", "o-1", R"({"amount": 10})");
  tx.commit();
  EXPECT_EQ(id.size(), 36u);  // a UUID, not the bigserial id
  EXPECT_EQ(t.count("status = 0"), 1);
}

TEST(Enqueue, TheSqlFunctionEnqueuesInsideTheCallersTransaction) {
  OutboxTestTable t;
  pqxx::connection conn(t.dsn);
  pqxx::work tx(conn);
  auto r = tx.exec("SELECT " + t.table.quoted_with_suffix("_enqueue") +
                   "('ORDER_PAID', 'o-9', '{\"x\":1}')");
  tx.commit();
  EXPECT_EQ(r[0][0].as<std::string>().size(), 36u);
  EXPECT_EQ(t.count("biz_type = 'ORDER_PAID' AND biz_id = 'o-9'"), 1);
}

TEST(OutboxStore, ClaimReturnsDueEventsOfOwnedShardsInIdOrder) {
  OutboxTestTable t;
  t.insert(200, 20);
  pqxx::connection conn(t.dsn);
  OutboxStore store(conn, t.table);
  auto everything = store.claim_batch(all_shards(16), 1000);
  ASSERT_EQ(everything.size(), 200u);
  EXPECT_TRUE(std::is_sorted(everything.begin(), everything.end(),
                             [](const auto& a, const auto& b) { return a.id < b.id; }));
  auto some = store.claim_batch({0, 1, 2}, 1000);
  for (const auto& e : some) {
    EXPECT_LE(e.shard, 2);
  }
  auto limited = store.claim_batch(all_shards(16), 7);
  EXPECT_EQ(limited.size(), 7u);
  // The events of a batch in flight are left out of the next claim.
  std::vector<std::int64_t> in_flight;
  for (std::size_t i = 0; i < 150; ++i) {
    in_flight.push_back(everything[i].id);
  }
  auto rest = store.claim_batch(all_shards(16), 1000, in_flight);
  ASSERT_EQ(rest.size(), 50u);
  EXPECT_EQ(rest.front().id, everything[150].id);
}

TEST(OutboxStore, AnEventWaitingForItsRetryBlocksLaterEventsOfItsKeyOnly) {
  OutboxTestTable t;
  t.insert(9, 3);  // keys k0 k1 k2, three events each
  pqxx::connection conn(t.dsn);
  OutboxStore store(conn, t.table);
  auto batch = store.claim_batch(all_shards(16), 100);
  ASSERT_EQ(batch.size(), 9u);
  const OutboxEvent head = batch[0];  // first event of k0
  store.record_failures({{head.id, false, std::chrono::hours(1), "broker said no"}});
  auto next = store.claim_batch(all_shards(16), 100);
  EXPECT_EQ(next.size(), 6u);
  for (const auto& e : next) {
    EXPECT_NE(e.biz_id, head.biz_id) << "event " << e.id << " overtook the retrying head";
  }
  EXPECT_EQ(t.count("retry_count = 1 AND last_error = 'broker said no' AND status = 0"), 1);
  // Once the head is FAILED it no longer blocks its key.
  store.record_failures({{head.id, true, {}, "gave up"}});
  EXPECT_EQ(store.claim_batch(all_shards(16), 100).size(), 8u);
  EXPECT_EQ(t.count("status = 2 AND retry_count = 2"), 1);
}

// spec.relay.ordering None: the same retrying head holds back nothing.
TEST(OutboxStore, WithoutPerKeyOrderARetryingEventHoldsNothingBack) {
  OutboxTestTable t;
  t.insert(9, 3);
  pqxx::connection conn(t.dsn);
  OutboxStore store(conn, t.table, ClaimOptions{true, false});
  auto batch = store.claim_batch(all_shards(16), 100);
  ASSERT_EQ(batch.size(), 9u);
  store.record_failures({{batch[0].id, false, std::chrono::hours(1), "broker said no"}});
  auto next = store.claim_batch(all_shards(16), 100);
  EXPECT_EQ(next.size(), 8u) << "the head's two later events come too";
  for (const auto& e : next) {
    EXPECT_NE(e.id, batch[0].id) << "the head itself waits for its retry time";
  }
}

// A retry that is due may fail again; a later event of its key claimed beside it
// could be delivered meanwhile (on another topic or partition). So the retry is
// claimed alone for its key, and the key's later events once it is settled.
TEST(OutboxStore, ADueRetryIsClaimedAloneForItsKey) {
  OutboxTestTable t;
  t.insert(9, 3);  // keys k0 k1 k2, three events each
  pqxx::connection conn(t.dsn);
  OutboxStore store(conn, t.table);
  auto batch = store.claim_batch(all_shards(16), 100);
  ASSERT_EQ(batch.size(), 9u);
  const OutboxEvent head = batch[0];  // first event of k0
  store.record_failures({{head.id, false, std::chrono::milliseconds(0), "broker said no"}});
  auto next = store.claim_batch(all_shards(16), 100);
  ASSERT_EQ(next.size(), 7u) << "the due head and the six events of the other keys";
  for (const auto& e : next) {
    EXPECT_TRUE(e.biz_id != head.biz_id || e.id == head.id)
        << "event " << e.id << " was claimed beside its key's due retry";
  }
  EXPECT_EQ(next.front().id, head.id);
  EXPECT_EQ(next.front().retry_count, 1);
  // Delivered this time: its key's later events are claimed again.
  store.mark_sent({head.id}, false);
  EXPECT_EQ(store.claim_batch(all_shards(16), 100).size(), 8u);
}

TEST(OutboxStore, MarkSentChangesOnlyPendingRowsAndDeleteModeDeletes) {
  OutboxTestTable t;
  t.insert(10, 5);
  pqxx::connection conn(t.dsn);
  OutboxStore store(conn, t.table);
  auto batch = store.claim_batch(all_shards(16), 100);
  std::vector<std::int64_t> ids;
  for (const auto& e : batch) {
    ids.push_back(e.id);
  }
  std::vector<std::int64_t> first(ids.begin(), ids.begin() + 4);
  EXPECT_EQ(store.mark_sent(first, false), 4);
  EXPECT_EQ(store.mark_sent(first, false), 0) << "already sent rows must not change again";
  EXPECT_EQ(t.count("status = 1 AND sent_at IS NOT NULL"), 4);
  std::vector<std::int64_t> rest(ids.begin() + 4, ids.end());
  EXPECT_EQ(store.mark_sent(rest, true), 6);
  EXPECT_EQ(t.count("true"), 4);
}

TEST(OutboxStore, BacklogIsMeasuredOnTheDatabaseClock) {
  OutboxTestTable t;
  t.insert(5, 5);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("UPDATE " + t.table.quoted() +
                                  " SET created_at = now() - interval '20 minutes' WHERE id IN "
                                  "(SELECT min(id) FROM " +
                                  t.table.quoted() + ")");
  OutboxStore store(conn, t.table);
  auto first = store.claim_batch(all_shards(16), 1);
  store.record_failures({{first[0].id + 1, true, {}, "poison"}});
  Backlog b = store.backlog(std::chrono::minutes(10));
  EXPECT_EQ(b.pending, 4);
  EXPECT_EQ(b.failed, 1);
  EXPECT_EQ(b.stuck, 1);
  EXPECT_GE(b.oldest_pending_seconds, 1199.0);
  EXPECT_LT(b.oldest_pending_seconds, 1300.0);
}

TEST(OutboxStore, ClaimUsesThePendingPartialIndex) {
  OutboxTestTable t;
  t.insert(50, 10);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction tx(conn);
  tx.exec("ANALYZE " + t.table.quoted());
  // A 50-row table is cheapest to scan; forbid that to see which index the claim can use.
  tx.exec("SET enable_seqscan = off");
  auto plan = tx.exec("EXPLAIN SELECT id FROM " + t.table.quoted() +
                      " WHERE status = 0 AND shard = ANY('{1,2}'::int[]) ORDER BY id LIMIT 10");
  std::string text;
  for (const auto& r : plan) {
    text += r[0].as<std::string>() + "\n";
  }
  EXPECT_NE(text.find(t.table.table() + "_pending"), std::string::npos) << text;
}

// Index entries read from the table's "_pending" index so far, as `conn` sees it
// (its own reads flushed first: PostgreSQL 15 reports them at most once a second).
long long pending_index_reads(pqxx::connection& conn, const TableName& table) {
  pqxx::nontransaction(conn).exec("SELECT pg_stat_force_next_flush()");
  pqxx::nontransaction tx(conn);
  return tx
      .exec_params(
          "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = $1 AND "
          "indexrelname = $2",
          table.schema(), table.table() + "_pending")[0][0]
      .as<long long>();
}

// A backlog inserted in bulk before anything analyzed the table: the planner then
// guesses a handful of pending rows and, left alone, reads and sorts every one of
// them on every claim. The claim must walk "_pending" in order and stop at its limit.
TEST(OutboxStore, AClaimOnANeverAnalyzedBacklogReadsOnlyItsBatchOfThePendingIndex) {
  OutboxTestTable t;
  pqxx::connection conn(t.dsn);
  {
    pqxx::nontransaction tx(conn);
    tx.exec("ALTER TABLE " + t.table.quoted() + " SET (autovacuum_enabled = false)");
    tx.exec("INSERT INTO " + t.table.quoted() +
            " (biz_type, biz_id, payload) SELECT 't', 'k' || (g % 50), '{}' FROM "
            "generate_series(1, 20000) g");
    ASSERT_LT(tx.exec("SELECT reltuples FROM pg_class WHERE oid = '" + t.table.quoted() +
                      "'::regclass")[0][0]
                  .as<double>(),
              0)
        << "the table must never have been analyzed";
  }
  ClaimQueries claims(conn, t.table);
  const long long before = pending_index_reads(conn, t.table);
  std::vector<OutboxEvent> batch = claims.claim_batch(all_shards(16), 100);
  const long long read = pending_index_reads(conn, t.table) - before;
  ASSERT_EQ(batch.size(), 100u);
  EXPECT_TRUE(std::is_sorted(batch.begin(), batch.end(),
                             [](const auto& a, const auto& b) { return a.id < b.id; }));
  EXPECT_LT(read, 1000) << "the claim read " << read << " entries of the pending index";
}

// Sequential scans of the table so far, as `conn` sees it (flushed first, as above).
long long table_seq_scans(pqxx::connection& conn, const TableName& table) {
  pqxx::nontransaction(conn).exec("SELECT pg_stat_force_next_flush()");
  pqxx::nontransaction tx(conn);
  return tx
      .exec_params(
          "SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2",
          table.schema(), table.table())[0][0]
      .as<long long>();
}

// The claim is prepared with one generic plan, made at its first run. A relay starts on an
// empty table, where scanning and sorting everything is the cheapest plan; nothing in a bulk
// insert makes PostgreSQL plan again, so that first plan must already be the one a backlog
// needs: the pending index in order, no scan of the table.
TEST(OutboxStore, AClaimPlannedOnAnEmptyTableStillReadsOnlyItsBatchOfABulkBacklog) {
  OutboxTestTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("ALTER TABLE " + t.table.quoted() +
                                  " SET (autovacuum_enabled = false)");
  ClaimQueries claims(conn, t.table);
  ASSERT_TRUE(claims.claim_batch(all_shards(16), 100).empty());
  pqxx::nontransaction(conn).exec("INSERT INTO " + t.table.quoted() +
                                  " (biz_type, biz_id, payload) SELECT 't', 'k' || (g % 50), "
                                  "'{}' FROM generate_series(1, 20000) g");
  const long long reads_before = pending_index_reads(conn, t.table);
  const long long scans_before = table_seq_scans(conn, t.table);
  std::vector<OutboxEvent> batch = claims.claim_batch(all_shards(16), 100);
  const long long read = pending_index_reads(conn, t.table) - reads_before;
  ASSERT_EQ(batch.size(), 100u);
  EXPECT_LT(read, 1000) << "the claim read " << read << " entries of the pending index";
  EXPECT_EQ(table_seq_scans(conn, t.table), scans_before) << "the claim scanned the whole table";
}

TEST(OutboxStore, HealthSeesDeadTuplesAndTheOldestOpenTransaction) {
  OutboxTestTable t;
  t.insert(100, 10);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("DELETE FROM " + t.table.quoted() + " WHERE id % 2 = 0");
  pqxx::connection holder(t.dsn);
  pqxx::work open_tx(holder);
  open_tx.exec("SELECT txid_current()");  // holds an xid: the xmin horizon stops here
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  OutboxStore store(conn, t.table);
  TableHealth h;
  // Table statistics reach pg_stat_user_tables within about a second.
  EXPECT_TRUE(testing::eventually(
      [&] {
        h = store.health();
        return h.dead_tuples >= 50;
      },
      std::chrono::seconds(10)))
      << h.dead_tuples;
  EXPECT_GE(h.oldest_transaction_seconds, 1.0);
  EXPECT_EQ(h.live_tuples, 50);
  EXPECT_FALSE(h.last_vacuum_unix) << "a new table was never vacuumed: no time, not a sentinel";
  open_tx.abort();
  pqxx::nontransaction(conn).exec("VACUUM " + t.table.quoted());
  EXPECT_TRUE(testing::eventually(
      [&] {
        h = store.health();
        return h.last_vacuum_unix.has_value();
      },
      std::chrono::seconds(10)));
  ASSERT_TRUE(h.seconds_since_vacuum());
  EXPECT_GE(*h.seconds_since_vacuum(), 0.0);
  EXPECT_LT(*h.seconds_since_vacuum(), 60.0);
}

TEST(ShardOwnership, ReplicasSplitTheShardsAndADeadOnesShardsMove) {
  OutboxTestTable t;
  pqxx::connection a_conn(t.dsn);
  auto b_conn = std::make_unique<pqxx::connection>(t.dsn);
  ShardOwnership a(a_conn, t.table, 16);
  auto b = std::make_unique<ShardOwnership>(*b_conn, t.table, 16);
  a.join();
  b->join();
  for (int i = 0; i < 3; ++i) {
    a.rebalance();
    b->rebalance();
  }
  EXPECT_EQ(a.owned().size(), 8u);
  EXPECT_EQ(b->owned().size(), 8u);
  std::set<int> all(a.owned().begin(), a.owned().end());
  all.insert(b->owned().begin(), b->owned().end());
  EXPECT_EQ(all.size(), 16u) << "no shard owned twice, none left out";
  // B's session ends (a killed replica): its locks die with it.
  b.reset();
  b_conn.reset();
  // The server ends B's backend (and drops its locks) a moment after the close.
  EXPECT_TRUE(testing::eventually(
      [&] {
        a.rebalance();
        return a.owned().size() == 16u;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(a.live_members(), 1);
}

}  // namespace
}  // namespace outbox
