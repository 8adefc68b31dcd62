#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "controller/rollout_budget.hpp"
#include "kube/caches.hpp"
#include "kube/client.hpp"
#include "kube/lease_elector.hpp"
#include "kube/reconciler.hpp"
#include "metrics/registry.hpp"

// The OutboxRelay reconciler: what one OutboxRelay needs, as a kube::Reconciler that a
// kube::ControllerEngine runs (controller.hpp puts the two together). One class, one file per
// aspect: the reconcile function and the owner mapping (relay_reconcile.cpp), applying owned
// objects and asking the rollout budget (relay_apply.cpp), deletionPolicy: Drop
// (relay_finalize.cpp), and writing the status and Events (relay_status_write.cpp); the pure
// parts are relay_resources (rendering), relay_status (conditions) and rollout_budget (what
// waits for the budget, and which holds still stand). It reads the engine's informer caches and
// keeps its own memory of what it wrote: the applied forms, status writes and Events.
//
// Guarantees:
//  - A change to an OutboxRelay, or to (or the deletion of) an object it owns, requeues it;
//    owned objects map back to their owner through the controller ownerReference (owners_of).
//  - A failed reconcile is retried with per-key backoff, except an invalid spec: it is reported
//    (Degraded, InvalidSpec) and left until the object changes, as no retry can fix it.
//  - A resource held back by the rollout budget is not rendered again while nothing it depends
//    on changed and the budget stays spent (RolloutBudget::still_held).
//  - Each reconcile re-applies every owned object whose desired form or live version changed
//    since this process last applied it (server-side apply, field manager "outbox-operator",
//    force), so drift is repaired and an idle resource costs at most one status check.
// Caveats: the operator reads no Secret. A missing one is what the kubelet says of the relay pods
// waiting for it (relay_secrets.hpp), looked at again every not_ready_recheck; with no relay pod
// (spec.relay.replicas 0, suspended) nothing says it. A rotation reaches the running relays
// through their mounted files, without the operator.
namespace outbox::controller {

using kube::Outcome;
using kube::ReconcileCancelled;
using kube::ReconcileResult;
using kube::TerminalError;
using kube::throw_if_stopped;

// The `controller` subcommand's options: the engine's (namespaces, workers, identity,
// leader_election, resync_period; see controller.cpp) and the reconciler's.
struct ControllerOptions {
  std::vector<std::string> namespaces;  // empty: all namespaces
  RenderOptions render;
  int workers = 2;
  std::string identity;  // Event source instance and Lease holder
  std::optional<kube::LeaseElectorConfig> leader_election;  // lease fields only
  // A resource whose relay pods are not all ready is looked at again this often, to say why
  // (the pods' waiting reasons, the relay's own problem) as soon as they say it.
  std::chrono::milliseconds not_ready_recheck{30'000};
  // Every resource is reconciled again this often even when no watch event arrived (as
  // controller-runtime's SyncPeriod): repairs what no event reports, e.g. an ownerReference
  // removed from an object that no longer maps back to its owner. Zero: never.
  std::chrono::milliseconds resync_period{600'000};
  // At most this many relay Deployments roll out, and schema Jobs re-migrate, at once across
  // everything this operator watches; a resource whose relay pod template would change, or
  // whose migrated table would be migrated again, while that many are under way keeps its pods
  // and table as they are (Reconciling=True RolloutQueued) and is looked at again soon. An
  // operator upgrade that changes every relay's image then rolls the fleet in waves. New
  // resources are never held. Zero: no limit.
  int max_rolling_relays = 10;
};

// What the engine watches for OutboxRelays in `namespaces`: every OutboxRelay, and every object
// of an owned kind that carries the managed-by label.
kube::Watches relay_watches(const std::vector<std::string>& namespaces);

class RelayReconciler : public kube::Reconciler {
 public:
  // `caches` are the engine's, built from relay_watches(options.namespaces).
  RelayReconciler(kube::Client& client, ControllerOptions options, metrics::Registry& registry,
                  const kube::Caches& caches);

  // One pass for one "namespace/name" key. Throws on failure (TerminalError for an invalid
  // spec); throws ReconcileCancelled once `stop` is requested, before the next write.
  ReconcileResult reconcile(const std::string& key, std::stop_token stop) override;
  // The controller ownerReference's OutboxRelay; for the Drop Job, which has none, its labels'.
  std::vector<std::string> owners_of(const Json& owned) const override;
  // Deployments and schema Jobs: what the rollout budget counts. Any owned object: a hold of
  // its owner decided before this change no longer stands.
  void observe_owned(const kube::Resource& kind, const Json& object,
                     kube::OwnedChange change) override;

 private:
  struct Applied {
    std::string desired_hash;
    std::string resource_version;
  };

  // The reconcile function's steps (relay_reconcile.cpp). Renders what `relay` owns, or reports
  // an invalid spec and throws TerminalError.
  RenderedRelay render_or_report(const Json& relay, std::stop_token stop);
  // Applies, reports, and says when to look again.
  ReconcileResult apply_and_report(const Json& relay, RenderedRelay& rendered,
                                   std::stop_token stop);
  // How long until the status of `relay` may change with time alone (no watch event marks it).
  struct StatusReport;
  std::optional<std::chrono::milliseconds> status_due_in(const Json& relay,
                                                         const StatusReport& report);
  const kube::Informer* informer_for(const kube::Resource& kind, const std::string& ns) const {
    return caches_.informer(kind, ns);
  }

  // deletionPolicy: Drop (relay_finalize.cpp). Adds kDropFinalizer while the policy is Drop and
  // removes it once it is not.
  void keep_drop_finalizer(const Json& relay, std::stop_token stop);
  // A resource being deleted: with the finalizer, stops its relays, runs the Drop Job and
  // removes the finalizer once the Job succeeded (a failed one is Degraded DropFailed).
  ReconcileResult finalize(const Json& relay, std::stop_token stop);
  // Scales the relay Deployment to zero and suspends both CronJobs; true once no relay pod runs.
  bool stop_relays(const Json& relay, std::stop_token stop);
  enum class DropFinalizer { kAdd, kRemove };
  void patch_drop_finalizer(const Json& relay, DropFinalizer change);

  // Applying owned objects (relay_apply.cpp). Applies every rendered object; throws after
  // reporting ApplyFailed when the apiserver refused any. Then prunes an unwanted PDB.
  void apply_all(const Json& relay, const RenderedRelay& rendered, std::stop_token stop);
  // Takes out of `rendered` what the rollout budget holds back: the relay Deployment when
  // applying it would start a rollout, and the schema Job when it would re-migrate a table
  // already migrated (an operator upgrade's new image, a spec change), while max_rolling_relays
  // are under way. A first migration is never held: the relays cannot run without it.
  HeldBack hold_back(const Json& relay, RenderedRelay& rendered);
  bool hold_rollout(RenderedRelay& rendered);
  bool hold_schema_job(const Json& relay, RenderedRelay& rendered);
  void apply_owned(const OwnedObject& owned);
  void delete_pdb(const std::string& ns, const std::string& name);
  bool delete_unwanted(const kube::Resource& resource, const std::string& ns,
                       const std::string& name);

  // The status and Events (relay_status_write.cpp). What a pass found besides the caches:
  struct Findings {
    std::optional<Problem> problem;  // set: Degraded
    HeldBack held;                   // what waits for the rollout budget
    static Findings degraded(Problem problem) { return {std::move(problem), {}}; }
    static Findings holding(HeldBack held) { return {std::nullopt, held}; }
  };
  // What the status says that the caller decides on.
  struct StatusReport {
    bool relays_not_ready = false;  // Ready=False RelaysNotReady: worth a look again soon
  };
  // Writes the status if it changed.
  StatusReport update_status(const Json& relay, const Findings& found, std::stop_token stop);
  // What the relay pods say of why they are not ready, from one list of them: the detail
  // (not_ready_detail) and a Secret they wait for (missing_secret), if any.
  struct PodsReport {
    std::string detail;
    std::optional<Problem> missing_secret;
  };
  PodsReport look_at_pods(const Json& relay);
  // Whether the cached `relay` shows this process's last status write (or it never wrote one).
  bool status_cache_current(const Json& relay);
  // Applies `desired` and records the Events its changes from `before` are worth
  // (condition_events).
  void write_status(const Json& relay, const Json& desired, const Json& before);
  void record_event(const Json& relay, const EventNote& note);
  void note_failed_events(const Json& relay);
  // What the status writer remembers of a resource ("ns/name") that is gone or going.
  void forget(const std::string& key);
  void clear_relay_problem(const Json& relay, const StatusReport& report);
  // Writes status.lastRequeue (lastReplay) for a requeue (replay) Job that ended without its
  // pod writing it.
  void answer_ended_requeue(const Json& relay, std::stop_token stop);
  // Records a <Kind>Requested Event for each request whose Job was not in `existing`.
  void announce_requests(const Json& relay, const std::set<std::string>& existing);
  std::set<std::string> existing_request_jobs(const Json& relay);

  kube::Client& client_;
  ControllerOptions options_;
  const kube::Caches& caches_;

  std::mutex applied_mu_;
  std::map<std::string, Applied> applied_;             // "plural/ns/name" -> what we last applied
  std::map<std::string, std::string> status_written_;  // "ns/name" -> resourceVersion written
  std::map<std::string, long long> failed_seen_;       // "ns/name" -> status.backlog.failed
  std::set<std::string> announced_;  // "ns/job" of requests whose Event was recorded
  // The rollout budget, and what it holds back. One decision at a time: the count and the
  // start it allows are one step.
  std::mutex rollout_mu_;
  RolloutBudget budget_;

  metrics::Counter& applies_;
  metrics::Counter& status_writes_;
  metrics::Counter& events_;
  metrics::Counter& renders_;
};

}  // namespace outbox::controller
