// Applying owned objects against a real kube-apiserver and etcd (no kubelet, no
// controller-manager): they appear, follow the spec, come back, are replaced when immutable,
// and a refusal makes the resource Degraded.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "controller_e2e.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

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
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_EQ(pod.at("/volumes/1/secret/secretName"_json_pointer), "orders-db");
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

// outbox.dev/pause-reconciliation=true holds every owned object still: a spec edit, a deleted
// object and a requeue request change nothing while Reconciling says why; removing it resumes
// all three.
TEST_F(ControllerE2E, ThePauseAnnotationHoldsEveryOwnedObjectUntilRemoved) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {}, "pause-" + ns);
  client.create(kOutboxRelays, ns, relay_object("orders", base_spec()));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));

  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"metadata", {{"annotations", {{kPauseAnnotation, "true"}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("orders"), "Reconciling").value("reason", "") ==
               "ReconciliationPaused";
      },
      20s))
      << relay("orders").dump();
  EXPECT_EQ(condition(relay("orders"), "Reconciling").value("status", ""), "False");
  EXPECT_NE(condition(relay("orders"), "Reconciling").value("message", "").find(kPauseAnnotation),
            std::string::npos);
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"metadata", {{"annotations", {{kRequeueAnnotation, "t-paused"}}}}},
                      {"spec", {{"relay", {{"replicas", 3}}}}}});
  client.remove(owned::config_maps, ns, "orders-config");
  // The controller has seen both changes (the edit's generation) and acted on neither.
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer), 2);
  EXPECT_THROW(get(owned::config_maps, "orders-config"), kube::ApiError);
  for (const Json& job : client.list(owned::jobs, ns).value("items", Json::array())) {
    ADD_FAILURE() << "a Job while paused: " << job.at("/metadata/name"_json_pointer);
  }

  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"metadata", {{"annotations", {{kPauseAnnotation, nullptr}}}}}});
  ASSERT_TRUE(eventually(
      [&] {
        try {
          get(owned::config_maps, "orders-config");
        } catch (const kube::ApiError&) {
          return false;
        }
        return get(owned::deployments, "orders-relay").at("/spec/replicas"_json_pointer) == 3 &&
               !client.list(owned::jobs, ns).value("items", Json::array()).empty() &&
               condition(relay("orders"), "Reconciling").value("reason", "") !=
                   "ReconciliationPaused";
      },
      20s))
      << relay("orders").dump();
}

// What the Deployment controller writes when a rollout has finished; this test bed phase runs
// no kube-controller-manager, so the test writes it (the cluster phase has the real one).
void finish_rollout(kube::Client& client, const std::string& ns, const std::string& name) {
  const Json d = client.get(owned::deployments, ns, name);
  const int replicas = d.at("/spec/replicas"_json_pointer);
  Json status = {{"observedGeneration", d.at("/metadata/generation"_json_pointer)},
                 {"replicas", replicas},
                 {"updatedReplicas", replicas},
                 {"readyReplicas", replicas},
                 {"availableReplicas", replicas},
                 {"conditions", Json::array({{{"type", "Progressing"},
                                              {"status", "True"},
                                              {"reason", "NewReplicaSetAvailable"},
                                              {"message", "done"}}})}};
  client.merge_patch(owned::deployments, ns, name, {{"status", status}}, "status");
}

// An operator upgrade (a new default relay image) with --max-rolling-relays=2 and five
// OutboxRelays: two Deployments take the new pod template, the other three keep theirs and say
// Reconciling=True RolloutQueued, and each finished rollout lets the next one start, never more
// than two at once, until all five run the new image.
TEST_F(ControllerE2E, AnOperatorUpgradeRollsRelaysInWavesOfTheRolloutBudget) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  const std::vector<std::string> names = {"r1", "r2", "r3", "r4", "r5"};
  {
    testing::ControllerProcess old_release(ns, {"--max-rolling-relays=2"}, "budget-old-" + ns);
    for (const std::string& n : names) {
      client.create(kOutboxRelays, ns, relay_object(n, base_spec()));
    }
    ASSERT_TRUE(eventually(
        [&] {
          return std::all_of(names.begin(), names.end(),
                             [&](const std::string& n) { return observed(n); });
        },
        30s));
  }
  for (const std::string& n : names) {
    finish_rollout(client, ns, n + "-relay");
  }
  auto image_of = [&](const std::string& n) {
    return get(owned::deployments, n + "-relay")
        .at("/spec/template/spec/containers/0/image"_json_pointer)
        .get<std::string>();
  };
  auto upgraded = [&] {
    std::vector<std::string> out;
    for (const std::string& n : names) {
      if (image_of(n) == "ghcr.io/outbox-operator/outbox-operator:next") {
        out.push_back(n);
      }
    }
    return out;
  };

  testing::ControllerProcess new_release(
      ns, {"--max-rolling-relays=2", "--relay-image=ghcr.io/outbox-operator/outbox-operator:next"},
      "budget-new-" + ns);
  std::set<std::string> finished;
  for (int wave = 0; finished.size() < names.size(); ++wave) {
    ASSERT_LT(wave, 5) << "no progress";
    const std::size_t want = std::min(finished.size() + 2, names.size());
    ASSERT_TRUE(eventually([&] { return upgraded().size() == want; }, 20s))
        << "wave " << wave << ": " << upgraded().size() << " upgraded, want " << want;
    std::this_thread::sleep_for(2s);  // no more than the budget, even given time
    const std::vector<std::string> now = upgraded();
    ASSERT_EQ(now.size(), want) << "wave " << wave;
    for (const std::string& n : names) {
      const bool is_upgraded = std::find(now.begin(), now.end(), n) != now.end();
      if (!is_upgraded) {
        EXPECT_TRUE(eventually(
            [&] {
              return condition(relay(n), "Reconciling").value("reason", "") == "RolloutQueued";
            },
            10s))
            << n << ": " << relay(n).dump();
      } else if (!finished.contains(n)) {
        finish_rollout(client, ns, n + "-relay");
        finished.insert(n);
      }
    }
  }
  for (const std::string& n : names) {
    EXPECT_TRUE(eventually(
        [&] { return condition(relay(n), "Reconciling").value("reason", "") != "RolloutQueued"; },
        10s))
        << n;
  }
}

