// The controller against a real kube-apiserver and etcd (no kubelet, no controller-manager:
// Deployments get no pods, so tests patch deployments/status as the admin), and, for the
// backlog report and the jobs' last runs, the real binary against the test bed's PostgreSQL and
// Kafka.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <pqxx/pqxx>

#include "../jobs/cli_runner.hpp"
#include "controller/relay_resources.hpp"
#include "controller_fixture.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using testing::eventually;

const kube::Resource kSecrets{"", "v1", "secrets", true};
const kube::Resource kEvents{"", "v1", "events", true};

Json relay_object(const std::string& name, const Json& spec) {
  return {{"apiVersion", "outbox.dev/v1alpha1"},
          {"kind", "OutboxRelay"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

Json base_spec() {
  return {{"database", {{"dsnSecretRef", {{"name", "orders-db"}, {"key", "dsn"}}}}},
          {"kafka",
           {{"bootstrapServers", "kafka:9092"},
            {"routes", Json::array({{{"bizType", "order"}, {"topic", "orders.v1"}}})}}},
          {"relay", {{"replicas", 2}}},
          {"compensation", {{"schedule", "*/2 * * * *"}, {"staleAfter", "3m"}}},
          {"retention", {{"schedule", "0 4 * * *"}, {"keepSent", "24h"}}}};
}

Json condition(const Json& relay, const std::string& type) {
  for (const Json& c : relay.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.at("type") == type) {
      return c;
    }
  }
  return Json::object();
}

bool has_arg(const Json& container, const std::string& arg) {
  const Json& args = container.at("args");
  return std::find(args.begin(), args.end(), arg) != args.end();
}

class ControllerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::install_crd(); }
  void SetUp() override { ns = testing::make_namespace(client, "obr-e2e"); }

  Json get(const kube::Resource& r, const std::string& name) { return client.get(r, ns, name); }
  Json relay(const std::string& name) { return client.get(kOutboxRelays, ns, name); }
  bool observed(const std::string& name) {
    Json r = relay(name);
    return r.value("status", Json::object()).value("observedGeneration", 0LL) ==
           r.at("metadata").at("generation").get<long long>();
  }
  std::vector<Json> warning_events(const std::string& reason) {
    std::vector<Json> out;
    const Json events = client.list(kEvents, ns);
    for (const Json& e : events.at("items")) {
      if (e.value("reason", "") == reason && e.value("type", "") == "Warning") {
        out.push_back(e);
      }
    }
    return out;
  }

  kube::Client client = testing::admin_client();
  std::string ns;
};

