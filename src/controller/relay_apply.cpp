#include "controller/relay_reconciler.hpp"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "kube/errors.hpp"

// Applying the owned objects: server-side apply of what changed, replacement of what cannot
// change in place, and pruning a PodDisruptionBudget the spec no longer wants.
namespace outbox::controller {
namespace {

// On every owned object: the hash of the form this operator last applied. With it, a live
// object whose fields include the desired ones is known to carry no field the operator set
// earlier and no longer wants, so it needs no apply (e.g. after a restart or a failover).
const char kAppliedHashAnnotation[] = "outbox.dev/applied-hash";

// Whether every field of `want` is in `have` with the same value; arrays must match element
// by element. Fields only `have` has (defaults, other managers' fields) do not matter.
bool contains(const Json& have, const Json& want) {
  if (want.is_object()) {
    if (!have.is_object()) {
      return false;
    }
    for (const auto& [key, value] : want.items()) {
      auto it = have.find(key);
      if (it == have.end() || !contains(*it, value)) {
        return false;
      }
    }
    return true;
  }
  if (want.is_array()) {
    if (!have.is_array() || have.size() != want.size()) {
      return false;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (!contains(have[i], want[i])) {
        return false;
      }
    }
    return true;
  }
  return have == want;
}

// Whether `live` differs from `desired` in a field the apiserver never changes in place, so
// that applying would only be refused. The one case: the metrics Service became headless
// (clusterIP None) after releases that gave each relay a ClusterIP, which exhausts a /24
// service range at about 250 resources.
bool needs_replacing(const kube::Resource& resource, const Json& live, const Json& desired) {
  if (&resource != &owned::services) {
    return false;
  }
  const std::string want = desired.value("/spec/clusterIP"_json_pointer, std::string());
  const std::string have = live.value("/spec/clusterIP"_json_pointer, std::string());
  return !want.empty() && !have.empty() && want != have;
}

}  // namespace

// Every object is tried even after one is refused: they do not depend on each other at
// admission, and a half-applied resource is easier to read when the status names exactly
// what is missing. A refusal (the apiserver answered) is the user's to see: Degraded with the
// apiserver's words, then a retry with backoff, as the cause may lie outside the spec (an
// admission policy, a quota). No answer at all (TransportError) stays a plain error.
void RelayReconciler::apply_all(const Json& relay, const RenderedRelay& rendered,
                                std::stop_token stop) {
  std::vector<std::string> refusals;
  for (const OwnedObject& object : rendered.objects) {
    throw_if_stopped(stop);
    try {
      apply_owned(object);
    } catch (const kube::ApiError& e) {
      const std::string kind = object.object.value("kind", object.resource->plural);
      const std::string said = e.status().message.empty() ? e.what() : e.status().message;
      refusals.push_back(kind + " " + name_of(object.object) + ": " + said);
    }
  }
  if (!refusals.empty()) {
    std::string message = "The apiserver refused an owned object: ";
    for (size_t i = 0; i < refusals.size(); ++i) {
      message += (i == 0 ? "" : "; ") + refusals[i];
    }
    update_status(relay, Findings::degraded(Problem{"ApplyFailed", message}), stop);
    throw std::runtime_error(message);
  }
  if (!rendered.wants_pdb) {
    throw_if_stopped(stop);
    delete_pdb(ns_of(relay), rendered.pdb_name);
  }
  if (!rendered.wants_network_policy) {
    throw_if_stopped(stop);
    if (delete_unwanted(owned::network_policies, ns_of(relay), rendered.network_policy_name)) {
      spdlog::info("deleted NetworkPolicy {}/{}: spec.networkPolicy is not enabled", ns_of(relay),
                   rendered.network_policy_name);
    }
  }
}

// Skips the request when this process already applied exactly this object and the live one
// has not changed since (same resourceVersion), or when the cached live object was applied
// from this same desired form (its applied-hash annotation) and still has every desired field
// and value. Anything else, including deletion or an edit by someone else, is applied again.
void RelayReconciler::apply_owned(const OwnedObject& owned) {
  const std::string ns = ns_of(owned.object);
  const std::string name = name_of(owned.object);
  const std::string id = owned.resource->plural + "/" + ns + "/" + name;
  const std::string hash = stable_hash(owned.object.dump());
  Json desired = owned.object;
  desired["metadata"]["annotations"][kAppliedHashAnnotation] = hash;
  const kube::Informer* informer = informer_for(*owned.resource, ns);
  std::optional<Json> live = informer ? informer->get(ns + "/" + name) : std::nullopt;
  // A Job runs once, and its pod template cannot change: a Job's name already says what it runs
  // (the schema Job's hashes its image and arguments, a requeue Job's its request), so one that
  // exists is left as it is rather than refused over, say, new pod resources in the spec.
  if (live && owned.resource == &owned::jobs) {
    return;
  }
  const std::string live_version =
      live ? live->at("metadata").value("resourceVersion", "") : std::string();
  {
    std::lock_guard lock(applied_mu_);
    auto it = applied_.find(id);
    if (it != applied_.end() && it->second.desired_hash == hash && live &&
        live_version == it->second.resource_version) {
      return;
    }
    // apiVersion and kind are not compared: objects read by a LIST do not carry them.
    Json fields = desired;
    fields.erase("apiVersion");
    fields.erase("kind");
    if (live && contains(*live, fields)) {
      applied_[id] = {hash, live_version};
      return;
    }
  }
  if (live && needs_replacing(*owned.resource, *live, desired)) {
    client_.remove(*owned.resource, ns, name);
    spdlog::info("deleted {} to create it again: a field it must change is immutable", id);
  }
  Json result = client_.apply(*owned.resource, ns, desired, kFieldManager, true);
  applies_.inc();
  std::lock_guard lock(applied_mu_);
  applied_[id] = {hash, result.at("metadata").value("resourceVersion", "")};
}

namespace {

// Whether the Deployment controller is rolling `deployment` out: a generation it has not seen
// yet, or its Progressing condition says a new ReplicaSet is being scaled up. Not a Deployment
// whose pods merely crash (that is no rollout, and would hold the budget forever), nor one past
// its progress deadline.
bool rolling_out(const Json& deployment) {
  const long long generation = deployment.at("metadata").value("generation", 0LL);
  const Json status = deployment.value("status", Json::object());
  if (deployment.value("/spec/replicas"_json_pointer, 1) == 0) {
    return false;
  }
  if (status.value("observedGeneration", 0LL) < generation) {
    return true;
  }
  for (const Json& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "Progressing") {
      return c.value("status", "") == "True" && c.value("reason", "") == "ReplicaSetUpdated";
    }
  }
  return false;
}

}  // namespace

