// The operator on a real single-node cluster: installed by its Helm chart, relay pods and
// CronJob pods from the image built from the Dockerfile, the kubelet restarting what dies,
// the controller-manager's Deployment, Job, CronJob and garbage collectors at work. Each test
// asserts an outcome a platform team relies on, with events consumed back from Kafka.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "cluster_fixture.hpp"
#include "controller/schedules.hpp"
#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "support/testbed.hpp"

namespace outbox::cluster {
namespace {

using namespace testing;
using namespace std::chrono_literals;

std::string pod_name(const Json& pod) {
  return pod.at("/metadata/name"_json_pointer);
}

std::set<std::string> names_of(const std::vector<Json>& list) {
  std::set<std::string> out;
  for (const Json& p : list) {
    out.insert(pod_name(p));
  }
  return out;
}

int restart_count(const Json& pod) {
  int n = 0;
  for (const Json& c : pod.value("/status/containerStatuses"_json_pointer, Json::array())) {
    n += c.value("restartCount", 0);
  }
  return n;
}

// Shards owned per relay pod, read from each pod's /metrics over the pod bridge.
std::map<std::string, int> shards_per_pod(const RelayUnderTest& r) {
  std::map<std::string, int> out;
  for (const Json& pod : pods(r.ns, r.relay_selector())) {
    std::string ip = pod.value("/status/podIP"_json_pointer, std::string());
    if (ip.empty()) {
      continue;
    }
    std::string body;
    try {
      body = kubectl("get --raw /api/v1/namespaces/" + r.ns + "/pods/" + pod_name(pod) +
                     ":8080/proxy/metrics");
    } catch (const std::exception&) {
      continue;
    }
    for (std::size_t at = body.find("\noutbox_shards_owned{"); at != std::string::npos;
         at = body.find("\noutbox_shards_owned{", at + 1)) {
      std::size_t sp = body.find("} ", at);
      out[pod_name(pod)] += std::stoi(body.substr(sp + 2));
    }
  }
  return out;
}

int total(const std::map<std::string, int>& m) {
  int n = 0;
  for (const auto& [k, v] : m) {
    n += v;
  }
  return n;
}

// The granted advisory locks of the whole database, straight from PostgreSQL: how many
// sessions hold one lock. PostgreSQL grants an exclusive advisory lock to one session only, so
// this is a sanity check of the locking the relay relies on, not a test that could catch a
// relay bug; the per-key order and loss checks are what prove no two pods published a shard.
int most_holders_of_one_shard(const RelayUnderTest& r) {
  pqxx::connection conn(r.table.dsn);
  pqxx::nontransaction tx(conn);
  auto row = tx.exec1(
      "SELECT COALESCE(max(n), 0) FROM (SELECT count(*) AS n FROM pg_locks "
      "WHERE locktype = 'advisory' AND granted GROUP BY classid, objid) s");
  return row[0].as<int>();
}

// True once the relay runs `n` Ready pods and none of them is one of `old_pods`.
bool all_replaced(const RelayUnderTest& r, const std::set<std::string>& old_pods, std::size_t n) {
  auto now = names_of(pods(r.ns, r.relay_selector()));
  for (const auto& p : now) {
    if (old_pods.count(p)) {
      return false;
    }
  }
  return now.size() == n && ready_pods(r.ns, r.relay_selector()).size() == n;
}

void wait_for_ready_pods(const RelayUnderTest& r, std::size_t n, std::chrono::seconds timeout) {
  ASSERT_TRUE(eventually(
      [&] {
        return ready_pods(r.ns, r.relay_selector()).size() == n &&
               pods(r.ns, r.relay_selector()).size() == n;
      },
      timeout))
      << kubectl("-n " + r.ns + " get pods -o wide");
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The relay container's process as this machine sees it: the image has no shell, cat or id
// to exec, and the test bed's node runs here, so the host's /proc shows the container's
// processes. The pod's containerStatuses name the container's ID, and the container's
// cgroup path holds that ID (with either kubelet cgroup driver), which picks this pod's
// process among every relay's; its argv[0] is the image's binary. "" until it is found.
std::string relay_process(const std::string& ns, const std::string& pod) {
  std::string id = kubectl("-n " + ns + " get pod " + pod +
                           " -o jsonpath={.status.containerStatuses[0].containerID}");
  id = id.substr(id.find("://") == std::string::npos ? 0 : id.find("://") + 3);
  if (id.size() < 12) {
    return "";
  }
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos ||
        file_text("/proc/" + pid + "/cgroup").find(id) == std::string::npos) {
      continue;
    }
    const std::string argv = file_text("/proc/" + pid + "/cmdline");
    if (argv.substr(0, argv.find('\0')) == "/usr/local/bin/outbox-operator") {
      return pid;
    }
  }
  return "";
}

// A field of /proc/<pid>/status ("Uid", "Gid"): its tab-separated values.
std::string status_field(const std::string& pid, const std::string& field) {
  std::istringstream in(file_text("/proc/" + pid + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":\t", 0) == 0) {
      return line.substr(field.size() + 2);
    }
  }
  return "";
}

// The mount options of the process's root ("/" in its /proc/<pid>/mountinfo): the per-mount
// options are the sixth field.
std::string root_mount_options(const std::string& pid) {
  std::istringstream in(file_text("/proc/" + pid + "/mountinfo"));
  std::string options;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point, opts;
    fields >> id >> parent >> dev >> root >> mount_point >> opts;
    if (mount_point == "/") {
      options = opts;  // the last mount on "/" is the one the process sees
    }
  }
  return options;
}

TEST(Cluster, RelayPodsStartFromTheImageDeliverAndShowReadyInKubectl) {
  RelayUnderTest r("cl-ready");
  r.apply();
  r.wait_ready();
  std::string table = kubectl("-n " + r.ns + " get obr " + r.name);
  EXPECT_NE(table.find("True"), std::string::npos) << table;
  Json status = r.get().at("status");
  EXPECT_EQ(status.at("/relay/readyReplicas"_json_pointer), 2) << status.dump();

  r.table.insert(300, 10);
  EXPECT_EQ(r.delivery_problem(300), "");

  // Nothing to exec into but the binary: exec itself works for those allowed pods/exec (the
  // binary answers, found on PATH), a shell is not there by path nor on PATH.
  std::string pod = ready_pods(r.ns, r.relay_selector()).at(0);
  const std::string version =
      kubectl("-n " + r.ns + " exec " + pod + " -- outbox-operator --version");
  EXPECT_EQ(version.rfind("outbox-operator ", 0), 0u) << version;
  for (const std::string shell : {"/bin/sh -c true", "sh -c true", "/bin/bash -c true"}) {
    try {
      std::string out = kubectl("-n " + r.ns + " exec " + pod + " -- " + shell);
      ADD_FAILURE() << "the image has a shell: `" << shell << "` ran: " << out;
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("no such file or directory") != std::string::npos ||
                  what.find("not found") != std::string::npos)
          << shell << ": " << what;
    }
  }
  // The container runs as the chart's non-root user on a read-only root filesystem, as its
  // process shows on this machine (there is no `id` or `touch` in the image to ask).
  std::string pid;
  ASSERT_TRUE(eventually([&] { return !(pid = relay_process(r.ns, pod)).empty(); }, 30s))
      << "no process of " << pod << "'s container on this machine";
  EXPECT_EQ(status_field(pid, "Uid"), "65532\t65532\t65532\t65532");
  EXPECT_EQ(status_field(pid, "Gid"), "65532\t65532\t65532\t65532");
  const std::string root_options = root_mount_options(pid);
  EXPECT_TRUE(root_options == "ro" || root_options.rfind("ro,", 0) == 0) << root_options;
  // The DSN reached the relay through the Secret only: not in the pod spec or the args.
  std::string spec = kubectl("-n " + r.ns + " get pod " + pod + " -o json");
  EXPECT_EQ(spec.find(node_env().pod_dsn), std::string::npos);
}

