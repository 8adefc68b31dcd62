// The spec's one table of defaults and bounds (api/spec.cpp) against the CRD, both ways, and
// parse_spec's defaults and refusals.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "api/defaults.hpp"
#include "api/spec.hpp"
#include "common/duration.hpp"

namespace outbox::api {
namespace {

// What the CRD says about one field of the spec.
struct CrdRule {
  Json default_value;
  std::optional<double> minimum;
  std::optional<double> maximum;
  std::vector<std::string> one_of;
};

Json to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    Json out = Json::object();
    for (const auto& kv : node) {
      out[kv.first.as<std::string>()] = to_json(kv.second);
    }
    return out;
  }
  if (node.IsSequence()) {
    Json out = Json::array();
    for (const auto& item : node) {
      out.push_back(to_json(item));
    }
    return out;
  }
  // Scalars as the schema types them: the CRD quotes strings that would read as numbers.
  const std::string text = node.Scalar();
  if (node.Tag() == "!") {
    return text;
  }
  if (text == "true" || text == "false") {
    return text == "true";
  }
  try {
    std::size_t used = 0;
    const long long i = std::stoll(text, &used);
    if (used == text.size()) {
      return i;
    }
    const double d = std::stod(text, &used);
    if (used == text.size()) {
      return d;
    }
  } catch (const std::exception&) {
  }
  return text;
}

void collect(const YAML::Node& schema, const std::string& path,
             std::map<std::string, CrdRule>& rules) {
  CrdRule rule;
  bool any = false;
  if (schema["default"]) {
    rule.default_value = to_json(schema["default"]);
    any = true;
  }
  if (schema["minimum"]) {
    rule.minimum = schema["minimum"].as<double>();
    any = true;
  }
  if (schema["maximum"]) {
    rule.maximum = schema["maximum"].as<double>();
    any = true;
  }
  if (schema["enum"]) {
    rule.one_of = schema["enum"].as<std::vector<std::string>>();
    any = true;
  }
  if (any) {
    rules[path] = rule;
  }
  if (schema["properties"]) {
    for (const auto& kv : schema["properties"]) {
      collect(kv.second, path + "/" + kv.first.as<std::string>(), rules);
    }
  }
  if (schema["items"]) {
    collect(schema["items"], path + "/*", rules);
  }
}

