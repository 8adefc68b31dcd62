// The relay end to end against a real PostgreSQL and a real Kafka broker:
// delivery, headers, replicas, kill -9, broker outage, poison events, restarts.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "outbox/schema.hpp"
#include "outbox/shards.hpp"
#include "outbox/store.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"
#include "topic_admin.hpp"

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

// A relay whose poll, rebalance and backlog intervals are a minute long: only NOTIFYs (and
// what the wake-up tests look at) explain what it does quickly, and it claims for no other
// reason.
relay::RelayConfig quiet_relay_config(const OutboxTestTable& t) {
  auto c = t.relay_config();
  c.poll_interval = 60s;
  c.rebalance_interval = 60s;
  c.backlog_interval = 60s;
  return c;
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
  auto row = pqxx::nontransaction(conn).exec("SELECT event_id::text FROM " + t.events());
  EXPECT_EQ(got[0].headers.at("event_id"), row[0][0].as<std::string>());
  const std::string metrics = relay.registry().render();
  EXPECT_NE(metrics.find("outbox_events_published_total{table=\"" + t.table.plain() + "\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("outbox_topic_events_published_total{table=\"" + t.table.plain() +
                         "\",topic=\"" + t.topic + "\"} 1"),
            std::string::npos)
      << metrics;
  // Commit-to-acknowledgement lag, one observation, well under the test's 30 s.
  EXPECT_NE(metrics.find("outbox_delivery_lag_seconds_count{table=\"" + t.table.plain() + "\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("outbox_delivery_lag_seconds_bucket{table=\"" + t.table.plain() +
                         "\",le=\"30\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("outbox_build_info{table=\"" + t.table.plain() + "\",version=\""),
            std::string::npos);
}

// Every message carries outbox.seq, what the relay orders a key's events by: the row id
// in status mode, the row's position (xid) in log mode. Per key it increases from one
// transaction to the next in commit order; a consumer's inbox refuses an older one after
// a newer one with it (<inbox>_apply).
TEST(Relay, EveryMessageCarriesASeqThatIncreasesPerKeyInCommitOrder) {
  OutboxTestTable t;
  constexpr int kTransactions = 4;
  for (int i = 0; i < kTransactions; ++i) {
    t.insert(6, 3, i * 6);  // two events of each of three keys per transaction
  }
  ThreadRelay relay(t.relay_config());
  auto got = consume_all({t.topic}, kTransactions * 6, 30s, 1s);
  ASSERT_EQ(distinct_seqs(got), static_cast<std::size_t>(kTransactions * 6));
  pqxx::connection conn(t.dsn);
  const std::string column = testing::table_mode() == TableMode::kLog ? "xid::text" : "id::text";
  std::map<std::string, std::string> row_seq;  // event_id -> the row's own id or position
  for (const auto& row : pqxx::nontransaction(conn).exec("SELECT event_id::text, " + column +
                                                         " FROM " + t.table.quoted())) {
    row_seq[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  std::map<std::string, std::pair<long long, long long>> last;  // key -> (payload seq, outbox.seq)
  for (const auto& m : got) {
    ASSERT_EQ(m.headers.count("outbox.seq"), 1U) << "payload " << m.payload;
    const std::string& seq = m.headers.at("outbox.seq");
    EXPECT_EQ(seq, row_seq.at(m.headers.at("event_id")));
    const long long value = std::stoll(seq);
    const long long payload_seq = nlohmann::json::parse(m.payload).at("seq").get<long long>();
    if (auto it = last.find(m.key); it != last.end() && payload_seq > it->second.first) {
      // A later event of the key: a later transaction has a higher seq; one transaction's
      // events share a position in log mode, and are never lower.
      if (payload_seq / 6 > it->second.first / 6) {
        EXPECT_GT(value, it->second.second) << m.key << " payload seq " << payload_seq;
      } else {
        EXPECT_GE(value, it->second.second) << m.key << " payload seq " << payload_seq;
      }
    }
    if (auto it = last.find(m.key); it == last.end() || payload_seq > it->second.first) {
      last[m.key] = {payload_seq, value};
    }
  }
  EXPECT_EQ(last.size(), 3U);
  EXPECT_EQ(per_key_order_problem(got), "");
}

// migrate --payload text and bytes: a text that is no JSON, and Avro in Confluent's wire
// format (magic byte 0, a 4-byte schema id, then bytes including 0x00 and 0xff), reach
// Kafka byte for byte; a jsonb payload keeps PostgreSQL's normalised JSON text.
TEST(Relay, PayloadsOfEveryColumnTypeArePublishedByteForByte) {
  const std::string wire("\x00\x00\x00\x00\x2a\x02\x06\x66\x6f\x6f\x00\xff\x80", 13);
  const std::string text = "plain text, not JSON: caf\xc3\xa9 ok";
  for (const auto& [type, payload] : std::vector<std::pair<PayloadType, std::string>>{
           {PayloadType::kBytes, wire}, {PayloadType::kText, text}}) {
    OutboxTestTable t;
    const TableName table = TableName::parse(testbed::unique_name("payload"));
    pqxx::connection conn(t.dsn);
    migrate(conn, table, MigrateOptions{16, testing::table_mode(), kDefaultPartitionXids, type});
    EXPECT_EQ(inspect_table(conn, table).payload, type);
    {
      pqxx::work tx(conn);
      const std::string insert = "INSERT INTO " + table.quoted() +
                                 " (biz_type, biz_id, payload) VALUES ('order', 'k', $1)";
      if (type == PayloadType::kBytes) {
        tx.exec_params(insert, pqxx::binarystring(wire));
      } else {
        tx.exec_params(insert, text);
      }
      tx.commit();
    }
    auto c = t.relay_config();
    c.table = table.plain();
    ThreadRelay relay(c);
    auto got = consume_all({t.topic}, 1, 30s, 1s);
    ASSERT_EQ(got.size(), 1u) << payload_sql_type(type);
    EXPECT_EQ(got[0].payload, payload) << payload_sql_type(type);
  }
}

// The row's headers column (a service's W3C trace context) reaches consumers as
// Kafka headers; the relay's own four stay the relay's. A headers value that is
// no object can never become headers: that event is FAILED alone, its key's
// neighbours and other keys go on.
TEST(Relay, TheHeadersColumnReachesKafkaAndABadOneIsIsolated) {
  OutboxTestTable t;
  {
    pqxx::connection conn(t.dsn);
    pqxx::work tx(conn);
    const std::string insert = "INSERT INTO " + t.table.quoted() +
                               " (biz_type, biz_id, payload, headers) VALUES ($1, $2, $3::jsonb, "
                               "$4::jsonb)";
    tx.exec_params(
        insert, "order", "o-1", R"({"seq": 1, "key": "o-1"})",
        R"({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",)"
        R"( "tracestate": "vendor=1", "attempt": 2, "biz_type": "forged", "outbox.seq": "0"})");
    tx.exec_params(insert, "order", "o-2", R"({"seq": 2, "key": "o-2"})",
                   R"(["not", "an object"])");
    tx.exec_params(insert, "order", "o-3", R"({"seq": 3, "key": "o-3"})", nullptr);
    tx.commit();
  }
  ThreadRelay relay(t.relay_config());
  ASSERT_TRUE(eventually([&] { return t.count("status <> 0") == 3; }, 30s));
  EXPECT_EQ(t.count("status = 2 AND biz_id = 'o-2' AND last_error LIKE 'headers:%'"), 1);
  auto got = consume_all({t.topic}, 2, 30s, 2s);
  ASSERT_EQ(got.size(), 2u);
  std::map<std::string, testing::Consumed> by_key;
  for (auto& m : got) {
    by_key[m.key] = m;
  }
  const auto& traced = by_key.at("o-1").headers;
  EXPECT_EQ(traced.at("traceparent"), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_EQ(traced.at("tracestate"), "vendor=1");
  EXPECT_EQ(traced.at("attempt"), "2");
  EXPECT_EQ(traced.at("biz_type"), "order") << "the relay's own header is not overridden";
  EXPECT_NE(traced.at("outbox.seq"), "0") << "nor is the per-key sequence";
  EXPECT_EQ(by_key.at("o-3").headers.size(), 4u) << "no headers column value: the relay's four";
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

// A quiet relay stays in <table>_waiting across wake-ups and claims once per wake-up:
// no claim beside the batch in flight, none after its write-back, no statements to
// register and withdraw per event (before: three claims and two of those per event).
// The intervals are long, so only NOTIFYs explain quick deliveries.
TEST(Relay, AQuietRelayStaysRegisteredAndClaimsOncePerWakeUp) {
  OutboxTestTable t;
  auto c = quiet_relay_config(t);
  c.coalesce_window =
      relay::CoalesceWindow::fixed(0ms);  // every wake-up claims: what is counted here
  ThreadRelay relay(c);
  ASSERT_TRUE(eventually([&] { return t.waiting_entries() == 1; }, 10s)) << "never went idle";
  std::this_thread::sleep_for(200ms);  // past the first, short wait after registering
  const double claims_before = metric(relay, "outbox_claim_seconds_count", t.table.plain());
  constexpr int kEvents = 20;
  // Delivered and written back, as the relay counts it: in log mode the status view follows
  // once the progress is stored (with the next claim, or 100 ms later), and waiting for it would
  // stretch the test over other tests' open transactions, whose watermark re-polls are claims.
  const auto published = [&] {
    return metric(relay, "outbox_events_published_total", t.table.plain());
  };
  const double published_before = published();
  for (int i = 0; i < kEvents; ++i) {
    t.insert(1, 1);
    ASSERT_TRUE(eventually([&] { return published() - published_before == i + 1; }, 5s))
        << "event " << i;
    std::this_thread::sleep_for(20ms);  // its write-back done, the relay idle again
    EXPECT_EQ(t.waiting_entries(), 1) << "withdrawn after event " << i;
  }
  const double claims =
      metric(relay, "outbox_claim_seconds_count", t.table.plain()) - claims_before;
  EXPECT_LE(claims, kEvents * 1.5) << "claims for " << kEvents << " events, one per wake-up";
}

// With a coalesce window, the first event after a quiet spell goes out at once, and the
// commits that trickle in behind it wait for the window and share its claims: here 22
// events in about three claims, where a relay without the window claims once per commit
// (the test above). While they keep coming it does not make them notify.
TEST(Relay, WithACoalesceWindowTricklingCommitsShareAClaimAndTheFirstIsNotHeld) {
  OutboxTestTable t;
  auto c = quiet_relay_config(t);
  c.coalesce_window = relay::CoalesceWindow::fixed(1s);
  ThreadRelay relay(c);
  t.insert(1, 1);  // the topic's first send (its metadata) is not what this test times
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 1; }, 30s));
  std::this_thread::sleep_for(1200ms);  // the window it opened is over
  ASSERT_EQ(t.waiting_entries(), 1) << "not waiting for work";
  const auto claims = [&] { return metric(relay, "outbox_claim_seconds_count", t.table.plain()); };
  const double claims_before = claims();
  auto started = std::chrono::steady_clock::now();
  t.insert(1, 1);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 2; }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 600ms) << "the first event was held";
  // The next commit, right behind it, waits for the window that the first claim opened.
  started = std::chrono::steady_clock::now();
  t.insert(1, 1);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 3; }, 5s));
  EXPECT_GT(std::chrono::steady_clock::now() - started, 300ms) << "not coalesced";
  // Commits keep coming (the second window in a row that found events): the relay
  // withdraws, so they notify nobody, and claims once per window. On a loaded machine the
  // inserts take longer and span more windows, so the bound counts the windows they spanned
  // (about one on a quiet machine: at most 6 claims for 22 events).
  constexpr int kTrickle = 20;
  bool withdrawn = false;
  const auto trickle_started = std::chrono::steady_clock::now();
  for (int i = 0; i < kTrickle; ++i) {
    t.insert(1, 1);
    std::this_thread::sleep_for(25ms);
    withdrawn = withdrawn || t.waiting_entries() == 0;
  }
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == kTrickle + 3; }, 10s));
  const double used = claims() - claims_before;
  const double windows =
      std::ceil(std::chrono::duration<double>(std::chrono::steady_clock::now() - trickle_started) /
                c.coalesce_window.limit);
  EXPECT_LE(used, windows + 5) << "claims for " << kTrickle + 2 << " events over " << windows
                               << " windows";
  EXPECT_TRUE(withdrawn) << "commits kept coming and still notified";
  EXPECT_TRUE(eventually([&] { return t.waiting_entries() == 1; }, 5s))
      << "the commits stopped, and the relay did not register again";
}

