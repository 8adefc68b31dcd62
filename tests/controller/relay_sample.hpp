#pragma once

#include <nlohmann/json.hpp>

// An OutboxRelay as the apiserver returns it (CRD defaults left to the code under test), shared
// by the render and status unit tests; `spec_patch` is merged into its spec.
namespace outbox::controller::testing {

inline nlohmann::json sample_relay(const nlohmann::json& spec_patch = nlohmann::json::object()) {
  nlohmann::json r = {
      {"apiVersion", "outbox.dev/v1alpha1"},
      {"kind", "OutboxRelay"},
      {"metadata", {{"name", "orders"}, {"namespace", "shop"}, {"uid", "u-1"}, {"generation", 3}}},
      {"spec",
       {{"database", {{"dsnSecretRef", {{"name", "db"}, {"key", "dsn"}}}}},
        {"kafka", {{"bootstrapServers", "k:9092"}}}}}};
  r["spec"].merge_patch(spec_patch);
  return r;
}

}  // namespace outbox::controller::testing