TEST_F(ControllerE2E, OwnedObjectsAppearFollowTheSpecAndComeBack) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {}, "owned-" + ns);
  Json created = client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  const std::string uid = created.at("metadata").at("uid");

  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  Json dep = get(owned::deployments, "orders-relay");
  EXPECT_EQ(dep.at("/spec/replicas"_json_pointer), 2);
  const Json owner = dep.at("/metadata/ownerReferences/0"_json_pointer);
  EXPECT_EQ(owner.at("uid"), uid);
  EXPECT_EQ(owner.at("kind"), "OutboxRelay");
  EXPECT_TRUE(owner.at("controller").get<bool>());
  EXPECT_TRUE(owner.at("blockOwnerDeletion").get<bool>());
  const Json pod = dep.at("/spec/template/spec"_json_pointer);
  const Json c = pod.at("/containers/0"_json_pointer);
  EXPECT_EQ(c.at("image"), "ghcr.io/outbox-operator/outbox-operator:test");
  EXPECT_EQ(c.at("/env/0/name"_json_pointer), "OUTBOX_DSN");
  EXPECT_EQ(c.at("/env/0/valueFrom/secretKeyRef"_json_pointer),
            Json({{"name", "orders-db"}, {"key", "dsn"}}));
  EXPECT_TRUE(has_arg(c, "--report-status=" + ns + "/orders"));
  EXPECT_TRUE(has_arg(c, "--route=order=orders.v1"));
  EXPECT_EQ(c.at("/readinessProbe/httpGet/path"_json_pointer), "/readyz");
  EXPECT_EQ(c.at("/livenessProbe/httpGet/path"_json_pointer), "/healthz");
  EXPECT_TRUE(pod.at("/securityContext/runAsNonRoot"_json_pointer).get<bool>());
  EXPECT_EQ(pod.at("/securityContext/runAsUser"_json_pointer), 65532);
  EXPECT_EQ(pod.at("/securityContext/seccompProfile/type"_json_pointer), "RuntimeDefault");
  EXPECT_TRUE(c.at("/securityContext/readOnlyRootFilesystem"_json_pointer).get<bool>());
  EXPECT_FALSE(c.at("/securityContext/allowPrivilegeEscalation"_json_pointer).get<bool>());
  EXPECT_EQ(c.at("/securityContext/capabilities/drop"_json_pointer), Json::array({"ALL"}));
  EXPECT_EQ(pod.at("serviceAccountName"), "orders-relay");
  const std::string hash1 =
      dep.at("/spec/template/metadata/annotations"_json_pointer).at(kConfigHashAnnotation);

  Json comp = get(owned::cron_jobs, "orders-compensate");
  EXPECT_EQ(comp.at("/spec/schedule"_json_pointer), "*/2 * * * *");
  EXPECT_EQ(comp.at("/spec/concurrencyPolicy"_json_pointer), "Forbid");
  EXPECT_FALSE(comp.at("/spec/suspend"_json_pointer).get<bool>());
  Json comp_c = comp.at("/spec/jobTemplate/spec/template/spec/containers/0"_json_pointer);
  EXPECT_EQ(comp_c.at("/args/0"_json_pointer), "compensate");
  EXPECT_TRUE(has_arg(comp_c, "--stale-after=3m"));
  EXPECT_TRUE(comp_c.at("/securityContext/readOnlyRootFilesystem"_json_pointer).get<bool>());
  Json clean = get(owned::cron_jobs, "orders-cleanup");
  EXPECT_EQ(clean.at("/spec/schedule"_json_pointer), "0 4 * * *");
  EXPECT_TRUE(has_arg(clean.at("/spec/jobTemplate/spec/template/spec/containers/0"_json_pointer),
                      "--keep-sent=24h"));
  Json svc = get(owned::services, "orders-metrics");
  EXPECT_EQ(svc.at("/metadata/labels/app.kubernetes.io~1name"_json_pointer), "outbox-relay");
  EXPECT_EQ(svc.at("/metadata/labels/app.kubernetes.io~1instance"_json_pointer), "orders");
  EXPECT_EQ(svc.at("/metadata/labels/app.kubernetes.io~1managed-by"_json_pointer),
            "outbox-operator");
  EXPECT_EQ(svc.at("/spec/ports/0/name"_json_pointer), "metrics");
  EXPECT_EQ(svc.at("/spec/clusterIP"_json_pointer), "None");
  EXPECT_EQ(
      get(owned::pod_disruption_budgets, "orders-relay").at("/spec/maxUnavailable"_json_pointer),
      1);
  Json role = get(owned::roles, "orders-relay");
  EXPECT_EQ(role.at("/rules/1/resources/0"_json_pointer), "outboxrelays/status");
  EXPECT_EQ(get(owned::role_bindings, "orders-relay").at("/subjects/0/name"_json_pointer),
            "orders-relay");
  EXPECT_NO_THROW(get(owned::service_accounts, "orders-relay"));
  EXPECT_NO_THROW(get(owned::config_maps, "orders-config"));
  EXPECT_EQ(relay("orders").at("/status/relay/selector"_json_pointer), relay_selector("orders"));

  // Edit the spec: replicas, a schedule and a relay setting (which rolls the pods).
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"spec",
                       {{"relay", {{"replicas", 3}, {"batchSize", 50}}},
                        {"compensation", {{"schedule", "*/7 * * * *"}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer) == 3 &&
               get(owned::cron_jobs, "orders-compensate").at("/spec/schedule"_json_pointer) ==
                   "*/7 * * * *" &&
               observed("orders");
      },
      20s));
  dep = get(owned::deployments, "orders-relay");
  EXPECT_TRUE(has_arg(dep.at("/spec/template/spec/containers/0"_json_pointer), "--batch-size=50"));
  EXPECT_NE(dep.at("/spec/template/metadata/annotations"_json_pointer).at(kConfigHashAnnotation),
            hash1);
  EXPECT_EQ(relay("orders").at("/status/observedGeneration"_json_pointer), 2);

  // Drift: the owned Deployment deleted, and a CronJob edited by hand.
  const std::string old_uid = dep.at("/metadata/uid"_json_pointer);
  client.remove(owned::deployments, ns, "orders-relay");
  client.merge_patch(owned::cron_jobs, ns, "orders-cleanup",
                     {{"spec", {{"schedule", "1 1 * * *"}}}});
  ASSERT_TRUE(eventually(
      [&] {
        Json d = get(owned::deployments, "orders-relay");
        return d.at("/metadata/uid"_json_pointer) != old_uid &&
               d.at("/spec/replicas"_json_pointer) == 3 &&
               get(owned::cron_jobs, "orders-cleanup").at("/spec/schedule"_json_pointer) ==
                   "0 4 * * *";
      },
      20s));

  // One replica: no PodDisruptionBudget.
  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"relay", {{"replicas", 1}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        try {
          get(owned::pod_disruption_budgets, "orders-relay");
          return false;
        } catch (const kube::ApiError& e) {
          return e.is_not_found() &&
                 get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer) == 1;
        }
      },
      20s));

  // Suspend: scaled to zero, both CronJobs suspended, Ready=False Suspended.
  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"suspend", true}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer) == 0 &&
               get(owned::cron_jobs, "orders-compensate").at("/spec/suspend"_json_pointer) ==
                   true &&
               get(owned::cron_jobs, "orders-cleanup").at("/spec/suspend"_json_pointer) == true &&
               condition(relay("orders"), "Ready").value("reason", "") == "Suspended";
      },
      20s));
  EXPECT_EQ(relay("orders").at("/status/observedGeneration"_json_pointer),
            relay("orders").at("/metadata/generation"_json_pointer));
}

