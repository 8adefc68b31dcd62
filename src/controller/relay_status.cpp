#include "controller/relay_status.hpp"

#include <algorithm>
#include <ctime>
#include <vector>

#include "api/spec.hpp"
#include "common/duration.hpp"
#include "common/redact.hpp"
#include "controller/relay_resources.hpp"

namespace outbox::controller {
namespace {

// The status is written for every resource, one whose spec cannot be parsed included (it then
// says InvalidSpec), so it reads the few spec fields it needs itself, with the table's defaults.
template <typename T>
T default_of(const char* path) {
  return api::spec_field(path).default_value.get<T>();
}

// `value`: "True", "False" or "Unknown" (metav1.ConditionStatus). The message often quotes a
// pod (its report, its last log line), so it goes through redact(): this process holds no
// credential, but a URI's userinfo and a password= value are recognised without one.
Json condition(const Json& current_status, const std::string& type, const std::string& value,
               const std::string& reason, const std::string& message, long long generation,
               const std::string& now) {
  Json previous = find_condition(current_status, type);
  std::string since = now;
  if (previous.is_object() && previous.value("status", "") == value &&
      previous.contains("lastTransitionTime")) {
    since = previous.at("lastTransitionTime");
  }
  return {{"type", type},
          {"status", value},
          {"reason", reason},
          {"message", redact(message)},
          {"observedGeneration", generation},
          {"lastTransitionTime", since}};
}

struct Rollout {
  int desired = 0;
  int replicas = 0;
  int ready = 0;
  bool complete = false;
};

Rollout rollout_of(const Json* deployment, int desired) {
  Rollout r;
  r.desired = desired;
  if (deployment == nullptr) {
    return r;
  }
  const Json& st = deployment->value("status", Json::object());
  r.replicas = st.value("replicas", 0);
  r.ready = st.value("readyReplicas", 0);
  long long generation = deployment->at("metadata").value("generation", 0LL);
  bool observed = st.value("observedGeneration", 0LL) >= generation;
  // A scale-down is complete only once the surplus pods are gone.
  r.complete = observed && st.value("updatedReplicas", 0) >= desired && r.ready >= desired &&
               r.replicas == desired;
  return r;
}

// The waiting reasons that do not go away by themselves: each needs a person or a fix.
bool stuck_waiting(const std::string& reason) {
  return reason == "CreateContainerConfigError" || reason == "CreateContainerError" ||
         reason == "CrashLoopBackOff" || reason == "ImagePullBackOff" || reason == "ErrImagePull" ||
         reason == "InvalidImageName" || reason == "RunContainerError";
}

// What one pod says about why it does not run, or "".
std::string pod_detail(const Json& pod) {
  const Json status = pod.value("status", Json::object());
  for (const Json& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
      return c.value("reason", "Unschedulable") + ": " + c.value("message", "");
    }
  }
  for (const Json& cs : status.value("containerStatuses", Json::array())) {
    const Json waiting = cs.value("/state/waiting"_json_pointer, Json::object());
    const std::string reason = waiting.value("reason", "");
    if (!stuck_waiting(reason)) {
      continue;
    }
    std::string out = reason;
    if (const std::string m = waiting.value("message", ""); !m.empty()) {
      out += ": " + m;
    }
    // A crash loop's own message is only "back-off ... restarting": the last exit says why
    // (with terminationMessagePolicy FallbackToLogsOnError, the last lines of its log).
    const Json last = cs.value("/lastState/terminated"_json_pointer, Json::object());
    if (last.is_object() && last.contains("exitCode")) {
      out += "; last exit code " + std::to_string(last.value("exitCode", 0));
      std::string m = last.value("message", "");
      while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) {
        m.pop_back();
      }
      if (auto nl = m.rfind('\n'); nl != std::string::npos) {
        m = m.substr(nl + 1);
      }
      // A pod that logs JSON (the operator's log format): its message, not the record.
      if (const Json line = Json::parse(m, nullptr, false);
          line.is_object() && line.contains("msg") && line.at("msg").is_string()) {
        m = line.at("msg").get<std::string>();
      }
      if (!m.empty()) {
        out += ": " + m;
      }
    }
    return out;
  }
  return {};
}

// The conditions of one status, each from the observations in StatusInputs.
struct Conditions {
  explicit Conditions(const StatusInputs& in)
      : in(in),
        spec(in.relay.at("spec")),
        current(in.relay.value("status", Json::object())),
        generation(in.relay.at("metadata").value("generation", 0LL)),
        now(format_time(in.now)),
        suspend(value_at<bool>(spec, "/suspend", false)),
        desired(suspend
                    ? 0
                    : value_at<int>(spec, "/relay/replicas", default_of<int>("/relay/replicas"))),
        rollout(rollout_of(in.deployment, desired)) {}

