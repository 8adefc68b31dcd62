// The status (relay_status): observations -> conditions, pure.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "relay_sample.hpp"

namespace outbox::controller {
namespace {

Json relay(const Json& spec_patch = Json::object()) {
  return testing::sample_relay(spec_patch);
}

// With manageSchema, SchemaReady follows the migrate Job: Pending before it exists,
// Migrating while it runs (saying where its log is after a failed try), Migrated once it
// succeeded, MigrationFailed with the Job's reason when it gave up. Without, no condition.
TEST(RelayStatus, SchemaReadyFollowsTheMigrateJob) {
  auto now = std::chrono::system_clock::now();
  const Json r = relay({{"database", {{"manageSchema", true}}}});
  auto schema = [&](const Json* job) {
    return find_condition(
        compute_status({r, nullptr, std::nullopt, now, "", "orders-schema-1", job}), "SchemaReady");
  };
  EXPECT_EQ(schema(nullptr).at("reason"), "Pending");
  const Json running = {{"status", {{"active", 1}, {"failed", 1}}}};
  EXPECT_EQ(schema(&running).at("reason"), "Migrating");
  EXPECT_NE(
      schema(&running).at("message").get<std::string>().find("kubectl logs job/orders-schema-1"),
      std::string::npos);
  const Json done = {{"status", {{"succeeded", 1}}}};
  EXPECT_EQ(schema(&done).at("status"), "True");
  EXPECT_EQ(schema(&done).at("reason"), "Migrated");
  const Json failed = {
      {"status",
       {{"failed", 4},
        {"conditions",
         Json::array({{{"type", "Failed"},
                       {"status", "True"},
                       {"reason", "BackoffLimitExceeded"},
                       {"message", "Job has reached the specified backoff limit"}}})}}}};
  EXPECT_EQ(schema(&failed).at("status"), "False");
  EXPECT_EQ(schema(&failed).at("reason"), "MigrationFailed");
  EXPECT_NE(schema(&failed).at("message").get<std::string>().find("BackoffLimitExceeded"),
            std::string::npos);
  EXPECT_TRUE(find_condition(compute_status({relay(), nullptr, std::nullopt, now, "", "", nullptr}),
                             "SchemaReady")
                  .is_null());
}

// A re-migration held by the rollout budget: the table keeps its last migration (SchemaReady
// stays True, MigrationQueued) and Reconciling says the schema Job waits.
TEST(RelayStatus, AQueuedSchemaJobKeepsSchemaReadyAndIsRolloutQueued) {
  const Json r = relay({{"database", {{"manageSchema", true}}}});
  StatusInputs in{r,  nullptr,           std::nullopt, std::chrono::system_clock::now(),
                  "", "orders-schema-2", nullptr};
  in.held.schema_job = true;
  const Json status = compute_status(in);
  EXPECT_EQ(find_condition(status, "SchemaReady").at("status"), "True");
  EXPECT_EQ(find_condition(status, "SchemaReady").at("reason"), "MigrationQueued");
  EXPECT_EQ(find_condition(status, "Reconciling").at("reason"), "RolloutQueued");
  EXPECT_NE(find_condition(status, "Reconciling")
                .at("message")
                .get<std::string>()
                .find("The schema Job waits"),
            std::string::npos);
}

TEST(RelayStatus, JobFailedFollowsTheLastRunsTheJobsReported) {
  auto now = std::chrono::system_clock::now();
  Json r = relay();
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}), "JobFailed")
          .at("status"),
      "False");
  r["status"] = {{"lastCompensation", {{"outcome", "Succeeded"}, {"resent", 3}}},
                 {"lastCleanup",
                  {{"outcome", "Failed"},
                   {"time", "2026-01-02T03:04:05Z"},
                   {"message", "cleanup failed: no route"}}}};
  Json failed =
      find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}), "JobFailed");
  EXPECT_EQ(failed.at("status"), "True");
  EXPECT_EQ(failed.at("reason"), "CleanupFailed");
  EXPECT_NE(failed.at("message").get<std::string>().find("cleanup failed: no route"),
            std::string::npos);
  EXPECT_NE(failed.at("message").get<std::string>().find("2026-01-02T03:04:05Z"),
            std::string::npos);
  r["status"]["lastCompensation"]["outcome"] = "Failed";
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}), "JobFailed")
          .at("reason"),
      "CompensationCleanupFailed");
  r["status"]["lastCompensation"]["outcome"] = "Succeeded";
  r["status"]["lastCleanup"]["outcome"] = "Succeeded";
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}), "JobFailed")
          .at("status"),
      "False");
}