// Releases before the headless Service gave each relay's metrics Service a ClusterIP, which
// cannot change in place: the operator deletes it and creates it again, headless.
TEST_F(ControllerE2E, AMetricsServiceWithAClusterIPFromAnOlderReleaseBecomesHeadless) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  Json created = client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  Json old = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata",
               {{"name", "orders-metrics"},
                {"labels",
                 {{"app.kubernetes.io/name", "outbox-relay"},
                  {"app.kubernetes.io/instance", "orders"},
                  {"app.kubernetes.io/component", "relay"},
                  {"app.kubernetes.io/managed-by", "outbox-operator"}}},
                {"ownerReferences", Json::array({{{"apiVersion", "outbox.dev/v1alpha1"},
                                                  {"kind", "OutboxRelay"},
                                                  {"name", "orders"},
                                                  {"uid", created.at("/metadata/uid"_json_pointer)},
                                                  {"controller", true}}})}}},
              {"spec",
               {{"selector", {{"app.kubernetes.io/instance", "orders"}}},
                {"ports", Json::array({{{"name", "metrics"}, {"port", 8080}}})}}}};
  const std::string old_uid =
      client.create(owned::services, ns, old).at("/metadata/uid"_json_pointer);
  ASSERT_NE(get(owned::services, "orders-metrics").at("/spec/clusterIP"_json_pointer), "None");

  testing::ControllerProcess ctl(ns, {}, "headless-" + ns);
  ASSERT_TRUE(eventually(
      [&] {
        try {
          return get(owned::services, "orders-metrics").at("/spec/clusterIP"_json_pointer) ==
                 "None";
        } catch (const kube::ApiError&) {
          return false;  // between the delete and the create
        }
      },
      20s));
  Json svc = get(owned::services, "orders-metrics");
  EXPECT_NE(svc.at("/metadata/uid"_json_pointer), old_uid);
  EXPECT_EQ(svc.at("/metadata/ownerReferences/0/uid"_json_pointer),
            created.at("/metadata/uid"_json_pointer));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  EXPECT_EQ(condition(relay("orders"), "Degraded").value("status", ""), "False");
}