namespace {

bool is_schema_job(const Json& job) {
  return job.value("/metadata/labels/app.kubernetes.io~1component"_json_pointer, "") == "schema";
}

// Complete or Failed: the Job controller starts no more pods for it.
bool job_finished(const Json& job) {
  for (const Json& c : job.value("/status/conditions"_json_pointer, Json::array())) {
    const std::string type = c.value("type", "");
    if (c.value("status", "") == "True" && (type == "Complete" || type == "Failed")) {
      return true;
    }
  }
  return false;
}

}  // namespace

// The budget counts from what the informers' events say, never from the cached objects
// themselves: every held resource asks it again every few seconds, and unpacking a fleet's
// Deployments or Jobs each time cost a 200-resource upgrade ~100 MiB of transient memory.
void RelayReconciler::observe_owned(const kube::Resource& kind, const Json& object,
                                    kube::OwnedChange change) {
  const std::string key = kube::Informer::key_of(object);
  std::lock_guard lock(rollout_mu_);
  if (&kind == &owned::deployments) {
    if (change == kube::OwnedChange::kDeleted) {
      budget_.forget_deployment(key);
    } else {
      budget_.observe_deployment(
          key, {object.at("metadata").value("generation", 0LL), rolling_out(object)});
    }
  } else if (&kind == &owned::jobs && is_schema_job(object)) {
    if (change == kube::OwnedChange::kDeleted) {
      budget_.forget_schema_job(key);
    } else {
      budget_.observe_schema_job(key, job_finished(object) ? RolloutBudget::JobSeen::kFinished
                                                           : RolloutBudget::JobSeen::kRunning);
    }
  }
  for (const std::string& owner : owners_of(object)) {
    budget_.release(owner);
  }
}

