#include "controller/relay_reconciler.hpp"

#include <spdlog/spdlog.h>

// spec.deletionPolicy: Drop. The finalizer holds a deleted resource until the Drop Job removed
// what the operator created in the database; Retain (the default) never sets it, so deleting
// such a resource leaves the database as it is and the apiserver removes it at once.
namespace outbox::controller {
namespace {

enum class JobOutcome { kRunning, kSucceeded, kFailed };

// The Job's outcome from its terminal condition, and the condition's reason and message.
std::pair<JobOutcome, std::string> job_outcome(const Json& job) {
  for (const Json& c : job.value("/status/conditions"_json_pointer, Json::array())) {
    if (c.value("status", "") != "True") {
      continue;
    }
    const std::string type = c.value("type", "");
    if (type == "Complete" || type == "Failed") {
      return {type == "Complete" ? JobOutcome::kSucceeded : JobOutcome::kFailed,
              c.value("reason", "") + ": " + c.value("message", "")};
    }
  }
  return {JobOutcome::kRunning, ""};
}

std::string drop_failed_message(const std::string& job, const std::string& why) {
  return "The Drop Job " + job + " failed (" + why + "); nothing was dropped (it runs in one " +
         "transaction). `kubectl logs job/" + job + "` says why. After fixing the cause, " +
         "`kubectl delete job " + job + "` runs it again; to let the resource go without it, " +
         "set spec.deletionPolicy to Retain or remove the finalizer " + kDropFinalizer +
         " (the database then keeps what docs/install.md lists under Retain).";
}

}  // namespace

// A merge patch of the whole finalizer list, conditional on the resourceVersion the list was
// read at: a finalizer someone else added meanwhile makes it fail (409) and retry, never lost.
void RelayReconciler::patch_drop_finalizer(const Json& relay, DropFinalizer change) {
  const bool keep = change == DropFinalizer::kAdd;
  Json finalizers = Json::array();
  for (const Json& f : relay.at("metadata").value("finalizers", Json::array())) {
    if (f != kDropFinalizer) {
      finalizers.push_back(f);
    }
  }
  if (keep) {
    finalizers.push_back(kDropFinalizer);
  }
  client_.merge_patch(kOutboxRelays, ns_of(relay), name_of(relay),
                      {{"metadata",
                        {{"resourceVersion", relay.at("metadata").value("resourceVersion", "")},
                         {"finalizers", finalizers}}}});
  spdlog::info("{} finalizer {} on OutboxRelay {}/{}", keep ? "added" : "removed", kDropFinalizer,
               ns_of(relay), name_of(relay));
}

void RelayReconciler::keep_drop_finalizer(const Json& relay, std::stop_token stop) {
  const bool want = drops_on_deletion(relay);
  if (want == has_drop_finalizer(relay)) {
    return;
  }
  throw_if_stopped(stop);
  patch_drop_finalizer(relay, want ? DropFinalizer::kAdd : DropFinalizer::kRemove);
}

bool RelayReconciler::stop_relays(const Json& relay, std::stop_token stop) {
  const std::string ns = ns_of(relay);
  const RelayNames names(name_of(relay));
  bool stopped = true;
  if (const kube::Informer* informer = informer_for(owned::deployments, ns)) {
    if (const std::optional<Json> d = informer->get(ns + "/" + names.deployment)) {
      if (d->value("/spec/replicas"_json_pointer, 1) != 0) {
        throw_if_stopped(stop);
        client_.merge_patch(owned::deployments, ns, names.deployment,
                            {{"spec", {{"replicas", 0}}}});
        stopped = false;
      }
      // status.replicas leaves out pods still terminating; terminatingReplicas counts them
      // where the apiserver reports it (absent: 0).
      stopped = stopped && d->value("/status/replicas"_json_pointer, 0) == 0 &&
                d->value("/status/terminatingReplicas"_json_pointer, 0) == 0;
    }
  }
  if (const kube::Informer* informer = informer_for(owned::cron_jobs, ns)) {
    for (const std::string& name : {names.compensation, names.retention}) {
      const std::optional<Json> c = informer->get(ns + "/" + name);
      if (c && !c->value("/spec/suspend"_json_pointer, false)) {
        throw_if_stopped(stop);
        client_.merge_patch(owned::cron_jobs, ns, name, {{"spec", {{"suspend", true}}}});
      }
    }
  }
  return stopped;
}

ReconcileResult RelayReconciler::finalize(const Json& relay, std::stop_token stop) {
  const std::string ns = ns_of(relay);
  const std::string key = ns + "/" + name_of(relay);
  if (!has_drop_finalizer(relay)) {
    forget(key);
    return {};  // Retain: the garbage collector removes what it owned
  }
  if (!drops_on_deletion(relay)) {  // set back to Retain while being deleted: let it go
    throw_if_stopped(stop);
    patch_drop_finalizer(relay, DropFinalizer::kRemove);
    forget(key);
    return {};
  }
  if (reconciliation_paused(relay)) {
    update_status(relay, {}, stop);
    return {};  // held: removing the annotation is a watch event
  }
  if (!stop_relays(relay, stop)) {
    // The Deployment's status (a watch event) says when its pods are gone; the recheck only
    // covers a missed one.
    return {Outcome::kRequeueAfter, std::chrono::seconds(5)};
  }
  std::optional<OwnedObject> job;
  try {
    job = drop_job(relay, options_.render);
  } catch (const InvalidSpec& e) {
    update_status(relay, Findings::degraded(Problem{"InvalidSpec", e.what()}), stop);
    throw TerminalError(std::string("invalid spec: ") + e.what());
  }
  const std::string job_name = name_of(job->object);
  const kube::Informer* jobs = informer_for(owned::jobs, ns);
  const std::optional<Json> live = jobs ? jobs->get(ns + "/" + job_name) : std::nullopt;
  if (!live) {
    throw_if_stopped(stop);
    apply_owned(*job);
    update_status(relay, {}, stop);
    return {};
  }
  const auto [outcome, why] = job_outcome(*live);
  if (outcome == JobOutcome::kFailed) {
    update_status(
        relay, Findings::degraded(Problem{"DropFailed", drop_failed_message(job_name, why)}), stop);
    return {};
  }
  if (outcome == JobOutcome::kRunning) {
    update_status(relay, {}, stop);
    return {};
  }
  throw_if_stopped(stop);
  patch_drop_finalizer(relay, DropFinalizer::kRemove);
  spdlog::info("OutboxRelay {}: the Drop Job {} succeeded", key, job_name);
  forget(key);
  return {};
}

}  // namespace outbox::controller
