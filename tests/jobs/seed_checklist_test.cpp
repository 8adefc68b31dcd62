// The seed's acceptance checklist (§6), against a real PostgreSQL and Kafka.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "outbox/shards.hpp"
#include "outbox/store.hpp"
#include "points_service/points_service.hpp"
#include "relay/compensator.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testing::consume_all;
using testing::eventually;
using testing::OutboxTestTable;

relay::CompensationConfig compensation_for(const OutboxTestTable& t) {
  relay::CompensationConfig c;
  auto rc = t.relay_config();
  c.dsn = rc.dsn;
  c.table = rc.table;
  c.kafka = rc.kafka;
  c.publish = rc.publish;
  c.time_budget = 30s;
  return c;
}

TEST(SeedChecklist, Item1_AnExceptionAfterTheBusinessUpdateLeavesNoEventAndPublishesNothing) {
  OutboxTestTable t;
  testing::ThreadRelay relay(t.relay_config());
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec(
      "CREATE TABLE IF NOT EXISTS checklist_orders (id text PRIMARY KEY, status text)");
  try {
    pqxx::work tx(conn);
    tx.exec("INSERT INTO checklist_orders VALUES ('" + t.topic + "', 'PAID')");
    enqueue(tx, t.table, "ORDER_PAID", t.topic, R"({"seq": 0})");
    throw std::runtime_error("business rule failed after both writes");
  } catch (const std::runtime_error&) {
    // the transaction object rolled back as it went out of scope
  }
  t.insert(1, 1, 1);  // a committed marker event proves the relay was working
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 1; }, 30s));
  EXPECT_EQ(t.count("true"), 1) << "no outbox row from the rolled-back transaction";
  auto orders = pqxx::nontransaction(conn).exec(
      "SELECT count(*) FROM checklist_orders WHERE id = '" + t.topic + "'");
  EXPECT_EQ(orders[0][0].as<int>(), 0) << "the business update rolled back too";
  auto got = consume_all({t.topic}, 1, 30s, 2s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(got[0].payload).at("seq"), 1) << "only the committed marker";
}

TEST(SeedChecklist, Item2_CompensationPublishesWhatAStoppedRelayLeftBehind) {
  OutboxTestTable t;
  t.insert(120, 12);  // no relay runs: these are stuck
  relay::CompensationReport r = relay::compensate(compensation_for(t));
  EXPECT_EQ(r.shards_taken, 16);
  EXPECT_EQ(r.resent, 120u);
  EXPECT_EQ(r.backlog.pending, 0);
  EXPECT_EQ(t.count("status = 1"), 120);
  auto got = consume_all({t.topic}, 120, 30s);
  EXPECT_EQ(got.size(), 120u);
  EXPECT_EQ(testing::per_key_order_problem(got), "");
  auto j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j.at("resent"), 120);
}

// Also the shard-level test of the same rule (it was
// ShardOwnership.CompensationTakesOnlyShardsNoLiveSessionHolds): what compensation's
// acquire_unowned() takes, and that a released shard is free to it at once.
TEST(SeedChecklist, Item2_CompensationNeverTouchesShardsALiveRelayHolds) {
  OutboxTestTable t;
  // A live relay's session holding every shard (slow, so its events are pending).
  pqxx::connection relay_conn(t.dsn);
  ShardOwnership live(relay_conn, t.table, 16);
  live.join();
  live.rebalance();
  ASSERT_EQ(live.owned().size(), 16u);
  t.insert(50, 5);
  relay::CompensationReport r = relay::compensate(compensation_for(t));
  EXPECT_EQ(r.shards_taken, 0);
  EXPECT_EQ(r.resent, 0u);
  EXPECT_EQ(t.count("status = 0"), 50) << "the live relay's events are left to it";
  pqxx::connection job_conn(t.dsn);
  ShardOwnership job(job_conn, t.table, 16);
  job.acquire_unowned();
  EXPECT_TRUE(job.owned().empty());
  live.release_all();
  job.acquire_unowned();
  EXPECT_EQ(job.owned().size(), 16u);
}