TEST_F(ControllerE2E, DegradedForAMissingSecretThenReadyFromTheDeploymentStatus) {
  testing::ControllerProcess ctl(ns, {"--secret-recheck=1s"}, "degraded-" + ns);
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));

  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("status", "") == "True"; }, 20s));
  Json degraded = condition(relay("orders"), "Degraded");
  EXPECT_EQ(degraded.at("reason"), "SecretNotFound");
  EXPECT_NE(degraded.at("message").get<std::string>().find("\"orders-db\""), std::string::npos);
  EXPECT_NE(degraded.at("message").get<std::string>().find("create secret generic"),
            std::string::npos);
  EXPECT_EQ(condition(relay("orders"), "Ready").value("status", ""), "False");
  ASSERT_TRUE(eventually([&] { return warning_events("SecretNotFound").size() == 1; }, 10s));
  EXPECT_THROW(get(owned::deployments, "orders-relay"), kube::ApiError);

  // The Secret exists, even without the key the resource names: the operator reads Secrets'
  // metadata only, so it applies; a missing key is the kubelet's to report, and the Ready
  // condition quotes it (tests/cluster: ReadyConditionSaysWhyRelayPodsAreNotReady...).
  testing::create_secret(client, ns, "orders-db", {{"password", "x"}});
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("orders"), "Degraded").value("status", "") == "False" &&
               get(owned::deployments, "orders-relay").contains("spec");
      },
      20s));
  EXPECT_EQ(warning_events("SecretNotFound").size(), 1u) << "one Event for one transition";
  Json ready = condition(relay("orders"), "Ready");
  EXPECT_EQ(ready.at("status"), "False");
  EXPECT_EQ(ready.at("reason"), "RelaysNotReady");
  EXPECT_EQ(condition(relay("orders"), "Progressing").at("status"), "True");

  // What a kubelet and the Deployment controller would report.
  Json dep = get(owned::deployments, "orders-relay");
  client.merge_patch(owned::deployments, ns, "orders-relay",
                     {{"status",
                       {{"observedGeneration", dep.at("/metadata/generation"_json_pointer)},
                        {"replicas", 2},
                        {"updatedReplicas", 2},
                        {"readyReplicas", 2},
                        {"availableReplicas", 2}}}},
                     "status");
  ASSERT_TRUE(eventually(
      [&] {
        Json r = relay("orders");
        return r.at("/status/relay/readyReplicas"_json_pointer) == 2 &&
               condition(r, "Ready").value("status", "") == "True" &&
               condition(r, "Progressing").value("status", "") == "False";
      },
      20s));
  std::string out = testing::kubectl("-n " + ns + " get obr orders");
  EXPECT_NE(out.find("True"), std::string::npos) << out;
  // `kubectl scale` works through the scale subresource and status.relay.selector.
  testing::kubectl("-n " + ns + " scale obr/orders --replicas=3");
  ASSERT_TRUE(eventually(
      [&] {
        return get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer) == 3;
      },
      20s));
}

