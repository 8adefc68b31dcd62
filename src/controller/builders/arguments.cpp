#include "controller/builders/arguments.hpp"

#include <cstdio>
#include <map>
#include <stdexcept>

#include "controller/builders/pod.hpp"
#include "outbox/column_map.hpp"

namespace outbox::controller::builders {
namespace {

// The relay's flags for the mounted credentials (PublishOptions reads the files).
void add_kafka_credential_args(const Json& kafka, std::vector<std::string>& args) {
  if (kafka.contains("configSecretRef")) {
    args.push_back(flag("kafka-config-dir", kKafkaConfigDir));
  }
  if (kafka.contains("tls")) {
    args.push_back(flag("kafka-ca-file", std::string(kKafkaCaDir) + "/ca.crt"));
  }
  const Json auth = kafka.value("authentication", Json::object());
  const std::string type = auth.value("type", "");
  if (type == "tls") {
    args.push_back(flag("kafka-cert-file", std::string(kKafkaUserDir) + "/user.crt"));
    args.push_back(flag("kafka-key-file", std::string(kKafkaUserDir) + "/user.key"));
  } else if (!type.empty()) {
    const std::map<std::string, std::string> mechanisms = {
        {"scram-sha-512", "SCRAM-SHA-512"}, {"scram-sha-256", "SCRAM-SHA-256"}, {"plain", "PLAIN"}};
    const auto mechanism = mechanisms.find(type);
    if (mechanism == mechanisms.end() || !auth.contains("username")) {
      throw InvalidSpec("spec.kafka.authentication: type " + type +
                        " needs username and passwordSecret");
    }
    args.push_back(flag("kafka-sasl-mechanism", mechanism->second));
    args.push_back(flag("kafka-sasl-username", auth.at("username").get<std::string>()));
    args.push_back(flag("kafka-sasl-password-file", std::string(kKafkaUserDir) + "/password"));
  }
}

}  // namespace

std::string literal(std::string_view spec_text) {
  std::string out;
  for (char c : spec_text) {
    if (c == '$') {
      out.push_back('$');
    }
    out.push_back(c);
  }
  return out;
}

std::string flag(std::string_view name, std::string_view spec_value) {
  return "--" + std::string(name) + "=" + literal(spec_value);
}

std::vector<std::string> table_args(const api::OutboxRelaySpec& spec) {
  std::vector<std::string> args = {flag("table", spec.database.table)};
  if (spec.database.columns.is_null()) {
    return args;
  }
  std::vector<std::string> entries;
  for (const auto& [role, column] : spec.database.columns.items()) {
    entries.push_back(role + "=" + column.get<std::string>());
  }
  try {
    for (const auto& [role, column] : ColumnMap::parse(entries).entries()) {
      args.push_back(flag("column", role + "=" + column));
    }
  } catch (const std::invalid_argument& e) {
    throw InvalidSpec(std::string("spec.database.") + e.what());
  }
  return args;
}

std::vector<std::string> publish_args(const api::OutboxRelaySpec& spec) {
  std::vector<std::string> args = table_args(spec);
  args.push_back(flag("brokers", spec.kafka.bootstrap_servers));
  args.push_back(flag("topic", spec.kafka.topic));
  for (const api::Route& route : spec.kafka.routes) {
    args.push_back(flag("route", route.biz_type + "=" + route.topic));
  }
  if (spec.kafka.dead_letter_topic) {
    args.push_back(flag("dead-letter-topic", *spec.kafka.dead_letter_topic));
  }
  add_kafka_credential_args(spec.kafka.credentials, args);
  if (!spec.relay.per_key_order) {
    args.push_back("--ordering=none");
  }
  args.push_back(std::string("--on-sent=") + (spec.relay.delete_on_sent ? "delete" : "mark"));
  args.push_back("--max-attempts=" + std::to_string(spec.retry.max_attempts));
  args.push_back(flag("initial-backoff", spec.retry.initial_backoff));
  args.push_back(flag("max-backoff", spec.retry.max_backoff));
  char jitter[32];
  std::snprintf(jitter, sizeof jitter, "%g", spec.retry.jitter);
  args.push_back(std::string("--jitter=") + jitter);
  return args;
}

std::string report_status_arg(const RelayMeta& relay) {
  return flag("report-status", relay.ns + "/" + relay.name);
}

}  // namespace outbox::controller::builders
