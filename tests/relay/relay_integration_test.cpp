// The relay end to end against a real PostgreSQL and a real Kafka broker:
// delivery, headers, replicas, kill -9, broker outage, poison events, restarts.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "outbox/schema.hpp"
#include "outbox/shards.hpp"
#include "outbox/store.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testing::consume_all;
using testing::distinct_seqs;
using testing::eventually;
using testing::OutboxTestTable;
using testing::per_key_order_problem;
using testing::ProcessRelay;
using testing::ThreadRelay;

std::string log_path(const std::string& name) {
  return "/tmp/" + testbed::unique_name(name) + ".log";
}

TEST(Relay, PublishesACommittedEventOnceWithEveryHeaderAndNeverARolledBackOne) {
  OutboxTestTable t;
  {
    pqxx::connection conn(t.dsn);
    pqxx::work rolled_back(conn);
    enqueue(rolled_back, t.table, "order", "rolled-back", R"({"seq": -1})");
    rolled_back.abort();
    pqxx::work tx(conn);
    enqueue(tx, t.table, "order", "o-1", R"({"seq": 1, "key": "o-1"})");
    tx.commit();
  }
  ThreadRelay relay(t.relay_config());
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 1; }, 30s));
  auto got = consume_all({t.topic}, 1, 30s, 2s);
  ASSERT_EQ(got.size(), 1u) << "exactly one message in steady state";
  EXPECT_EQ(got[0].key, "o-1");
  EXPECT_EQ(nlohmann::json::parse(got[0].payload).at("seq"), 1);
  EXPECT_EQ(got[0].headers.at("biz_type"), "order");
  EXPECT_EQ(got[0].headers.at("event_id").size(), 36u);
  EXPECT_FALSE(got[0].headers.at("created_at").empty());
  pqxx::connection conn(t.dsn);
  auto row = pqxx::nontransaction(conn).exec("SELECT event_id::text FROM " + t.table.quoted());
  EXPECT_EQ(got[0].headers.at("event_id"), row[0][0].as<std::string>());
  EXPECT_NE(relay.registry().render().find("outbox_events_published_total{table=\"" +
                                           t.table.plain() + "\"} 1"),
            std::string::npos);
}

TEST(Relay, WakesOnNotifyLongBeforeThePollInterval) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.poll_interval = 60s;  // only NOTIFY can explain a quick delivery
  ThreadRelay relay(c);
  std::this_thread::sleep_for(1s);  // let it go idle
  auto started = std::chrono::steady_clock::now();
  t.insert(1, 1);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 1; }, 20s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
}

void run_replicas(int replicas) {
  OutboxTestTable t;
  const int events = 3000;
  std::vector<std::unique_ptr<ThreadRelay>> relays;
  for (int i = 0; i < replicas; ++i) {
    relays.push_back(std::make_unique<ThreadRelay>(t.relay_config()));
  }
  std::this_thread::sleep_for(1s);  // shards settle
  for (int chunk = 0; chunk < 10; ++chunk) {
    t.insert(events / 10, 50, chunk * events / 10);
  }
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == events; }, 120s))
      << t.count("status = 1") << " of " << events << " sent";
  auto got = consume_all({t.topic}, events, 60s);
  EXPECT_EQ(distinct_seqs(got), static_cast<std::size_t>(events)) << "every event published";
  EXPECT_EQ(got.size(), static_cast<std::size_t>(events)) << "none twice in steady state";
  EXPECT_EQ(per_key_order_problem(got), "");
  for (auto& r : relays) {
    std::string metrics = r->registry().render();
    EXPECT_EQ(metrics.find("outbox_shards_owned{table=\"" + t.table.plain() + "\"} 0\n"),
              std::string::npos)
        << "every replica got a share of the shards";
  }
}

TEST(Relay, TwoReplicasShareOneTable) {
  run_replicas(2);
}
TEST(Relay, ThreeReplicasShareOneTable) {
  run_replicas(3);
}

TEST(Relay, AKilledReplicasShardsMoveAndNothingIsLostOrReordered) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.batch_size = 50;
  ProcessRelay a(c, log_path("relay-a"));
  ProcessRelay b(c, log_path("relay-b"));
  const int events = 4000;
  std::thread writer([&] {
    for (int chunk = 0; chunk < 40; ++chunk) {
      t.insert(events / 40, 40, chunk * events / 40);
      std::this_thread::sleep_for(25ms);
    }
  });
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") > 500; }, 60s));
  a.kill9();  // mid-stream: some of its batches were published but not marked
  auto killed_at = std::chrono::steady_clock::now();
  writer.join();
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == events; }, 120s))
      << t.count("status = 0") << " still pending after the kill";
  auto takeover = std::chrono::steady_clock::now() - killed_at;
  auto got = consume_all({t.topic}, events, 60s);
  EXPECT_EQ(distinct_seqs(got), static_cast<std::size_t>(events)) << "nothing lost";
  EXPECT_EQ(per_key_order_problem(got), "");
  std::cout << "[ info ] duplicates after kill -9: " << got.size() - events << ", all sent "
            << std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count()
            << " ms after the kill\n";
  EXPECT_EQ(b.terminate(), 0);
}

