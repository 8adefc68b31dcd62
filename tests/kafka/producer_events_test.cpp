// What the relay logs of librdkafka's errors. Unit: no broker.
#include <chrono>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "kafka/producer.hpp"

namespace outbox::kafka {
namespace {

TEST(ProducerEvents, AConnectionErrorIsLoggedOnce) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  {
    ProducerConfig c;
    c.bootstrap_servers = "127.0.0.1:1";  // nothing listens: connection refused
    BatchProducer producer(c);
    producer.probe(std::chrono::milliseconds(300));
    producer.flush(std::chrono::milliseconds(300));  // serves the queued events
  }
  spdlog::set_default_logger(previous);
  const std::string log = out.str();
  const std::string refused = "Connect to ipv4#127.0.0.1:1 failed: Connection refused";
  // librdkafka suppresses identical repeats itself and, when the next reconnect fails within
  // the test's 600 ms, reports it once with "(N identical error(s) suppressed)". That line is a
  // later attempt; the relay must not double the first one (log line and error event both).
  int first_attempt_lines = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(refused) != std::string::npos &&
        line.find("identical error(s) suppressed") == std::string::npos) {
      ++first_attempt_lines;
    }
  }
  EXPECT_EQ(first_attempt_lines, 1) << log;
}

TEST(ProducerEvents, TheFailLogLineIsDroppedForItsErrorEvent) {
  const std::string text = "kafka:9092/1: Connect to ipv4#10.0.0.1:9092 failed: Connection refused";
  EXPECT_EQ(client_event_line(false, "FAIL", "[thrd:kafka:9092/1]: " + text, false), "");
  EXPECT_EQ(client_event_line(true, "", text, false), text);
  EXPECT_EQ(client_event_line(false, "CONFWARN", "property x is deprecated", false),
            "CONFWARN property x is deprecated");
}

TEST(ProducerEvents, TheSecurityProtocolHintIsDroppedOnceABrokerAnswered) {
  const std::string stop =
      "kafka:9092/1: Disconnected: verify that security.protocol is correctly configured, broker "
      "might require SASL authentication (after 36ms in state UP)";
  EXPECT_EQ(client_event_line(true, "", stop, true),
            "kafka:9092/1: Disconnected by the broker (after 36ms in state UP)");
  const std::string apiversion =
      "kafka:9092/1: Disconnected while requesting ApiVersion: might be caused by incorrect "
      "security.protocol configuration (connecting to a SSL listener?) or broker version is < "
      "0.10 (see api.version.request) (after 1ms in state APIVERSION_QUERY)";
  EXPECT_EQ(client_event_line(true, "", apiversion, true),
            "kafka:9092/1: Disconnected while requesting ApiVersion (after 1ms in state "
            "APIVERSION_QUERY)");
  // Before any broker answered, a wrong protocol is a likely cause: the hint stays.
  EXPECT_EQ(client_event_line(true, "", stop, false), stop);
}

TEST(ProducerEvents, AScramRefusalNamesTheLibrdkafkaNonceBugOnlyWhereItApplies) {
  const std::string refused =
      "sasl_ssl://kafka:9093/bootstrap: SASL authentication error: Authentication failed during "
      "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";
  EXPECT_NE(scram_hint(refused, 0x020002ff).find("before 2.6.1"), std::string::npos);
  EXPECT_EQ(scram_hint(refused, 0x020601ff), "") << "fixed from 2.6.1 on";
  EXPECT_EQ(scram_hint("kafka:9092/1: Connect failed", 0x020002ff), "");
}

// librdkafka quotes a setting it cannot read: an unsecured-JWT config from where it stops
// reading (the client secret), a value that ran two settings together (the password). What the
// relay logs of it, and the refusal it turns into its readiness problem, keep neither.
TEST(ProducerEvents, WhatLibrdkafkaQuotesOfTheSecretsIsNotRepeated) {
  const std::string password = "Hunter2Kafka";
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  {
    ProducerConfig c;
    c.bootstrap_servers = "127.0.0.1:1";
    c.properties = {{"security.protocol", "SASL_PLAINTEXT"},
                    {"sasl.mechanism", "OAUTHBEARER"},
                    {"enable.sasl.oauthbearer.unsecure.jwt", "true"},
                    {"sasl.oauthbearer.config", "principal=outbox clientSecret=" + password}};
    BatchProducer producer(c);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (out.str().find("OAUTHBEARER") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      producer.probe(std::chrono::milliseconds(100));
    }
  }
  spdlog::set_default_logger(previous);
  EXPECT_NE(out.str().find("Unrecognized sasl.oauthbearer.config"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find(password), std::string::npos) << out.str();

  ProducerConfig joined;
  joined.bootstrap_servers = "127.0.0.1:1";
  joined.properties = {{"security.protocol", "SASL_PLAINTEXT"},
                       {"sasl.mechanism", "SCRAM-SHA-512 sasl.password=" + password}};
  try {
    BatchProducer producer(joined);
    ADD_FAILURE() << "a mechanism with a password in it was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string said = e.what();
    EXPECT_NE(said.find("kafka property sasl.mechanism rejected"), std::string::npos) << said;
    EXPECT_EQ(said.find(password), std::string::npos) << said;
  }

  ProducerConfig unknown;  // a mechanism librdkafka does not know, beside a password
  unknown.bootstrap_servers = "127.0.0.1:1";
  unknown.properties = {{"security.protocol", "SASL_PLAINTEXT"},
                        {"sasl.mechanism", "BOGUS"},
                        {"sasl.username", "outbox"},
                        {"sasl.password", password}};
  try {
    BatchProducer producer(unknown);
    ADD_FAILURE() << "an unknown mechanism was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Unsupported SASL mechanism"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find(password), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace outbox::kafka
