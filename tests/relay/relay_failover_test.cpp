// The relay against the test bed's 3-node Kafka cluster (up.sh kafka3: replication
// factor 3, min.insync.replicas 2), as production runs it: a partition leader's broker
// crashes under load, and two brokers of three go down. The relay publishes with its
// own producer settings (acks=all, idempotence); nothing in these tests weakens them.
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "kafka/producer.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"
#include "topic_admin.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::consume_all;
using testing::distinct_seqs;
using testing::eventually;
using testing::metric;
using testing::OutboxTestTable;
using testing::PartitionInfo;
using testing::per_key_order_problem;
using testing::ThreadRelay;
using testing::TopicAdmin;

constexpr int kPartitions = 6;
constexpr int kKeys = 20;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// How many partitions each broker leads; -1 counts partitions without a leader.
std::map<int, int> leaders(const std::vector<PartitionInfo>& partitions) {
  std::map<int, int> count;
  for (const auto& p : partitions) {
    ++count[p.leader];
  }
  return count;
}

std::string describe(const std::vector<PartitionInfo>& partitions) {
  std::string out;
  for (const auto& p : partitions) {
    out += " p" + std::to_string(p.id) + ":leader=" + std::to_string(p.leader) +
           ",isr=" + std::to_string(p.isr.size());
  }
  return out.empty() ? " (no metadata)" : out;
}

// Every partition has a leader and all three replicas in sync.
bool fully_replicated(TopicAdmin& admin, const std::string& topic, int partitions) {
  auto ps = admin.partitions(topic, 5s);
  if (static_cast<int>(ps.size()) != partitions) {
    return false;
  }
  for (const auto& p : ps) {
    if (p.leader < 0 || p.isr.size() != 3) {
      return false;
    }
  }
  return true;
}

// Puts every node of the cluster back whatever the test did, so that a failed
// assertion does not leave the next test (or test run) with brokers down.
struct ClusterRestorer {
  ~ClusterRestorer() {
    try {
      testbed::control("kafka3", "start");  // starts only the nodes that are down
    } catch (const std::exception& e) {
      ADD_FAILURE() << "could not restart the 3-node cluster: " << e.what();
    }
  }
};

// Produces one message with acks=all and no retries, and returns its delivery
// report's error code: the broker's own answer, not librdkafka's timeout after
// retrying it. Not idempotent: with two nodes of three down the controller quorum
// is lost, and with it the allocation of producer ids, so a new idempotent producer
// would wait for one until its message timed out (the relay's producer got its id
// before the outage and keeps it).
rd_kafka_resp_err_t produce_one(const std::string& bootstrap, const std::string& topic) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : std::map<std::string, std::string>{{"bootstrap.servers", bootstrap},
                                                               {"enable.idempotence", "false"},
                                                               {"acks", "all"},
                                                               {"retries", "0"},
                                                               {"message.timeout.ms", "20000"}}) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(err);
    }
  }
  static rd_kafka_resp_err_t reported;
  reported = RD_KAFKA_RESP_ERR__FAIL;
  rd_kafka_conf_set_dr_msg_cb(
      conf, [](rd_kafka_t*, const rd_kafka_message_t* m, void*) { reported = m->err; });
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) {
    throw std::runtime_error(err);
  }
  std::string payload = "probe";
  rd_kafka_resp_err_t queued =
      rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY("probe", 5),
                        RD_KAFKA_V_VALUE(payload.data(), payload.size()),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
  if (queued == RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_flush(rk, 30'000);  // the delivery report comes within message.timeout.ms
  } else {
    reported = queued;
  }
  rd_kafka_destroy(rk);
  return reported;
}

class RelayFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    bootstrap_ = testbed::kafka3_bootstrap();
    if (bootstrap_.empty()) {
      GTEST_SKIP() << "OUTBOX_TEST_KAFKA3_BOOTSTRAP is unset: these tests need the 3-node Kafka "
                      "cluster; start it with scripts/testbed/up.sh pg kafka3 (scripts/test.sh "
                      "does) and source the env file it prints";
    }
    // A node left down by an earlier run that died halfway comes back first.
    testbed::control("kafka3", "start");
    admin_ = std::make_unique<TopicAdmin>(bootstrap_);
  }

  // The topic as production would have it: replicated on all three nodes, and
  // min.insync.replicas 2 set on the topic itself (not only as the cluster default).
  void create_topic(const std::string& topic, int partitions) {
    admin_->create(topic, partitions, 3, {{"min.insync.replicas", "2"}});
    ASSERT_TRUE(eventually([&] { return fully_replicated(*admin_, topic, partitions); }, 60s))
        << topic << ":" << describe(admin_->partitions(topic, 5s));
  }

  // The relay with the producer's defaults (acks=all, idempotence, the default
  // message timeout), on the 3-node cluster.
  relay::RelayConfig relay_config(const OutboxTestTable& t) const {
    auto c = t.relay_config(bootstrap_);
    c.kafka.message_timeout = kafka::ProducerConfig{}.message_timeout;
    return c;
  }

  std::string bootstrap_;
  std::unique_ptr<TopicAdmin> admin_;
};