// An event kept back from a batch (its key went to another topic in that batch) is
// claimed again once the batch is written back, with no NOTIFY and long before the poll
// interval: a quiet relay that skips claims nobody announced must not skip that one.
TEST(Relay, AKeptBackEventGoesOutRightAfterItsBatchWithoutWaitingForAPoll) {
  OutboxTestTable t;
  const std::string other = t.topic + "-other";
  testing::TopicAdmin admin(testbed::kafka_bootstrap());
  admin.create(t.topic, 1, 1, {});
  admin.create(other, 1, 1, {});
  auto c = quiet_relay_config(t);
  c.publish.router = relay::TopicRouter(t.topic, {{"moved", other}});
  ThreadRelay relay(c);
  ASSERT_TRUE(eventually([&] { return t.waiting_entries() == 1; }, 10s)) << "never went idle";
  std::this_thread::sleep_for(200ms);  // past the first, short wait after registering
  {
    pqxx::connection conn(t.dsn);
    pqxx::work tx(conn);
    enqueue(tx, t.table, "order", "k", R"({"seq": 0})");
    enqueue(tx, t.table, "moved", "k", R"({"seq": 1})");  // kept back: another topic
    tx.commit();
  }
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 2; }, 30s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << "waited for a poll";
}

// Under load the relay withdraws (every notifying commit serialises the writers' commits)
// and polls; idle again, it registers again.
TEST(Relay, ABusyRelayWithdrawsItsRegistrationAndRegistersAgainWhenIdle) {
  OutboxTestTable t;
  auto c = t.relay_config();
  // Many turns with something to claim, long enough for the checks below (a query every few
  // ms) to see the withdrawal on a quiet machine, where 5,000 events drained in about a second.
  c.batch_size = 10;
  ThreadRelay relay(c);
  ASSERT_TRUE(eventually([&] { return t.waiting_entries() == 1; }, 10s)) << "never went idle";
  t.insert(20'000, 100);
  bool withdrawn = false;
  ASSERT_TRUE(eventually(
      [&] {
        withdrawn = withdrawn || (t.waiting_entries() == 0 && t.count("status = 0") > 0);
        return t.count("status = 0") == 0;
      },
      120s));
  EXPECT_TRUE(withdrawn) << "registered through the whole drain";
  EXPECT_TRUE(eventually([&] { return t.waiting_entries() == 1; }, 10s)) << "idle, not registered";
}

// Log mode reads only below the oldest open transaction's id; that transaction's end
// sends no NOTIFY when it wrote no event. The relay must look again by itself, soon,
// not at the poll interval. (Status mode delivers at once; the test holds in both.)
TEST(Relay, AnEventHeldBackByAnUnrelatedTransactionGoesOutSoonAfterItEnds) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.poll_interval = 60s;
  ThreadRelay relay(c);
  std::this_thread::sleep_for(1s);  // let it go idle
  pqxx::connection other_conn(t.dsn);
  pqxx::work other(other_conn);
  other.exec("SELECT pg_current_xact_id()");  // an id, no event: like another service's write
  t.insert(1, 1);
  std::this_thread::sleep_for(500ms);
  const auto ended = std::chrono::steady_clock::now();
  other.commit();
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 1; }, 20s));
  EXPECT_LT(std::chrono::steady_clock::now() - ended, 5s);
}