  // `status`: "True", "False" or "Unknown".
  Json make(const std::string& type, const char* status, const std::string& reason,
            const std::string& message) const {
    return condition(current, type, status, reason, message, generation, now);
  }

  // What a person must fix, if anything: the operator's own finding (a missing Secret, an
  // invalid spec), else a relay pod's fresh report of its own (table not migrated, Kafka
  // refused the credentials), else a failed schema migration, else a requeue annotation it
  // refuses (the relay itself is fine; GitOps tools read Stalled to show the bad value).
  std::optional<Problem> blocking_problem() const {
    if (in.problem) {
      return in.problem;
    }
    const Json reported = current.value("relayProblem", Json::object());
    if (reported.is_object() && reported.contains("message") &&
        relay_problem_fresh(reported, in.now)) {
      return Problem{
          reported.value("reason", "RelayProblem"),
          "Relay pod " + reported.value("pod", "?") + " reports: " + reported.value("message", "")};
    }
    if (!in.schema_job_name.empty()) {
      if (Json s = schema_ready(); s.at("reason") == "MigrationFailed") {
        return Problem{"MigrationFailed", s.at("message")};
      }
    }
    for (const ChangeKind* kind : {&kRequeueKind, &kReplayKind}) {
      if (const std::string refused = change_request(in.relay, *kind).problem; !refused.empty()) {
        return Problem{"InvalidAnnotation", refused};
      }
    }
    return std::nullopt;
  }

  std::string pods_ready() const {
    return std::to_string(rollout.ready) + " of " + std::to_string(desired) + " relay pods ready.";
  }

  Json degraded() const {
    if (const auto p = blocking_problem()) {
      return make("Degraded", "True", p->reason, p->message);
    }
    return make("Degraded", "False", "AsExpected",
                "No relay pod waits for a Secret, every owned object is applied and no relay "
                "reports a problem.");
  }

  // kstatus: the operator cannot get the resource to its spec without a person.
  Json stalled() const {
    if (const auto p = blocking_problem()) {
      return make("Stalled", "True", p->reason,
                  "Nothing changes until this is fixed: " + p->message);
    }
    return make("Stalled", "False", "NoProblem", "Nothing blocks the reconciliation.");
  }

  // kstatus: the operator is still bringing what it owns to the spec (a rollout, a migration).
  Json reconciling() const {
    if (reconciliation_paused(in.relay)) {
      return make("Reconciling", "False", "ReconciliationPaused",
                  std::string("The annotation ") + kPauseAnnotation +
                      "=true holds every object of this resource as it is; remove it to resume.");
    }
    if (blocking_problem()) {
      return make("Reconciling", "False", "Stalled", "See the Stalled condition.");
    }
    if (in.relay.at("metadata").contains("deletionTimestamp") && has_drop_finalizer(in.relay)) {
      return make("Reconciling", "True", "Dropping",
                  "Deleting with deletionPolicy Drop: the relays stop, then the Job " +
                      drop_job_name(in.relay) +
                      " removes what the operator created in the database; the resource goes "
                      "once it succeeded.");
    }
    if (!in.schema_job_name.empty() && schema_ready().at("status") != "True") {
      return make("Reconciling", "True", "Migrating", "The schema Job has not finished.");
    }
    if (in.held.any()) {
      return make("Reconciling", "True", "RolloutQueued",
                  std::string(in.held.schema_job ? "The schema Job waits"
                                                 : "The relay pods' new template waits") +
                      ": as many relay rollouts and schema Jobs as the operator runs at once "
                      "(--max-rolling-relays) are under way now.");
    }
    if (!suspend && !rollout.complete) {
      return make("Reconciling", "True", "RollingOut",
                  "The relay Deployment is rolling out: " + pods_ready());
    }
    return make("Reconciling", "False", "Complete", "Everything the operator owns is up to date.");
  }

  Json progressing() const {
    if (in.problem) {
      return make("Progressing", "False", in.problem->reason,
                  "Waiting for the problem in the Degraded condition to be fixed.");
    }
    if (!rollout.complete) {
      return make("Progressing", "True", "RollingOut",
                  "The relay Deployment is rolling out: " + pods_ready());
    }
    return make("Progressing", "False", "Complete", "The relay Deployment is up to date.");
  }