// A namespace whose ResourceQuota counts cpu and memory requests and memory limits refuses
// every pod that does not state them: the relay pods with the default resources are admitted,
// run Burstable and are counted; with `resources: {}` the same quota refuses them. The default
// spread over nodes is soft: both replicas still run on this one node.
TEST(Cluster, RelayPodsWithTheDefaultResourcesAreAdmittedUnderAResourceQuota) {
  RelayUnderTest r("cl-quota");
  apply({{"apiVersion", "v1"},
         {"kind", "ResourceQuota"},
         {"metadata", {{"name", "compute"}, {"namespace", r.ns}}},
         {"spec",
          {{"hard",
            {{"requests.cpu", "1"}, {"requests.memory", "1Gi"}, {"limits.memory", "2Gi"}}}}}});
  // The quota admission plugin refuses every pod until the controller-manager has filled in
  // the quota's status.
  auto quota = [&] {
    return Json::parse(kubectl("-n " + r.ns + " get resourcequota compute -o json"));
  };
  ASSERT_TRUE(eventually([&] { return quota().contains("/status/hard"_json_pointer); }, 60s))
      << quota().dump();

  r.apply({{"relay", {{"resources", Json::object()}}}});
  auto refused = [&] {
    Json sets = Json::parse(
        kubectl("-n " + r.ns + " get replicasets -o json -l '" + r.relay_selector() + "'"));
    for (const Json& rs : sets.at("items")) {
      for (const Json& c : rs.value("/status/conditions"_json_pointer, Json::array())) {
        if (c.value("type", "") == "ReplicaFailure" &&
            c.value("message", "").find("forbidden") != std::string::npos) {
          return true;
        }
      }
    }
    return false;
  };
  ASSERT_TRUE(eventually(refused, 90s)) << "the quota admitted relay pods without resources";
  EXPECT_TRUE(pods(r.ns, r.relay_selector()).empty());

  r.apply({{"relay", {{"resources", nullptr}}}});
  r.wait_ready();
  // The API server filled in the CRD's default, and the pods carry it.
  EXPECT_EQ(r.get().at("/spec/relay/resources/limits/memory"_json_pointer), "128Mi");
  const std::vector<Json> running = pods(r.ns, r.relay_selector());
  ASSERT_EQ(running.size(), 2u);
  for (const Json& pod : running) {
    EXPECT_EQ(pod.at("/status/qosClass"_json_pointer), "Burstable") << pod_name(pod);
    EXPECT_EQ(pod.at("/spec/containers/0/resources/requests/cpu"_json_pointer), "50m");
    EXPECT_EQ(pod.at("/spec/topologySpreadConstraints/0/whenUnsatisfiable"_json_pointer),
              "ScheduleAnyway");
    EXPECT_EQ(pod.at("/spec/nodeName"_json_pointer),
              running.front().at("/spec/nodeName"_json_pointer));
  }
  // Two pods of 64Mi requested and 128Mi limit each.
  EXPECT_TRUE(eventually(
      [&] {
        const Json used = quota().value("/status/used"_json_pointer, Json::object());
        return used.value("requests.memory", "") == "128Mi" &&
               used.value("limits.memory", "") == "256Mi" &&
               used.value("requests.cpu", "") == "100m";
      },
      60s))
      << quota().dump();
  r.table.insert(50, 5);
  EXPECT_EQ(r.delivery_problem(50), "");
}

// spec.database.manageSchema on a table that does not exist yet: the operator's migrate Job
// (a real pod from the image) creates it in log mode with the spec's shard count, SchemaReady
// turns True, the relay pods become Ready on it and publish what a service then writes.
TEST(Cluster, AManagedSchemaIsCreatedByAJobBeforeTheRelaysPublish) {
  RelayUnderTest r("cl-schema");
  const TableName table = TableName::parse(outbox::testbed::unique_name("managed"));
  r.apply({{"database", {{"table", table.plain()}, {"manageSchema", true}, {"mode", "Log"}}},
           {"relay", {{"shards", 8}}}});
  ASSERT_TRUE(eventually(
      [&] {
        for (const Json& c : r.get().value("/status/conditions"_json_pointer, Json::array())) {
          if (c.value("type", "") == "SchemaReady") {
            return c.value("status", "") == "True";
          }
        }
        return false;
      },
      240s))
      << r.get().value("status", Json::object()).dump() << kubectl("-n " + r.ns + " get jobs,pods");
  r.wait_ready();
  pqxx::connection conn(r.table.dsn);
  const TableInfo info = inspect_table(conn, table);
  EXPECT_EQ(info.mode, TableMode::kLog);
  EXPECT_EQ(info.shard_count, 8);
  {
    pqxx::work tx(conn);
    for (int i = 0; i < 100; ++i) {
      const std::string key = "k" + std::to_string(i % 5);
      enqueue(tx, table, "order", key,
              "{\"seq\": " + std::to_string(i) + ", \"key\": \"" + key + "\"}");
    }
    tx.commit();
  }
  EXPECT_EQ(r.delivery_problem(100), "");
}