// Holds a lock that the relay's next write-back waits for, until released: in status
// mode on the first event's row (every write-back of its batch updates it), in log mode
// on every shard's progress row.
class WriteBackBlocker {
 public:
  explicit WriteBackBlocker(const OutboxTestTable& t) : conn_(t.dsn), tx_(conn_) {
    tx_.exec(testing::table_mode() == TableMode::kLog
                 ? "SELECT shard FROM " + t.table.quoted_with_suffix("_progress") + " FOR UPDATE"
                 : "SELECT id FROM " + t.table.quoted() + " ORDER BY id LIMIT 1 FOR UPDATE");
  }
  void release() { tx_.abort(); }

 private:
  pqxx::connection conn_;
  pqxx::work tx_;
};

// The write-back of a settled batch runs behind the sends: a write-back that waits on
// a lock (or a slow WAL flush) holds up no delivery while it is younger than the
// write-behind limit, and the claims leave its events out meanwhile (none twice).
TEST(Relay, AStalledWriteBackHoldsUpNoDeliveryWithinTheWriteBehindLimit) {
  OutboxTestTable t;
  t.insert(200, 10);
  WriteBackBlocker blocker(t);
  auto c = t.relay_config();
  c.batch_size = 20;
  c.write_behind_limit = 120s;
  // A rebalance waits until nothing is behind, and a batch in flight stops claiming once
  // one is due: with the fixture's 200 ms, that and not the write-back would stop sends.
  c.rebalance_interval = 120s;
  ThreadRelay relay(c);
  auto got = consume_all({t.topic}, 200, 60s, 500ms);
  EXPECT_EQ(distinct_seqs(got), 200u)
      << "delivered while the first write-back waits; missing " << testing::missing_seqs(got, 200);
  EXPECT_EQ(got.size(), 200u) << "nothing claimed twice while its write-back is behind";
  EXPECT_EQ(t.count("status = 1"), 0) << "nothing written back yet";
  blocker.release();
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 200; }, 30s))
      << t.count("status = 1") << " of 200 written back after the lock went";
  EXPECT_EQ(per_key_order_problem(got), "");
  // The counter moves when the relay's thread collects a finished write-back, a moment
  // after its commit made the rows visible to the query above: no counter in the relay's
  // memory can move inside the database's commit. Here the later batches' settlements
  // queued behind the stalled one and go back in one write-back after it, so the rows can
  // all be written while the counter still holds only the first batch.
  const auto published = [&] {
    return testing::metric(relay, "outbox_events_published_total", t.table.plain());
  };
  EXPECT_TRUE(eventually([&] { return published() >= 200; }, 10s))
      << published() << " of 200 counted after all were written back";
  EXPECT_EQ(published(), 200) << "each event counted once";
}

