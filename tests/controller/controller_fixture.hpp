#pragma once

#include "support/child_process.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kube/client.hpp"
#include "support/loopback_http.hpp"

// Shared by the controller e2e tests: the real outbox-operator binary as a child process, the
// test bed's apiserver through the admin kubeconfig, and polling helpers.
namespace outbox::controller::testing {

using Json = nlohmann::json;

kube::Client admin_client();
// Applies crds/ with kubectl (server-side), as docs/install.md says.
void install_crd();
std::string make_namespace(kube::Client& client, const std::string& prefix);
void create_secret(kube::Client& client, const std::string& ns, const std::string& name,
                   const std::map<std::string, std::string>& data);
// kubectl with the admin kubeconfig; returns stdout (stderr appended), throws on failure.
std::string kubectl(const std::string& args);
using testbed::free_port;
using testbed::http_get;
// Value of an unlabelled metric line "name value" ("name{...} value" when labels given).
double metric(const std::string& body, const std::string& series);

// Polls `check` every 200 ms until it returns true or `timeout` passes.
bool eventually(const std::function<bool()>& check, std::chrono::milliseconds timeout);

// A child process of the real binary; kill -9 on destruction.
using Process = outbox::testbed::ChildProcess;

// `outbox-operator controller` watching one namespace, serving HTTP on a free port.
struct ControllerProcess {
  ControllerProcess(const std::string& watch_ns, const std::vector<std::string>& extra_args,
                    const std::string& log_name);
  unsigned short port;
  Process process;
  std::string metrics() const { return http_get(port, "/metrics"); }
};

}  // namespace outbox::controller::testing
