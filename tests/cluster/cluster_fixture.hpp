#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller_fixture.hpp"
#include "relay_fixture.hpp"

// Shared by the cluster tests (label `cluster`): the test bed's real node (kubelet,
// containerd, controller-manager, scheduler), the operator installed by its Helm chart from
// the image built from the Dockerfile, and relay pods that publish to the test bed's Kafka.
namespace outbox::cluster::testing {

using Json = nlohmann::json;
using controller::testing::eventually;
using controller::testing::kubectl;
using namespace std::chrono_literals;

// What the node's pods use (scripts/testbed/up.sh node).
struct NodeEnv {
  std::string image;                // the project's image, built from the Dockerfile
  std::string tools_image;          // busybox + kubectl
  std::string pod_dsn;              // PostgreSQL through the forwarder on the pod bridge
  std::string pod_bootstrap;        // Kafka's listener for pods
  std::string pod_scram_bootstrap;  // its SCRAM-SHA-512 over TLS listener for pods
  std::string kafka_pki;            // the test CA and Strimzi-shaped credentials (up.sh)
};
const NodeEnv& node_env();

constexpr const char* kOperatorNamespace = "outbox-system";
constexpr const char* kRelease = "outbox";

// `helm upgrade --install` of charts/outbox-operator with the test bed's image, once per
// process (later calls return at once), then waits until both operator pods are Ready.
void install_operator();
std::string helm(const std::string& args);
// `kubectl outbox ARGS`: kubectl finding kubectl-plugin/kubectl-outbox on PATH, as an on-call
// who copied it there runs it.
std::string kubectl_outbox(const std::string& args);
// kubectl apply of one object given as JSON.
void apply(const Json& object);

// Pods of a label selector: name -> phase ("" when none). Only pods not being deleted.
std::vector<Json> pods(const std::string& ns, const std::string& selector);
// Names of the Ready pods among them.
std::vector<std::string> ready_pods(const std::string& ns, const std::string& selector);

// One OutboxRelay named "orders" in a namespace of its own, on an outbox table of its own
// (migrated from the host), publishing to a topic of its own.
class RelayUnderTest {
 public:
  explicit RelayUnderTest(const std::string& prefix);
  ~RelayUnderTest();
  // Applies the OutboxRelay: the fast test settings merged with `spec_patch`.
  void apply(const Json& spec_patch = Json::object());
  // `kubectl wait --for=condition=Ready` on the resource.
  void wait_ready(std::chrono::seconds timeout = 180s);
  Json get() const;  // the OutboxRelay as it is now
  std::string relay_selector() const;
  // Consumes the topic from the host and checks that every one of `inserted` events
  // (seq 0..inserted-1) arrived, and in order per key. Returns "" or the problem.
  std::string delivery_problem(int inserted, std::chrono::seconds timeout = 120s) const;

  std::string ns;
  const std::string name = "orders";
  outbox::testing::OutboxTestTable table;
  Json spec;  // as last applied
};

// Inserts events one per transaction on a thread, at about `per_second`, keys cycling
// through `keys`, seq numbers from `start`. stop() returns the number committed.
class Load {
 public:
  Load(outbox::testing::OutboxTestTable& table, int per_second, int keys = 20, int start = 0);
  ~Load();
  int stop();
  int committed() const { return committed_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> committed_{0};
  std::thread thread_;
};

}  // namespace outbox::cluster::testing
