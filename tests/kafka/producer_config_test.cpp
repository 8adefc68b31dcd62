// The Kafka Secret cannot weaken the producer guarantees the relay relies on.
// Unit: no broker (a producer is created, but nothing is sent).
#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kafka/producer.hpp"
#include "metrics/registry.hpp"
#include "relay/relay.hpp"
#include "support/testbed.hpp"

namespace outbox::kafka {
namespace {

ProducerConfig config_with(const std::string& key, const std::string& value) {
  ProducerConfig c;
  c.bootstrap_servers = "127.0.0.1:1";
  c.properties[key] = value;
  return c;
}

// The producer refuses the property with a message naming it and saying why.
void expect_refused(const std::string& key, const std::string& value, const std::string& why) {
  const std::string problem = guarantee_problem(config_with(key, value).properties);
  EXPECT_NE(problem.find("kafka property " + key + "=" + value + " is refused"), std::string::npos)
      << problem;
  EXPECT_NE(problem.find(why), std::string::npos) << problem;
  try {
    BatchProducer producer(config_with(key, value));
    ADD_FAILURE() << key << "=" << value << " was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), problem);
  }
}

void expect_accepted(const std::string& key, const std::string& value) {
  EXPECT_EQ(guarantee_problem(config_with(key, value).properties), "") << key << "=" << value;
  EXPECT_NO_THROW(BatchProducer producer(config_with(key, value))) << key << "=" << value;
}

TEST(ProducerGuarantees, IdempotenceCannotBeTurnedOff) {
  expect_refused("enable.idempotence", "false", "idempotent producer");
  expect_accepted("enable.idempotence", "true");
}

TEST(ProducerGuarantees, AcksCannotBeWeakened) {
  expect_refused("acks", "1", "acks=all");
  expect_refused("acks", "0", "acks=all");
  expect_refused("request.required.acks", "1", "acks=all");
  expect_accepted("acks", "all");
  expect_accepted("acks", "-1");
}

TEST(ProducerGuarantees, AtMostFiveRequestsInFlight) {
  expect_refused("max.in.flight.requests.per.connection", "6", "1 to 5 requests in flight");
  expect_refused("max.in.flight", "1000", "1 to 5 requests in flight");
  expect_accepted("max.in.flight.requests.per.connection", "5");
  expect_accepted("max.in.flight", "1");
}

TEST(ProducerGuarantees, PartitionerMustHashTheKey) {
  expect_refused("partitioner", "random", "partition their key hashes to");
  expect_refused("partitioner", "fnv1a_random", "partition their key hashes to");
  expect_accepted("partitioner", "murmur2_random");
  expect_accepted("partitioner", "consistent_random");
}

TEST(ProducerGuarantees, RetriesCannotBeZero) {
  expect_refused("retries", "0", "without retries");
  expect_refused("message.send.max.retries", "0", "without retries");
  expect_accepted("retries", "10");
}

TEST(ProducerGuarantees, OtherPropertiesStillPassThrough) {
  expect_accepted("linger.ms", "5");
  expect_accepted("security.protocol", "plaintext");
}

// The refusal reaches the relay's readiness problem (and so /readyz and the
// resource's status) instead of crashing the relay: no Relay is built with it
// (KafkaRefused), and stay_not_ready() keeps its health not ready with the reason.
TEST(ProducerGuarantees, ARefusedPropertyIsTheRelaysReadinessProblem) {
  relay::RelayConfig c;
  c.dsn = "host=127.0.0.1 port=1";
  c.kafka = config_with("acks", "1");
  metrics::Registry registry;
  relay::RelayHealth health;
  std::string refused;
  try {
    relay::Relay relay(c, registry, health);
    ADD_FAILURE() << "a relay was built with acks=1";
  } catch (const relay::KafkaRefused& e) {
    refused = e.what();
  }
  EXPECT_EQ(refused, guarantee_problem(c.kafka.properties));
  EXPECT_NE(registry.render().find("outbox_build_info{"), std::string::npos)
      << "the metrics are served while not ready";
  std::stop_source stop;
  relay::RunEnd end = relay::RunEnd::kKafkaCredentialsChanged;
  std::thread runner(
      [&] { end = relay::stay_not_ready(health, refused, FileWatch(), stop.get_token()); });
  for (int i = 0; i < 100 && health.problem().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(health.ready());
  EXPECT_EQ(health.problem(), guarantee_problem(c.kafka.properties));
  EXPECT_LT(health.since_last_beat(), std::chrono::seconds(1)) << "alive for /healthz";
  stop.request_stop();
  runner.join();
  EXPECT_EQ(end, relay::RunEnd::kStopped);
}

// The Secret fixed: the kubelet rewrites the mounted properties, and the relay, which cannot
// give a running producer new properties, ends so that its process starts again with them.
TEST(ProducerGuarantees, ARelayNotReadyForRefusedPropertiesEndsOnceTheirFilesChange) {
  const std::string dir = "/tmp/" + testbed::unique_name("kafka-config");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/acks") << "1";
  relay::RelayHealth health;
  std::stop_source stop;
  std::atomic<bool> ended = false;
  relay::RunEnd end = relay::RunEnd::kStopped;
  std::thread runner([&] {
    end = relay::stay_not_ready(health, "refused", FileWatch({dir}), stop.get_token());
    ended = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(ended) << "nothing changed yet";
  std::ofstream(dir + "/acks") << "all";
  for (int i = 0; i < 150 && !ended; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.request_stop();
  runner.join();
  EXPECT_EQ(end, relay::RunEnd::kKafkaCredentialsChanged);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace outbox::kafka
