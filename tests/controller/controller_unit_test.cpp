#include <gtest/gtest.h>

#include <algorithm>

#include "controller/job_status.hpp"
#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"

namespace outbox::controller {
namespace {

Json relay(const Json& spec_patch = Json::object()) {
  Json r = {
      {"apiVersion", "outbox.dev/v1alpha1"},
      {"kind", "OutboxRelay"},
      {"metadata", {{"name", "orders"}, {"namespace", "shop"}, {"uid", "u-1"}, {"generation", 3}}},
      {"spec",
       {{"database", {{"dsnSecretRef", {{"name", "db"}, {"key", "dsn"}}}}},
        {"kafka", {{"bootstrapServers", "k:9092"}}}}}};
  r["spec"].merge_patch(spec_patch);
  return r;
}

const Json* find(const RenderedRelay& r, const std::string& kind, const std::string& name) {
  for (const auto& o : r.objects) {
    if (o.object.at("kind") == kind && o.object.at("/metadata/name"_json_pointer) == name) {
      return &o.object;
    }
  }
  return nullptr;
}

TEST(RenderRelay, NamesOwnersAndPdbFollowReplicas) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay two = render_relay(relay(), opts);
  for (const char* kind :
       {"ServiceAccount", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget"}) {
    ASSERT_NE(find(two, kind, "orders-relay"), nullptr) << kind;
  }
  ASSERT_NE(find(two, "ConfigMap", "orders-config"), nullptr);
  ASSERT_NE(find(two, "CronJob", "orders-compensate"), nullptr);
  ASSERT_NE(find(two, "CronJob", "orders-cleanup"), nullptr);
  ASSERT_NE(find(two, "Service", "orders-metrics"), nullptr);
  for (const auto& o : two.objects) {
    EXPECT_EQ(o.object.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
    EXPECT_EQ(o.object.at("/metadata/namespace"_json_pointer), "shop");
  }
  EXPECT_TRUE(two.wants_pdb);
  RenderedRelay one = render_relay(relay({{"relay", {{"replicas", 1}}}}), opts);
  EXPECT_FALSE(one.wants_pdb);
  EXPECT_EQ(find(one, "PodDisruptionBudget", "orders-relay"), nullptr);
  RenderedRelay suspended = render_relay(relay({{"suspend", true}}), opts);
  EXPECT_EQ(find(suspended, "Deployment", "orders-relay")->at("/spec/replicas"_json_pointer), 0);
  EXPECT_TRUE(
      find(suspended, "CronJob", "orders-cleanup")->at("/spec/suspend"_json_pointer).get<bool>());
  EXPECT_THROW(render_relay(relay(), RenderOptions{}), std::invalid_argument);
  EXPECT_EQ(find(render_relay(relay({{"relay", {{"image", "own:2"}}}}), RenderOptions{}),
                 "Deployment", "orders-relay")
                ->at("/spec/template/spec/containers/0/image"_json_pointer),
            "own:2");
}

// The Kafka Secret reaches the relay and the compensation job as files (one per librdkafka
// property), never as an argument or an environment variable; the cleanup job gets none.
TEST(RenderRelay, KafkaSecretIsMountedAsFilesNeverArgsOrEnv) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay r = render_relay(relay({{"kafka", {{"configSecretRef", {{"name", "kc"}}}}}}), opts);
  auto pod_of = [&](const char* kind, const char* name, const char* path) {
    return find(r, kind, name)->at(Json::json_pointer(path));
  };
  for (const Json& pod :
       {pod_of("Deployment", "orders-relay", "/spec/template/spec"),
        pod_of("CronJob", "orders-compensate", "/spec/jobTemplate/spec/template/spec")}) {
    const Json& c = pod.at("/containers/0"_json_pointer);
    EXPECT_EQ(pod.at("/volumes/1"_json_pointer),
              Json({{"name", "kafka-config"},
                    {"secret", {{"secretName", "kc"}, {"defaultMode", 0440}}}}));
    EXPECT_EQ(
        c.at("/volumeMounts/1"_json_pointer),
        Json({{"name", "kafka-config"}, {"mountPath", "/etc/outbox/kafka"}, {"readOnly", true}}));
    const Json& args = c.at("args");
    EXPECT_NE(std::find(args.begin(), args.end(), "--kafka-config-dir=/etc/outbox/kafka"),
              args.end());
    EXPECT_EQ(c.at("env").size(), 1u) << "only the DSN, from its secretKeyRef";
    EXPECT_EQ(c.at("/env/0/name"_json_pointer), "OUTBOX_DSN");
    EXPECT_EQ(c.at("terminationMessagePolicy"), "FallbackToLogsOnError");
    EXPECT_EQ(c.dump().find("kafka-property"), std::string::npos) << c.dump();
  }
  const Json cleanup = pod_of("CronJob", "orders-cleanup", "/spec/jobTemplate/spec/template/spec");
  EXPECT_EQ(cleanup.at("volumes").size(), 1u) << "cleanup never talks to Kafka";
  // Without a Kafka Secret: no volume, no flag.
  RenderedRelay plain = render_relay(relay(), opts);
  EXPECT_EQ(find(plain, "Deployment", "orders-relay")
                ->at("/spec/template/spec/volumes"_json_pointer)
                .size(),
            1u);
}

// One ClusterIP per resource would exhaust a /24 service range at ~250 resources.
TEST(RenderRelay, MetricsServiceIsHeadless) {
  RenderedRelay r = render_relay(relay(), RenderOptions{"img:1", ""});
  EXPECT_EQ(find(r, "Service", "orders-metrics")->at("/spec/clusterIP"_json_pointer), "None");
}

// Kubernetes expands $(VAR) in args from the container's environment, which holds
// OUTBOX_DSN: a spec string must reach the relay as written, never expanded.
TEST(RenderRelay, SpecStringsInArgsAreEscapedAgainstVariableExpansion) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay r = render_relay(
      relay({{"kafka",
              {{"configSecretRef", {{"name", "kc"}}},
               {"topic", "t.$(OUTBOX_DSN)"},
               {"routes", Json::array({{{"bizType", "$(OUTBOX_DSN)"}, {"topic", "x$y"}}})}}},
             {"retention", {{"archiveTable", "$(OUTBOX_DSN)"}}}}),
      opts);
  const Json args = find(r, "Deployment", "orders-relay")
                        ->at("/spec/template/spec/containers/0/args"_json_pointer);
  auto has = [&](const Json& list, const std::string& arg) {
    return std::find(list.begin(), list.end(), arg) != list.end();
  };
  EXPECT_TRUE(has(args, "--route=$$(OUTBOX_DSN)=x$$y")) << args.dump();
  EXPECT_TRUE(has(args, "--topic=t.$$(OUTBOX_DSN)")) << args.dump();
  const Json compensate =
      find(r, "CronJob", "orders-compensate")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_TRUE(has(compensate, "--route=$$(OUTBOX_DSN)=x$$y")) << compensate.dump();
  const Json cleanup =
      find(r, "CronJob", "orders-cleanup")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_TRUE(has(cleanup, "--archive-table=$$(OUTBOX_DSN)")) << cleanup.dump();
  // No unescaped reference, in any container.
  for (const auto& o : r.objects) {
    const std::string text = o.object.dump();
    for (auto at = text.find("$(OUTBOX_DSN)"); at != std::string::npos;
         at = text.find("$(OUTBOX_DSN)", at + 1)) {
      EXPECT_TRUE(at > 0 && text[at - 1] == '$') << text;
    }
  }
}

TEST(RenderRelay, ConfigHashChangesWithRelaySettingsOnly) {
  RenderOptions opts{"img:1", ""};
  auto hash = [&](const Json& patch) {
    return find(render_relay(relay(patch.is_null() ? Json::object() : patch), opts), "Deployment",
                "orders-relay")
        ->at("/spec/template/metadata/annotations"_json_pointer)
        .at(kConfigHashAnnotation)
        .get<std::string>();
  };
  EXPECT_EQ(hash({}), hash({{"relay", {{"replicas", 5}}}}));
  EXPECT_NE(hash({}), hash({{"relay", {{"batchSize", 7}}}}));
  EXPECT_EQ(stable_hash("abc"), "e71fa2190541574b");
}

// Both jobs write their outcome into the OutboxRelay's status, so their pods carry the relay's
// ServiceAccount token and name the resource; the relay's Role lets exactly that through.
TEST(RenderRelay, CronJobPodsGetTheRelayTokenAndReportStatus) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay r = render_relay(relay({{"retention", {{"archiveTable", "public.old"}}}}), opts);
  for (const char* name : {"orders-compensate", "orders-cleanup"}) {
    const Json* cron = find(r, "CronJob", name);
    ASSERT_NE(cron, nullptr) << name;
    const Json pod = cron->at("/spec/jobTemplate/spec/template/spec"_json_pointer);
    EXPECT_EQ(pod.at("serviceAccountName"), "orders-relay") << name;
    EXPECT_TRUE(pod.at("automountServiceAccountToken").get<bool>()) << name;
    EXPECT_EQ(pod.at("restartPolicy"), "Never") << name;
    const Json& args = pod.at("/containers/0/args"_json_pointer);
    EXPECT_EQ(std::count(args.begin(), args.end(), "--report-status=shop/orders"), 1)
        << name << ": " << args.dump();
  }
  const Json cleanup_args =
      find(r, "CronJob", "orders-cleanup")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(cleanup_args.at(0), "cleanup");
  EXPECT_NE(std::find(cleanup_args.begin(), cleanup_args.end(), "--archive-table=public.old"),
            cleanup_args.end());
  EXPECT_EQ(find(r, "CronJob", "orders-compensate")
                ->at("/spec/jobTemplate/spec/template/spec/containers/0/args/0"_json_pointer),
            "compensate");