// The fencing bound: once a write-back has run longer than the limit, the relay sends
// nothing more until it ends (a replica whose lock session is lost stops sending).
TEST(Relay, NoBatchIsSentOnceAWriteBackHasRunLongerThanTheLimit) {
  OutboxTestTable t;
  const int events = 5000;
  t.insert(events, 50);
  WriteBackBlocker blocker(t);
  auto c = t.relay_config();
  c.batch_size = 10;  // 500 batches: more than fit in the limit on any machine
  c.write_behind_limit = 100ms;
  c.rebalance_interval = 120s;  // so that only the limit can stop the sends
  ThreadRelay relay(c);
  std::this_thread::sleep_for(3s);
  const auto before = consume_all({t.topic}, events, 2s, 0ms);
  EXPECT_GT(distinct_seqs(before), 0u) << "sends went on at first";
  EXPECT_LT(distinct_seqs(before), static_cast<std::size_t>(events)) << "and stopped";
  EXPECT_EQ(t.count("status = 1"), 0);
  blocker.release();
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == events; }, 60s))
      << t.count("status = 1") << " of " << events << " sent after the lock went";
  const auto got = consume_all({t.topic}, events, 60s);
  EXPECT_EQ(distinct_seqs(got), static_cast<std::size_t>(events));
  EXPECT_EQ(got.size(), static_cast<std::size_t>(events)) << "none twice";
  EXPECT_EQ(per_key_order_problem(got), "");
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
  EXPECT_EQ(distinct_seqs(got), static_cast<std::size_t>(events))
      << "every event published; missing seqs: " << missing_seqs(got, events) << "; "
      << testing::partition_report(t.topic, got);
  EXPECT_EQ(got.size(), static_cast<std::size_t>(events))
      << "none twice in steady state; " << testing::partition_report(t.topic, got);
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

