#pragma once

#include <map>
#include <string>
#include <vector>

#include "api/defaults.hpp"
#include "kafka/producer.hpp"
#include "relay/batch_publisher.hpp"

namespace CLI {
class App;
}

namespace outbox::cli {

// Kafka connection and publishing rules, shared by `relay` and `compensate` so
// that both publish with the same routes, retries and backoff.
struct PublishOptions {
  std::string brokers;
  std::vector<std::string> kafka_properties;
  std::string kafka_properties_file;
  std::string kafka_config_dir;  // a Secret mounted as files: name = property, content = value
  // Credentials in the shape Strimzi's Secrets hold them, each a mounted file: the cluster CA
  // (ca.crt), a tls KafkaUser's user.crt and user.key, a SCRAM KafkaUser's password.
  std::string kafka_ca_file;
  std::string kafka_cert_file;
  std::string kafka_key_file;
  std::string sasl_mechanism;
  std::string sasl_username;
  std::string sasl_password_file;
  std::string topic = api::defaults::kTopic;
  std::vector<std::string> routes;
  std::string dead_letter_topic;
  std::string on_sent = "mark";
  std::string ordering = "per-key";
  int max_attempts = api::defaults::kMaxAttempts;
  std::string initial_backoff = api::defaults::kInitialBackoff;
  std::string max_backoff = api::defaults::kMaxBackoff;
  double jitter = api::defaults::kJitter;
  std::string message_timeout = "10s";

  void add_to(CLI::App& cmd);
  // Throw std::invalid_argument with what to fix.
  kafka::ProducerConfig producer_config() const;
  // The files producer_config() reads or hands to librdkafka (the properties file and
  // directory, the certificates, the SASL password): what a rotated Secret rewrites.
  std::vector<std::string> credential_files() const;
  // The librdkafka properties the credential options stand for (TLS verified against the CA).
  std::map<std::string, std::string> credential_properties() const;
  relay::PublishPolicy policy() const;
};

}  // namespace outbox::cli