// A failed requeue run is a failed job like the others, and says how to run it again.
TEST(RelayStatus, JobFailedFollowsTheLastRequeueRun) {
  auto now = std::chrono::system_clock::now();
  Json r = relay();
  r["status"] = {{"lastRequeue",
                  {{"outcome", "Failed"},
                   {"request", "t1"},
                   {"time", "2026-12-04T10:00:00Z"},
                   {"message", "requeue failed: connection refused"}}}};
  Json failed =
      find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}), "JobFailed");
  EXPECT_EQ(failed.at("status"), "True");
  EXPECT_EQ(failed.at("reason"), "RequeueFailed");
  const std::string message = failed.at("message");
  EXPECT_NE(message.find("requeue failed: connection refused"), std::string::npos) << message;
  EXPECT_NE(message.find("new outbox.dev/requeue-failed value"), std::string::npos) << message;
  r["status"]["lastRequeue"]["outcome"] = "Succeeded";
  EXPECT_EQ(
      find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}), "JobFailed")
          .at("status"),
      "False");
}

// A requeue annotation the operator refuses is for a person to fix: Degraded and Stalled name
// it (kstatus readers such as Flux and Argo CD show Stalled); Ready still says how the relay
// pods are, as the relay is not affected.
TEST(RelayStatus, AnInvalidRequeueAnnotationIsDegradedNotUnready) {
  auto now = std::chrono::system_clock::now();
  Json r = relay();
  r["metadata"]["annotations"] = {{kRequeueAnnotation, "next tuesday"}};
  const Json deployment = {
      {"metadata", {{"generation", 1}}},
      {"status",
       {{"observedGeneration", 1}, {"replicas", 2}, {"readyReplicas", 2}, {"updatedReplicas", 2}}}};
  const Json s = compute_status({r, &deployment, std::nullopt, now, "", "", nullptr});
  for (const char* type : {"Degraded", "Stalled"}) {
    const Json c = find_condition(s, type);
    EXPECT_EQ(c.at("status"), "True") << type;
    EXPECT_EQ(c.at("reason"), "InvalidAnnotation") << type;
    EXPECT_NE(c.at("message").get<std::string>().find("annotation outbox.dev/requeue-failed"),
              std::string::npos)
        << c.dump();
  }
  EXPECT_EQ(find_condition(s, "Ready").at("reason"), "RelaysReady");
  r["metadata"]["annotations"][kRequeueAnnotation] = "2026-12-04T10:00:00Z";
  EXPECT_EQ(find_condition(compute_status({r, &deployment, std::nullopt, now, "", "", nullptr}),
                           "Degraded")
                .at("status"),
            "False");
}

