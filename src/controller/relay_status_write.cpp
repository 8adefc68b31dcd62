#include "controller/relay_reconciler.hpp"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "common/redact.hpp"
#include "controller/job_status.hpp"
#include "controller/relay_secrets.hpp"

// Writing what the reconciler found: the status (computed by relay_status), Events for
// conditions that turned on, and clearing a relay's stale report of its own problem.
namespace outbox::controller {
namespace {

const kube::Resource kPods{"", "v1", "pods", true};
const kube::Resource kEvents{"", "v1", "events", true};

}  // namespace

RelayReconciler::StatusReport RelayReconciler::update_status(const Json& relay,
                                                             const Findings& found,
                                                             std::stop_token stop) {
  const std::string ns = ns_of(relay);
  const std::string name = name_of(relay);
  note_failed_events(relay);
  std::optional<Json> deployment;
  if (const kube::Informer* d = informer_for(owned::deployments, ns)) {
    deployment = d->get(ns + "/" + RelayNames(name).deployment);
  }
  std::string job_name;
  std::optional<Json> job;
  try {
    job_name = schema_job_name(relay, options_.render);
  } catch (const InvalidSpec&) {
    // Rendering refused the spec: the problem (Degraded) says so already.
  }
  if (const kube::Informer* j = informer_for(owned::jobs, ns); j != nullptr && !job_name.empty()) {
    job = j->get(ns + "/" + job_name);
  }
  std::string detail;
  std::optional<Problem> problem = found.problem;
  auto compute = [&](const Json& observed) {
    return compute_status({observed, deployment ? &*deployment : nullptr, problem,
                           std::chrono::system_clock::now(), detail, job_name,
                           job ? &*job : nullptr, found.held});
  };
  Json desired = compute(relay);
  // Still true once the pods' missing Secret is the problem: its fix may change nothing the
  // informers see (a pod that then crashes), so the look again stays due.
  const bool not_ready = relays_not_ready(desired);
  if (not_ready && deployment && deployment->value("/status/replicas"_json_pointer, 0) > 0) {
    PodsReport pods = look_at_pods(relay);
    detail = std::move(pods.detail);
    problem = std::move(pods.missing_secret);  // no problem so far: Ready would name it
    desired = compute(relay);
  }
  throw_if_stopped(stop);
  clear_relay_problem(relay, {not_ready});
  if (status_matches(desired, relay.value("status", Json::object()))) {
    return {not_ready};
  }
  // About to write. Transitions must be judged against what the apiserver has: a cache that
  // has not seen this process's previous status write yet would move lastTransitionTime and
  // repeat Events, so then the live status is read first.
  Json observed = relay;
  if (!status_cache_current(relay)) {
    observed["status"] = client_.get(kOutboxRelays, ns, name).value("status", Json::object());
    desired = compute(observed);
  }
  const Json before = observed.value("status", Json::object());
  if (status_matches(desired, before)) {
    return {not_ready};
  }
  throw_if_stopped(stop);
  write_status(relay, desired, before);
  return {not_ready};
}

// Only for a resource whose Deployment has pods that are not all ready, and one list per
// look: no pod informer, whose cache would hold every relay pod of the cluster. The
// namespace's FailedMount Events are listed too, only while a pod waits for its volumes (the
// kubelet says a missing Secret nowhere else). Both served from the apiserver's watch cache
// (resourceVersion 0), not from etcd.
RelayReconciler::PodsReport RelayReconciler::look_at_pods(const Json& relay) {
  kube::ListOptions by_relay;
  by_relay.label_selector = relay_selector(name_of(relay));
  by_relay.resource_version = "0";
  const Json pods = client_.list(kPods, ns_of(relay), by_relay);
  const Json items = pods.value("items", Json::array());
  Json events = Json::object();
  if (std::any_of(items.begin(), items.end(), waiting_for_volumes)) {
    kube::ListOptions failed_mounts;
    failed_mounts.field_selector = "involvedObject.kind=Pod,reason=FailedMount";
    failed_mounts.resource_version = "0";
    events = client_.list(kEvents, ns_of(relay), failed_mounts);
  }
  return {not_ready_detail(pods, relay.value("status", Json::object()),
                           std::chrono::system_clock::now()),
          missing_secret(relay, pods, events)};
}

// The cache is known to be current when it shows the resourceVersion our last write returned,
// or when this process never wrote this status (its informer has watched it since before it
// led).
bool RelayReconciler::status_cache_current(const Json& relay) {
  const std::string cached_version = relay.at("metadata").value("resourceVersion", "");
  std::lock_guard lock(applied_mu_);
  auto it = status_written_.find(ns_of(relay) + "/" + name_of(relay));
  return it == status_written_.end() || it->second == cached_version;
}

void RelayReconciler::write_status(const Json& relay, const Json& desired, const Json& before) {
  const std::string ns = ns_of(relay);
  const std::string name = name_of(relay);
  Json written = client_.apply_status(kOutboxRelays, ns,
                                      {{"apiVersion", "outbox.dev/v1alpha1"},
                                       {"kind", "OutboxRelay"},
                                       {"metadata", {{"name", name}, {"namespace", ns}}},
                                       {"status", desired}},
                                      kFieldManager, true);
  status_writes_.inc();
  {
    std::lock_guard lock(applied_mu_);
    status_written_[ns + "/" + name] = written.at("metadata").value("resourceVersion", "");
  }
  for (const EventNote& note : condition_events(before, desired)) {
    record_event(relay, note);
  }
}

// A requeue or replay Job whose pod never wrote its status field (it could not start, ran past
// the deadline, or its report was refused) leaves the request unanswered, and the Job's deletion
// after ttlSecondsAfterFinished would run it again. So once the Job has ended, the operator
// answers for it (ended_change_run): a merge patch of that one field, as the pod's own. The
// live object is read first: the pod's report comes before the Job ends, but its watch event
// may come after.
void RelayReconciler::answer_ended_requeue(const Json& relay, std::stop_token stop) {
  const std::string ns = ns_of(relay);
  const kube::Informer* jobs = informer_for(owned::jobs, ns);
  if (jobs == nullptr) {
    return;
  }
  for (const ChangeKind* kind : {&kRequeueKind, &kReplayKind}) {
    const ChangeRequest request = change_request(relay, *kind);
    if (request.job.empty()) {
      continue;
    }
    const std::optional<Json> job = jobs->get(ns + "/" + request.job);
    const std::optional<JobRun> run =
        job ? ended_change_run(*job, *kind, request.token) : std::nullopt;
    if (!run) {
      continue;
    }
    const Json live = client_.get(kOutboxRelays, ns, name_of(relay));
    if (change_request(live, *kind).job != request.job) {
      continue;  // answered by the pod after all, or another request replaced it
    }
    throw_if_stopped(stop);
    client_.merge_patch(kOutboxRelays, ns, name_of(relay), job_status_patch(*run), "status");
    status_writes_.inc();
    spdlog::info("answered {} request {} of {}/{} for Job {}, which ended without a report",
                 kind->verb, request.token, ns, name_of(relay), request.job);
  }
}

// The field manager that last set `annotation` on the live object, from its managedFields: what
// the API server records of a change (the client's --field-manager), not who made it.
std::string annotation_manager(const Json& live, const std::string& annotation) {
  for (const Json& entry : live.at("metadata").value("managedFields", Json::array())) {
    const Json fields = entry.value("fieldsV1", Json::object());
    if (fields.contains("f:metadata") && fields.at("f:metadata").contains("f:annotations") &&
        fields.at("f:metadata").at("f:annotations").contains("f:" + annotation)) {
      return entry.value("manager", "");
    }
  }
  return "";
}

// An Event on the OutboxRelay for each requeue or replay request whose Job this pass created:
// what was asked, by whom the annotation says (a client-supplied name the API server does not
// check; see docs/install.md, on-call), with which field manager the API server recorded the
// change, and which Job carries it out. `existing` says which Jobs the cache held before the
// pass applied anything, so a Job already there (a request seen before, by this process or an
// earlier leader) announces nothing.
void RelayReconciler::announce_requests(const Json& relay, const std::set<std::string>& existing) {
  const std::string ns = ns_of(relay);
  for (const ChangeKind* kind : {&kRequeueKind, &kReplayKind}) {
    const ChangeRequest request = change_request(relay, *kind);
    if (request.job.empty() || existing.count(request.job) != 0) {
      continue;
    }
    {
      std::lock_guard lock(applied_mu_);
      if (!announced_.insert(ns + "/" + request.job).second) {
        continue;
      }
    }
    std::string manager;
    try {
      manager =
          annotation_manager(client_.get(kOutboxRelays, ns, name_of(relay)), kind->annotation);
    } catch (const std::exception& e) {
      spdlog::warn("could not read the field manager of {} on {}/{}: {}", kind->annotation, ns,
                   name_of(relay), e.what());
    }
    std::string message = std::string(kind->event_noun) + " request " + request.token + " (" +
                          request.summary + ") requested by " +
                          (request.requested_by.empty() ? std::string("an unnamed user")
                                                        : request.requested_by +
                                                              " (as the "
                                                              "annotation "
                                                              "says)");
    if (!manager.empty()) {
      message += ", set through field manager " + manager;
    }
    message +=
        "; Job " + request.job + " carries it out and reports in status." + kind->field + ".";
    record_event(relay, {"Normal", std::string(kind->event_noun) + "Requested", message});
  }
}

// Which requeue and replay Jobs of `relay` the cache holds now.
std::set<std::string> RelayReconciler::existing_request_jobs(const Json& relay) {
  std::set<std::string> out;
  const kube::Informer* jobs = informer_for(owned::jobs, ns_of(relay));
  for (const ChangeKind* kind : {&kRequeueKind, &kReplayKind}) {
    const ChangeRequest request = change_request(relay, *kind);
    if (!request.job.empty() && (jobs == nullptr || jobs->get(ns_of(relay) + "/" + request.job))) {
      out.insert(request.job);
    }
  }
  return out;
}

// The relay pod that wrote status.relayProblem clears it once ready, but a pod replaced while
// not ready (the usual way its problem gets fixed: a new Secret, a new spec) never comes back
// to. So the operator removes it once every relay pod is ready, or once no pod has repeated it
// for kRelayProblemFresh. A merge patch, as it is another manager's field.
void RelayReconciler::clear_relay_problem(const Json& relay, const StatusReport& report) {
  const Json status = relay.value("status", Json::object());
  if (!status.contains("relayProblem")) {
    return;
  }
  if (report.relays_not_ready &&
      relay_problem_fresh(status.at("relayProblem"), std::chrono::system_clock::now())) {
    return;
  }
  client_.merge_patch(kOutboxRelays, ns_of(relay), name_of(relay),
                      {{"status", {{"relayProblem", nullptr}}}}, "status");
  status_writes_.inc();
}

void RelayReconciler::forget(const std::string& key) {
  std::lock_guard lock(applied_mu_);
  status_written_.erase(key);
  failed_seen_.erase(key);
  // The requests' Jobs are named "<name>-<verb>-<hash>" in the same namespace.
  std::erase_if(announced_, [&](const std::string& job) { return job.starts_with(key + "-"); });
}

// The FAILED count is the relays' field: its rise from 0 is judged on every look, not only
// when the operator writes the status.
void RelayReconciler::note_failed_events(const Json& relay) {
  const Json status = relay.value("status", Json::object());
  if (!status.contains("/backlog/failed"_json_pointer)) {
    return;
  }
  const std::string key = ns_of(relay) + "/" + name_of(relay);
  std::optional<long long> seen;
  {
    std::lock_guard lock(applied_mu_);
    if (auto it = failed_seen_.find(key); it != failed_seen_.end()) {
      seen = it->second;
    }
    failed_seen_[key] = status.at("/backlog/failed"_json_pointer).get<long long>();
  }
  if (auto note = failed_events_event(seen, status, ns_of(relay), name_of(relay))) {
    record_event(relay, *note);
  }
}

// Best effort: an Event that cannot be written is logged, never retried.
void RelayReconciler::record_event(const Json& relay, const EventNote& note) {
  const std::string now = format_time(std::chrono::system_clock::now());
  try {
    client_.create(kube::resources::events, ns_of(relay),
                   {{"apiVersion", "v1"},
                    {"kind", "Event"},
                    {"metadata", {{"generateName", name_of(relay) + "."}}},
                    {"involvedObject",
                     {{"apiVersion", "outbox.dev/v1alpha1"},
                      {"kind", "OutboxRelay"},
                      {"name", name_of(relay)},
                      {"namespace", ns_of(relay)},
                      {"uid", relay.at("metadata").value("uid", "")}}},
                    {"type", note.type},
                    {"reason", note.reason},
                    {"message", redact(note.message)},
                    {"source", {{"component", "outbox-operator"}}},
                    {"reportingComponent", "outbox-operator"},
                    {"reportingInstance", options_.identity},
                    {"firstTimestamp", now},
                    {"lastTimestamp", now},
                    {"count", 1}});
    events_.inc();
  } catch (const std::exception& e) {
    spdlog::warn("could not record Event {} for {}/{}: {}", note.reason, ns_of(relay),
                 name_of(relay), e.what());
  }
}

}  // namespace outbox::controller