// Kafka unreachable without stopping the shared broker (so that it runs beside other tests):
// a relay whose bootstrap is a port nobody listens on defers its batch without counting an
// attempt, says Kafka is down, and its events stay pending.
TEST(Relay, AnUnreachableBrokerDefersWithoutBurningAttempts) {
  OutboxTestTable t;
  auto c = t.relay_config("127.0.0.1:1");
  c.kafka.message_timeout = 1s;
  ThreadRelay relay(c);
  t.insert(30, 5);
  ASSERT_TRUE(eventually(
      [&] { return metric(relay, "outbox_events_deferred_total", c.table) >= 30; }, 30s));
  EXPECT_EQ(metric(relay, "outbox_kafka_up", c.table), 0);
  std::this_thread::sleep_for(3s);  // a pause, a probe or another batch timing out
  EXPECT_EQ(t.count("status = 0"), 30) << "deferred events stay pending";
  EXPECT_EQ(t.count("retry_count > 0"), 0) << "no attempt is counted while Kafka is unreachable";
  EXPECT_EQ(t.count("status = 2"), 0);
  EXPECT_EQ(metric(relay, "outbox_kafka_up", c.table), 0);
}

// One event of key `key` larger than the 10,000 bytes the poison tests allow a message.
void enqueue_too_large(const OutboxTestTable& t, const std::string& key) {
  pqxx::connection conn(t.dsn);
  pqxx::work tx(conn);
  enqueue(tx, t.table, "order", key,
          nlohmann::json{{"seq", 0}, {"blob", std::string(20000, 'x')}}.dump());
  tx.commit();
}