TEST(SeedChecklist, Item2_CompensationBesideARunningRelaySendsNothingTwice) {
  OutboxTestTable t;
  testing::ThreadRelay relay(t.relay_config());
  std::this_thread::sleep_for(500ms);
  std::size_t resent = 0;
  for (int round = 0; round < 10; ++round) {
    t.insert(100, 20, round * 100);
    resent += relay::compensate(compensation_for(t)).resent;
  }
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 1000; }, 60s));
  auto got = consume_all({t.topic}, 1000, 60s);
  EXPECT_EQ(got.size(), 1000u) << "no event published twice";
  EXPECT_EQ(resent, 0u) << "the live relay held every shard";
}

// Also the relay's kill -9 test (it was Relay.AKilledReplicasShardsMoveAndNothingIsLostOrReordered,
// the same scenario twice): replica A is killed mid-stream, with some of its batches published
// but not marked, and events keep arriving during and after the kill.
TEST(SeedChecklist, Item3_OneOfTwoRelaysKilledTheOtherCarriesAllShards) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.batch_size = 50;
  testing::ProcessRelay a(c, "/tmp/" + testbed::unique_name("checklist-a") + ".log");
  testing::ProcessRelay b(c, "/tmp/" + testbed::unique_name("checklist-b") + ".log");
  const int streamed = 4000;
  std::thread writer([&] {
    for (int chunk = 0; chunk < 40; ++chunk) {
      t.insert(streamed / 40, 40, chunk * streamed / 40);
      std::this_thread::sleep_for(25ms);
    }
  });
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") > 500; }, 60s));
  a.kill9();  // mid-stream: some of its batches were published but not marked
  auto killed_at = std::chrono::steady_clock::now();
  writer.join();
  t.insert(500, 25, streamed);  // written after the kill: only the survivor can send these
  const int events = streamed + 500;
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == events; }, 120s))
      << t.count("status = 0") << " still pending after the kill";
  auto takeover = std::chrono::steady_clock::now() - killed_at;
  // The survivor holds all 16 shard locks.
  pqxx::connection conn(t.dsn);
  ShardOwnership probe(conn, t.table, 16);
  probe.acquire_unowned();
  EXPECT_TRUE(probe.owned().empty()) << "every shard is held by the surviving relay";
  auto got = consume_all({t.topic}, events, 60s);
  EXPECT_EQ(testing::distinct_seqs(got), static_cast<std::size_t>(events)) << "nothing lost";
  EXPECT_EQ(testing::per_key_order_problem(got), "");
  std::cout << "[ info ] duplicates after kill -9: " << got.size() - events << ", all sent "
            << std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count()
            << " ms after the kill\n";
  EXPECT_EQ(b.terminate(), 0);
}

TEST(SeedChecklist, Item4_TheSameMessageDelivered100TimesAddsPointsOnce) {
  const std::string topic = testbed::unique_name("points");
  const std::string user = testbed::unique_name("user");
  kafka::ProducerConfig pc;
  pc.bootstrap_servers = testbed::kafka_bootstrap();
  kafka::BatchProducer producer(pc);
  const std::string event_id =
      "5f0c1f6e-8a4c-4a55-9a61-" + std::to_string(100000000000 + ::getpid() % 1000000);
  std::vector<kafka::Message> copies(
      100, kafka::Message{topic,
                          "order-1",
                          nlohmann::json{{"user", user}, {"amount", 250}}.dump(),
                          {{"event_id", event_id}, {"biz_type", "ORDER_PAID"}}});
  for (const auto& d : producer.publish(copies)) {
    ASSERT_EQ(d.error_class, kafka::ErrorClass::kNone) << d.error;
  }
  auto r =
      testing::run_cli(testbed::postgres_dsn(), std::string(POINTS_SERVICE_BINARY) + " --dsn '" +
                                                    testbed::postgres_dsn() + "' --brokers " +
                                                    testbed::kafka_bootstrap() + " --topic " +
                                                    topic + " --group " + topic + " --idle-exit 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("applied 1, duplicates skipped 99"), std::string::npos) << r.output;
  example::PointsService service(testbed::postgres_dsn());
  EXPECT_EQ(service.points(user), 25) << "250 paid = 25 points, added once";
}

}  // namespace
}  // namespace outbox
