#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/outbox_relay.hpp"

// The status the operator writes for one OutboxRelay, computed from what it observed. Pure: the
// reconciler gathers the inputs, this decides the conditions.
namespace outbox::controller {

using Json = nlohmann::json;

// A problem the user must fix; it makes the resource Degraded.
struct Problem {
  std::string reason;  // CamelCase, e.g. SecretNotFound
  std::string message;
};

// What a pass held back for the rollout budget (ControllerOptions::max_rolling_relays).
struct HeldBack {
  bool rollout = false;     // the relay Deployment's new pod template
  bool schema_job = false;  // the schema Job of schema_job_name (the table was migrated before)
  bool any() const { return rollout || schema_job; }
};

struct StatusInputs {
  const Json& relay;                 // the OutboxRelay as cached
  const Json* deployment = nullptr;  // the relay Deployment as cached, if any
  std::optional<Problem> problem;    // set: Degraded
  std::chrono::system_clock::time_point now;
  // Why relay pods are not ready, when known (not_ready_detail); appended to Ready's message.
  std::string not_ready_detail;
  // With spec.database.manageSchema: the schema Job's name (schema_job_name) and the Job as
  // cached, if any.
  std::string schema_job_name;
  const Json* schema_job = nullptr;
  HeldBack held = {};  // what waits for the rollout budget
};

// The relay's own report of why it is not ready (status.relayProblem, written by the relay pods
// under their own field manager) counts while it is at most this old.
inline constexpr std::chrono::seconds kRelayProblemFresh{60};

// Why the relay pods are not ready, in one line a person can act on, from what the kubelet says
// (`pods`: a PodList of the relay's pods; a container waiting with CreateContainerConfigError,
// ImagePullBackOff, CrashLoopBackOff and its last exit, an unschedulable pod) and from what a
// relay says itself (a fresh status.relayProblem: table not migrated, Kafka refused...).
// Empty when neither says anything.
std::string not_ready_detail(const Json& pods, const Json& relay_status,
                             std::chrono::system_clock::time_point now);

// A relay reports the backlog every 15 s (relay --report-interval); a report older than this
// means no relay measures it any more, and BacklogStuck turns Unknown.
inline constexpr std::chrono::seconds kBacklogReportStale{120};

// Whether status.backlog.measuredAt is within kBacklogReportStale of `now`.
bool backlog_report_fresh(const Json& status, std::chrono::system_clock::time_point now);

// Whether a relay of `relay` (an OutboxRelay with its status) is alive: it reported the backlog
// within kBacklogReportStale, or the resource is younger than that (its relays are starting).
// Relays that are up but cannot reach Kafka or the database still report, so an outage shared
// by a fleet does not turn every compensation CronJob to its rescue schedule.
bool relays_alive(const Json& relay, std::chrono::system_clock::time_point now);

// How long until relays_alive turns false (nullopt when it is false already): the later of the
// last report turning stale and the resource turning kBacklogReportStale old. No watch event
// marks that moment, and the compensation CronJob's switch to every minute waits for it, so the
// reconciler looks again then.
std::optional<std::chrono::system_clock::duration> relays_alive_ends_in(
    const Json& relay, std::chrono::system_clock::time_point now);

// How long until a fresh backlog report in `status` turns stale (nullopt when there is none or it
// is stale already): no watch event marks that moment, so the reconciler looks again then.
std::optional<std::chrono::system_clock::duration> backlog_report_turns_stale_in(
    const Json& status, std::chrono::system_clock::time_point now);

// Whether a status.relayProblem was reported within kRelayProblemFresh of `now`.
bool relay_problem_fresh(const Json& relay_problem, std::chrono::system_clock::time_point now);

using api::parse_time;

// Whether the status computed by compute_status says the relay pods are not all ready yet
// (Ready=False RelaysNotReady): worth a look again soon, as no watch event may report why.
bool relays_not_ready(const Json& status);

// The controller-owned part of the status, as an apply configuration's `status` field:
// observedGeneration, conditions and relay. Conditions: Ready; Reconciling and Stalled as kstatus
// (Flux, Argo CD, kpt) reads them (Stalled: a person must fix something; Reconciling: a rollout
// or migration is under way); Progressing (the Deployment's view); Degraded (what to fix: the
// operator's finding or a relay's own report); BacklogStuck (the oldest pending event is older
// than monitoring.stuckAfter; Unknown when no fresh report); JobFailed (the last compensation,
// cleanup or requeue run failed); SchemaReady. Conditions
// follow metav1.Condition: lastTransitionTime is copied from the current status unless the
// condition's status flips.
Json compute_status(const StatusInputs& in);

// True when `desired` (from compute_status) already matches `current` (the object's status),
// so applying it would change nothing.
bool status_matches(const Json& desired, const Json& current);

// The condition of `type` in a status (null when absent).
Json find_condition(const Json& status, const std::string& type);

// A core/v1 Event for a person: `type` is "Warning" or "Normal".
struct EventNote {
  std::string type;
  std::string reason;
  std::string message;
};

// The Events a status write from `before` to `desired` is worth: a Warning when Degraded,
// BacklogStuck, JobFailed or ClusterMoved turns True, or stays True for another reason (a new
// thing to act on; for ClusterMoved, another move); a Normal `Recovered` when one of them turns
// False again, naming what cleared. Stalled says what Degraded says, so it gets none.
std::vector<EventNote> condition_events(const Json& before, const Json& desired);

// A Warning `EventsFailed` when the FAILED count a relay reported (status.backlog.failed) rises
// from 0 to more; `seen` is the count this operator saw last for the resource, none when it
// has seen none since it started (then nothing: the count may have been there for days).
std::optional<EventNote> failed_events_event(std::optional<long long> seen, const Json& status,
                                             const std::string& ns, const std::string& name);

using api::format_time;

}  // namespace outbox::controller