TEST(RelayStatus, TransitionTimeMovesOnlyWhenStatusFlips) {
  using namespace std::chrono;
  auto t0 = system_clock::time_point(seconds(1'700'000'000));
  Json r = relay({{"monitoring", {{"stuckAfter", "10s"}}}});
  Json s1 = compute_status({r, nullptr, Problem{"SecretNotFound", "m"}, t0, "", "", nullptr});
  EXPECT_EQ(find_condition(s1, "Degraded").at("status"), "True");
  EXPECT_EQ(find_condition(s1, "Ready").at("reason"), "SecretNotFound");
  r["status"] = s1;
  Json s2 = compute_status(
      {r, nullptr, Problem{"SecretKeyMissing", "m2"}, t0 + seconds(60), "", "", nullptr});
  EXPECT_EQ(find_condition(s2, "Degraded").at("lastTransitionTime"), format_time(t0));
  r["status"] = s2;
  Json s3 = compute_status({r, nullptr, std::nullopt, t0 + seconds(120), "", "", nullptr});
  EXPECT_EQ(find_condition(s3, "Degraded").at("lastTransitionTime"),
            format_time(t0 + seconds(120)));
  EXPECT_FALSE(status_matches(s3, s2));
  r["status"] = s3;
  EXPECT_TRUE(status_matches(
      compute_status({r, nullptr, std::nullopt, t0 + seconds(500), "", "", nullptr}), s3));
}

TEST(RelayStatus, ReadyFromTheDeploymentAndBacklogStuckFromTheReport) {
  auto now = std::chrono::system_clock::now();
  Json r = relay({{"monitoring", {{"stuckAfter", "1m30s"}}}});
  Json dep = {
      {"metadata", {{"generation", 4}}},
      {"status",
       {{"observedGeneration", 4}, {"replicas", 2}, {"updatedReplicas", 2}, {"readyReplicas", 2}}}};
  r["status"] = {{"backlog",
                  {{"oldestPendingSeconds", 91.0},
                   {"measuredAt", format_time(now - std::chrono::seconds(10))}}}};
  Json s = compute_status({r, &dep, std::nullopt, now, "", "", nullptr});
  EXPECT_EQ(find_condition(s, "Ready").at("status"), "True");
  EXPECT_EQ(find_condition(s, "Progressing").at("status"), "False");
  EXPECT_EQ(find_condition(s, "Reconciling").at("status"), "False");
  EXPECT_EQ(find_condition(s, "BacklogStuck").at("status"), "True");
  EXPECT_EQ(find_condition(s, "BacklogStuck").at("reason"), "EventsStuck");
  // An old event is not a failed rollout: kstatus must not read the resource as Failed.
  EXPECT_EQ(find_condition(s, "Stalled").at("status"), "False");
  EXPECT_EQ(s.at("/relay/readyReplicas"_json_pointer), 2);
  EXPECT_EQ(s.at("observedGeneration"), 3);
  r["status"]["backlog"]["oldestPendingSeconds"] = 89.0;
  EXPECT_EQ(
      find_condition(compute_status({r, &dep, std::nullopt, now, "", "", nullptr}), "BacklogStuck")
          .at("status"),
      "False");
  dep["status"]["readyReplicas"] = 1;
  Json s2 = compute_status({r, &dep, std::nullopt, now, "", "", nullptr});
  EXPECT_EQ(find_condition(s2, "Ready").at("reason"), "RelaysNotReady");
  EXPECT_EQ(find_condition(s2, "Ready").at("message"), "1 of 2 relay pods ready.");
  EXPECT_TRUE(relays_not_ready(s2));
  EXPECT_FALSE(relays_not_ready(s));
  EXPECT_EQ(find_condition(s2, "Progressing").at("status"), "True");
  EXPECT_EQ(find_condition(s2, "Reconciling").at("status"), "True");
  EXPECT_EQ(find_condition(s2, "Reconciling").at("reason"), "RollingOut");
  Json s3 = compute_status({r, &dep, std::nullopt, now, "pod p: ImagePullBackOff.", "", nullptr});
  EXPECT_EQ(find_condition(s3, "Ready").at("message"),
            "1 of 2 relay pods ready. pod p: ImagePullBackOff.");
}

// Figures nobody measures any more are not judged: BacklogStuck turns Unknown and says since
// when, and the reconciler knows when to look again.
TEST(RelayStatus, BacklogStuckIsUnknownWithoutAFreshReport) {
  using namespace std::chrono;
  auto now = system_clock::time_point(seconds(1'700'000'000));
  Json r = relay();
  Json none = find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}),
                             "BacklogStuck");
  EXPECT_EQ(none.at("status"), "Unknown");
  EXPECT_EQ(none.at("reason"), "NoBacklogReport");

  const std::string at = format_time(now - kBacklogReportStale - seconds(1));
  r["status"] = {{"backlog", {{"oldestPendingSeconds", 0.5}, {"measuredAt", at}}}};
  Json stale = find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}),
                              "BacklogStuck");
  EXPECT_EQ(stale.at("status"), "Unknown");
  EXPECT_EQ(stale.at("reason"), "NoRecentReport");
  EXPECT_NE(stale.at("message").get<std::string>().find("since " + at), std::string::npos)
      << stale.at("message");
  EXPECT_FALSE(backlog_report_turns_stale_in(r.at("status"), now));

  r["status"]["backlog"]["measuredAt"] = format_time(now - seconds(100));
  EXPECT_EQ(find_condition(compute_status({r, nullptr, std::nullopt, now, "", "", nullptr}),
                           "BacklogStuck")
                .at("reason"),
            "BacklogFresh");
  auto in = backlog_report_turns_stale_in(r.at("status"), now);
  ASSERT_TRUE(in);
  EXPECT_EQ(duration_cast<seconds>(*in), kBacklogReportStale - seconds(100) + seconds(1));
  EXPECT_FALSE(backlog_report_turns_stale_in(relay(), now));
}