  Json ready() const {
    if (in.problem) {
      return make("Ready", "False", in.problem->reason, in.problem->message);
    }
    if (suspend) {
      return make("Ready", "False", "Suspended",
                  "spec.suspend is true: the relay is scaled to zero and the CronJobs are "
                  "suspended; events accumulate until it is resumed.");
    }
    if (desired == 0) {
      return make("Ready", "False", "ScaledToZero",
                  "spec.relay.replicas is 0: no relay publishes events.");
    }
    if (rollout.ready >= desired) {
      return make("Ready", "True", "RelaysReady", pods_ready());
    }
    return make("Ready", "False", "RelaysNotReady",
                pods_ready() + (in.not_ready_detail.empty() ? "" : " " + in.not_ready_detail));
  }

  // The relay measures the backlog (status.backlog, its own field manager); the operator only
  // judges it against spec.monitoring.stuckAfter, and says Unknown when nobody measures.
  Json backlog_stuck() const {
    const std::string stuck_after = value_at<std::string>(
        spec, "/monitoring/stuckAfter", default_of<std::string>("/monitoring/stuckAfter"));
    const double threshold = static_cast<double>(parse_duration(stuck_after).count()) / 1000.0;
    if (!current.contains("/backlog/oldestPendingSeconds"_json_pointer)) {
      return make("BacklogStuck", "Unknown", "NoBacklogReport",
                  "No relay has reported the backlog yet.");
    }
    const std::string measured = current.value("/backlog/measuredAt"_json_pointer, "");
    if (!backlog_report_fresh(current, in.now)) {
      return make("BacklogStuck", "Unknown", "NoRecentReport",
                  "No relay has reported the backlog since " +
                      (measured.empty() ? std::string("an unknown time") : measured) +
                      " (they report every 15s); status.backlog is from then. Check "
                      "that the relay pods run and reach the database.");
    }
    const double oldest = current.at("/backlog/oldestPendingSeconds"_json_pointer).get<double>();
    if (oldest > threshold) {
      return make("BacklogStuck", "True", "EventsStuck",
                  "The oldest pending event is older than spec.monitoring.stuckAfter (" +
                      stuck_after +
                      "); see status.backlog. Check the relay's logs, Kafka and the "
                      "relay's outbox_kafka_up metric.");
    }
    return make("BacklogStuck", "False", "BacklogFresh",
                "No pending event is older than spec.monitoring.stuckAfter (" + stuck_after + ").");
  }

  // spec.database.manageSchema: what the schema Job did. The relays wait, not ready and
  // saying the table is missing, until it has migrated.
  Json schema_ready() const {
    const std::string& job = in.schema_job_name;
    const std::string logs = " Its pod's log says why: kubectl logs job/" + job + ".";
    if (in.schema_job == nullptr && in.held.schema_job) {
      return make("SchemaReady", "True", "MigrationQueued",
                  "The table keeps the schema of the last migration; the migrate Job " + job +
                      " for this image and spec waits for the rollout budget "
                      "(--max-rolling-relays).");
    }
    if (in.schema_job == nullptr) {
      return make("SchemaReady", "False", "Pending",
                  "The migrate Job " + job + " is being created.");
    }
    const Json& st = in.schema_job->value("status", Json::object());
    if (st.value("succeeded", 0) > 0) {
      return make("SchemaReady", "True", "Migrated",
                  "The migrate Job " + job + " brought the table to this image's schema.");
    }
    for (const Json& c : st.value("conditions", Json::array())) {
      if (c.value("type", "") == "Failed" && c.value("status", "") == "True") {
        return make("SchemaReady", "False", "MigrationFailed",
                    "The migrate Job " + job + " failed (" + c.value("reason", "") + ": " +
                        c.value("message", "") + ")." + logs +
                        " Fix the cause, then change the spec or delete the Job to run it again.");
      }
    }
    return make(
        "SchemaReady", "False", "Migrating",
        "The migrate Job " + job + " is running" +
            (st.value("failed", 0) > 0 ? " again after " + std::to_string(st.value("failed", 0)) +
                                             " failed attempt(s)." + logs
                                       : "."));
  }

