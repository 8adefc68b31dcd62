#include <fstream>
#include <iostream>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "cli/signals.hpp"
#include "common/duration.hpp"
#include "http/health_server.hpp"
#include "relay/relay.hpp"

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

struct RelayOptions {
  DatabaseOptions db;
  std::string brokers;
  std::vector<std::string> kafka_properties;
  std::string kafka_properties_file;
  std::vector<std::string> routes;
  std::string topic = "outbox.{biz_type}";
  int batch_size = 500;
  std::string poll_interval = "2s";
  std::string on_sent = "mark";
  int max_attempts = 10;
  std::string initial_backoff = "1m";
  std::string max_backoff = "64m";
  double jitter = 0.2;
  std::string stuck_after = "10m";
  std::string message_timeout = "10s";
  std::string listen = "0.0.0.0:8080";
};

}  // namespace

Action add_relay_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("relay", "publish committed outbox events to Kafka (long-running)");
  auto o = std::make_shared<RelayOptions>();
  o->db.add_to(*cmd);
  cmd->set_config("--config", "",
                  "configuration file (key = value lines; flags and env override it)");
  cmd->add_option("--brokers", o->brokers, "Kafka bootstrap servers")
      ->envname("OUTBOX_KAFKA_BOOTSTRAP")
      ->required();
  cmd->add_option("--kafka-property", o->kafka_properties,
                  "librdkafka property key=value (repeatable)");
  cmd->add_option("--kafka-properties-file", o->kafka_properties_file,
                  "librdkafka properties file (SASL, TLS), e.g. a mounted Secret")
      ->envname("OUTBOX_KAFKA_PROPERTIES_FILE");
  cmd->add_option("--topic", o->topic, "default topic; {biz_type} is substituted")
      ->envname("OUTBOX_TOPIC")
      ->capture_default_str();
  cmd->add_option("--route", o->routes, "biz_type=topic, overrides --topic (repeatable)");
  cmd->add_option("--batch-size", o->batch_size, "events per claim")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--poll-interval", o->poll_interval, "fallback poll when no NOTIFY arrives")
      ->capture_default_str();
  cmd->add_option("--on-sent", o->on_sent, "mark or delete delivered rows")
      ->check(CLI::IsMember({"mark", "delete"}))
      ->capture_default_str();
  cmd->add_option("--max-attempts", o->max_attempts, "delivery attempts before FAILED")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--initial-backoff", o->initial_backoff, "first retry delay")
      ->capture_default_str();
  cmd->add_option("--max-backoff", o->max_backoff, "retry delay cap")->capture_default_str();
  cmd->add_option("--jitter", o->jitter, "retry delay jitter fraction")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--stuck-after", o->stuck_after, "pending age counted as stuck")
      ->capture_default_str();
  cmd->add_option("--message-timeout", o->message_timeout, "Kafka delivery timeout per batch")
      ->capture_default_str();
  cmd->add_option("--listen", o->listen, "address:port for /healthz, /readyz, /metrics")
      ->envname("OUTBOX_LISTEN")
      ->capture_default_str();

  return [o]() {
    relay::RelayConfig c;
    c.dsn = o->db.resolve_dsn();
    c.table = o->db.table;
    c.kafka.bootstrap_servers = o->brokers;
    if (!o->kafka_properties_file.empty()) {
      read_properties(o->kafka_properties_file, c.kafka.properties);
    }
    for (const auto& p : o->kafka_properties) {
      c.kafka.properties.insert_or_assign(split_pair(p, "--kafka-property").first,
                                          split_pair(p, "--kafka-property").second);
    }
    c.kafka.message_timeout = parse_duration(o->message_timeout);
    c.topic_template = o->topic;
    for (const auto& r : o->routes) {
      auto [biz_type, topic] = split_pair(r, "--route");
      c.routes[biz_type] = topic;
    }
    c.batch_size = o->batch_size;
    c.poll_interval = parse_duration(o->poll_interval);
    c.delete_on_sent = o->on_sent == "delete";
    c.max_attempts = o->max_attempts;
    c.backoff.initial = parse_duration(o->initial_backoff);
    c.backoff.max = parse_duration(o->max_backoff);
    c.backoff.jitter = o->jitter;
    if (c.backoff.max < c.backoff.initial) {
      throw std::invalid_argument("--max-backoff must be at least --initial-backoff");
    }
    c.stuck_after =
        std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o->stuck_after));

    auto colon = o->listen.rfind(':');
    if (colon == std::string::npos) {
      throw std::invalid_argument("--listen must be address:port");
    }
    std::string address = o->listen.substr(0, colon);
    if (address.size() > 2 && address.front() == '[') {
      address = address.substr(1, address.size() - 2);
    }
    auto port = static_cast<unsigned short>(std::stoi(o->listen.substr(colon + 1)));

    const auto& stop = install_stop_signals();
    metrics::Registry registry;
    relay::Relay relay(c, registry);
    http::HealthServer server(
        address, port,
        {{"/healthz",
          [&relay] {
            bool alive = relay.since_last_beat() < std::chrono::seconds(60);
            return http::Response{alive ? 200 : 503, "text/plain",
                                  alive ? "ok\n" : "relay loop stalled\n"};
          }},
         {"/readyz",
          [&relay] {
            return http::Response{relay.ready() ? 200 : 503, "text/plain",
                                  relay.ready() ? "ready\n" : "not connected to the database\n"};
          }},
         {"/metrics", [&registry] {
            return http::Response{200, "text/plain; version=0.0.4", registry.render()};
          }}});
    spdlog::info("relay serving /healthz, /readyz, /metrics on {}:{}", address, server.port());
    relay.run(stop);
    return 0;
  };
}

}  // namespace outbox::cli
