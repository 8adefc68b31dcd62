#include "cluster_fixture.hpp"

#include <cstdio>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include <gtest/gtest.h>

#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "support/child_process.hpp"
#include "support/testbed.hpp"

namespace outbox::cluster::testing {
namespace {

std::string run(const std::string& cmd) {
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("popen failed");
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) {
    out.append(buf, n);
  }
  if (::pclose(pipe) != 0) {
    throw std::runtime_error(cmd + " failed: " + out);
  }
  return out;
}

std::string temp_file(const std::string& text) {
  std::string path = "/tmp/" + testbed::unique_name("cluster-test") + ".json";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

const NodeEnv& node_env() {
  static const NodeEnv env{testbed::require_env("OUTBOX_TEST_IMAGE"),
                           testbed::require_env("OUTBOX_TEST_TOOLS_IMAGE"),
                           testbed::require_env("OUTBOX_TEST_POD_PG_DSN"),
                           testbed::require_env("OUTBOX_TEST_POD_KAFKA_BOOTSTRAP"),
                           testbed::require_env("OUTBOX_TEST_POD_KAFKA_SCRAM_BOOTSTRAP"),
                           testbed::require_env("OUTBOX_TEST_KAFKA_PKI")};
  return env;
}

std::string helm(const std::string& args) {
  return run("KUBECONFIG='" + testbed::kubeconfig_path() + "' '" +
             testbed::require_env("OUTBOX_TESTBED_BIN") + "/helm' " + args);
}

// helm under `flock <lock>`: one helm command at a time across processes.
std::string helm_locked(const std::string& lock, const std::string& args) {
  return run("KUBECONFIG='" + testbed::kubeconfig_path() + "' flock '" + lock + "' '" +
             testbed::require_env("OUTBOX_TESTBED_BIN") + "/helm' " + args);
}

std::string kubectl_outbox(const std::string& args) {
  const std::string bin = testbed::require_env("OUTBOX_TESTBED_BIN");
  return run("PATH='" + std::string(OUTBOX_SOURCE_DIR) + "/kubectl-plugin:" + bin +
             ":'\"$PATH\" KUBECONFIG='" + testbed::kubeconfig_path() + "' kubectl outbox " + args);
}

void apply(const Json& object) {
  std::string path = temp_file(object.dump());
  kubectl("apply -f " + path);
  std::remove(path.c_str());
}

void install_operator() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& image = node_env().image;
    const auto colon = image.rfind(':');
    // Values any user may set: the image, short lease timings so failover tests are quick,
    // and a short resync so the status follows within seconds what no watch event reports.
    // The chart's CRD comes with it (crds/).
    // Tests run in parallel (scripts/test.sh), each in its own process: helm refuses an
    // upgrade while another is in progress, so one at a time, under a lock beside the
    // kubeconfig. The values are the same in every test, so a second upgrade changes no pod.
    const std::string kubeconfig = testbed::kubeconfig_path();
    const std::string lock = kubeconfig.substr(0, kubeconfig.rfind('/') + 1) + "helm.lock";
    helm_locked(
        lock, "upgrade --install " + std::string(kRelease) + " '" + OUTBOX_SOURCE_DIR +
                  "/charts/outbox-operator' --namespace " + kOperatorNamespace +
                  " --create-namespace --wait --timeout 180s" +
                  " --set image.repository=" + image.substr(0, colon) +
                  " --set image.tag=" + image.substr(colon + 1) + " --set image.pullPolicy=Never" +
                  " --set leaderElection.leaseDuration=6s --set leaderElection.renewDeadline=4s" +
                  " --set leaderElection.retryPeriod=1s --set controller.resyncPeriod=5s" +
                  " --set log.format=text");
    kubectl("wait --for=condition=Established crd/outboxrelays.outbox.dev --timeout=60s");
  });
}