// The apiserver refuses one owned object (here through a ValidatingAdmissionPolicy, so the test
// does not depend on which specs the CRD lets through): the resource says so in its status,
// with the apiserver's words and the object's name, and recovers once the refusal stops.
TEST_F(ControllerE2E, AnOwnedObjectTheApiserverRefusesMakesTheResourceDegraded) {
  const kube::Resource policies{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                                false};
  const kube::Resource bindings{"admissionregistration.k8s.io", "v1",
                                "validatingadmissionpolicybindings", false};
  const std::string policy = "refuse-0-5-" + ns;
  client.create(
      policies, "",
      {{"apiVersion", "admissionregistration.k8s.io/v1"},
       {"kind", "ValidatingAdmissionPolicy"},
       {"metadata", {{"name", policy}}},
       {"spec",
        {{"failurePolicy", "Fail"},
         {"matchConstraints",
          {{"resourceRules", Json::array({{{"apiGroups", {"batch"}},
                                           {"apiVersions", {"v1"}},
                                           {"operations", {"CREATE", "UPDATE"}},
                                           {"resources", {"cronjobs"}}}})}}},
         {"validations", Json::array({{{"expression", "object.spec.schedule != '0 5 * * *'"},
                                       {"message", "no jobs at five in this test"}}})}}}});
  auto bind = [&] {
    client.create(
        bindings, "",
        {{"apiVersion", "admissionregistration.k8s.io/v1"},
         {"kind", "ValidatingAdmissionPolicyBinding"},
         {"metadata", {{"name", policy}}},
         {"spec",
          {{"policyName", policy},
           {"validationActions", {"Deny"}},
           {"matchResources",
            {{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns}}}}}}}}}});
    // The policy takes effect asynchronously: wait until a dry run is refused.
    ASSERT_TRUE(eventually(
        [&] {
          try {
            testing::kubectl("-n " + ns +
                             " create cronjob probe --image=x --schedule='0 5 * * *' "
                             "--dry-run=server");
            return false;
          } catch (const std::exception&) {
            return true;
          }
        },
        20s));
  };
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {}, "refused-" + ns);

  // A healthy resource, then an edit the apiserver refuses for the retention CronJob.
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  ASSERT_TRUE(eventually(
      [&] {
        return observed("orders") &&
               condition(relay("orders"), "Degraded").value("status", "") == "False";
      },
      20s));
  bind();
  if (HasFatalFailure()) {
    return;
  }
  client.merge_patch(
      kOutboxRelays, ns, "orders",
      {{"spec", {{"relay", {{"replicas", 3}}}, {"retention", {{"schedule", "0 5 * * *"}}}}}});
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Degraded").value("status", "") == "True"; }, 20s));
  Json degraded = condition(relay("orders"), "Degraded");
  const std::string message = degraded.at("message");
  EXPECT_EQ(degraded.at("reason"), "ApplyFailed");
  EXPECT_NE(message.find("CronJob orders-cleanup"), std::string::npos) << message;
  EXPECT_NE(message.find("no jobs at five in this test"), std::string::npos) << message;
  EXPECT_EQ(relay("orders").at("/status/observedGeneration"_json_pointer), 2);
  EXPECT_EQ(degraded.at("observedGeneration"), 2);
  EXPECT_EQ(condition(relay("orders"), "Ready").value("status", ""), "False");
  // The objects the apiserver accepted are applied all the same.
  EXPECT_EQ(get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer), 3);
  ASSERT_TRUE(eventually([&] { return warning_events("ApplyFailed").size() == 1; }, 10s));
  EXPECT_NE(
      warning_events("ApplyFailed")[0].at("message").get<std::string>().find("orders-cleanup"),
      std::string::npos);
  EXPECT_EQ(warning_events("ApplyFailed")[0].at("/involvedObject/name"_json_pointer), "orders");

  // A new resource refused from the start also gets a status and observedGeneration 1.
  Json spec = base_spec();
  spec["compensation"]["schedule"] = "0 5 * * *";
  client.create(kOutboxRelays, ns, relay_object("billing", spec));
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("billing"), "Degraded").value("reason", "") == "ApplyFailed" &&
               relay("billing").at("/status/observedGeneration"_json_pointer) == 1;
      },
      20s));
  EXPECT_NE(condition(relay("billing"), "Degraded")
                .at("message")
                .get<std::string>()
                .find("CronJob billing-compensate"),
            std::string::npos);

  // The refusal stops: the retry applies the CronJob and Degraded clears.
  client.remove(bindings, "", policy);
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("orders"), "Degraded").value("status", "") == "False" &&
               get(owned::cron_jobs, "orders-cleanup").at("/spec/schedule"_json_pointer) ==
                   "0 5 * * *";
      },
      40s));
  client.remove(policies, "", policy);
}

// Resync reconciles every resource although nothing changed, without writing anything; an
// ownerReference someone removed comes back (without it the object would outlive its owner);
// a restarted controller finds nothing to apply.
TEST_F(ControllerE2E, ResyncRepairsARemovedOwnerReferenceAndWritesNothingWhenIdle) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {"--resync-period=1s"}, "resync-" + ns);
  Json created = client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  const std::string uid = created.at("metadata").at("uid");
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  std::this_thread::sleep_for(1500ms);  // the first passes settle

  // No kubelet here, so the relay pods never become ready: each pass ends "requeue" (look
  // again for why) rather than "success"; both are passes that wrote nothing.
  auto passes = [](const std::string& metrics) {
    return testing::metric(metrics, "outbox_controller_reconcile_total{result=\"success\"}") +
           testing::metric(metrics, "outbox_controller_reconcile_total{result=\"requeue\"}");
  };
  std::string before = ctl.metrics();
  std::this_thread::sleep_for(3500ms);
  std::string after = ctl.metrics();
  EXPECT_GE(passes(after) - passes(before), 2) << "one reconcile per resync period";
  EXPECT_EQ(testing::metric(after, "outbox_controller_applies_total"),
            testing::metric(before, "outbox_controller_applies_total"));
  EXPECT_EQ(testing::metric(after, "outbox_controller_status_writes_total"),
            testing::metric(before, "outbox_controller_status_writes_total"));

  for (const auto& [kind, name] :
       {std::pair{"deployment", "orders-relay"}, std::pair{"cronjob", "orders-cleanup"}}) {
    testing::kubectl(
        "-n " + ns + " patch " + kind + " " + name +
        " --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/ownerReferences\"}]'");
  }
  auto owned_by_relay = [&](const kube::Resource& r, const std::string& name) {
    Json refs = get(r, name).at("metadata").value("ownerReferences", Json::array());
    return refs.size() == 1 && refs[0].at("uid") == uid && refs[0].at("controller") == true;
  };
  EXPECT_TRUE(eventually([&] { return owned_by_relay(owned::deployments, "orders-relay"); }, 10s));
  EXPECT_TRUE(eventually([&] { return owned_by_relay(owned::cron_jobs, "orders-cleanup"); }, 10s));

  // A new process (a restart, a failover) finds every object as it would apply it: no write.
  ctl.process.kill9();
  testing::ControllerProcess again(ns, {"--resync-period=1s"}, "resync-again-" + ns);
  ASSERT_TRUE(eventually([&] { return passes(again.metrics()) >= 2; }, 20s));
  const std::string m = again.metrics();
  EXPECT_EQ(testing::metric(m, "outbox_controller_applies_total"), 0) << m;
  EXPECT_EQ(testing::metric(m, "outbox_controller_status_writes_total"), 0) << m;
}