// A resource the rollout budget holds back is looked at again every few seconds, but not
// rendered again while nothing it depends on changed and the budget stays spent: a fleet-wide
// upgrade would otherwise render (and parse) every waiting resource every few seconds.
TEST_F(ControllerE2E, AResourceHeldBackByTheRolloutBudgetIsNotRenderedAgain) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  const std::vector<std::string> names = {"h1", "h2", "h3"};
  {
    testing::ControllerProcess old_release(ns, {}, "held-old-" + ns);
    for (const std::string& n : names) {
      client.create(kOutboxRelays, ns, relay_object(n, base_spec()));
    }
    ASSERT_TRUE(eventually(
        [&] {
          return std::all_of(names.begin(), names.end(),
                             [&](const std::string& n) { return observed(n); });
        },
        30s));
  }
  for (const std::string& n : names) {
    finish_rollout(client, ns, n + "-relay");
  }
  testing::ControllerProcess new_release(
      ns, {"--max-rolling-relays=1", "--relay-image=ghcr.io/outbox-operator/outbox-operator:next"},
      "held-new-" + ns);
  auto queued = [&] {
    return std::count_if(names.begin(), names.end(), [&](const std::string& n) {
      return condition(relay(n), "Reconciling").value("reason", "") == "RolloutQueued";
    });
  };
  ASSERT_TRUE(eventually([&] { return queued() == 2; }, 20s));
  std::this_thread::sleep_for(6s);  // the status write's own watch event is judged afresh once

  auto passes = [](const std::string& m) {
    return testing::metric(m, "outbox_controller_reconcile_total{result=\"requeue\"}") +
           testing::metric(m, "outbox_controller_reconcile_total{result=\"success\"}");
  };
  const std::string before = new_release.metrics();
  std::this_thread::sleep_for(11s);  // two looks again at each held resource
  const std::string after = new_release.metrics();
  ASSERT_EQ(queued(), 2);
  EXPECT_GE(passes(after) - passes(before), 4) << after;
  EXPECT_EQ(testing::metric(after, "outbox_controller_renders_total"),
            testing::metric(before, "outbox_controller_renders_total"))
      << after;
  EXPECT_EQ(testing::metric(after, "outbox_controller_applies_total"),
            testing::metric(before, "outbox_controller_applies_total"));
}

// spec.relay.template passes the CRD's admission and the API server's own validation of
// the pods it lands in (affinity and tolerations are kept as written, not pruned), and
// its ServiceAccount annotation (IRSA) reaches the ServiceAccount.
TEST_F(ControllerE2E, APodTemplateReachesThePodsAndTheServiceAccount) {
  testing::create_secret(client, ns, "orders-db", {{"dsn", "postgresql://u:p@db/orders"}});
  testing::ControllerProcess ctl(ns, {}, "template-" + ns);
  Json spec = base_spec();
  const Json affinity = {
      {"nodeAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution",
         {{"nodeSelectorTerms",
           Json::array({{{"matchExpressions",
                          Json::array({{{"key", "pool"},
                                        {"operator", "In"},
                                        {"values", Json::array({"relays"})}}})}}})}}}}}};
  const Json tolerations = Json::array({{{"key", "dedicated"},
                                         {"operator", "Equal"},
                                         {"value", "outbox"},
                                         {"effect", "NoSchedule"}}});
  spec["relay"]["template"] = {
      {"pod",
       {{"metadata", {{"labels", {{"team", "payments"}}}}},
        {"affinity", affinity},
        {"tolerations", tolerations},
        {"priorityClassName", "system-cluster-critical"},
        {"imagePullSecrets", Json::array({{{"name", "registry"}}})},
        {"securityContext",
         {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}}}},
      {"serviceAccount",
       {{"metadata", {{"annotations", {{"iam.gke.io/gcp-service-account", "relay@p.iam"}}}}}}}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  const Json pod = get(owned::deployments, "orders-relay").at("/spec/template"_json_pointer);
  EXPECT_EQ(pod.at("/metadata/labels/team"_json_pointer), "payments");
  EXPECT_EQ(pod.at("/spec/affinity"_json_pointer), affinity);
  EXPECT_EQ(pod.at("/spec/tolerations"_json_pointer), tolerations);
  EXPECT_EQ(pod.at("/spec/priorityClassName"_json_pointer), "system-cluster-critical");
  EXPECT_FALSE(pod.at("/spec/securityContext"_json_pointer).contains("runAsUser"))
      << "no fixed uid: OpenShift's restricted-v2 assigns one";
  const Json job_pod =
      get(owned::cron_jobs, "orders-compensate").at("/spec/jobTemplate/spec/template"_json_pointer);
  EXPECT_EQ(job_pod.at("/spec/affinity"_json_pointer), affinity);
  EXPECT_EQ(get(owned::service_accounts, "orders-relay")
                .at("/metadata/annotations/iam.gke.io~1gcp-service-account"_json_pointer),
            "relay@p.iam");
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

}  // namespace
}  // namespace outbox::controller