HeldBack RelayReconciler::hold_back(const Json& relay, RenderedRelay& rendered) {
  HeldBack held;
  held.rollout = hold_rollout(rendered);
  held.schema_job = hold_schema_job(relay, rendered);
  return held;
}

bool RelayReconciler::hold_rollout(RenderedRelay& rendered) {
  auto it = std::find_if(rendered.objects.begin(), rendered.objects.end(),
                         [](const OwnedObject& o) { return o.resource == &owned::deployments; });
  if (it == rendered.objects.end()) {
    return false;
  }
  const std::string ns = ns_of(it->object);
  const std::string key = ns + "/" + name_of(it->object);
  const kube::Informer* informer = informer_for(owned::deployments, ns);
  const std::optional<Json> live = informer ? informer->get(key) : std::nullopt;
  const Json& template_ = it->object.at("/spec/template"_json_pointer);
  if (!live || contains(live->value("/spec/template"_json_pointer, Json()), template_)) {
    return false;  // a new resource, or no new pod template: nothing to roll
  }
  std::lock_guard lock(rollout_mu_);
  if (budget_.may_roll(key, live->at("metadata").value("generation", 0LL), BudgetClock::now())) {
    return false;
  }
  rendered.objects.erase(it);
  return true;
}

bool RelayReconciler::hold_schema_job(const Json& relay, RenderedRelay& rendered) {
  auto it = std::find_if(
      rendered.objects.begin(), rendered.objects.end(),
      [](const OwnedObject& o) { return o.resource == &owned::jobs && is_schema_job(o.object); });
  if (it == rendered.objects.end()) {
    return false;
  }
  const std::string ns = ns_of(it->object);
  const std::string key = ns + "/" + name_of(it->object);
  const kube::Informer* informer = informer_for(owned::jobs, ns);
  if (informer == nullptr || informer->get(key)) {
    return false;  // created already: a Job is never applied again
  }
  const Json migrated = find_condition(relay.value("status", Json::object()), "SchemaReady");
  if (!migrated.is_object() || migrated.value("status", "") != "True") {
    return false;  // a first migration, or one that failed: the relays wait for it
  }
  std::lock_guard lock(rollout_mu_);
  if (budget_.may_migrate(key, BudgetClock::now())) {
    return false;
  }
  rendered.objects.erase(it);
  return true;
}

void RelayReconciler::delete_pdb(const std::string& ns, const std::string& name) {
  if (delete_unwanted(owned::pod_disruption_budgets, ns, name)) {
    spdlog::info("deleted PodDisruptionBudget {}/{}: one relay replica or fewer", ns, name);
  }
}

// Deletes an owned object the spec no longer wants; false when there was none. Only what the
// cache holds (so only what carries our label) is deleted: a missing object costs no request.
bool RelayReconciler::delete_unwanted(const kube::Resource& resource, const std::string& ns,
                                      const std::string& name) {
  const kube::Informer* informer = informer_for(resource, ns);
  if (informer == nullptr || !informer->get(ns + "/" + name)) {
    return false;
  }
  try {
    client_.remove(resource, ns, name);
    return true;
  } catch (const kube::ApiError& e) {
    if (!e.is_not_found()) {
      throw;
    }
    return false;
  }
}

}  // namespace outbox::controller