TEST_F(ControllerE2E, StalledFromTheReportedBacklogAndClearedWhenItDrains) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://x"}});
  testing::ControllerProcess ctl(ns, {}, "stalled-" + ns);
  Json spec = base_spec();
  spec["monitoring"] = {{"stuckAfter", "30s"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  EXPECT_EQ(condition(relay("orders"), "Stalled").value("reason", ""), "NoBacklogReport");

  auto report = [&](double oldest, long long pending) {
    client.apply_status(kOutboxRelays, ns,
                        {{"apiVersion", "outbox.dev/v1alpha1"},
                         {"kind", "OutboxRelay"},
                         {"metadata", {{"name", "orders"}}},
                         {"status",
                          {{"backlog",
                            {{"pending", pending},
                             {"failed", 0},
                             {"oldestPendingSeconds", oldest},
                             {"measuredAt", "2030-01-01T00:00:00Z"}}}}}},
                        kRelayFieldManager);
  };
  report(45.5, 120);
  ASSERT_TRUE(eventually(
      [&] { return condition(relay("orders"), "Stalled").value("status", "") == "True"; }, 20s));
  EXPECT_EQ(condition(relay("orders"), "Stalled").at("reason"), "EventsStuck");
  ASSERT_TRUE(eventually([&] { return warning_events("EventsStuck").size() == 1; }, 10s));
  // The operator's status applies leave the relay's field alone.
  EXPECT_EQ(relay("orders").at("/status/backlog/pending"_json_pointer), 120);

  report(0.2, 0);
  ASSERT_TRUE(eventually(
      [&] {
        Json c = condition(relay("orders"), "Stalled");
        return c.value("status", "") == "False" && c.value("reason", "") == "BacklogFresh";
      },
      20s));
}

// The relay binary, started with the arguments the controller rendered into the Deployment,
// reports the backlog it measures; it shows in `kubectl get obr`; events stuck behind an
// unreachable broker make the resource Stalled; a relay with the real broker drains them.
TEST_F(ControllerE2E, BacklogFromARealRelayShowsInKubectlAndStallsAndDrains) {
  outbox::testing::OutboxTestTable table;
  testing::create_secret(client, ns, "orders-db", {{"dsn", table.dsn}});
  testing::ControllerProcess ctl(ns, {}, "backlog-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table.table.plain();
  spec["kafka"] = {{"bootstrapServers", "127.0.0.1:1"}, {"topic", table.topic}};
  spec["monitoring"] = {{"stuckAfter", "3s"}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  auto relay_args = [&] {
    Json c =
        get(owned::deployments, "orders-relay").at("/spec/template/spec/containers/0"_json_pointer);
    std::vector<std::string> args = {OUTBOX_BINARY};
    for (const Json& a : c.at("args")) {
      std::string s = a;
      args.push_back(s.rfind("--listen=", 0) == 0 ? "--listen=127.0.0.1:0" : s);
    }
    args.push_back("--kubeconfig=" + testbed::kubeconfig_path());
    args.push_back("--report-interval=1s");
    args.push_back("--message-timeout=2s");
    return args;
  };
  table.insert(5, 2);
  auto stuck = std::make_unique<testing::Process>(
      relay_args(), std::map<std::string, std::string>{{"OUTBOX_DSN", table.dsn}},
      ::testing::TempDir() + "relay-stuck-" + ns + ".log");
  ASSERT_TRUE(eventually(
      [&] {
        Json r = relay("orders");
        return r.value("status", Json::object()).contains("backlog") &&
               r.at("/status/backlog/pending"_json_pointer) == 5 &&
               condition(r, "Stalled").value("status", "") == "True";
      },
      40s));
  std::string out = testing::kubectl("-n " + ns + " get obr orders");
  EXPECT_NE(out.find("PENDING"), std::string::npos) << out;
  std::string row = out.substr(out.find('\n') + 1);
  EXPECT_NE(row.find(" 5 "), std::string::npos) << out;
  Json managers = relay("orders").at("/metadata/managedFields"_json_pointer);
  bool relay_manager = false;
  for (const Json& m : managers) {
    relay_manager |=
        m.value("manager", "") == kRelayFieldManager && m.value("subresource", "") == "status";
  }
  EXPECT_TRUE(relay_manager) << managers.dump();

  // Point the resource at the real broker; run the relay with the new arguments.
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"spec", {{"kafka", {{"bootstrapServers", testbed::kafka_bootstrap()}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return has_arg(get(owned::deployments, "orders-relay")
                           .at("/spec/template/spec/containers/0"_json_pointer),
                       "--brokers=" + testbed::kafka_bootstrap());
      },
      20s));
  stuck->kill9();
  testing::Process draining(relay_args(), {{"OUTBOX_DSN", table.dsn}},
                            ::testing::TempDir() + "relay-drain-" + ns + ".log");
  ASSERT_TRUE(eventually(
      [&] {
        Json r = relay("orders");
        return r.at("/status/backlog/pending"_json_pointer) == 0 &&
               condition(r, "Stalled").value("status", "") == "False";
      },
      60s));
  EXPECT_EQ(table.count("status = 1"), 5);
}

// The compensation and retention jobs, run by the real binary with the arguments the controller
// rendered into their CronJobs, write status.lastCompensation and status.lastCleanup with the
// right counts; a failed database run exits non-zero and says Failed, which the controller turns
// into JobFailed=True until a run succeeds; the controller's status writes keep both fields; a
// status report that cannot be written leaves the exit code alone.
TEST_F(ControllerE2E, JobsReportTheirLastRunsAndTheControllerKeepsThem) {
  outbox::testing::OutboxTestTable table;
  testing::create_secret(client, ns, "orders-db", {{"dsn", table.dsn}});
  testing::ControllerProcess ctl(ns, {}, "jobs-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table.table.plain();
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", table.topic}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  // The command line of a CronJob's pod, run here with the admin kubeconfig in place of the
  // ServiceAccount token; each argument single-quoted for the shell.
  auto job_command = [&](const std::string& cron_job,
                         const std::map<std::string, std::string>& replace = {}) {
    Json c = get(owned::cron_jobs, cron_job)
                 .at("/spec/jobTemplate/spec/template/spec/containers/0"_json_pointer);
    std::string cmd = OUTBOX_BINARY;
    for (const Json& a : c.at("args")) {
      std::string s = a;
      for (const auto& [prefix, value] : replace) {
        if (s.rfind(prefix, 0) == 0) {
          s = prefix + value;
        }
      }
      cmd += " '" + s + "'";
    }
    return cmd + " '--kubeconfig=" + testbed::kubeconfig_path() + "'";
  };

  table.insert(10, 3);  // no relay runs: the compensation run publishes all of them
  auto comp = outbox::testing::run_cli(table.dsn, job_command("orders-compensate"));
  ASSERT_EQ(comp.exit_code, 0) << comp.output;
  EXPECT_EQ(table.count("status = 1"), 10);
  Json r = relay("orders");
  ASSERT_TRUE(r.contains("/status/lastCompensation"_json_pointer)) << r.at("status").dump();
  Json comp_status = r.at("/status/lastCompensation"_json_pointer);
  EXPECT_EQ(comp_status.at("outcome"), "Succeeded");
  EXPECT_EQ(comp_status.at("resent"), 10);
  EXPECT_EQ(comp_status.at("failed"), 0);
  EXPECT_FALSE(comp_status.contains("message"));
  EXPECT_TRUE(comp_status.at("time").is_string());
  EXPECT_FALSE(condition(r, "Ready").empty()) << "the controller's conditions are still there";

  // Six of the ten sent events are past spec.retention.keepSent (24h; retention ages events by
  // created_at).
  {
    pqxx::connection conn(table.dsn);
    pqxx::work tx(conn);
    tx.exec("UPDATE " + table.table.quoted() +
            " SET created_at = now() - interval '2 days' WHERE id IN (SELECT id FROM " +
            table.table.quoted() + " ORDER BY id LIMIT 6)");
    tx.commit();
  }
  auto clean = outbox::testing::run_cli(table.dsn, job_command("orders-cleanup"));
  ASSERT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_EQ(table.count("true"), 4);
  r = relay("orders");
  ASSERT_TRUE(r.contains("/status/lastCleanup"_json_pointer)) << r.at("status").dump();
  Json clean_status = r.at("/status/lastCleanup"_json_pointer);
  EXPECT_EQ(clean_status.at("outcome"), "Succeeded");
  EXPECT_EQ(clean_status.at("removed"), 6);
  EXPECT_EQ(clean_status.at("archived"), 0);
  EXPECT_EQ(r.at("/status/lastCompensation"_json_pointer), comp_status)
      << "the cleanup job left the compensation's field alone";

  // A spec change makes the controller write its status again (observedGeneration): a
  // server-side apply of only its own fields, which keeps the jobs' fields.
  client.merge_patch(kOutboxRelays, ns, "orders", {{"spec", {{"relay", {{"replicas", 3}}}}}});
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  r = relay("orders");
  EXPECT_EQ(r.at("/status/lastCompensation"_json_pointer), comp_status);
  EXPECT_EQ(r.at("/status/lastCleanup"_json_pointer), clean_status);

  // A run whose database is unreachable exits non-zero and reports Failed with the reason; the
  // counts of the previous run do not stay beside it.
  auto failed = outbox::testing::run_cli("postgresql://outbox@127.0.0.1:1/none?connect_timeout=2",
                                         job_command("orders-compensate"));
  EXPECT_NE(failed.exit_code, 0) << failed.output;
  r = relay("orders");
  Json failed_status = r.at("/status/lastCompensation"_json_pointer);
  EXPECT_EQ(failed_status.at("outcome"), "Failed") << failed_status.dump();
  EXPECT_NE(failed_status.value("message", "").find("compensation failed"), std::string::npos)
      << failed_status.dump();
  EXPECT_FALSE(failed_status.contains("resent")) << failed_status.dump();
  EXPECT_EQ(r.at("/status/lastCleanup"_json_pointer), clean_status);
  EXPECT_FALSE(condition(r, "Ready").empty());
  EXPECT_TRUE(eventually(
      [&] {
        Json c = condition(relay("orders"), "JobFailed");
        return c.value("status", "") == "True" && c.value("reason", "") == "CompensationFailed";
      },
      20s))
      << relay("orders").at("status").dump();
  EXPECT_EQ(relay("orders").at("/status/lastCompensation/outcome"_json_pointer), "Failed")
      << "the controller's write kept the failed run";

  // The next good run clears the message again.
  comp = outbox::testing::run_cli(table.dsn, job_command("orders-compensate"));
  ASSERT_EQ(comp.exit_code, 0) << comp.output;
  comp_status = relay("orders").at("/status/lastCompensation"_json_pointer);
  EXPECT_EQ(comp_status.at("outcome"), "Succeeded");
  EXPECT_EQ(comp_status.at("resent"), 0);
  EXPECT_FALSE(comp_status.contains("message")) << comp_status.dump();
  EXPECT_TRUE(eventually(
      [&] { return condition(relay("orders"), "JobFailed").value("status", "") == "False"; }, 20s))
      << relay("orders").at("status").dump();

  // A status report that cannot be written (no such OutboxRelay) is logged; the exit code stays
  // the database run's.
  auto orphan = outbox::testing::run_cli(
      table.dsn, job_command("orders-cleanup", {{"--report-status=", ns + "/missing"}}));
  EXPECT_EQ(orphan.exit_code, 0) << orphan.output;
  EXPECT_NE(orphan.output.find("could not report status.lastCleanup"), std::string::npos)
      << orphan.output;
}

}  // namespace
}  // namespace outbox::controller