// Stalled (kstatus: only a person can fix it) and Degraded (what to fix) from the operator's
// finding, from a relay pod's fresh report of its own, and from a failed schema migration;
// Reconciling while a migration runs.
TEST(RelayStatus, StalledAndDegradedNameWhatAPersonMustFix) {
  using namespace std::chrono;
  auto now = system_clock::time_point(seconds(1'700'000'000));
  auto status_of = [&](const Json& r, std::optional<Problem> p, const std::string& job_name = "",
                       const Json* job = nullptr) {
    return compute_status({r, nullptr, std::move(p), now, "", job_name, job});
  };
  Json s = status_of(relay(), Problem{"SecretNotFound", "Secret orders-db not found."});
  EXPECT_EQ(find_condition(s, "Stalled").at("status"), "True");
  EXPECT_EQ(find_condition(s, "Stalled").at("reason"), "SecretNotFound");
  EXPECT_EQ(find_condition(s, "Degraded").at("reason"), "SecretNotFound");
  EXPECT_EQ(find_condition(s, "Reconciling").at("status"), "False");

  Json r = relay();
  r["status"] = {{"relayProblem",
                  {{"pod", "orders-relay-1"},
                   {"message", "table public.outbox is not migrated: run migrate"},
                   {"reportedAt", format_time(now - seconds(20))}}}};
  Json d = find_condition(status_of(r, std::nullopt), "Degraded");
  EXPECT_EQ(d.at("status"), "True");
  EXPECT_EQ(d.at("reason"), "RelayProblem");
  EXPECT_EQ(d.at("message"),
            "Relay pod orders-relay-1 reports: table public.outbox is not migrated: run migrate");
  EXPECT_EQ(find_condition(status_of(r, std::nullopt), "Stalled").at("status"), "True");
  // A relay that names its reason (a table restored on another cluster) gets it as the
  // condition's reason, which alerts and `kubectl get obr` show.
  Json moved = r;
  moved["status"]["relayProblem"]["reason"] = "DatabaseMoved";
  EXPECT_EQ(find_condition(status_of(moved, std::nullopt), "Degraded").at("reason"),
            "DatabaseMoved");
  // The operator holds no credential, but what a pod reports passes redact() (issue 42): a
  // connection string's userinfo and a password= value are recognised without knowing them.
  Json leaky = r;
  leaky["status"]["relayProblem"]["message"] =
      "cannot reach postgresql://app:s3cret@db/x (host=db password=s3cret)";
  for (const char* type : {"Degraded", "Stalled"}) {
    EXPECT_EQ(find_condition(status_of(leaky, std::nullopt), type)
                  .at("message")
                  .get<std::string>()
                  .find("s3cret"),
              std::string::npos)
        << type;
  }
  r["status"]["relayProblem"]["reportedAt"] = format_time(now - kRelayProblemFresh - seconds(1));
  EXPECT_EQ(find_condition(status_of(r, std::nullopt), "Degraded").at("status"), "False");
  EXPECT_EQ(find_condition(status_of(r, std::nullopt), "Stalled").at("status"), "False");

  const Json managed = relay({{"database", {{"manageSchema", true}}}});
  const Json running = {{"status", {{"active", 1}}}};
  Json m = status_of(managed, std::nullopt, "orders-schema-1", &running);
  EXPECT_EQ(find_condition(m, "Reconciling").at("reason"), "Migrating");
  EXPECT_EQ(find_condition(m, "Stalled").at("status"), "False");
  const Json failed = {{"status",
                        {{"conditions", Json::array({{{"type", "Failed"},
                                                      {"status", "True"},
                                                      {"reason", "BackoffLimitExceeded"},
                                                      {"message", "backoff limit"}}})}}}};
  Json f = status_of(managed, std::nullopt, "orders-schema-1", &failed);
  EXPECT_EQ(find_condition(f, "Stalled").at("reason"), "MigrationFailed");
  EXPECT_EQ(find_condition(f, "Degraded").at("reason"), "MigrationFailed");
  EXPECT_EQ(find_condition(f, "Reconciling").at("status"), "False");
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
  Json crashed_json = waiting("CrashLoopBackOff", "back-off 40s");
  crashed_json["lastState"]["terminated"] = {
      {"exitCode", 1},
      {"message",
       R"({"ts":"2026-12-04T06:00:00.000Z","level":"error","msg":"relay: bad --shards","namespace":"shop"})"
       "\n"}};
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
                             pod("r-7", containers(crashed_json)),
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
            "pod r-7: CrashLoopBackOff: back-off 40s; last exit code 1: relay: bad --shards. "
            "relay pod r-6 reports: table public.outbox_event is not migrated: run migrate.");
  Json stale = fresh;
  stale["relayProblem"]["reportedAt"] = format_time(now - kRelayProblemFresh - seconds(1));
  EXPECT_EQ(not_ready_detail(Json{{"items", Json::array()}}, stale, now), "");
  EXPECT_EQ(not_ready_detail(Json::object(), Json::object(), now), "");
  EXPECT_EQ(parse_time(format_time(now)), now);
  EXPECT_EQ(parse_time("yesterday"), std::nullopt);
}

// Warning when one of Degraded, BacklogStuck, JobFailed turns True or changes its reason;
// Normal Recovered when it turns False; nothing for no change, for Unknown, or for Stalled.
TEST(RelayStatus, ConditionEventsAreTheTransitionsAPersonActsOn) {
  const auto status = [](std::vector<std::tuple<std::string, std::string, std::string>> cs) {
    Json conditions = Json::array();
    for (const auto& [type, value, reason] : cs) {
      conditions.push_back(
          {{"type", type}, {"status", value}, {"reason", reason}, {"message", reason + " text"}});
    }
    return Json{{"conditions", conditions}};
  };
  const Json calm = status({{"Degraded", "False", "AsExpected"},
                            {"BacklogStuck", "False", "BacklogFresh"},
                            {"JobFailed", "False", "NoFailedRun"},
                            {"Stalled", "False", "AsExpected"}});
  EXPECT_TRUE(condition_events(calm, calm).empty());
  const Json stuck = status({{"Degraded", "True", "SecretMissing"},
                             {"BacklogStuck", "True", "EventsStuck"},
                             {"JobFailed", "False", "NoFailedRun"},
                             {"Stalled", "True", "SecretMissing"}});
  auto notes = condition_events(calm, stuck);
  ASSERT_EQ(notes.size(), 2u) << "Stalled repeats Degraded: no Event of its own";
  EXPECT_EQ(notes[0].type, "Warning");
  EXPECT_EQ(notes[0].reason, "SecretMissing");
  EXPECT_EQ(notes[0].message, "SecretMissing text");
  EXPECT_EQ(notes[1].reason, "EventsStuck");
  EXPECT_TRUE(condition_events(stuck, stuck).empty()) << "no change, no Event";
  EXPECT_TRUE(condition_events(Json::object(), calm).empty()) << "a first status is no recovery";
  const Json refused = status({{"Degraded", "True", "ApplyFailed"},
                               {"BacklogStuck", "Unknown", "NoRecentReport"},
                               {"JobFailed", "False", "NoFailedRun"}});
  notes = condition_events(stuck, refused);
  ASSERT_EQ(notes.size(), 1u) << "a new reason is news; True to Unknown is no recovery";
  EXPECT_EQ(notes[0].reason, "ApplyFailed");
  notes = condition_events(stuck, calm);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].type, "Normal");
  EXPECT_EQ(notes[0].reason, "Recovered");
  EXPECT_EQ(notes[0].message, "Degraded cleared (was SecretMissing): AsExpected text");
  EXPECT_EQ(notes[1].message, "BacklogStuck cleared (was EventsStuck): BacklogFresh text");
}