// Scenario A. The broker that leads the most partitions is killed (SIGKILL) while a
// writer commits events for 20 keys and the relay publishes them; it comes back
// once its partitions have new leaders, and takes its leadership back (preferred
// leader election, every 10 s on the test bed) while the load goes on. Leadership
// thus moves twice under load. Every committed event must arrive, each key's events
// in order, and no event may have an attempt counted or end FAILED: a moving leader
// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, timeouts while the dead broker is
// still in the ISR) is the cluster's state, not the event's fault (docs/relay.md).
TEST_F(RelayFailover, KillingThePartitionLeadersBrokerLosesNothingKeepsOrderAndBurnsNoAttempt) {
  const auto test_started = Clock::now();
  ClusterRestorer restore;
  OutboxTestTable t;
  ASSERT_NO_FATAL_FAILURE(create_topic(t.topic, kPartitions));
  ThreadRelay relay(relay_config(t));

  std::atomic<bool> stop_writing{false};
  std::atomic<int> committed{0};
  std::string writer_problem;  // read after the join
  std::thread writer([&] {
    // One transaction of 20 events, one per key, every 30 ms plus its commit.
    try {
      while (!stop_writing) {
        t.insert(kKeys, kKeys, committed);
        committed += kKeys;
        std::this_thread::sleep_for(30ms);
      }
    } catch (const std::exception& e) {
      writer_problem = e.what();
    }
  });
  struct JoinWriter {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~JoinWriter() {
      stop = true;
      if (thread.joinable()) {
        thread.join();
      }
    }
  } join_writer{stop_writing, writer};

  ASSERT_TRUE(eventually([&] { return t.count("status = 1") >= 500; }, 120s))
      << "the relay publishes before the crash: " << t.count("status = 1") << " sent";

  const auto before = admin_->partitions(t.topic, 5s);
  int victim = -1;
  int most = 0;
  for (const auto& [broker, led] : leaders(before)) {
    if (broker >= 1 && led > most) {
      victim = broker;
      most = led;
    }
  }
  ASSERT_GE(victim, 1) << describe(before);
  const long long sent_at_kill = t.count("status = 1");
  testbed::control("kafka3-" + std::to_string(victim), "kill9");
  const auto killed_at = Clock::now();

  // The controller fences the dead broker after its session timeout (5 s) and
  // elects new leaders from the ISR; the writer and the relay carry on meanwhile.
  ASSERT_TRUE(eventually(
      [&] {
        auto ps = admin_->partitions(t.topic, 5s);
        auto now = leaders(ps);
        // Every partition led, and by a live broker.
        return static_cast<int>(ps.size()) == kPartitions && now.count(victim) == 0 &&
               now.count(-1) == 0;
      },
      90s))
      << "leadership did not move off broker " << victim << ":"
      << describe(admin_->partitions(t.topic, 5s));
  const double moved_after = seconds_since(killed_at);
  const long long sent_before_restart = t.count("status = 1");
  std::this_thread::sleep_for(2s);  // a little load on the two survivors alone
  testbed::control("kafka3-" + std::to_string(victim), "start");  // returns once unfenced
  const double restarted_after = seconds_since(killed_at);
  // Back in the ISR, then preferred leader again: the second move, still under load.
  const bool led_again =
      eventually([&] { return leaders(admin_->partitions(t.topic, 5s)).count(victim) != 0; }, 90s);
  const double back_after = seconds_since(killed_at);
  std::this_thread::sleep_for(2s);
  stop_writing = true;
  writer.join();
  ASSERT_EQ(writer_problem, "") << "the writer stopped early";
  const int events = committed;

  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == events; }, 240s))
      << t.count("status = 0") << " pending, " << t.count("status = 2") << " failed of " << events;
  const double drained_after = seconds_since(killed_at);
  EXPECT_EQ(t.count("status = 2"), 0) << "no event ended FAILED";
  EXPECT_EQ(t.count("retry_count > 0"), 0) << "no attempt burned while leadership moved";
  EXPECT_EQ(metric(relay, "outbox_events_retried_total", t.table.plain()), 0);

  auto got = consume_all({t.topic}, static_cast<std::size_t>(events), 180s, 3s, bootstrap_);
  std::set<std::string> event_ids;
  for (const auto& m : got) {
    event_ids.insert(m.headers.count("event_id") != 0 ? m.headers.at("event_id") : "");
  }
  EXPECT_EQ(distinct_seqs(got), static_cast<std::size_t>(events)) << "0 lost";
  EXPECT_EQ(event_ids.size(), static_cast<std::size_t>(events)) << "distinct event ids";
  EXPECT_EQ(per_key_order_problem(got), "");
  EXPECT_EQ(metric(relay, "outbox_order_anomalies_total", t.table.plain()), 0);

  std::cout << "[ info ] killed broker " << victim << " (led " << most << " of " << kPartitions
            << " partitions) after " << sent_at_kill << " sent; leaders moved after " << moved_after
            << " s (" << sent_before_restart - sent_at_kill
            << " sent meanwhile); restarted and ready after " << restarted_after
            << " s; preferred leader again: " << (led_again ? "yes" : "NO") << " after "
            << back_after << " s; " << events << " events drained " << drained_after
            << " s after the kill; " << static_cast<long>(got.size()) - events
            << " duplicates; deferred "
            << metric(relay, "outbox_events_deferred_total", t.table.plain())
            << " times; test took " << seconds_since(test_started) << " s\n";
}