std::vector<Json> pods(const std::string& ns, const std::string& selector) {
  Json list = Json::parse(kubectl("-n " + ns + " get pods -o json -l '" + selector + "'"));
  std::vector<Json> out;
  for (const Json& pod : list.at("items")) {
    if (!pod.at("metadata").contains("deletionTimestamp")) {
      out.push_back(pod);
    }
  }
  return out;
}

std::vector<std::string> ready_pods(const std::string& ns, const std::string& selector) {
  std::vector<std::string> out;
  for (const Json& pod : pods(ns, selector)) {
    for (const Json& c : pod.value("/status/conditions"_json_pointer, Json::array())) {
      if (c.value("type", "") == "Ready" && c.value("status", "") == "True") {
        out.push_back(pod.at("/metadata/name"_json_pointer));
      }
    }
  }
  return out;
}

RelayUnderTest::RelayUnderTest(const std::string& prefix) {
  install_operator();
  auto client = controller::testing::admin_client();
  ns = controller::testing::make_namespace(client, prefix);
  // The DSN reaches the pods only through this Secret.
  controller::testing::create_secret(client, ns, "orders-db", {{"dsn", node_env().pod_dsn}});
  // Fast settings for tests; each test patches what it is about.
  spec = {
      {"database",
       {{"dsnSecretRef", {{"name", "orders-db"}, {"key", "dsn"}}}, {"table", table.table.plain()}}},
      {"kafka", {{"bootstrapServers", node_env().pod_bootstrap}, {"topic", table.topic}}},
      {"relay", {{"replicas", 2}, {"pollInterval", "200ms"}, {"batchSize", 100}}},
      {"retry", {{"initialBackoff", "200ms"}, {"maxBackoff", "2s"}}}};
}

RelayUnderTest::~RelayUnderTest() {
  try {
    kubectl("delete namespace " + ns + " --wait=false");
  } catch (const std::exception&) {
  }
}

void RelayUnderTest::apply(const Json& spec_patch) {
  spec.merge_patch(spec_patch);
  testing::apply({{"apiVersion", "outbox.dev/v1alpha1"},
                  {"kind", "OutboxRelay"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"spec", spec}});
}

void RelayUnderTest::wait_ready(std::chrono::seconds timeout) {
  kubectl("-n " + ns + " wait --for=condition=Ready obr/" + name +
          " --timeout=" + std::to_string(timeout.count()) + "s");
}

Json RelayUnderTest::get() const {
  return Json::parse(kubectl("-n " + ns + " get obr " + name + " -o json"));
}

std::string RelayUnderTest::relay_selector() const {
  return "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/component=relay";
}

std::string RelayUnderTest::delivery_problem(int inserted, std::chrono::seconds timeout) const {
  auto messages = outbox::testing::consume_all({table.topic}, inserted, timeout, 2s);
  std::size_t distinct = outbox::testing::distinct_seqs(messages);
  if (distinct != static_cast<std::size_t>(inserted)) {
    return std::to_string(distinct) + " of " + std::to_string(inserted) +
           " events reached Kafka (" + std::to_string(messages.size()) + " messages)";
  }
  return outbox::testing::per_key_order_problem(messages);
}

Load::Load(outbox::testing::OutboxTestTable& table, int per_second, int keys, int start)
    : thread_([this, &table, per_second, keys, start] {
        pqxx::connection conn(table.dsn);
        const auto interval = std::chrono::microseconds(1'000'000 / per_second);
        auto next = std::chrono::steady_clock::now();
        for (int seq = start; !stop_; ++seq) {
          std::string key = "k" + std::to_string(seq % keys);
          pqxx::work tx(conn);
          enqueue(tx, table.table, "order", key, Json{{"seq", seq}, {"key", key}}.dump());
          tx.commit();
          ++committed_;
          next += interval;
          std::this_thread::sleep_until(next);
        }
      }) {}

Load::~Load() {
  stop();
}

int Load::stop() {
  stop_ = true;
  if (thread_.joinable()) {
    thread_.join();
  }
  return committed_;
}

}  // namespace outbox::cluster::testing