  // The jobs write their last runs themselves (status.lastCompensation, status.lastCleanup,
  // status.lastRequeue); the operator only turns a failed one into a condition, which a later
  // good run clears (for a requeue: the next request's).
  Json job_failed() const {
    std::string failed_jobs;
    std::string failed_messages;
    for (const auto& [field, job] :
         {std::pair{"lastCompensation", "Compensation"}, std::pair{"lastCleanup", "Cleanup"},
          std::pair{"lastRequeue", "Requeue"}, std::pair{"lastReplay", "Replay"}}) {
      const Json run = current.value(field, Json::object());
      if (run.is_object() && run.value("outcome", "") == "Failed") {
        failed_jobs += job;
        failed_messages += "The " + std::string(field) + " run at " + run.value("time", "?") +
                           " failed: " + run.value("message", "no message") + " ";
      }
    }
    if (failed_jobs.empty()) {
      return make("JobFailed", "False", "NoFailedRun",
                  "The last compensation, cleanup, requeue and replay runs did not fail (or have "
                  "not run yet).");
    }
    return make(
        "JobFailed", "True", failed_jobs + "Failed",
        failed_messages + "See the Job's logs; the next run that succeeds clears this " +
            (failed_jobs.ends_with("Requeue") || failed_jobs.ends_with("Replay")
                 ? "condition (a requeue or replay runs again for a new request token: set a new "
                   "outbox.dev/requeue-failed value, or kubectl outbox requeue|replay)."
                 : "condition."));
  }

  // Log mode: a relay reports the table's last move to another PostgreSQL cluster, as the
  // rebase that followed it recorded it (status.database.clusterMove, its field manager). It
  // needs nobody (no write was refused, nothing lost) but on-call should know it happened;
  // the condition exists once a move was reported, and stays as it was while no relay reports
  // one: every relay pod applies status.database under the one field manager, so a pod that
  // reports none (starting, of an older version, still on the old cluster) removes the field
  // until the next report, and the condition must not come and go with it (nor its Event).
  std::optional<Json> cluster_moved() const {
    static const Json::json_pointer at("/database/clusterMove");
    if (!current.contains(at) || !current.at(at).is_object() ||
        current.at(at).value("to", "").empty()) {
      if (const Json was = find_condition(current, "ClusterMoved"); was.is_object()) {
        return make("ClusterMoved", was.value("status", "") == "True" ? "True" : "False",
                    was.value("reason", ""), was.value("message", ""));
      }
      return std::nullopt;
    }
    const Json& move = current.at(at);
    return make("ClusterMoved", "True", "TableRebased",
                "Table " + value_at<std::string>(spec, "/database/table", "?") +
                    " moved from PostgreSQL cluster " + move.value("from", "?") + " to " +
                    move.value("to", "?") + " and was rebased at " + move.value("at", "?") +
                    " (positions offset by " + std::to_string(move.value("positionOffset", 0LL)) +
                    "): no write was refused and nothing was lost. Events the old cluster "
                    "published after the copy was taken are published again (consumers "
                    "dedupe on event_id).");
  }

  const StatusInputs& in;
  const Json& spec;
  const Json current;
  const long long generation;
  const std::string now;
  const bool suspend;
  const int desired;
  const Rollout rollout;
};

}  // namespace

bool backlog_report_fresh(const Json& status, std::chrono::system_clock::time_point now) {
  return backlog_report_turns_stale_in(status, now).has_value();
}

bool relays_alive(const Json& relay, std::chrono::system_clock::time_point now) {
  return relays_alive_ends_in(relay, now).has_value();
}

std::optional<std::chrono::system_clock::duration> relays_alive_ends_in(
    const Json& relay, std::chrono::system_clock::time_point now) {
  std::optional<std::chrono::system_clock::duration> ends_in =
      backlog_report_turns_stale_in(relay.value("status", Json::object()), now);
  const auto created = parse_time(relay.at("metadata").value("creationTimestamp", ""));
  if (created && now - *created <= kBacklogReportStale) {
    const auto young_for = *created + kBacklogReportStale - now + std::chrono::seconds(1);
    ends_in = ends_in ? std::max(*ends_in, young_for) : young_for;
  }
  return ends_in;
}

std::optional<std::chrono::system_clock::duration> backlog_report_turns_stale_in(
    const Json& status, std::chrono::system_clock::time_point now) {
  const auto at = parse_time(status.value("/backlog/measuredAt"_json_pointer, ""));
  if (!at || now - *at > kBacklogReportStale) {
    return std::nullopt;
  }
  return *at + kBacklogReportStale - now + std::chrono::seconds(1);
}

bool relay_problem_fresh(const Json& relay_problem, std::chrono::system_clock::time_point now) {
  const auto at = parse_time(relay_problem.value("reportedAt", ""));
  return at && now - *at <= kRelayProblemFresh;
}

