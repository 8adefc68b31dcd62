// The relay against librdkafka's mock cluster (a stand-in for a broker, used
// where the real one cannot be made to refuse exactly the requests a test
// needs) and the real PostgreSQL.
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <stdexcept>

#include "relay_fixture.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;

// An in-process mock Kafka cluster with error injection.
class MockCluster {
 public:
  explicit MockCluster(int brokers) {
    char err[512];
    handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof err);
    if (handle_ == nullptr) {
      throw std::runtime_error(err);
    }
    cluster_ = rd_kafka_mock_cluster_new(handle_, brokers);
    if (cluster_ == nullptr) {
      throw std::runtime_error("rd_kafka_mock_cluster_new failed");
    }
  }
  ~MockCluster() {
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(handle_);
  }
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;

  std::string bootstrap() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }
  void create_topic(const std::string& topic, int partitions) {
    rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
  }
  // The next `count` Produce requests (from any client) fail with `error`.
  void fail_next_produce_requests(std::size_t count, rd_kafka_resp_err_t error) {
    std::vector<rd_kafka_resp_err_t> errors(count, error);
    rd_kafka_mock_push_request_errors_array(cluster_, kProduceApiKey, count, errors.data());
  }

 private:
  static constexpr int16_t kProduceApiKey = 0;
  rd_kafka_t* handle_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

// The pipelined relay claims batch k+1 while batch k is in flight. When the
// broker refuses some of k, k+1 must not publish later events of those keys:
// they wait until the refused events are retried (docs/relay.md, "Order per key").
TEST(RelayMockKafka, RefusedEventsAreNeverOvertakenByLaterEventsOfTheirKey) {
  MockCluster kafka(1);
  testing::OutboxTestTable t;
  kafka.create_topic(t.topic, 3);
  auto c = t.relay_config();
  c.kafka.bootstrap_servers = kafka.bootstrap();
  c.batch_size = 40;  // 8 events of each of 5 keys per batch: every batch holds every key
  // One produce request per batch: within a request the broker's sequence checks
  // keep order (the mock does not check them), across batches the relay must.
  c.kafka.linger = std::chrono::milliseconds(5);
  t.insert(600, 5);
  // Not retried inside librdkafka; the relay counts an attempt and backs off.
  kafka.fail_next_produce_requests(4, RD_KAFKA_RESP_ERR_POLICY_VIOLATION);
  testing::ThreadRelay relay(c);
  ASSERT_TRUE(testing::eventually([&] { return t.count("status = 1") == 600; }, 60s))
      << t.count("status = 0") << " pending, " << t.count("status = 2") << " failed";
  // Counted by the relay: log mode keeps no attempt count once a retry is delivered.
  EXPECT_GT(testing::metric(relay, "outbox_events_retried_total", t.table.plain()), 0)
      << "the injected refusals must have hit some events";
  // Generous: the mock cluster's group join is slow on a loaded machine; it returns at 600.
  auto got = testing::consume_all({t.topic}, 600, 90s, 1500ms, kafka.bootstrap());
  EXPECT_EQ(testing::distinct_seqs(got), 600u);
  EXPECT_EQ(testing::per_key_order_problem(got), "");
}

// --ordering none (spec.relay.ordering None): the same refusals hold nothing back.
// Later events of the refused keys go out while the refused ones wait out a
// backoff longer than the whole drain, so consumers see those keys reordered:
// proof that the per-key holding is skipped, not merely cheap. Nothing is lost.
TEST(RelayMockKafka, WithoutPerKeyOrderRefusedEventsHoldNothingBack) {
  MockCluster kafka(1);
  testing::OutboxTestTable t;
  kafka.create_topic(t.topic, 3);
  auto c = t.relay_config();
  c.kafka.bootstrap_servers = kafka.bootstrap();
  c.batch_size = 40;
  c.kafka.linger = std::chrono::milliseconds(5);
  c.publish.per_key_order = false;
  c.publish.backoff.initial = std::chrono::seconds(8);
  c.publish.backoff.max = std::chrono::seconds(8);
  c.publish.backoff.jitter = 0;
  t.insert(600, 5);
  kafka.fail_next_produce_requests(1, RD_KAFKA_RESP_ERR_POLICY_VIOLATION);
  testing::ThreadRelay relay(c);
  // Everything but the refused events, before their retry is due.
  ASSERT_TRUE(testing::eventually(
      [&] { return t.count("status = 1") >= 560 && t.count("retry_count > 0") > 0; }, 6s))
      << t.count("status = 1") << " sent, " << t.count("retry_count > 0") << " retrying";
  EXPECT_GT(t.count("status = 0 AND retry_count > 0"), 0) << "the refused wait for their retry";
  ASSERT_TRUE(testing::eventually([&] { return t.count("status = 1") == 600; }, 60s));
  auto got = testing::consume_all({t.topic}, 600, 90s, 1500ms, kafka.bootstrap());
  EXPECT_EQ(testing::distinct_seqs(got), 600u);
  EXPECT_NE(testing::per_key_order_problem(got), "") << "no key was reordered";
}

}  // namespace
}  // namespace outbox