  const Json* role = find(r, "Role", "orders-relay");
  ASSERT_NE(role, nullptr);
  bool may_patch_status = false;
  for (const Json& rule : role->at("rules")) {
    const Json& verbs = rule.at("verbs");
    if (rule.at("resources") == Json::array({"outboxrelays/status"})) {
      EXPECT_EQ(rule.at("resourceNames"), Json::array({"orders"}));
      may_patch_status = std::find(verbs.begin(), verbs.end(), "patch") != verbs.end();
    }
  }
  EXPECT_TRUE(may_patch_status) << role->dump();
}

TEST(JobStatus, PatchTouchesOnlyItsOwnFieldAndClearsWhatTheRunDidNotSet) {
  JobRun ok;
  ok.field = kLastCompensationField;
  ok.counts = {{"resent", 7}, {"failed", 1}};
  ok.finished = std::chrono::system_clock::from_time_t(1'700'000'000);
  EXPECT_EQ(job_status_patch(ok),
            Json::parse(R"({"status":{"lastCompensation":{"time":"2023-11-14T22:13:20Z",
              "outcome":"Succeeded","resent":7,"failed":1,"message":null}}})"));

  JobRun bad;
  bad.field = kLastCleanupField;
  bad.succeeded = false;
  bad.counts = {{"removed", std::nullopt}, {"archived", std::nullopt}};
  bad.message = std::string(5000, 'x');
  const Json p = job_status_patch(bad);
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(p.at("status").size(), 1u);
  const Json& c = p.at("/status/lastCleanup"_json_pointer);
  EXPECT_EQ(c.at("outcome"), "Failed");
  EXPECT_TRUE(c.at("removed").is_null());
  EXPECT_TRUE(c.at("archived").is_null());
  EXPECT_EQ(c.at("message").get<std::string>().size(), 1024u) << "the CRD's maxLength";

  // The operator's server-side apply of its status never names the jobs' fields, so it neither
  // owns nor removes them.
  Json r = relay();
  r["status"] = {{"lastCompensation", {{"outcome", "Succeeded"}}},
                 {"lastCleanup", {{"outcome", "Failed"}}}};
  const Json s = compute_status({r, nullptr, std::nullopt, std::chrono::system_clock::now(), ""});
  EXPECT_FALSE(s.contains("lastCompensation"));
  EXPECT_FALSE(s.contains("lastCleanup"));
}

