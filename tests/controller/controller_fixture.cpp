#include "controller_fixture.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <regex>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "kube/config.hpp"
#include "kube/resource.hpp"
#include "support/testbed.hpp"

namespace outbox::controller::testing {

kube::Client admin_client() {
  return kube::Client(kube::load_kubeconfig(testbed::kubeconfig_path()));
}

std::string kubectl(const std::string& args) {
  std::string cmd = "KUBECONFIG='" + testbed::kubeconfig_path() + "' '" +
                    testbed::require_env("OUTBOX_TESTBED_BIN") + "/kubectl' " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("popen failed");
  }
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) {
    out.append(buf.data(), n);
  }
  int status = ::pclose(pipe);
  if (status != 0) {
    throw std::runtime_error("kubectl " + args + " failed: " + out);
  }
  return out;
}

void install_crd() {
  kubectl("apply --server-side --force-conflicts -f '" + std::string(OUTBOX_SOURCE_DIR) +
          "/crds/'");
  kubectl("wait --for=condition=Established crd/outboxrelays.outbox.dev --timeout=30s");
}

std::string make_namespace(kube::Client& client, const std::string& prefix) {
  std::string name = testbed::unique_name(prefix);
  for (char& c : name) {
    if (c == '_') {
      c = '-';
    }
  }
  client.create(kube::resources::namespaces, "",
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  return name;
}

void create_secret(kube::Client& client, const std::string& ns, const std::string& name,
                   const std::map<std::string, std::string>& data) {
  client.create(kube::Resource{"", "v1", "secrets", true}, ns,
                {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", name}}},
                 {"stringData", data}});
}

double metric(const std::string& body, const std::string& series) {
  std::size_t at = 0;
  while ((at = body.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || body[at - 1] == '\n') {
      return std::stod(body.substr(at + series.size() + 1));
    }
    ++at;
  }
  return -1;
}

bool eventually(const std::function<bool()>& check, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    try {
      if (check()) {
        return true;
      }
    } catch (const std::exception&) {
      // not there yet (404 and the like)
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

static std::vector<std::string> controller_args(const std::string& watch_ns, unsigned short port,
                                                const std::vector<std::string>& extra) {
  std::vector<std::string> args = {OUTBOX_BINARY,
                                   "--log-level=debug",
                                   "controller",
                                   "--kubeconfig=" + testbed::kubeconfig_path(),
                                   "--namespaces=" + watch_ns,
                                   "--listen=127.0.0.1:" + std::to_string(port)};
  // An operator of another release is one with another default relay image.
  if (std::none_of(extra.begin(), extra.end(),
                   [](const std::string& a) { return a.rfind("--relay-image=", 0) == 0; })) {
    args.push_back("--relay-image=ghcr.io/outbox-operator/outbox-operator:test");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

ControllerProcess::ControllerProcess(const std::string& watch_ns,
                                     const std::vector<std::string>& extra_args,
                                     const std::string& log_name)
    : port(free_port()),
      process(controller_args(watch_ns, port, extra_args), {},
              ::testing::TempDir() + log_name + ".log") {}

}  // namespace outbox::controller::testing