TEST(Relay, APoisonEventEndsFailedWithTheReasonWhileOtherKeysFlow) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.kafka.properties["message.max.bytes"] = "10000";  // the producer refuses larger messages
  ThreadRelay relay(c);
  enqueue_too_large(t, "poison");
  t.insert(50, 5, 1);
  ASSERT_TRUE(
      eventually([&] { return t.count("status = 1") == 50 && t.count("status = 2") == 1; }, 60s));
  pqxx::connection conn(t.dsn);
  auto r = pqxx::nontransaction(conn).exec("SELECT biz_id, last_error FROM " + t.events() +
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

// spec.kafka.deadLetterTopic: an event moved to FAILED is FAILED in the table as without it,
// and a copy (key, payload, its headers) goes to the dead-letter topic with the reason and
// the topic it was meant for. Here one event cannot be routed and one has a headers column
// that is not an object (its copy then carries the relay's own headers only).
TEST(Relay, ADeadLetterTopicGetsACopyOfEveryFailedEventWithTheReason) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.publish.router = relay::TopicRouter(t.topic, {{"bad type", "not a topic!"}});
  c.publish.dead_letter_topic = t.topic + ".dead-letters";
  {
    pqxx::connection conn(t.dsn);
    pqxx::work tx(conn);
    const std::string insert = "INSERT INTO " + t.table.quoted() +
                               " (biz_type, biz_id, payload, headers) VALUES ($1, $2, $3::jsonb, "
                               "$4::jsonb)";
    tx.exec_params(insert, "bad type", "unroutable", R"({"seq": 0})", R"({"traceparent": "t-1"})");
    tx.exec_params(insert, "order", "bad-headers", R"({"seq": 0})", R"(["not", "an object"])");
    tx.commit();
  }
  t.insert(5, 5, 1);
  ThreadRelay relay(c);
  ASSERT_TRUE(
      eventually([&] { return t.count("status = 1") == 5 && t.count("status = 2") == 2; }, 30s));
  auto copies = consume_all({c.publish.dead_letter_topic}, 2, 30s, 2s);
  ASSERT_EQ(copies.size(), 2u);
  std::map<std::string, testing::Consumed> by_key;
  for (auto& m : copies) {
    by_key[m.key] = m;
  }
  pqxx::connection conn(t.dsn);
  const auto event_id = [&](const std::string& key) {
    return pqxx::nontransaction(conn)
        .exec_params1("SELECT event_id::text FROM " + t.events() + " WHERE biz_id = $1", key)[0]
        .as<std::string>();
  };
  const auto& unroutable = by_key.at("unroutable");
  EXPECT_EQ(nlohmann::json::parse(unroutable.payload), nlohmann::json::parse(R"({"seq": 0})"));
  EXPECT_EQ(unroutable.headers.at("event_id"), event_id("unroutable"));
  EXPECT_EQ(unroutable.headers.at("traceparent"), "t-1");
  EXPECT_EQ(unroutable.headers.at("outbox.topic"), "not a topic!");
  EXPECT_EQ(unroutable.headers.at("outbox.error").rfind("routing:", 0), 0u)
      << unroutable.headers.at("outbox.error");
  const auto& bad_headers = by_key.at("bad-headers");
  EXPECT_EQ(bad_headers.headers.at("event_id"), event_id("bad-headers"));
  EXPECT_EQ(bad_headers.headers.at("outbox.topic"), t.topic);
  EXPECT_EQ(bad_headers.headers.at("outbox.error").rfind("headers:", 0), 0u);
  EXPECT_EQ(bad_headers.headers.size(), 6u) << "the relay's four and the two outbox.* ones";
  EXPECT_EQ(consume_all({t.topic}, 5, 30s, 1s).size(), 5u) << "no copy on the events' topic";
  const std::string metrics = relay.registry().render();
  EXPECT_NE(metrics.find("outbox_events_dead_lettered_total{table=\"" + t.table.plain() + "\"} 2"),
            std::string::npos)
      << metrics;
}