std::map<std::string, CrdRule> crd_rules() {
  const YAML::Node crd = YAML::LoadFile(OUTBOX_SOURCE_DIR "/crds/outbox.dev_outboxrelays.yaml");
  std::map<std::string, CrdRule> rules;
  collect(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"], "", rules);
  return rules;
}

TEST(SpecTable, EveryDefaultBoundAndEnumOfTheCrdIsTheTables) {
  const auto rules = crd_rules();
  ASSERT_GT(rules.size(), 20u) << "the CRD's spec schema was not found";
  for (const auto& [path, rule] : rules) {
    SCOPED_TRACE(path);
    const SpecField* row = nullptr;
    try {
      row = &spec_field(path);
    } catch (const std::out_of_range&) {
      ADD_FAILURE() << "the CRD sets a default, bound or enum on spec" << path
                    << " and the table (api/spec.cpp) has no row for it";
      continue;
    }
    EXPECT_EQ(rule.default_value, row->default_value);
    EXPECT_EQ(rule.minimum, row->minimum);
    EXPECT_EQ(rule.maximum, row->maximum);
    EXPECT_EQ(rule.one_of, row->one_of);
  }
}

TEST(SpecTable, EveryRowOfTheTableIsInTheCrd) {
  const auto rules = crd_rules();
  for (const SpecField& row : spec_fields()) {
    EXPECT_TRUE(rules.count(row.path))
        << "the table has spec" << row.path << " and the CRD sets nothing there: a default the "
        << "apiserver does not apply, or a field the CRD does not have";
  }
}

// The relay's own flags default to the constants; the table's text must mean the same.
TEST(SpecTable, DurationDefaultsMeanTheRelaysConstants) {
  const auto ms = [](const char* path) {
    return parse_duration(spec_field(path).default_value.get<std::string>());
  };
  EXPECT_EQ(ms("/relay/pollInterval"), defaults::kPollInterval);
  EXPECT_EQ(spec_field("/relay/coalesceWindow").default_value.get<std::string>(),
            defaults::kCoalesceWindow);
  EXPECT_EQ(ms("/monitoring/stuckAfter"), defaults::kStuckAfter);
}

Json minimal() {
  return {{"database", {{"dsnSecretRef", {{"name", "db"}, {"key", "dsn"}}}}},
          {"kafka", {{"bootstrapServers", "kafka:9092"}}}};
}

TEST(ParseSpec, AMinimalSpecGetsEveryDefaultOfTheTable) {
  const OutboxRelaySpec s = parse_spec(minimal());
  EXPECT_EQ(s.database.table, spec_field("/database/table").default_value);
  EXPECT_FALSE(s.database.manage_schema);
  EXPECT_EQ(s.kafka.topic, spec_field("/kafka/topic").default_value);
  EXPECT_EQ(s.relay.replicas, spec_field("/relay/replicas").default_value);
  EXPECT_EQ(s.relay.batch_size, spec_field("/relay/batchSize").default_value);
  EXPECT_EQ(s.relay.poll_interval, spec_field("/relay/pollInterval").default_value);
  EXPECT_TRUE(s.relay.per_key_order);
  EXPECT_FALSE(s.relay.delete_on_sent);
  EXPECT_FALSE(s.relay.shards);
  EXPECT_EQ(s.relay.resources, spec_field("/relay/resources").default_value);
  EXPECT_EQ(s.relay.resources.at("/requests/memory"_json_pointer), defaults::kRelayMemoryRequest);
  EXPECT_EQ(s.retry.max_attempts, spec_field("/retry/maxAttempts").default_value);
  EXPECT_EQ(s.retry.jitter, spec_field("/retry/jitter").default_value);
  EXPECT_EQ(s.compensation.batch_size, spec_field("/compensation/batchSize").default_value);
  EXPECT_FALSE(s.compensation.schedule);
  EXPECT_EQ(s.retention.keep_sent, spec_field("/retention/keepSent").default_value);
  EXPECT_EQ(s.stuck_after, spec_field("/monitoring/stuckAfter").default_value);
  EXPECT_FALSE(s.suspend);
}

TEST(ParseSpec, WhatTheSpecSaysWinsOverTheDefault) {
  Json spec = minimal();
  spec["relay"] = {{"replicas", 0},
                   {"batchSize", 10000},
                   {"ordering", "None"},
                   {"shards", 8},
                   {"resources", Json::object()}};
  spec["retry"] = {{"jitter", 0}};
  spec["database"]["tls"] = {{"ca", {{"configMapRef", {{"name", "pg-ca"}}}}}};
  const OutboxRelaySpec s = parse_spec(spec);
  EXPECT_EQ(s.relay.replicas, 0);
  EXPECT_EQ(s.relay.batch_size, 10000);
  EXPECT_FALSE(s.relay.per_key_order);
  EXPECT_EQ(s.relay.shards, 8);
  EXPECT_EQ(s.relay.resources, Json::object());
  EXPECT_EQ(s.retry.jitter, 0.0);
  ASSERT_TRUE(s.database.tls);
  EXPECT_EQ(s.database.tls->mode, "verify-full");
  ASSERT_TRUE(s.database.tls->ca);
  EXPECT_FALSE(s.database.tls->ca_in_secret);
  EXPECT_EQ(s.database.tls->ca->key, "ca.crt");
}

// A resource the CRD's schema did not check (an older CRD, a copy restored into etcd) is
// refused with the field named, never rendered with a guess.
TEST(ParseSpec, AWrongShapeIsRefusedNamingTheField) {
  const auto refusal = [](const std::function<void(Json&)>& edit) {
    Json spec = minimal();
    edit(spec);
    try {
      parse_spec(spec);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal([](Json& s) {
              s["relay"] = {{"batchSize", "500"}};
            }),
            "spec.relay.batchSize: must be an integer, not \"500\"");
  EXPECT_EQ(refusal([](Json& s) {
              s["relay"] = {{"batchSize", 0}};
            }),
            "spec.relay.batchSize: 0 is less than the minimum 1.0");
  EXPECT_EQ(refusal([](Json& s) {
              s["relay"] = {{"replicas", 65}};
            }),
            "spec.relay.replicas: 65 is more than the maximum 64.0");
  EXPECT_EQ(refusal([](Json& s) {
              s["relay"] = {{"ordering", "Global"}};
            }),
            "spec.relay.ordering: \"Global\" is not one of [\"PerKey\",\"None\"]");
  EXPECT_EQ(refusal([](Json& s) {
              s["relay"] = {{"coalesceWindow", "11s"}};
            }),
            "spec.relay.coalesceWindow: at most 10s");
  EXPECT_NE(refusal([](Json& s) {
              s["retry"] = {{"maxBackoff", "soon"}};
            }).find("spec.retry.maxBackoff: "),
            std::string::npos);
  EXPECT_EQ(refusal([](Json& s) { s["kafka"].erase("bootstrapServers"); }),
            "spec.kafka.bootstrapServers: required");
  EXPECT_EQ(refusal([](Json& s) { s["database"]["dsnSecretRef"].erase("key"); }),
            "spec.database.dsnSecretRef: needs a name and a key");
  EXPECT_EQ(refusal([](Json& s) { s["suspend"] = "yes"; }),
            "spec.suspend: must be true or false, not \"yes\"");
  EXPECT_EQ(refusal([](Json& s) {
              s["relay"] = {{"resources", "64Mi"}};
            }),
            "spec.relay.resources: must be an object, not \"64Mi\"");
}

}  // namespace
}  // namespace outbox::api
