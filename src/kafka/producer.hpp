#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace RdKafka {
class Producer;
}

namespace outbox::kafka {

// How the relay must treat a delivery error (an attempt counts only for a
// real refusal; docs/relay.md).
enum class ErrorClass {
  kNone,         // delivered
  kUnreachable,  // broker down, timed out, queue full: defer, burn no attempt
  kRetryable,    // refused by the broker for a reason that may pass: count an attempt
  kPermanent,    // can never succeed (too large, invalid topic): FAILED now
};

ErrorClass classify_error(int rdkafka_error_code);

struct Message {
  std::string topic;
  std::string key;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct Delivery {
  ErrorClass error_class = ErrorClass::kNone;
  std::string error;  // the broker's or librdkafka's reason
  int partition = -1;
  long long offset = -1;
};

struct ProducerConfig {
  std::string bootstrap_servers;
  // librdkafka properties passed through (SASL, TLS, tuning). Values may be
  // secrets: they are never logged.
  std::map<std::string, std::string> properties;
  std::chrono::milliseconds message_timeout{10000};
  // The whole batch is queued before the relay waits, so lingering only adds delay.
  std::chrono::milliseconds linger{0};
};

// An idempotent (acks=all) producer that publishes a batch and waits for every
// delivery report, so the caller can mark exactly what the broker acknowledged.
// One batch is in flight at a time: send() queues it and returns at once, so
// the caller can do database work while the broker acknowledges; collect()
// waits for its reports.
class BatchProducer {
 public:
  // Throws std::invalid_argument naming a rejected property (guarantee_problem,
  // or one librdkafka does not accept).
  explicit BatchProducer(const ProducerConfig& config);
  ~BatchProducer();
  BatchProducer(const BatchProducer&) = delete;
  BatchProducer& operator=(const BatchProducer&) = delete;

  // Produces the messages in order and waits for all their reports. Messages of
  // one key go to one partition, where the idempotent producer keeps their order.
  std::vector<Delivery> publish(const std::vector<Message>& messages);

  // Queues a batch without waiting (throws std::logic_error while an earlier
  // batch is still uncollected).
  void send(const std::vector<Message>& messages);
  // Waits for every report of the batch sent last; one Delivery per message.
  std::vector<Delivery> collect();
  // Forgets the batch in flight (the relay lost its database session): its late
  // reports are ignored, and the next send() starts afresh.
  void abandon();

  // Waits for in-flight messages (graceful shutdown).
  void flush(std::chrono::milliseconds timeout);

  // Asks the cluster for metadata: true when a broker answers within `timeout`.
  // The relay probes this way while paused instead of timing out whole batches.
  bool probe(std::chrono::milliseconds timeout);

 private:
  void learn_topic(const std::string& topic);

  struct Callbacks;
  std::unique_ptr<Callbacks> callbacks_;
  std::set<std::string> known_topics_;
  std::unique_ptr<RdKafka::Producer> producer_;
  std::chrono::milliseconds wait_limit_;
};

// Empty when `properties` (from the Kafka Secret) keep the guarantees the relay
// relies on: idempotence, acks=all, at most 5 requests in flight, retries, and
// per-key partitioning. Else one sentence naming the first property that would
// weaken them, and why. BatchProducer refuses such properties.
std::string guarantee_problem(const std::map<std::string, std::string>& properties);

// The line to log for a librdkafka error event (`error_event`) or log event of
// `facility`; empty: log nothing. librdkafka reports each broker failure twice,
// as a FAIL log line and as an error event with the same text: only the error
// event is kept. Its hint to verify security.protocol, which it adds whenever a
// broker closes a fresh connection, is dropped once a broker has answered on
// this configuration (`broker_reached`): then it is a broker stopping, not a
// wrong protocol.
std::string client_event_line(bool error_event, const std::string& facility,
                              const std::string& text, bool broker_reached);

// What to add to a SCRAM "invalid credentials" line when `librdkafka_version` (RdKafka::version())
// is older than 2.6.1: those versions repeat the client's nonce in SCRAM's final message, which
// Kafka 4.0 and later refuse (they check it strictly since CVE-2024-56128) even with the right
// password. Empty otherwise.
std::string scram_hint(const std::string& line, int librdkafka_version);

// Returns an empty string when `topic` is a legal Kafka topic name, else why not.
std::string topic_name_problem(const std::string& topic);

}  // namespace outbox::kafka
