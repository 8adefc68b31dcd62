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
#include "kube/caches.hpp"
#include "kube/client.hpp"
#include "kube/lease_elector.hpp"
#include "kube/reconciler.hpp"
#include "metrics/registry.hpp"

// The OutboxRelay reconciler: what one OutboxRelay needs, as a kube::Reconciler that a
// kube::ControllerEngine runs (controller.hpp puts the two together). One class, one file per
// aspect: the reconcile function and the owner mapping (relay_reconcile.cpp), applying owned
// objects and the rollout budget (relay_apply.cpp),
// deletionPolicy: Drop (relay_finalize.cpp), and writing the status and Events
// (relay_status_write.cpp); the pure parts are relay_resources (rendering) and relay_status
// (conditions). It reads the engine's informer caches and keeps its own memory of what it
// wrote: the applied forms, status writes, Events and the relay Deployments' rollout summary.
//
// Guarantees:
//  - A change to an OutboxRelay, or to (or the deletion of) an object it owns, requeues it;
//    owned objects map back to their owner through the controller ownerReference (owners_of).
//  - A failed reconcile is retried with per-key backoff, except an invalid spec: it is reported
//    (Degraded, InvalidSpec) and left until the object changes, as no retry can fix it.
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
  // Deployments: keeps the rollout summary the rollout budget counts (observe_deployment).
  void observe_owned(const kube::Resource& kind, const Json& object, bool deleted) override;

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
  void patch_drop_finalizer(const Json& relay, bool keep);

  // Applying owned objects (relay_apply.cpp). Applies every rendered object; throws after
  // reporting ApplyFailed when the apiserver refused any. Then prunes an unwanted PDB.
  void apply_all(const Json& relay, const RenderedRelay& rendered, std::stop_token stop);
  // Takes the relay Deployment out of `rendered` when applying it would start a rollout while
  // max_rolling_relays are rolling already; true when it did.
  bool hold_rollout(RenderedRelay& rendered);
  // Takes the schema Job out of `rendered` when it would re-migrate a table already migrated
  // (an operator upgrade's new image, a spec change) while the budget is spent; true when it
  // did. A first migration is never held: the relays cannot run without it.
  bool hold_schema_job(const Json& relay, RenderedRelay& rendered);
  // Relay Deployments rolling out now: as the caches show them, and those this process changed
  // whose new generation the caches do not show as rolled yet.
  int rolling_relays();
  // Keeps deployment_rollouts_ current; called for every Deployment event (observe_owned).
  void observe_deployment(const Json& deployment, bool deleted);
  // Schema Jobs that have not finished: as the caches show them, and those this process created
  // that the caches do not show yet. They share max_rolling_relays with the rollouts.
  int running_schema_jobs();
  void apply_owned(const OwnedObject& owned);
  void delete_pdb(const std::string& ns, const std::string& name);
  bool delete_unwanted(const kube::Resource& resource, const std::string& ns,
                       const std::string& name);

  // The status and Events (relay_status_write.cpp). Writes the status if it changed; true
  // while the relay pods are not all ready.
  bool update_status(const Json& relay, const std::optional<Problem>& problem, std::stop_token stop,
                     bool rollout_queued = false, bool schema_job_queued = false);
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
  void clear_relay_problem(const Json& relay, bool not_ready);
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
  std::map<std::string, long long> rollouts_started_;  // "ns/name" of a Deployment -> generation
  // Every relay Deployment in the caches: its generation and whether it is rolling out.
  struct DeploymentRollout {
    long long generation = 0;
    bool rolling = false;
  };
  std::map<std::string, DeploymentRollout> deployment_rollouts_;  // "ns/name" ->
  // "ns/name" of a schema Job this process created -> when (forgotten once the cache has it, or
  // after a minute).
  std::map<std::string, std::chrono::steady_clock::time_point> schema_jobs_started_;
  std::mutex rollout_mu_;  // one hold at a time: the count and the start are one step

  metrics::Counter& applies_;
  metrics::Counter& status_writes_;
  metrics::Counter& events_;
};

}  // namespace outbox::controller