TEST(RelayStatus, JobFailedFollowsTheLastRunsTheJobsReported) {
  auto now = std::chrono::system_clock::now();
  Json r = relay();
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, ""}), "JobFailed").at("status"),
      "False");
  r["status"] = {{"lastCompensation", {{"outcome", "Succeeded"}, {"resent", 3}}},
                 {"lastCleanup",
                  {{"outcome", "Failed"},
                   {"time", "2026-01-02T03:04:05Z"},
                   {"message", "cleanup failed: no route"}}}};
  Json failed = find_condition(compute_status({r, nullptr, std::nullopt, now, ""}), "JobFailed");
  EXPECT_EQ(failed.at("status"), "True");
  EXPECT_EQ(failed.at("reason"), "CleanupFailed");
  EXPECT_NE(failed.at("message").get<std::string>().find("cleanup failed: no route"),
            std::string::npos);
  EXPECT_NE(failed.at("message").get<std::string>().find("2026-01-02T03:04:05Z"),
            std::string::npos);
  r["status"]["lastCompensation"]["outcome"] = "Failed";
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, ""}), "JobFailed").at("reason"),
      "CompensationCleanupFailed");
  r["status"]["lastCompensation"]["outcome"] = "Succeeded";
  r["status"]["lastCleanup"]["outcome"] = "Succeeded";
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, ""}), "JobFailed").at("status"),
      "False");
}

