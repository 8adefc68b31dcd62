#pragma once

// Shared by the controller's e2e tests (one file per aspect): sample specs, condition look-up,
// and a fixture with a fresh namespace on the test bed's kube-apiserver and the CRD installed.
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/relay_resources.hpp"
#include "controller_fixture.hpp"

namespace outbox::controller::testing {

inline const kube::Resource kSecrets{"", "v1", "secrets", true};
inline const kube::Resource kEvents{"", "v1", "events", true};

inline Json relay_object(const std::string& name, const Json& spec) {
  return {{"apiVersion", "outbox.dev/v1alpha1"},
          {"kind", "OutboxRelay"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

inline Json base_spec() {
  return {{"database", {{"dsnSecretRef", {{"name", "orders-db"}, {"key", "dsn"}}}}},
          {"kafka",
           {{"bootstrapServers", "kafka:9092"},
            {"routes", Json::array({{{"bizType", "order"}, {"topic", "orders.v1"}}})}}},
          {"relay", {{"replicas", 2}}},
          {"compensation", {{"schedule", "*/2 * * * *"}, {"staleAfter", "3m"}}},
          {"retention", {{"schedule", "0 4 * * *"}, {"keepSent", "24h"}}}};
}

inline Json condition(const Json& relay, const std::string& type) {
  for (const Json& c : relay.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.at("type") == type) {
      return c;
    }
  }
  return Json::object();
}

inline bool has_arg(const Json& container, const std::string& arg) {
  const Json& args = container.at("args");
  return std::find(args.begin(), args.end(), arg) != args.end();
}

class ControllerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { install_crd(); }
  void SetUp() override { ns = make_namespace(client, "obr-e2e"); }

  Json get(const kube::Resource& r, const std::string& name) { return client.get(r, ns, name); }
  Json relay(const std::string& name) { return client.get(kOutboxRelays, ns, name); }
  bool observed(const std::string& name) {
    Json r = relay(name);
    return r.value("status", Json::object()).value("observedGeneration", 0LL) ==
           r.at("metadata").at("generation").get<long long>();
  }
  std::vector<Json> warning_events(const std::string& reason) { return events(reason, "Warning"); }

  std::vector<Json> events(const std::string& reason, const std::string& type) {
    std::vector<Json> out;
    const Json events = client.list(kEvents, ns);
    for (const Json& e : events.at("items")) {
      if (e.value("reason", "") == reason && e.value("type", "") == type) {
        out.push_back(e);
      }
    }
    return out;
  }

  kube::Client client = admin_client();
  std::string ns;
};

}  // namespace outbox::controller::testing
