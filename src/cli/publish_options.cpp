#include "cli/publish_options.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <CLI/CLI.hpp>

#include "cli/database_options.hpp"
#include "common/duration.hpp"

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
  cmd.add_option("--topic", topic, "default topic; {biz_type} is substituted")
      ->envname("OUTBOX_TOPIC")
      ->capture_default_str();
  cmd.add_option("--route", routes, "biz_type=topic, overrides --topic (repeatable)");
  cmd.add_option("--on-sent", on_sent, "mark or delete delivered rows")
      ->check(CLI::IsMember({"mark", "delete"}))
      ->capture_default_str();
  cmd.add_option("--max-attempts", max_attempts, "delivery attempts before FAILED")
      ->check(CLI::Range(1, 100))
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
  c.message_timeout = parse_duration(message_timeout);
  return c;
}

relay::PublishPolicy PublishOptions::policy() const {
  std::map<std::string, std::string> route_map;
  for (const auto& r : routes) {
    auto [biz_type, t] = relay::TopicRouter::parse_route(r);
    route_map[biz_type] = t;
  }
  relay::PublishPolicy p{
      relay::TopicRouter(topic, route_map), max_attempts, {}, on_sent == "delete"};
  p.backoff.initial = parse_duration(initial_backoff);
  p.backoff.max = parse_duration(max_backoff);
  p.backoff.jitter = jitter;
  if (p.backoff.max < p.backoff.initial) {
    throw std::invalid_argument("--max-backoff must be at least --initial-backoff");
  }
  return p;
}

}  // namespace outbox::cli