// A rotated Secret (new resourceVersion) must change the relay pod template, so the pods roll
// and read the new value; nothing else about the Secrets may.
TEST(RenderRelay, SecretVersionsChangeThePodTemplateAndNothingElse) {
  auto rendered = [](const std::string& versions) {
    RenderOptions opts{"img:1", versions};
    return render_relay(relay(), opts);
  };
  auto annotations = [](const RenderedRelay& r) {
    return find(r, "Deployment", "orders-relay")
        ->at("/spec/template/metadata/annotations"_json_pointer);
  };
  RenderedRelay before = rendered("orders-db=100\n");
  RenderedRelay after = rendered("orders-db=101\n");
  EXPECT_NE(annotations(before).at(kSecretsHashAnnotation),
            annotations(after).at(kSecretsHashAnnotation));
  EXPECT_EQ(annotations(before).at(kConfigHashAnnotation),
            annotations(after).at(kConfigHashAnnotation));
  EXPECT_EQ(*find(before, "ConfigMap", "orders-config"),
            *find(after, "ConfigMap", "orders-config"));
}

TEST(RelayStatus, TransitionTimeMovesOnlyWhenStatusFlips) {
  using namespace std::chrono;
  auto t0 = system_clock::time_point(seconds(1'700'000'000));
  Json r = relay({{"monitoring", {{"stuckAfter", "10s"}}}});
  Json s1 = compute_status({r, nullptr, Problem{"SecretNotFound", "m"}, t0, ""});
  EXPECT_EQ(find_condition(s1, "Degraded").at("status"), "True");
  EXPECT_EQ(find_condition(s1, "Ready").at("reason"), "SecretNotFound");
  r["status"] = s1;
  Json s2 = compute_status({r, nullptr, Problem{"SecretKeyMissing", "m2"}, t0 + seconds(60), ""});
  EXPECT_EQ(find_condition(s2, "Degraded").at("lastTransitionTime"), format_time(t0));
  r["status"] = s2;
  Json s3 = compute_status({r, nullptr, std::nullopt, t0 + seconds(120), ""});
  EXPECT_EQ(find_condition(s3, "Degraded").at("lastTransitionTime"),
            format_time(t0 + seconds(120)));
  EXPECT_FALSE(status_matches(s3, s2));
  r["status"] = s3;
  EXPECT_TRUE(
      status_matches(compute_status({r, nullptr, std::nullopt, t0 + seconds(500), ""}), s3));
}

TEST(RelayStatus, ReadyFromTheDeploymentAndStalledFromTheBacklog) {
  auto now = std::chrono::system_clock::now();
  Json r = relay({{"monitoring", {{"stuckAfter", "1m30s"}}}});
  Json dep = {
      {"metadata", {{"generation", 4}}},
      {"status",
       {{"observedGeneration", 4}, {"replicas", 2}, {"updatedReplicas", 2}, {"readyReplicas", 2}}}};
  r["status"] = {{"backlog", {{"oldestPendingSeconds", 91.0}}}};
  Json s = compute_status({r, &dep, std::nullopt, now, ""});
  EXPECT_EQ(find_condition(s, "Ready").at("status"), "True");
  EXPECT_EQ(find_condition(s, "Progressing").at("status"), "False");
  EXPECT_EQ(find_condition(s, "Stalled").at("reason"), "EventsStuck");
  EXPECT_EQ(s.at("/relay/readyReplicas"_json_pointer), 2);
  EXPECT_EQ(s.at("observedGeneration"), 3);
  r["status"]["backlog"]["oldestPendingSeconds"] = 89.0;
  EXPECT_EQ(
      find_condition(compute_status({r, &dep, std::nullopt, now, ""}), "Stalled").at("status"),
      "False");
  dep["status"]["readyReplicas"] = 1;
  Json s2 = compute_status({r, &dep, std::nullopt, now, ""});
  EXPECT_EQ(find_condition(s2, "Ready").at("reason"), "RelaysNotReady");
  EXPECT_EQ(find_condition(s2, "Ready").at("message"), "1 of 2 relay pods ready.");
  EXPECT_TRUE(relays_not_ready(s2));
  EXPECT_FALSE(relays_not_ready(s));
  EXPECT_EQ(find_condition(s2, "Progressing").at("status"), "True");
  Json s3 = compute_status({r, &dep, std::nullopt, now, "pod p: ImagePullBackOff."});
  EXPECT_EQ(find_condition(s3, "Ready").at("message"),
            "1 of 2 relay pods ready. pod p: ImagePullBackOff.");
}

// What the kubelet and the relays say about pods that are not ready, shaped as the apiserver
// returns it (a PodList as v1.37 writes it for these cases).
TEST(RelayStatus, NotReadyDetailQuotesTheKubeletAndAFreshRelayProblem) {
  using namespace std::chrono;
  const auto now = system_clock::time_point(seconds(1'700'000'000));
  auto pod = [](const std::string& name, Json status) {
    return Json{{"metadata", {{"name", name}}}, {"status", std::move(status)}};
  };
  auto waiting = [](const std::string& reason, const std::string& message) {
    Json w = {{"reason", reason}};
    if (!message.empty()) {
      w["message"] = message;
    }
    return Json{{"state", {{"waiting", w}}}, {"ready", false}};
  };
  auto containers = [](Json status) {
    return Json{{"containerStatuses", Json::array({std::move(status)})}};
  };
  Json crashed = waiting("CrashLoopBackOff", "back-off 20s");
  crashed["lastState"]["terminated"] = {{"exitCode", 2},
                                        {"message", "line one\nrelay: bad --table\n"}};
  Json unschedulable = {{"conditions", Json::array({{{"type", "PodScheduled"},
                                                     {"status", "False"},
                                                     {"reason", "Unschedulable"},
                                                     {"message", "0/1 nodes are available"}}})}};
  Json leaving = pod("r-5", containers(waiting("ErrImagePull", "")));
  leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  Json pods = {{"items", Json::array({
                             pod("r-1", containers(waiting("CreateContainerConfigError",
                                                           "couldn't find key dsn in Secret "
                                                           "shop/db"))),
                             // Still being created: waiting is normal, not a reason.
                             pod("r-2", containers(waiting("ContainerCreating", ""))),
                             pod("r-3", containers(crashed)),
                             pod("r-4", unschedulable),
                             // Going away: not the reason.
                             leaving,
                         })}};
  Json fresh = {{"relayProblem",
                 {{"pod", "r-6"},
                  {"message", "table public.outbox_event is not migrated: run migrate"},
                  {"reportedAt", format_time(now - seconds(20))}}}};
  const std::string detail = not_ready_detail(pods, fresh, now);
  EXPECT_EQ(detail,
            "pod r-1: CreateContainerConfigError: couldn't find key dsn in Secret shop/db. "
            "pod r-3: CrashLoopBackOff: back-off 20s; last exit code 2: relay: bad --table. "
            "pod r-4: Unschedulable: 0/1 nodes are available. "
            "relay pod r-6 reports: table public.outbox_event is not migrated: run migrate.");
  Json stale = fresh;
  stale["relayProblem"]["reportedAt"] = format_time(now - kRelayProblemFresh - seconds(1));
  EXPECT_EQ(not_ready_detail(Json{{"items", Json::array()}}, stale, now), "");
  EXPECT_EQ(not_ready_detail(Json::object(), Json::object(), now), "");
  EXPECT_EQ(parse_time(format_time(now)), now);
  EXPECT_EQ(parse_time("yesterday"), std::nullopt);
}

}  // namespace
}  // namespace outbox::controller