// operator/samples/debezium.yaml on the node, with manageSchema: a table in Debezium's shape,
// written by plain INSERTs that never heard of this project, is adopted by the operator's Job
// (migrate --adopt with the sample's columns) and relayed to Debezium's topic names with the
// service's ids, per-key order and its trace context from tracingspancontext.
TEST(Cluster, TheDebeziumSampleRelaysAnUnchangedTableWithItsTraceContext) {
  RelayUnderTest r("cl-dbz");
  const TableName table = TableName::parse(outbox::testbed::unique_name("dbz"));
  pqxx::connection conn(r.table.dsn);
  pqxx::nontransaction(conn).exec(
      "CREATE TABLE " + table.quoted() +
      " (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT "
      "NULL, type varchar(255) NOT NULL, payload jsonb, timestamp timestamp NOT NULL DEFAULT "
      "now(), tracingspancontext varchar(256))");
  Json sample =
      Json::parse(kubectl("create --dry-run=client -o json -f " + std::string(OUTBOX_SOURCE_DIR) +
                          "/operator/samples/debezium.yaml"));
  Json spec = sample.at("spec");
  spec["database"]["dsnSecretRef"] = r.spec.at("/database/dsnSecretRef"_json_pointer);
  spec["database"]["table"] = table.plain();
  spec["database"]["manageSchema"] = true;
  spec["kafka"]["bootstrapServers"] = node_env().pod_bootstrap;
  spec["relay"] = r.spec.at("relay");
  // The fixture's fast retries, as every other test here: a transient refusal of a first send
  // (the topic is created by it) is retried within the wait below, not after the default 1 m.
  spec["retry"] = r.spec.at("retry");
  r.spec = Json::object();
  r.apply(spec);
  r.wait_ready(240s);
  const std::string type = "order" + std::to_string(::getpid());
  const int events = 60;
  for (int i = 0; i < events; ++i) {
    pqxx::work tx(conn);
    const std::string key = "o-" + std::to_string(i % 6);
    tx.exec_params("INSERT INTO " + table.quoted() +
                       " (id, aggregatetype, aggregateid, type, payload, tracingspancontext) "
                       "VALUES (gen_random_uuid(), $1, $2, 'OrderPaid', $3::jsonb, $4)",
                   type, key, "{\"seq\": " + std::to_string(i) + ", \"key\": \"" + key + "\"}",
                   "traceparent=00-" + std::string(32, 'c') + "-" + std::string(16, 'd') + "-01\n");
    tx.commit();
  }
  auto got = outbox::testing::consume_all({"outbox.event." + type}, events, 120s, 2s);
  EXPECT_EQ(outbox::testing::distinct_seqs(got), static_cast<std::size_t>(events));
  EXPECT_EQ(outbox::testing::per_key_order_problem(got), "");
  for (const auto& m : got) {
    EXPECT_EQ(m.headers.at("traceparent"),
              "00-" + std::string(32, 'c') + "-" + std::string(16, 'd') + "-01");
  }
  auto cols = pqxx::nontransaction(conn).exec_params(
      "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2",
      table.schema(), table.table());
  EXPECT_EQ(cols[0][0].as<int>(), 7) << "the service's table is unchanged";
}

// Strimzi's shapes, end to end from real pods: the cluster CA Secret and a scram-sha-512
// KafkaUser's Secret, mounted as files; the relay pods speak SCRAM over TLS (verified against
// the CA) to the Kafka 4.3 broker and deliver. The password is nowhere in the pod spec nor in
// the relay process's command line.
TEST(Cluster, RelayPodsDeliverOverScramAndTlsWithStrimziShapedSecrets) {
  RelayUnderTest r("cl-scram");
  const std::string password = file_text(node_env().kafka_pki + "/scram/password");
  ASSERT_FALSE(password.empty());
  apply({{"apiVersion", "v1"},
         {"kind", "Secret"},
         {"metadata", {{"name", "kafka-cluster-ca-cert"}, {"namespace", r.ns}}},
         {"stringData", {{"ca.crt", file_text(node_env().kafka_pki + "/ca.crt")}}}});
  apply({{"apiVersion", "v1"},
         {"kind", "Secret"},
         {"metadata", {{"name", "outbox-relay"}, {"namespace", r.ns}}},
         {"stringData",
          {{"password", password},
           {"sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            "username=\"outbox-relay\" password=\"" +
                password + "\";"}}}});
  r.apply({{"kafka",
            {{"bootstrapServers", node_env().pod_scram_bootstrap},
             {"tls",
              {{"trustedCertificates",
                {{{"secretName", "kafka-cluster-ca-cert"}, {"certificate", "ca.crt"}}}}}},
             {"authentication",
              {{"type", "scram-sha-512"},
               {"username", "outbox-relay"},
               {"passwordSecret", {{"secretName", "outbox-relay"}, {"password", "password"}}}}}}}});
  r.wait_ready();
  r.table.insert(100, 10);
  EXPECT_EQ(r.delivery_problem(100), "");

  const std::string pod = ready_pods(r.ns, r.relay_selector()).at(0);
  EXPECT_EQ(kubectl("-n " + r.ns + " get pod " + pod + " -o json").find(password),
            std::string::npos);
  std::string pid;
  ASSERT_TRUE(eventually([&] { return !(pid = relay_process(r.ns, pod)).empty(); }, 30s))
      << "no process of " << pod << "'s container on this machine";
  const std::string cmdline = file_text("/proc/" + pid + "/cmdline");
  EXPECT_NE(cmdline.find("relay"), std::string::npos) << cmdline;
  EXPECT_EQ(cmdline.find(password), std::string::npos) << "the password is in the relay's argv";
}

// A ready relay whose 20 events were all delivered, then three of them left FAILED as a relay
// leaves events after retry.maxAttempts: what a requeue works on.
void leave_three_failed(RelayUnderTest& r) {
  r.apply();
  r.wait_ready();
  r.table.insert(20, 4);
  ASSERT_EQ(r.delivery_problem(20), "");
  pqxx::connection conn(r.table.dsn);
  pqxx::nontransaction(conn).exec(
      "UPDATE " + r.table.table.quoted() + " SET status = 2, last_error = 'broker refused' " +
      "WHERE id IN (SELECT id FROM " + r.table.table.quoted() + " ORDER BY id LIMIT 3)");
}

// A kubeconfig for ServiceAccount `sa` of `ns` with a short-lived token (`kubectl create
// token`), on the test bed's API server: what an on-call's kubeconfig holds. Its path.
std::string service_account_kubeconfig(const std::string& ns, const std::string& sa) {
  const std::string token = kubectl("-n " + ns + " create token " + sa + " --duration=1h");
  const std::string path =
      std::filesystem::temp_directory_path() / ("oncall-" + ns + ".kubeconfig");
  std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n"
                      << "    server: " << testbed::require_env("OUTBOX_TEST_KUBE_SERVER") << "\n"
                      << "    certificate-authority: "
                      << testbed::require_env("OUTBOX_TEST_KUBE_CA") << "\nusers:\n- name: " << sa
                      << "\n  user:\n    token: "
                      << token.substr(0, token.find_last_not_of(" \n") + 1)
                      << "\ncontexts:\n- name: oncall\n  context:\n    cluster: testbed\n"
                      << "    user: " << sa << "\n    namespace: " << ns
                      << "\ncurrent-context: oncall\n";
  return path;
}