// Scenario B. Two brokers of three stop (cleanly: the controller moves every
// leadership to the survivor and shrinks the ISR to it). With min.insync.replicas 2
// an acks=all write cannot be acknowledged: the survivor refuses it with
// NOT_ENOUGH_REPLICAS (or, where the ISR could not shrink any more once the controller
// quorum was lost, it times out). The rule, from docs/relay.md: either is "Kafka
// unreachable", the event stays pending exactly as it was, with no attempt counted,
// however long the outage lasts: so not one event may be FAILED or have an attempt
// counted, not merely a bounded number. When the brokers return, everything is
// delivered, each key's events in order.
TEST_F(RelayFailover, TwoBrokersDownDefersEveryEventThenDeliversInOrderWhenTheyReturn) {
  const auto test_started = Clock::now();
  ClusterRestorer restore;
  OutboxTestTable t;
  ASSERT_NO_FATAL_FAILURE(create_topic(t.topic, kPartitions));
  const std::string probe_topic = t.topic + "-probe";  // keeps the probe off the checked topic
  ASSERT_NO_FATAL_FAILURE(create_topic(probe_topic, 1));
  ThreadRelay relay(relay_config(t));
  t.insert(60, kKeys);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 60; }, 60s));

  // Node 3 stays; nodes 1 and 2 stop one after the other, each returning once gone.
  const auto down_at = Clock::now();
  testbed::control("kafka3-1", "stop");
  testbed::control("kafka3-2", "stop");
  const double stopped_after = seconds_since(down_at);

  // What a producer with the relay's guarantees gets now, and how the relay classes it.
  const rd_kafka_resp_err_t refusal = produce_one(bootstrap_, probe_topic);
  std::cout << "[ info ] acks=all produce with two brokers down: " << rd_kafka_err2name(refusal)
            << " (" << rd_kafka_err2str(refusal) << ")\n";
  const std::set<rd_kafka_resp_err_t> expected_refusals = {
      RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
      RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT};
  EXPECT_EQ(expected_refusals.count(refusal), 1u)
      << "an acks=all write with one in-sync replica is refused or times out, not "
      << rd_kafka_err2name(refusal);
  EXPECT_EQ(kafka::classify_error(refusal), kafka::ErrorClass::kUnreachable)
      << rd_kafka_err2name(refusal) << " must defer, not count an attempt";

  for (int chunk = 0; chunk < 10; ++chunk) {
    t.insert(kKeys, kKeys, 60 + chunk * kKeys);
  }
  // Let the relay try and defer: as many deferrals as pending events at least (each
  // try takes up to the message timeout, 10 s, then a pause and a probe).
  const double deferred_before = metric(relay, "outbox_events_deferred_total", t.table.plain());
  ASSERT_TRUE(eventually(
      [&] {
        return metric(relay, "outbox_events_deferred_total", t.table.plain()) >=
               deferred_before + 200;
      },
      240s))
      << "deferred " << metric(relay, "outbox_events_deferred_total", t.table.plain());
  const double deferred = metric(relay, "outbox_events_deferred_total", t.table.plain());
  EXPECT_EQ(t.count("status = 1"), 60) << "nothing acknowledged with one in-sync replica";
  EXPECT_EQ(t.count("status = 0"), 200) << "the backlog waits";
  EXPECT_EQ(t.count("status = 2"), 0) << "no event FAILED while two brokers are down";
  EXPECT_EQ(t.count("retry_count > 0"), 0) << "no attempt counted while two brokers are down";
  const double outage = seconds_since(down_at);

  const auto back_at = Clock::now();
  testbed::control("kafka3-1", "start");
  testbed::control("kafka3-2", "start");
  const double restarted_after = seconds_since(back_at);
  const auto ready_at = Clock::now();
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 260; }, 240s))
      << t.count("status = 0") << " pending, " << t.count("status = 2") << " failed";
  const double drained_after = seconds_since(ready_at);
  EXPECT_EQ(t.count("status = 2"), 0);
  EXPECT_EQ(t.count("retry_count > 0"), 0);
  EXPECT_EQ(metric(relay, "outbox_events_retried_total", t.table.plain()), 0);

  auto got = consume_all({t.topic}, 260, 180s, 3s, bootstrap_);
  EXPECT_EQ(distinct_seqs(got), 260u) << "0 lost";
  EXPECT_EQ(per_key_order_problem(got), "");
  EXPECT_EQ(metric(relay, "outbox_order_anomalies_total", t.table.plain()), 0);

  std::cout << "[ info ] two brokers stopped in " << stopped_after << " s; " << deferred
            << " deferrals in " << outage << " s of outage, 0 attempts counted; brokers ready "
            << restarted_after << " s after their start; the 200 pending drained " << drained_after
            << " s after that; " << static_cast<long>(got.size()) - 260 << " duplicates; test took "
            << seconds_since(test_started) << " s\n";
}

}  // namespace
}  // namespace outbox