TEST(Relay, SigtermReleasesShardsAtOnceAndExitsZero) {
  OutboxTestTable t;
  auto c = t.relay_config();
  ProcessRelay a(c, log_path("relay-term"));
  t.insert(10, 5);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 10; }, 30s));
  EXPECT_EQ(a.terminate(), 0);
  // Its shards are free: a fresh session can take all of them right away.
  pqxx::connection conn(t.dsn);
  ShardOwnership probe(conn, t.table, 16);
  probe.acquire_unowned();
  EXPECT_EQ(probe.owned().size(), 16u);
}

TEST(Relay, KafkaDownDefersWithoutBurningAttemptsAndDrainsWhenBack) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.kafka.message_timeout = 2s;
  ThreadRelay relay(c);
  t.insert(20, 5);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 20; }, 30s));
  testbed::control("kafka", "stop");
  t.insert(300, 30, 20);
  std::this_thread::sleep_for(8s);  // several batches' worth of timeouts
  long long pending = t.count("status = 0");
  long long burned = t.count("retry_count > 0");
  testbed::control("kafka", "start");
  EXPECT_EQ(pending, 300) << "the backlog grows while Kafka is down";
  EXPECT_EQ(burned, 0) << "no attempt is counted while the broker is unreachable";
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 320; }, 120s))
      << t.count("status = 0") << " still pending after Kafka returned";
  EXPECT_EQ(t.count("status = 2"), 0);
  auto got = consume_all({t.topic}, 320, 60s);
  EXPECT_EQ(distinct_seqs(got), 320u);
  EXPECT_EQ(per_key_order_problem(got), "");
}

TEST(Relay, APoisonEventEndsFailedWithTheReasonWhileOtherKeysFlow) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.kafka.properties["message.max.bytes"] = "10000";  // the producer refuses larger messages
  ThreadRelay relay(c);
  {
    pqxx::connection conn(t.dsn);
    pqxx::work tx(conn);
    enqueue(tx, t.table, "order", "poison",
            nlohmann::json{{"seq", 0}, {"blob", std::string(20000, 'x')}}.dump());
    tx.commit();
  }
  t.insert(50, 5, 1);
  ASSERT_TRUE(
      eventually([&] { return t.count("status = 1") == 50 && t.count("status = 2") == 1; }, 60s));
  pqxx::connection conn(t.dsn);
  auto r = pqxx::nontransaction(conn).exec("SELECT biz_id, last_error FROM " + t.table.quoted() +
                                           " WHERE status = 2");
  EXPECT_EQ(r[0][0].as<std::string>(), "poison");
  EXPECT_NE(r[0][1].as<std::string>().find("too large"), std::string::npos)
      << r[0][1].as<std::string>();
}

TEST(Relay, AnInvalidRouteFailsOnlyTheEventsItRoutes) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.publish.router = relay::TopicRouter(t.topic, {{"bad type", "not a topic!"}});
  ThreadRelay relay(c);
  {
    pqxx::connection conn(t.dsn);
    pqxx::work tx(conn);
    enqueue(tx, t.table, "bad type", "k", R"({"seq": 0})");
    tx.commit();
  }
  t.insert(5, 5, 1);
  ASSERT_TRUE(
      eventually([&] { return t.count("status = 1") == 5 && t.count("status = 2") == 1; }, 30s));
  EXPECT_EQ(t.count("status = 2 AND last_error LIKE 'routing:%'"), 1);
}

TEST(Relay, ReconnectsAfterPostgresRestartsUnderIt) {
  OutboxTestTable t;
  ThreadRelay relay(t.relay_config());
  t.insert(10, 5);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 10; }, 30s));
  testbed::control("pg", "restart");
  t.insert(10, 5, 10);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 20; }, 60s));
  auto got = consume_all({t.topic}, 20, 30s);
  EXPECT_EQ(distinct_seqs(got), 20u);
}

TEST(Relay, StartsWhileTheDatabaseIsUnreachableAndRetries) {
  auto c = OutboxTestTable().relay_config();
  c.dsn = "postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=1";
  ThreadRelay relay(c);  // must not throw or crash; it keeps retrying
  std::this_thread::sleep_for(2s);
  std::string metrics = relay.registry().render();
  EXPECT_NE(metrics.find("outbox_database_up{table=\"" + c.table + "\"} 0"), std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace outbox

namespace outbox {
namespace {

TEST(Relay, AMissingTableIsReportedAndTheRelayStartsOnceItIsMigrated) {
  auto c = testing::OutboxTestTable().relay_config();
  c.table = testbed::unique_name("not_yet");
  testing::ThreadRelay relay(c);
  ASSERT_TRUE(testing::eventually([&] { return !relay.relay().problem().empty(); }, 10s));
  EXPECT_NE(relay.relay().problem().find("does not exist"), std::string::npos)
      << relay.relay().problem();
  EXPECT_NE(relay.relay().problem().find("migrate"), std::string::npos) << "says what to fix";
  EXPECT_FALSE(relay.relay().ready());
  pqxx::connection conn(c.dsn);
  auto table = TableName::parse(c.table);
  migrate(conn, table, 16);
  {
    pqxx::work tx(conn);
    enqueue(tx, table, "order", "k", R"({"seq": 1})");
    tx.commit();
  }
  ASSERT_TRUE(testing::eventually(
      [&] {
        return pqxx::nontransaction(conn)
                   .exec("SELECT count(*) FROM " + table.quoted() + " WHERE status = 1")[0][0]
                   .as<int>() == 1;
      },
      30s));
  EXPECT_TRUE(relay.relay().problem().empty());
}

}  // namespace
}  // namespace outbox
