#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "kube/client.hpp"
#include "kube/config.hpp"
#include "support/testbed.hpp"

// Helpers shared by the kube e2e tests (real kube-apiserver from scripts/testbed/up.sh).
namespace outbox::kube::e2e {

inline Client admin_client(ClientOptions options = {}) {
  return Client(load_kubeconfig(testbed::kubeconfig_path()), options);
}

// Namespace names must be DNS labels: unique_name() uses '_', which they refuse.
inline std::string dns_name(const std::string& prefix) {
  std::string name = testbed::unique_name(prefix);
  for (char& c : name) {
    if (c == '_') {
      c = '-';
    }
  }
  return name;
}

inline std::string make_namespace(Client& client, const std::string& prefix = "kube-e2e") {
  std::string name = dns_name(prefix);
  client.create(resources::namespaces, "",
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  return name;
}

inline Json config_map(const std::string& name, const Json& data) {
  return {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}, {"data", data}};
}

// Polls `condition` every 20 ms until it holds or `timeout` passes.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

}  // namespace outbox::kube::e2e