// The on-call path with Kubernetes RBAC only, as a ServiceAccount bound to exactly the
// documented verbs (examples/oncall/rbac.yaml): no pods/exec, no Secrets. `kubectl outbox
// status` shows the conditions, the backlog, every relay pod with its shards and the table's
// health; inspect reads the relay's /inspect through the pod proxy; requeue and replay are
// annotations the operator carries out with Jobs, answered in status and announced by Events
// that name the ServiceAccount. kubectl exec is refused to it.
TEST(Cluster, KubectlOutboxWorksForAnOnCallWithoutExecOrSecrets) {
  RelayUnderTest r("cl-oncall");
  ASSERT_NO_FATAL_FAILURE(leave_three_failed(r));
  kubectl("-n " + r.ns + " create serviceaccount oncall");
  // The example's ClusterRole as shipped (its RoleBinding is for a namespace "orders"; this one
  // binds the ServiceAccount here).
  kubectl("apply -f " + std::string(OUTBOX_SOURCE_DIR) +
          "/examples/oncall/rbac.yaml -l app.kubernetes.io/part-of=outbox-operator");
  kubectl("-n " + r.ns + " create rolebinding outbox-oncall --clusterrole=outbox-oncall " +
          "--serviceaccount=" + r.ns + ":oncall");
  const std::string kc = service_account_kubeconfig(r.ns, "oncall");
  const std::string as = " -n " + r.ns + " --kubeconfig " + kc;

  // Exactly the documented verbs, and none of what would reach the DSN.
  const std::map<std::string, bool> checks = {
      {"get outboxrelays.outbox.dev/orders", true},
      {"patch outboxrelays.outbox.dev/orders", true},
      {"list pods", true},
      {"get pods --subresource=proxy", true},
      {"list events", true},
      {"create pods --subresource=exec", false},
      {"get pods --subresource=exec", false},
      {"create pods --subresource=proxy", false},
      {"get secrets", false},
      {"list secrets", false},
      {"create jobs.batch", false},
      {"create pods", false},
      {"patch outboxrelays.outbox.dev/orders --subresource=status", false},
  };
  for (const auto& [check, allowed] : checks) {
    std::string answer;
    try {
      answer = kubectl("auth can-i " + check + as);
    } catch (const std::runtime_error& e) {
      answer = e.what();  // `no` exits 1
      answer = answer.substr(answer.rfind("failed: ") + 8);
    }
    answer = answer.substr(0, answer.find_first_of(" \n"));
    EXPECT_EQ(answer, allowed ? "yes" : "no")
        << check << " should be " << (allowed ? "allowed" : "refused") << ": " << answer;
  }
  const std::vector<std::string> relay_pods = ready_pods(r.ns, r.relay_selector());
  ASSERT_FALSE(relay_pods.empty());
  try {
    const std::string out =
        kubectl("exec " + relay_pods.at(0) + as + " -- outbox-operator --version");
    ADD_FAILURE() << "kubectl exec worked for the on-call: " << out;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("forbidden"), std::string::npos) << e.what();
  }

  const std::string status = kubectl_outbox("status " + r.name + as);
  EXPECT_NE(status.find("OutboxRelay " + r.ns + "/" + r.name), std::string::npos) << status;
  EXPECT_NE(status.find("RelaysReady"), std::string::npos) << status;
  EXPECT_NE(status.find("BacklogStuck"), std::string::npos) << status;
  EXPECT_NE(status.find("table health:"), std::string::npos) << status;
  EXPECT_NE(status.find("FAILED 3"), std::string::npos) << status;
  int shards = 0;
  for (const std::string& pod : relay_pods) {
    const std::size_t at = status.find("  " + pod + " ");
    ASSERT_NE(at, std::string::npos) << status;
    std::istringstream line(status.substr(at, status.find('\n', at) - at));
    std::string name, phase, restarts, owned;
    line >> name >> phase >> restarts >> owned;
    EXPECT_EQ(phase, "Running") << status;
    shards += std::stoi(owned);
  }
  EXPECT_EQ(shards, 16) << "every shard of the table (migrated with 16) is owned once\n" << status;

  const std::string inspected = kubectl_outbox("inspect " + r.name + as + " -- --json --top 2");
  EXPECT_EQ(Json::parse(inspected).at("failed"), 3) << inspected;
  EXPECT_EQ(Json::parse(inspected).at("lastErrors").size(), 2u) << inspected;

  // With the optional requester policy (examples/oncall/requester-policy.yaml, bound here to
  // this namespace only) the API server refuses a request that names someone else; the
  // plugin's requests, naming the user the API server authenticated, pass.
  kubectl("apply -f " + std::string(OUTBOX_SOURCE_DIR) +
          "/examples/oncall/requester-policy.yaml -l "
          "app.kubernetes.io/component=requester-policy");
  apply(
      {{"apiVersion", "admissionregistration.k8s.io/v1"},
       {"kind", "ValidatingAdmissionPolicyBinding"},
       {"metadata", {{"name", "outbox-requester-" + r.ns}}},
       {"spec",
        {{"policyName", "outbox-requester"},
         {"validationActions", {"Deny"}},
         {"matchResources",
          {{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", r.ns}}}}}}}}}});
  // A UUID no event has: if the policy is not in force yet, the request changes nothing.
  const std::string forged =
      "outbox.dev/replay={\"request\":\"forged-1\",\"requestedBy\":\"admin\","
      "\"eventIds\":[\"00000000-0000-4000-8000-000000000000\"]}";
  std::string refusal;
  EXPECT_TRUE(eventually(
      [&] {
        try {
          kubectl("annotate obr " + r.name + as + " --overwrite '" + forged + "'");
          kubectl("-n " + r.ns + " annotate obr " + r.name + " outbox.dev/replay-");
          return false;
        } catch (const std::runtime_error& e) {
          refusal = e.what();
          return refusal.find("must be the user making this change") != std::string::npos;
        }
      },
      30s))
      << refusal;

  const std::string requeued = kubectl_outbox("requeue " + r.name + as + " -- --all");
  EXPECT_NE(requeued.find("requeued 3 event(s)"), std::string::npos) << requeued;
  EXPECT_TRUE(eventually([&] { return r.table.count("status = 1") == 20; }, 60s))
      << "the requeued events were published again";

  pqxx::connection conn(r.table.dsn);
  const auto first =
      pqxx::nontransaction(conn).exec1("SELECT min(id) FROM " + r.table.table.quoted());
  const std::int64_t from = first[0].as<std::int64_t>();
  const std::string replayed =
      kubectl_outbox("replay " + r.name + as + " -- --from-id " + std::to_string(from) +
                     " --to-id " + std::to_string(from + 4));
  EXPECT_NE(replayed.find("replayed 5 event(s)"), std::string::npos) << replayed;
  EXPECT_EQ(r.get().value("/status/lastReplay/replayed"_json_pointer, -1), 5);
  EXPECT_TRUE(eventually([&] { return r.table.count("status = 1") == 20; }, 60s))
      << "the replayed events were published again";
  // An unbounded replay is refused by the operator, and the plugin says why.
  EXPECT_THROW(kubectl_outbox("replay " + r.name + as + " -- --biz-type order"),
               std::runtime_error);

  // Who asked: the Events name the ServiceAccount the API server authenticated.
  const std::string user = "system:serviceaccount:" + r.ns + ":oncall";
  const std::string events = kubectl("-n " + r.ns + " get events -o json");
  const Json listed = Json::parse(events);  // named: a range-for over a temporary's member dangles
  for (const std::string reason : {"RequeueRequested", "ReplayRequested"}) {
    bool named = false;
    for (const Json& e : listed.at("items")) {
      named = named || (e.value("reason", "") == reason &&
                        e.value("message", "").find("requested by " + user) != std::string::npos);
    }
    EXPECT_TRUE(named) << reason << " naming " << user << ": " << events;
  }
  const std::string shown = kubectl_outbox("status " + r.name + as);
  EXPECT_NE(shown.find("ReplayRequested"), std::string::npos) << shown;
  EXPECT_NE(shown.find("lastReplay: "), std::string::npos) << shown;
  EXPECT_THROW(kubectl_outbox("status no-such-relay" + as), std::runtime_error);
  kubectl("delete validatingadmissionpolicybinding outbox-requester-" + r.ns);
}

// The GitOps path: the outbox.dev/requeue-failed annotation runs a Job in the relay's image
// with the relay's Secret-mounted DSN; its pod requeues every FAILED event, the relays publish
// them again, and it answers the request in status.lastRequeue with the count.
TEST(Cluster, TheRequeueAnnotationRunsAJobThatRequeuesFailedEventsAndAnswersInStatus) {
  RelayUnderTest r("cl-requeue");
  ASSERT_NO_FATAL_FAILURE(leave_three_failed(r));
  const std::string token = "2026-12-04T10:00:00Z";
  kubectl("-n " + r.ns + " annotate obr " + r.name + " outbox.dev/requeue-failed=" + token);
  ASSERT_TRUE(eventually(
      [&] { return r.get().value("/status/lastRequeue/request"_json_pointer, "") == token; }, 180s))
      << kubectl("-n " + r.ns + " get jobs,pods -o wide");
  const Json answer = r.get().at("/status/lastRequeue"_json_pointer);
  EXPECT_EQ(answer.at("outcome"), "Succeeded") << answer.dump();
  EXPECT_EQ(answer.at("requeued"), 3) << answer.dump();
  EXPECT_TRUE(eventually([&] { return r.table.count("status = 1") == 20; }, 60s))
      << "the requeued events were published again";
  EXPECT_EQ(r.table.count("status = 2"), 0);

  // The Job's pod ran as the relay's pods do: the relay's ServiceAccount, the DSN from the
  // Secret (never in the Job), and it completed (the pod answers in status before it exits,
  // so the Job may count it a moment after the answer).
  Json job;
  EXPECT_TRUE(eventually(
      [&] {
        job = Json::parse(
                  kubectl("-n " + r.ns + " get job -l app.kubernetes.io/component=requeue -o json"))
                  .at("items")
                  .at(0);
        return job.value("/status/succeeded"_json_pointer, 0) == 1;
      },
      60s))
      << job.dump();
  EXPECT_EQ(job.at("/spec/template/spec/serviceAccountName"_json_pointer), "orders-relay");
  EXPECT_EQ(job.dump().find(node_env().pod_dsn), std::string::npos) << "the DSN is in the Job";
  for (const Json& c : r.get().value("/status/conditions"_json_pointer, Json::array())) {
    if (c.value("type", "") == "JobFailed") {
      EXPECT_EQ(c.value("status", ""), "False") << c.dump();
    }
  }
}

TEST(Cluster, KilledRelayContainerAndDeletedPodAreReplacedWithNothingLost) {
  RelayUnderTest r("cl-kill");
  r.apply();
  r.wait_ready();
  Load load(r.table, 200);
  std::this_thread::sleep_for(3s);

  // kill -9 of the relay process: the kubelet restarts the container in place.
  Json victim = pods(r.ns, r.relay_selector()).at(0);
  std::string id = victim.at("/status/containerStatuses/0/containerID"_json_pointer);
  id = id.substr(id.find("://") + 3);
  std::string sock = testbed::require_env("TESTBED_STATE") + "/node/containerd/containerd.sock";
  std::system(("ctr --address '" + sock + "' -n k8s.io tasks kill --signal SIGKILL " + id).c_str());
  ASSERT_TRUE(eventually(
      [&] {
        for (const Json& p : pods(r.ns, r.relay_selector())) {
          if (pod_name(p) == pod_name(victim)) {
            return restart_count(p) >= 1;
          }
        }
        return false;
      },
      60s))
      << kubectl("-n " + r.ns + " get pods");
  wait_for_ready_pods(r, 2, 90s);
  std::this_thread::sleep_for(2s);

  // Deleting a pod: the Deployment replaces it with a new one.
  std::set<std::string> before = names_of(pods(r.ns, r.relay_selector()));
  std::string deleted = *before.begin();
  kubectl("-n " + r.ns + " delete pod " + deleted + " --wait=false");
  ASSERT_TRUE(eventually(
      [&] {
        auto now = names_of(pods(r.ns, r.relay_selector()));
        return now.size() == 2 && !now.count(deleted) &&
               ready_pods(r.ns, r.relay_selector()).size() == 2;
      },
      90s))
      << kubectl("-n " + r.ns + " get pods");
  std::this_thread::sleep_for(2s);
  int inserted = load.stop();
  EXPECT_EQ(r.delivery_problem(inserted), "");
}

TEST(Cluster, ScaleOneToThreeToOneUnderLoadRebalancesShardsAndLosesNothing) {
  RelayUnderTest r("cl-scale");
  r.apply({{"relay", {{"replicas", 1}}}});
  r.wait_ready();
  Load load(r.table, 200);
  // Through the /scale subresource, as kubectl scale and autoscalers do.
  kubectl("-n " + r.ns + " scale obr/" + r.name + " --replicas=3");
  wait_for_ready_pods(r, 3, 120s);
  std::map<std::string, int> shards;
  EXPECT_TRUE(eventually(
      [&] {
        shards = shards_per_pod(r);
        if (shards.size() != 3 || total(shards) != 16) {
          return false;
        }
        for (const auto& [pod, n] : shards) {
          if (n == 0) {
            return false;
          }
        }
        return true;
      },
      60s))
      << "shards per pod did not spread over 3 pods: " << Json(shards).dump();
  EXPECT_LE(most_holders_of_one_shard(r), 1);

  r.apply({{"relay", {{"replicas", 1}}}});
  wait_for_ready_pods(r, 1, 120s);
  EXPECT_TRUE(eventually([&] { return total(shards = shards_per_pod(r)) == 16; }, 60s))
      << Json(shards).dump();
  int inserted = load.stop();
  EXPECT_EQ(r.delivery_problem(inserted), "");
}

TEST(Cluster, RolloutOfANewPodTemplateUnderLoadLosesNothingAndNeverSharesAShard) {
  RelayUnderTest r("cl-roll");
  r.apply();
  r.wait_ready();
  std::set<std::string> old_pods = names_of(pods(r.ns, r.relay_selector()));
  Load load(r.table, 200);
  std::atomic<bool> rolling{true};
  std::atomic<int> most_holders{0};
  std::thread sampler([&] {
    while (rolling) {
      most_holders = std::max(most_holders.load(), most_holders_of_one_shard(r));
      std::this_thread::sleep_for(100ms);
    }
  });
  // A new batch size changes the rendered arguments, so the pod template changes.
  r.apply({{"relay", {{"batchSize", 50}}}});
  bool rolled = eventually([&] { return all_replaced(r, old_pods, 2); }, 180s);
  std::this_thread::sleep_for(2s);
  rolling = false;
  sampler.join();
  ASSERT_TRUE(rolled) << kubectl("-n " + r.ns + " get pods");
  EXPECT_LE(most_holders.load(), 1);
  std::string args =
      kubectl("-n " + r.ns +
              " get deploy orders-relay -o jsonpath={.spec.template.spec.containers[0].args}");
  EXPECT_NE(args.find("--batch-size=50"), std::string::npos) << args;
  int inserted = load.stop();
  EXPECT_EQ(r.delivery_problem(inserted), "");
}

TEST(Cluster, DeletedLeadingOperatorPodIsSucceededByTheStandbyAndReconcilingResumes) {
  install_operator();
  const std::string lease = std::string(kRelease) + "-outbox-operator-leader";
  auto holder = [&] {
    return kubectl(std::string("-n ") + kOperatorNamespace + " get lease " + lease +
                   " -o jsonpath={.spec.holderIdentity}");
  };
  std::string leader;
  ASSERT_TRUE(eventually([&] { return !(leader = holder()).empty(); }, 60s));
  kubectl(std::string("-n ") + kOperatorNamespace + " delete pod " + leader + " --wait=false");
  auto t0 = std::chrono::steady_clock::now();
  std::string next;
  ASSERT_TRUE(eventually(
      [&] {
        next = holder();
        return !next.empty() && next != leader;
      },
      30s))
      << "the lease still names " << leader;
  auto takeover = std::chrono::steady_clock::now() - t0;
  // Lease duration 6 s, retry period 1 s (install_operator): a clean stop releases the
  // Lease at once; even a lost release must not take longer than one lease plus retries.
  EXPECT_LT(takeover, 10s);

  // The new leader reconciles: a new OutboxRelay gets its Deployment.
  RelayUnderTest r("cl-leader");
  r.apply({{"relay", {{"replicas", 1}}}});
  EXPECT_TRUE(eventually(
      [&] {
        try {
          kubectl("-n " + r.ns + " get deploy orders-relay");
          return true;
        } catch (const std::exception&) {
          return false;
        }
      },
      30s));
  r.wait_ready();
  // And the chart's Deployment replaced the deleted pod: two operator pods again.
  EXPECT_TRUE(eventually(
      [&] {
        return ready_pods(kOperatorNamespace, "app.kubernetes.io/name=outbox-operator").size() == 2;
      },
      90s));
}

// Issue 42: the operator reads no Secret, so a rotation rolls no pod. The kubelet rewrites the
// mounted DSN file, each relay notices within seconds, ends its database session cleanly and
// connects again with the new password, in the same container.
TEST(Cluster, RotatedDsnSecretReachesTheRunningRelaysWhichReconnectWithTheNewPassword) {
  RelayUnderTest r("cl-rotate");
  // A database role of its own, so that its password can change under the relay.
  const std::string role = testbed::unique_name("rotated");
  auto dsn_for = [&](const std::string& password) {
    std::string dsn = node_env().pod_dsn;  // postgresql://outbox:<pw>@host:port/db
    std::size_t user = dsn.find("://") + 3, at = dsn.find('@');
    return dsn.substr(0, user) + role + ":" + password + dsn.substr(at);
  };
  auto set_secret = [&](const std::string& password) {
    apply({{"apiVersion", "v1"},
           {"kind", "Secret"},
           {"metadata", {{"name", "orders-db"}, {"namespace", r.ns}}},
           {"stringData", {{"dsn", dsn_for(password)}}}});
  };
  auto sql = [&](const std::string& statement) {
    pqxx::connection conn(r.table.dsn);
    pqxx::nontransaction tx(conn);
    return tx.exec(statement);
  };
  sql("CREATE ROLE " + role + " LOGIN SUPERUSER PASSWORD 'first-password'");
  set_secret("first-password");
  r.apply();
  r.wait_ready();
  r.table.insert(50, 5);
  ASSERT_EQ(r.delivery_problem(50), "");
  const std::set<std::string> before = names_of(pods(r.ns, r.relay_selector()));
  const std::string template_before =
      kubectl("-n " + r.ns + " get deploy orders-relay -o jsonpath='{.spec.template}'");

  // Rotate: the old password stops working for new sessions; the Secret has the new one.
  const std::string rotated_at = sql("SELECT now()::text")[0][0].as<std::string>();
  sql("ALTER ROLE " + role + " PASSWORD 'second-password'");
  set_secret("second-password");
  // Every session the relays opened before the rotation ends (the kubelet's sync, up to about
  // a minute, then 5 s), and the new ones logged in with the new password.
  auto old_sessions = [&] {
    return sql("SELECT count(*) FROM pg_stat_activity WHERE usename = '" + role +
               "' AND backend_start < '" + rotated_at + "'")[0][0]
        .as<long long>();
  };
  EXPECT_TRUE(eventually([&] { return old_sessions() == 0; }, 150s))
      << kubectl("-n " + r.ns + " logs -l " + r.relay_selector() + " --tail=20");
  const std::string logs = kubectl("-n " + r.ns + " logs -l " + r.relay_selector() + " --tail=-1");
  EXPECT_NE(logs.find("database credential file /etc/outbox/database/dsn changed"),
            std::string::npos)
      << logs;
  EXPECT_EQ(logs.find("second-password"), std::string::npos) << "a password in the log";
  r.table.insert(50, 5, 50);
  EXPECT_EQ(r.delivery_problem(100), "");
  // No roll, no restart: the same pods, their containers never restarted, the same template.
  EXPECT_EQ(names_of(pods(r.ns, r.relay_selector())), before);
  EXPECT_EQ(kubectl("-n " + r.ns + " get pods -l " + r.relay_selector() +
                    " -o jsonpath='{.items[*].status.containerStatuses[*].restartCount}'"),
            "0 0");
  EXPECT_EQ(kubectl("-n " + r.ns + " get deploy orders-relay -o jsonpath='{.spec.template}'"),
            template_before);
  kubectl("delete namespace " + r.ns + " --wait=true --timeout=60s");
  sql("DROP ROLE IF EXISTS " + role);
}

// What `kubectl get obr` says when the relay pods cannot work: Ready=False with the reason from
// the kubelet's words (a Secret, or a Secret key, that does not exist: its FailedMount Events)
// or in the relay's own (a Kafka property it refuses), never only in pod logs; each clears once
// the Secret or the spec is fixed. The operator reads no Secret: a missing one is the kubelet's
// to find, and the Kafka Secret reaches the pods as files.
TEST(Cluster, ReadyConditionSaysWhyRelayPodsAreNotReadyAndClearsOnceFixed) {
  RelayUnderTest r("cl-why");
  auto ready_message = [&] {
    const Json status = r.get().value("status", Json::object());
    for (const Json& c : status.value("conditions", Json::array())) {
      if (c.value("type", "") == "Ready") {
        return c.value("status", "") + " " + c.value("reason", "") + ": " + c.value("message", "");
      }
    }
    return std::string();
  };
  auto says = [&](const std::vector<std::string>& words) {
    return eventually(
        [&] {
          const std::string m = ready_message();
          return std::all_of(words.begin(), words.end(),
                             [&](const std::string& w) { return m.find(w) != std::string::npos; });
        },
        120s);
  };

  // A Secret that does not exist: the pods wait in ContainerCreating, the kubelet says why.
  r.apply({{"database", {{"dsnSecretRef", {{"name", "no-such-secret"}}}}}});
  EXPECT_TRUE(says({"False SecretNotFound",
                    "Secret \"no-such-secret\" named by spec.database.dsnSecretRef does not "
                    "exist",
                    "create secret generic no-such-secret"}))
      << ready_message();
  // A key the Secret does not have: the same, SecretKeyNotFound.
  r.apply({{"database", {{"dsnSecretRef", {{"name", "orders-db"}, {"key", "no-such-key"}}}}}});
  EXPECT_TRUE(says({"False SecretKeyNotFound",
                    "Secret \"orders-db\" named by spec.database.dsnSecretRef has no key "
                    "\"no-such-key\""}))
      << ready_message();

  // The right key, and a Kafka Secret (mounted as files) with a property that would weaken
  // the producer: the relay starts, refuses it, and says so through status.relayProblem.
  kube::Client client = controller::testing::admin_client();
  controller::testing::create_secret(client, r.ns, "orders-kafka",
                                     {{"acks", "1"}, {"client.id", "cluster-test"}});
  r.apply({{"database", {{"dsnSecretRef", {{"key", "dsn"}}}}},
           {"kafka", {{"configSecretRef", {{"name", "orders-kafka"}}}}}});
  EXPECT_TRUE(says({"False RelaysNotReady", "reports: kafka property acks=1 is refused"}))
      << ready_message();
  EXPECT_NE(r.get()
                .value("/status/relayProblem/message"_json_pointer, std::string())
                .find("kafka property acks=1 is refused"),
            std::string::npos)
      << r.get().dump();
  EXPECT_EQ(kubectl("-n " + r.ns + " get pods -o yaml").find("cluster-test"), std::string::npos)
      << "a Kafka Secret value in a pod spec";

  // The Secret fixed (a new one: a rotation): the kubelet rewrites the files, the relay that
  // refused them exits (code 75) and its container starts again with them, ready; the relay
  // clears its report (or the operator, for a pod gone meanwhile).
  kubectl("-n " + r.ns + " delete secret orders-kafka");
  controller::testing::create_secret(client, r.ns, "orders-kafka", {{"client.id", "cluster-test"}});
  r.wait_ready(180s);
  EXPECT_TRUE(eventually([&] { return !r.get().at("status").contains("relayProblem"); }, 60s))
      << r.get().dump();
  r.table.insert(30, 3);
  EXPECT_EQ(r.delivery_problem(30), "");
}

// Issue 42: a DSN Secret whose password holds a bare % makes libpq quote the password. On real
// pods, the relays report why they cannot connect, and the password is in none of the
// OutboxRelay's status (relayProblem, Ready, Stalled, Degraded), its Events or the pods' logs.
TEST(Cluster, APasswordLibpqQuotesBackIsInNoStatusEventOrPodLog) {
  RelayUnderTest r("cl-redact");
  std::string dsn = node_env().pod_dsn;  // postgresql://outbox:<pw>@host:port/db
  const std::size_t colon = dsn.find(':', dsn.find("://") + 3), at = dsn.rfind('@');
  dsn = dsn.substr(0, colon + 1) + "Hunter2%zzSecret" + dsn.substr(at);
  apply({{"apiVersion", "v1"},
         {"kind", "Secret"},
         {"metadata", {{"name", "orders-db"}, {"namespace", r.ns}}},
         {"stringData", {{"dsn", dsn}}}});
  r.apply();
  auto shows_password = [](const std::string& text) {
    return text.find("Hunter2") != std::string::npos || text.find("zzSecret") != std::string::npos;
  };
  EXPECT_TRUE(eventually(
      [&] {
        return r.get()
                   .value("/status/relayProblem/message"_json_pointer, std::string())
                   .find("invalid percent-encoded token") != std::string::npos;
      },
      180s))
      << r.get().dump();
  EXPECT_FALSE(shows_password(r.get().at("status").dump())) << r.get().at("status").dump();
  const std::string events = kubectl("-n " + r.ns + " get events -o json");
  EXPECT_NE(events.find("invalid percent-encoded token"), std::string::npos) << events;
  EXPECT_FALSE(shows_password(events)) << events;
  const std::string logs = kubectl("-n " + r.ns + " logs -l " + r.relay_selector() + " --tail=-1");
  EXPECT_NE(logs.find("invalid percent-encoded token"), std::string::npos) << logs;
  EXPECT_FALSE(shows_password(logs)) << logs;
}

TEST(Cluster, DeletingTheOutboxRelayGarbageCollectsEverythingItOwned) {
  RelayUnderTest r("cl-gc");
  r.apply();
  r.wait_ready();
  const std::string sel = "app.kubernetes.io/instance=" + r.name;
  const std::string kinds =
      "deployments,replicasets,pods,cronjobs,configmaps,services,serviceaccounts,roles,"
      "rolebindings,poddisruptionbudgets";
  ASSERT_NE(kubectl("-n " + r.ns + " get " + kinds + " -l " + sel + " -o name"), "");
  kubectl("-n " + r.ns + " delete obr " + r.name + " --wait=false");
  std::string left;
  EXPECT_TRUE(eventually(
      [&] {
        left = kubectl("-n " + r.ns + " get " + kinds + " -l " + sel + " -o name");
        return left.empty();
      },
      90s))
      << "left behind: " << left;
}

// The rescue bound: with no relay alive, the compensation CronJob leaves its rare spread schedule
// for every minute once the relays' last report is two minutes old (here: the resource's own
// age, as none ever reported), so a stuck event is published within staleAfter plus about three
// minutes.
TEST(Cluster, CronJobsFireAndTheirJobsPublishStuckEventsAndRemoveSentOnes) {
  RelayUnderTest r("cl-cron");
  // No relay pods: only the compensation CronJob can publish.
  r.apply({{"relay", {{"replicas", 0}}},
           {"compensation", {{"staleAfter", "5s"}}},
           {"retention", {{"schedule", "*/1 * * * *"}, {"keepSent", "1s"}}}});
  // Empty until the operator has created it (a poll right after the apply may come first).
  auto compensation_schedule = [&] {
    return kubectl("-n " + r.ns + " get cronjob " + r.name +
                   "-compensate --ignore-not-found -o jsonpath={.spec.schedule}");
  };
  const std::string spread = controller::spread_compensation_schedule(r.ns, r.name);
  // The first pass makes it. Within 90 s, not 30: on a cold run (2026-12-07) the test
  // machine's apiserver timed out three of the leader's lease calls within 45 s and the CronJob
  // came later than 30 s; a leader that steps down is replaced within a lease duration (15 s)
  // plus the sync of the standby's caches. The bounds this test is about come after the insert.
  EXPECT_TRUE(eventually([&] { return compensation_schedule() == spread; }, 90s))
      << "a new resource's relays are starting: the rare schedule " << spread << ", not '"
      << compensation_schedule() << "'; the operator's lease and pods: "
      << kubectl(std::string("-n ") + kOperatorNamespace + " get lease " + kRelease +
                 "-outbox-operator-leader -o jsonpath='{.spec.holderIdentity} "
                 "{.spec.leaseTransitions}'")
      << " "
      << kubectl(std::string("-n ") + kOperatorNamespace +
                 " get pods -o jsonpath='{range .items[*]}{.metadata.name} "
                 "{.status.containerStatuses[0].restartCount} {end}'");
  const auto inserted = std::chrono::steady_clock::now();
  r.table.insert(100, 10);
  EXPECT_TRUE(eventually([&] { return compensation_schedule() == "*/1 * * * *"; }, 150s))
      << compensation_schedule();
  EXPECT_TRUE(eventually([&] { return r.table.count("status = 1") == 100; }, 150s))
      << kubectl("-n " + r.ns + " get cronjobs,jobs,pods");
  EXPECT_LT(std::chrono::steady_clock::now() - inserted, 5s + 4min) << "the stated rescue bound";
  EXPECT_EQ(r.delivery_problem(100), "");
  // Retention removes sent rows older than keepSent on one of its next runs.
  EXPECT_TRUE(eventually([&] { return r.table.count("true") == 0; }, 150s))
      << kubectl("-n " + r.ns + " get cronjobs,jobs,pods");
  // Both CronJobs' Jobs ran to completion (a later minute's run may still be going); none
  // failed.
  std::string jobs =
      kubectl("-n " + r.ns +
              " get jobs -o jsonpath='{range .items[*]}{.metadata.name} "
              "succeeded={.status.succeeded} failed={.status.failed}{\"\\n\"}{end}'");
  EXPECT_NE(jobs.find("orders-compensate-"), std::string::npos) << jobs;
  EXPECT_NE(jobs.find("orders-cleanup-"), std::string::npos) << jobs;
  for (const char* cron : {"orders-compensate-", "orders-cleanup-"}) {
    bool succeeded = false;
    for (std::size_t at = jobs.find(cron); at != std::string::npos; at = jobs.find(cron, at + 1)) {
      succeeded |= jobs.compare(jobs.find(' ', at), 12, " succeeded=1") == 0;
    }
    EXPECT_TRUE(succeeded) << cron << " has no completed Job: " << jobs;
  }
  EXPECT_EQ(jobs.find("failed=1"), std::string::npos) << "a Job failed: " << jobs;
  // The Jobs' pods reported their runs with the relay ServiceAccount's token (in-cluster config).
  EXPECT_TRUE(eventually(
      [&] {
        Json st = r.get().value("status", Json::object());
        return st.value("/lastCompensation/outcome"_json_pointer, "") == "Succeeded" &&
               st.value("/lastCleanup/outcome"_json_pointer, "") == "Succeeded";
      },
      90s))
      << r.get().value("status", Json::object()).dump();
}

// Runs `command` in a pod of `image` to completion; returns its log.
std::string run_pod(const std::string& ns, const std::string& name, const std::string& image,
                    const Json& command, const std::string& service_account = "") {
  Json spec = {
      {"restartPolicy", "Never"},
      {"automountServiceAccountToken", !service_account.empty()},
      {"containers", Json::array({{{"name", name},
                                   {"image", image},
                                   {"imagePullPolicy", "Never"},
                                   {"env", Json::array({{{"name", "HOME"}, {"value", "/tmp"}}})},
                                   {"command", command}}})}};
  if (!service_account.empty()) {
    spec["serviceAccountName"] = service_account;
  }
  apply({{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata", {{"name", name}, {"namespace", ns}}},
         {"spec", spec}});
  std::string phase;
  EXPECT_TRUE(eventually(
      [&] {
        phase = kubectl("-n " + ns + " get pod " + name + " -o jsonpath={.status.phase}");
        return phase == "Succeeded" || phase == "Failed";
      },
      90s))
      << kubectl("-n " + ns + " describe pod " + name);
  EXPECT_EQ(phase, "Succeeded") << kubectl("-n " + ns + " logs " + name);
  return kubectl("-n " + ns + " logs " + name);
}

TEST(Cluster, TheImageCarriesEveryLibraryItsBinaryLinks) {
  install_operator();
  auto client = controller::testing::admin_client();
  std::string ns = controller::testing::make_namespace(client, "cl-image");
  // ldd is a shell script and the image has no shell: the dynamic loader lists what it maps
  // (what ldd asks it for), run from the image as a pod's command.
  std::string out = run_pod(
      ns, "ldd", node_env().image,
      Json::array({"/lib64/ld-linux-x86-64.so.2", "--list", "/usr/local/bin/outbox-operator"}));
  EXPECT_EQ(out.find("not found"), std::string::npos) << out;
  EXPECT_NE(out.find("librdkafka"), std::string::npos) << out;
  EXPECT_NE(run_pod(ns, "version", node_env().image,
                    Json::array({"/usr/local/bin/outbox-operator", "--version"}))
                .find("outbox-operator"),
            std::string::npos);
  kubectl("delete namespace " + ns + " --wait=false");
}

TEST(Cluster, RelayServiceAccountCanDoExactlyWhatTheRelayNeeds) {
  RelayUnderTest r("cl-rbac");
  r.apply({{"relay", {{"replicas", 1}}}});
  r.wait_ready();
  // kubectl inside a pod that runs as the relay's ServiceAccount, with its mounted token.
  const std::map<std::string, bool> checks = {
      {"get outboxrelays.outbox.dev/orders", true},
      {"patch outboxrelays.outbox.dev/orders --subresource=status", true},
      {"update outboxrelays.outbox.dev/orders --subresource=status", true},
      {"create events", true},
      {"patch outboxrelays.outbox.dev/orders", false},
      {"get outboxrelays.outbox.dev/other", false},
      {"list outboxrelays.outbox.dev", false},
      {"get secrets", false},
      {"get secrets/orders-db", false},
      {"list pods", false},
      {"patch deployments", false},
      {"get outboxrelays.outbox.dev/orders -n default", false},
  };
  std::string script;
  for (const auto& [check, _] : checks) {
    script += "echo \"" + check + "=$(kubectl auth can-i " + check + " 2>&1)\"; ";
  }
  std::string out = run_pod(r.ns, "can-i", node_env().tools_image,
                            Json::array({"sh", "-c", script}), "orders-relay");
  for (const auto& [check, allowed] : checks) {
    EXPECT_NE(out.find(check + "=" + (allowed ? "yes" : "no")), std::string::npos)
        << check << " should be " << (allowed ? "allowed" : "refused") << "; got:\n"
        << out;
  }
}

}  // namespace
}  // namespace outbox::cluster