// A copy the dead-letter topic refuses (here too large, like the event itself) loses
// nothing: the event is FAILED with its reason, the refusal counted.
TEST(Relay, AFailedEventWhoseDeadLetterCopyIsRefusedIsFailedAllTheSame) {
  OutboxTestTable t;
  auto c = t.relay_config();
  c.kafka.properties["message.max.bytes"] = "10000";
  c.publish.dead_letter_topic = t.topic + ".dead-letters";
  ThreadRelay relay(c);
  enqueue_too_large(t, "poison");
  t.insert(3, 3, 1);
  ASSERT_TRUE(
      eventually([&] { return t.count("status = 1") == 3 && t.count("status = 2") == 1; }, 60s));
  EXPECT_EQ(t.count("status = 2 AND biz_id = 'poison' AND last_error LIKE '%too large%'"), 1);
  EXPECT_TRUE(eventually(
      [&] {
        return relay.registry().render().find("outbox_dead_letter_refused_total{table=\"" +
                                              t.table.plain() + "\"} 1") != std::string::npos;
      },
      10s))
      << relay.registry().render();
  EXPECT_TRUE(consume_all({c.publish.dead_letter_topic}, 1, 5s, 0s).empty());
}

// Kafka orders a key's events within one partition only. When the head of a key
// is refused and later events of the key route to another topic, only the relay
// can keep them from being delivered first: at the head's first attempt (one
// batch holds them all) and at each of its retries (issue 12: the due retry was
// claimed together with the later events, which were delivered while it failed
// again). Other keys on the same topic keep flowing meanwhile.
TEST(Relay, LaterEventsOfAKeyOnAnotherTopicWaitUntilItsRefusedHeadIsDelivered) {
  OutboxTestTable t;
  const std::string refusing = t.topic + "-refusing";
  testing::TopicAdmin admin(testbed::kafka_bootstrap());
  // A record whose timestamp lies before the broker's clock when it arrives is
  // refused with INVALID_TIMESTAMP: a refusal that may pass, an attempt counted.
  admin.create(refusing, 1, 1, {{"message.timestamp.before.max.ms", "0"}});
  admin.create(t.topic, 3, 1, {});
  auto c = t.relay_config();
  // The timestamp is taken when the relay hands a message over; lingering that
  // long before sending makes every record late (on loopback, a record sent at
  // once can arrive within the millisecond it was stamped and pass).
  c.kafka.linger = 100ms;
  c.publish.router = relay::TopicRouter(t.topic, {{"head", refusing}});
  c.publish.max_attempts = 1000;  // keep retrying (every 0.2 s up to 1 s) until the topic is fixed
  ThreadRelay relay(c);
  auto enqueue_all = [&](const std::vector<std::tuple<std::string, std::string, int>>& events) {
    pqxx::connection conn(t.dsn);
    pqxx::work tx(conn);
    for (const auto& [type, key, seq] : events) {
      enqueue(tx, t.table, type, key, nlohmann::json{{"seq", seq}, {"key", key}}.dump());
    }
    tx.commit();
  };
  auto head_attempts = [&] {
    pqxx::connection conn(t.dsn);
    return pqxx::nontransaction(conn)
        .exec("SELECT retry_count FROM " + t.events() + " WHERE biz_type = 'head'")[0][0]
        .as<int>();
  };

  // The head and a later event of its key in one transaction: one batch.
  enqueue_all({{"head", "k", 0}, {"later", "k", 1}, {"later", "other", 100}});
  ASSERT_TRUE(eventually(
      [&] { return head_attempts() >= 1 && t.count("biz_id = 'other' AND status = 1") == 1; },
      30s));
  // More events of the key while the head waits for its retry; they must wait
  // through at least two retries that come due beside them.
  enqueue_all({{"later", "k", 2}, {"later", "k", 3}, {"later", "other", 101}});
  const int attempts_before = head_attempts();
  ASSERT_TRUE(eventually([&] { return head_attempts() >= attempts_before + 2; }, 30s));
  ASSERT_TRUE(eventually([&] { return t.count("biz_id = 'other' AND status = 1") == 2; }, 30s))
      << "a key without a failing event is not held up";
  auto early = consume_all({t.topic}, 2, 20s);
  for (const auto& m : early) {
    EXPECT_NE(m.key, "k") << "seq " << m.payload << " of key k reached Kafka while its head "
                          << "was still refused";
  }
  EXPECT_EQ(t.count("biz_id = 'k' AND biz_type = 'later' AND (status <> 0 OR retry_count > 0)"), 0)
      << "the later events of k were never attempted";

  admin.set_config(refusing, {{"message.timestamp.before.max.ms", "9223372036854775807"}});
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 6; }, 60s))
      << t.count("status = 0") << " pending, " << t.count("status = 2") << " failed";
  auto got = consume_all({refusing, t.topic}, 6, 30s);
  EXPECT_EQ(distinct_seqs(got), 6u);
  long long head_at = -1;
  for (const auto& m : got) {
    if (m.topic == refusing) {
      head_at = m.timestamp_ms;
    }
  }
  ASSERT_GE(head_at, 0) << "the head reached Kafka";
  for (const auto& m : got) {
    if (m.key == "k" && m.topic == t.topic) {
      EXPECT_GE(m.timestamp_ms, head_at) << m.payload << " was produced before its head";
    }
  }
  EXPECT_NE(relay.registry().render().find("outbox_order_anomalies_total{table=\"" +
                                           t.table.plain() + "\"} 0"),
            std::string::npos);
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
  ASSERT_TRUE(testing::eventually([&] { return !relay.health().problem().empty(); }, 10s));
  EXPECT_NE(relay.health().problem().find("does not exist"), std::string::npos)
      << relay.health().problem();
  EXPECT_NE(relay.health().problem().find("migrate"), std::string::npos) << "says what to fix";
  EXPECT_FALSE(relay.health().ready());
  pqxx::connection conn(c.dsn);
  auto table = TableName::parse(c.table);
  testing::migrate_for_test(conn, table);
  {
    pqxx::work tx(conn);
    enqueue(tx, table, "order", "k", R"({"seq": 1})");
    tx.commit();
  }
  ASSERT_TRUE(testing::eventually(
      [&] {
        return pqxx::nontransaction(conn)
                   .exec("SELECT count(*) FROM " +
                         (testing::table_mode() == TableMode::kLog
                              ? table.quoted_with_suffix("_status")
                              : table.quoted()) +
                         " WHERE status = 1")[0][0]
                   .as<int>() == 1;
      },
      30s));
  EXPECT_TRUE(relay.health().problem().empty());
}

// spec.relay.shards reaches the relay as --shards: a table created with another
// count is refused (claiming with the wrong count would hand keys to two
// replicas), with both counts and the fix in the readiness problem.
TEST(Relay, ATableWithAnotherShardCountThanSetIsRefusedNamingBoth) {
  testing::OutboxTestTable t;  // 16 shards
  t.insert(1, 1);
  auto c = t.relay_config();
  c.shards = 64;
  {
    testing::ThreadRelay relay(c);
    ASSERT_TRUE(testing::eventually([&] { return !relay.health().problem().empty(); }, 10s));
    const std::string problem = relay.health().problem();
    EXPECT_NE(problem.find("shards is 64 but table " + t.table.plain() + " was created with 16"),
              std::string::npos)
        << problem;
    EXPECT_FALSE(relay.health().ready());
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(t.count("status = 1"), 0) << "nothing published on the wrong count";
  }
  c.shards = 16;
  testing::ThreadRelay relay(c);
  ASSERT_TRUE(testing::eventually([&] { return t.count("status = 1") == 1; }, 30s));
}

}  // namespace
}  // namespace outbox
