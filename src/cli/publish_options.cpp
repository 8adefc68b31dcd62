#include "cli/publish_options.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <CLI/CLI.hpp>

#include "cli/database_options.hpp"
#include "common/duration.hpp"
#include "common/redact.hpp"

namespace outbox::cli {
namespace {

// "key=value" -> pair; throws naming the bad item (never echoing a value).
std::pair<std::string, std::string> split_pair(const std::string& item, const std::string& what) {
  auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::invalid_argument(what + " must look like key=value");
  }
  return {item.substr(0, eq), item.substr(eq + 1)};
}

// A librdkafka properties file (key=value lines, # comments), as mounted from a Secret.
void read_properties(const std::string& path, std::map<std::string, std::string>& out) {
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument("cannot read kafka properties file " + path);
  }
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') {
      continue;
    }
    auto [k, v] = split_pair(line.substr(first), path + " line " + std::to_string(n));
    while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) {
      v.pop_back();
    }
    out[k] = v;
  }
}

// A Secret mounted as a directory: one file per key, named after the librdkafka property, holding
// its value. The kubelet's own entries (..data and the timestamped directory) start with a dot.
void read_properties_dir(const std::string& dir, std::map<std::string, std::string>& out) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    throw std::invalid_argument("cannot read kafka config directory " + dir + ": " + ec.message());
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.front() == '.' || !entry.is_regular_file()) {
      continue;
    }
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    out[file.filename().string()] = read_secret_file(file.string());
  }
}

// A path given to librdkafka must name a readable file now, not at the first connection.
void require_readable(const std::string& path, const std::string& flag) {
  if (!std::ifstream(path)) {
    throw std::invalid_argument(flag + ": cannot read " + path);
  }
}

}  // namespace

void PublishOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--brokers", brokers, "Kafka bootstrap servers")
      ->envname("OUTBOX_KAFKA_BOOTSTRAP")
      ->required();
  cmd.add_option("--kafka-property", kafka_properties,
                 "librdkafka property key=value (repeatable)")
      ->configurable(false);  // may carry a password: use --kafka-properties-file
  cmd.add_option("--kafka-properties-file", kafka_properties_file,
                 "librdkafka properties file (SASL, TLS), e.g. a mounted Secret")
      ->envname("OUTBOX_KAFKA_PROPERTIES_FILE");
  cmd.add_option("--kafka-config-dir", kafka_config_dir,
                 "directory with one file per librdkafka property (a mounted Secret)")
      ->envname("OUTBOX_KAFKA_CONFIG_DIR");
  cmd.add_option("--kafka-ca-file", kafka_ca_file,
                 "CA certificate (PEM) the brokers' certificates must chain to; turns TLS on");
  cmd.add_option("--kafka-cert-file", kafka_cert_file,
                 "client certificate (PEM) for mutual TLS, e.g. a KafkaUser's user.crt");
  cmd.add_option("--kafka-key-file", kafka_key_file, "its private key (PEM), e.g. user.key");
  cmd.add_option("--kafka-sasl-mechanism", sasl_mechanism, "SASL mechanism")
      ->check(CLI::IsMember({"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}));
  cmd.add_option("--kafka-sasl-username", sasl_username, "SASL user name");
  cmd.add_option("--kafka-sasl-password-file", sasl_password_file,
                 "file holding the SASL password, e.g. a KafkaUser Secret's password");
  cmd.add_option("--topic", topic, "default topic; {biz_type} is substituted")
      ->envname("OUTBOX_TOPIC")
      ->capture_default_str();
  cmd.add_option("--route", routes, "biz_type=topic, overrides --topic (repeatable)");
  cmd.add_option("--dead-letter-topic", dead_letter_topic,
                 "also publish a copy of every event moved to FAILED here, with headers "
                 "outbox.error and outbox.topic (the row stays FAILED)");
  cmd.add_option("--on-sent", on_sent, "mark or delete delivered rows")
      ->check(CLI::IsMember({"mark", "delete"}))
      ->capture_default_str();
  cmd.add_option("--ordering", ordering,
                 "per-key: a key's events go out in commit order, an event waiting for its "
                 "retry holds its key's later ones; none: nothing is held back (unordered topics)")
      ->check(CLI::IsMember({"per-key", "none"}))
      ->capture_default_str();
  cmd.add_option("--max-attempts", max_attempts, "delivery attempts before FAILED")
      ->check(CLI::Range(1, api::defaults::kMaxMaxAttempts))
      ->capture_default_str();
  cmd.add_option("--initial-backoff", initial_backoff, "first retry delay")->capture_default_str();
  cmd.add_option("--max-backoff", max_backoff, "retry delay cap")->capture_default_str();
  cmd.add_option("--jitter", jitter, "retry delay jitter fraction")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--message-timeout", message_timeout, "Kafka delivery timeout per batch")
      ->capture_default_str();
}

kafka::ProducerConfig PublishOptions::producer_config() const {
  kafka::ProducerConfig c;
  c.bootstrap_servers = brokers;
  if (!kafka_properties_file.empty()) {
    read_properties(kafka_properties_file, c.properties);
  }
  if (!kafka_config_dir.empty()) {
    read_properties_dir(kafka_config_dir, c.properties);
  }
  for (const auto& p : kafka_properties) {
    auto [k, v] = split_pair(p, "--kafka-property");
    c.properties[k] = v;
  }
  for (const auto& [k, v] : credential_properties()) {
    auto it = c.properties.find(k);
    if (it != c.properties.end() && it->second != v) {
      throw std::invalid_argument("kafka property " + k +
                                  " is set twice: by a credential option and by a property");
    }
    c.properties[k] = v;
  }
  Secrets secrets;  // the log sink, the HTTP server and the status writers leave them out
  secrets.add_kafka_properties(c.properties);
  remember_secrets(secrets);
  c.message_timeout = parse_duration(message_timeout);
  return c;
}

std::vector<std::string> PublishOptions::credential_files() const {
  std::vector<std::string> files;
  for (const std::string& f : {kafka_properties_file, kafka_config_dir, kafka_ca_file,
                               kafka_cert_file, kafka_key_file, sasl_password_file}) {
    if (!f.empty()) {
      files.push_back(f);
    }
  }
  return files;
}

std::map<std::string, std::string> PublishOptions::credential_properties() const {
  std::map<std::string, std::string> p;
  if (kafka_cert_file.empty() != kafka_key_file.empty()) {
    throw std::invalid_argument("--kafka-cert-file and --kafka-key-file go together");
  }
  const bool sasl = !sasl_mechanism.empty();
  if (sasl != !sasl_username.empty() || sasl != !sasl_password_file.empty()) {
    throw std::invalid_argument(
        "--kafka-sasl-mechanism, --kafka-sasl-username and --kafka-sasl-password-file go "
        "together");
  }
  const bool tls = !kafka_ca_file.empty() || !kafka_cert_file.empty();
  if (!kafka_ca_file.empty()) {
    require_readable(kafka_ca_file, "--kafka-ca-file");
    p["ssl.ca.location"] = kafka_ca_file;
  }
  if (!kafka_cert_file.empty()) {
    require_readable(kafka_cert_file, "--kafka-cert-file");
    require_readable(kafka_key_file, "--kafka-key-file");
    p["ssl.certificate.location"] = kafka_cert_file;
    p["ssl.key.location"] = kafka_key_file;
  }
  if (sasl) {
    p["sasl.mechanism"] = sasl_mechanism;
    p["sasl.username"] = sasl_username;
    p["sasl.password"] = read_secret_file(sasl_password_file);
  }
  if (tls || sasl) {
    p["security.protocol"] = sasl ? (tls ? "SASL_SSL" : "SASL_PLAINTEXT") : "SSL";
  }
  if (tls) {
    // librdkafka's defaults, stated so that a properties file cannot quietly turn them off.
    p["enable.ssl.certificate.verification"] = "true";
    p["ssl.endpoint.identification.algorithm"] = "https";
  }
  return p;
}

relay::PublishPolicy PublishOptions::policy() const {
  std::map<std::string, std::string> route_map;
  for (const auto& r : routes) {
    auto [biz_type, t] = relay::TopicRouter::parse_route(r);
    route_map[biz_type] = t;
  }
  relay::PublishPolicy p;
  p.router = relay::TopicRouter(topic, route_map);
  p.max_attempts = max_attempts;
  p.delete_on_sent = on_sent == "delete";
  p.backoff.initial = parse_duration(initial_backoff);
  p.backoff.max = parse_duration(max_backoff);
  p.backoff.jitter = jitter;
  p.per_key_order = ordering == "per-key";
  if (!dead_letter_topic.empty()) {
    if (std::string problem = kafka::topic_name_problem(dead_letter_topic); !problem.empty()) {
      throw std::invalid_argument("--dead-letter-topic: " + problem);
    }
    p.dead_letter_topic = dead_letter_topic;
  }
  if (p.backoff.max < p.backoff.initial) {
    throw std::invalid_argument("--max-backoff must be at least --initial-backoff");
  }
  return p;
}

}  // namespace outbox::cli