// A relay's report of the table's last move (status.database.clusterMove) is ClusterMoved=True
// naming both clusters; no report, no condition. Each new move is one Warning; the same move
// seen again is none, and nothing about it is Degraded.
TEST(RelayStatus, AReportedClusterMoveIsAConditionAndAWarningPerMove) {
  const auto now = std::chrono::system_clock::now();
  const auto status_with = [&](const Json& move) {
    Json r = relay({{"database", {{"table", "public.outbox_event"}}}});
    if (!move.is_null()) {
      r["status"] = {{"database", {{"tls", "off"}, {"clusterMove", move}}}};
    }
    return compute_status({r, nullptr, std::nullopt, now, "", "", nullptr});
  };
  const Json before = status_with(nullptr);
  EXPECT_TRUE(find_condition(before, "ClusterMoved").is_null());
  const Json first = status_with({{"from", "7001"},
                                  {"to", "7002"},
                                  {"at", "2026-12-07T10:00:00Z"},
                                  {"positionOffset", 20000}});
  const Json moved = find_condition(first, "ClusterMoved");
  ASSERT_TRUE(moved.is_object()) << first.dump();
  EXPECT_EQ(moved.at("status"), "True");
  EXPECT_EQ(moved.at("reason"), "TableRebased");
  const std::string message = moved.at("message");
  EXPECT_NE(message.find("Table public.outbox_event moved from PostgreSQL cluster 7001 to 7002 "
                         "and was rebased at 2026-12-07T10:00:00Z (positions offset by 20000)"),
            std::string::npos)
      << message;
  EXPECT_EQ(find_condition(first, "Degraded").at("status"), "False");
  auto notes = condition_events(before, first);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].type, "Warning");
  EXPECT_EQ(notes[0].reason, "TableRebased");
  EXPECT_EQ(notes[0].message, message);
  EXPECT_TRUE(condition_events(first, first).empty()) << "the same move again is no news";
  const Json second = status_with({{"from", "7002"},
                                   {"to", "7003"},
                                   {"at", "2026-12-08T10:00:00Z"},
                                   {"positionOffset", 40000}});
  notes = condition_events(first, second);
  ASSERT_EQ(notes.size(), 1u) << "another move is";
  EXPECT_NE(notes[0].message.find("from PostgreSQL cluster 7002 to 7003"), std::string::npos);
  EXPECT_TRUE(find_condition(status_with({{"to", ""}}), "ClusterMoved").is_null())
      << "a report naming no cluster is no move";
  // A pod that reports no move (it removes the field it shares with the others) changes
  // nothing: the condition stays, and when the move is reported again there is no new Event.
  Json r = relay({{"database", {{"table", "public.outbox_event"}}}});
  r["status"] = first;
  r["status"]["database"] = {{"tls", "off"}};
  const Json unreported = compute_status({r, nullptr, std::nullopt, now, "", "", nullptr});
  EXPECT_EQ(find_condition(unreported, "ClusterMoved"), moved) << unreported.dump();
  EXPECT_TRUE(condition_events(first, unreported).empty());
  EXPECT_TRUE(condition_events(unreported, first).empty());
}

TEST(RelayStatus, AFailedCountRisingFromZeroIsAWarningNamingTheCommands) {
  const auto failed = [](long long n) { return Json{{"backlog", {{"failed", n}}}}; };
  const auto note = failed_events_event(0, failed(3), "shop", "orders");
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(note->type, "Warning");
  EXPECT_EQ(note->reason, "EventsFailed");
  EXPECT_EQ(note->message.rfind("3 events moved to FAILED", 0), 0u) << note->message;
  EXPECT_NE(note->message.find("kubectl outbox inspect orders -n shop"), std::string::npos);
  EXPECT_NE(note->message.find("kubectl outbox requeue orders -n shop -- --all"),
            std::string::npos);
  EXPECT_FALSE(failed_events_event(std::nullopt, failed(3), "shop", "orders"))
      << "first sight since the operator started: the count may be days old";
  EXPECT_FALSE(failed_events_event(3, failed(5), "shop", "orders")) << "one Event per wave";
  EXPECT_FALSE(failed_events_event(0, failed(0), "shop", "orders"));
  EXPECT_FALSE(failed_events_event(0, Json::object(), "shop", "orders"));
}

}  // namespace
}  // namespace outbox::controller