std::string not_ready_detail(const Json& pods, const Json& relay_status,
                             std::chrono::system_clock::time_point now) {
  std::vector<std::string> details;
  auto add = [&](const std::string& d) {
    if (std::find(details.begin(), details.end(), d) == details.end()) {
      details.push_back(d);
    }
  };
  // Pods going away (a rollout, a scale-down) are not the reason anything is stuck.
  for (const Json& pod : pods.value("items", Json::array())) {
    if (pod.at("metadata").contains("deletionTimestamp")) {
      continue;
    }
    if (std::string d = pod_detail(pod); !d.empty()) {
      add("pod " + pod.at("metadata").value("name", "") + ": " + d);
    }
  }
  const Json reported = relay_status.value("relayProblem", Json::object());
  if (reported.is_object() && reported.contains("message")) {
    if (relay_problem_fresh(reported, now)) {
      add("relay pod " + reported.value("pod", "?") + " reports: " + reported.value("message", ""));
    }
  }
  std::string out;
  for (const std::string& d : details) {
    out += (out.empty() ? "" : " ") + d + (d.ends_with(".") ? "" : ".");
  }
  return out;
}

Json find_condition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions")) {
    return nullptr;
  }
  for (const Json& c : status.at("conditions")) {
    if (c.value("type", "") == type) {
      return c;
    }
  }
  return nullptr;
}

std::vector<EventNote> condition_events(const Json& before, const Json& desired) {
  std::vector<EventNote> notes;
  for (const std::string type : {"Degraded", "BacklogStuck", "JobFailed", "ClusterMoved"}) {
    const Json now = find_condition(desired, type);
    const Json was = find_condition(before, type);
    const bool on = now.is_object() && now.value("status", "") == "True";
    const bool was_on = was.is_object() && was.value("status", "") == "True";
    // A second move keeps ClusterMoved's reason; its message names the new clusters.
    const bool changed =
        was_on && on &&
        (was.value("reason", "") != now.value("reason", "") ||
         (type == "ClusterMoved" && was.value("message", "") != now.value("message", "")));
    if (on && (!was_on || changed)) {
      notes.push_back({"Warning", now.at("reason"), now.at("message")});
    } else if (was_on && now.is_object() && now.value("status", "") == "False") {
      notes.push_back({"Normal", "Recovered",
                       std::string(type) + " cleared (was " + was.value("reason", "") +
                           "): " + now.value("message", "")});
    }
  }
  return notes;
}

std::optional<EventNote> failed_events_event(std::optional<long long> seen, const Json& status,
                                             const std::string& ns, const std::string& name) {
  const long long failed = status.value("/backlog/failed"_json_pointer, 0LL);
  if (!seen || *seen != 0 || failed == 0) {
    return std::nullopt;
  }
  return EventNote{"Warning", "EventsFailed",
                   std::to_string(failed) +
                       " events moved to FAILED (retries used up or refused for good); they "
                       "hold nothing back but reach no consumer until requeued. See why: "
                       "kubectl outbox inspect " +
                       name + " -n " + ns + "; once fixed: kubectl outbox requeue " + name +
                       " -n " + ns + " -- --all (runbook OutboxFailedEventsPresent)"};
}

Json compute_status(const StatusInputs& in) {
  const Conditions c(in);
  Json conditions = Json::array({c.ready(), c.reconciling(), c.stalled(), c.progressing(),
                                 c.degraded(), c.backlog_stuck(), c.job_failed()});
  if (!in.schema_job_name.empty()) {
    conditions.push_back(c.schema_ready());
  }
  if (std::optional<Json> moved = c.cluster_moved()) {
    conditions.push_back(std::move(*moved));
  }
  return {{"observedGeneration", c.generation},
          {"conditions", std::move(conditions)},
          {"relay",
           {{"replicas", c.rollout.replicas},
            {"readyReplicas", c.rollout.ready},
            {"selector", relay_selector(in.relay.at("metadata").at("name"))}}}};
}

bool relays_not_ready(const Json& status) {
  const Json ready = find_condition(status, "Ready");
  return ready.is_object() && ready.value("reason", "") == "RelaysNotReady";
}

bool status_matches(const Json& desired, const Json& current) {
  if (!current.is_object() || current.value("observedGeneration", -1LL) !=
                                  desired.at("observedGeneration").get<long long>()) {
    return false;
  }
  if (current.value("relay", Json::object()) != desired.at("relay")) {
    return false;
  }
  for (const Json& want : desired.at("conditions")) {
    if (find_condition(current, want.at("type")) != want) {
      return false;
    }
  }
  return current.at("conditions").size() == desired.at("conditions").size();
}

}  // namespace outbox::controller
