#include "controller/controller.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/stop.hpp"
#include "kube/errors.hpp"

namespace outbox::controller {
namespace {

using Clock = std::chrono::steady_clock;

// A Secret's resourceVersion read this recently is used again without asking: a new resource
// is reconciled several times within seconds (its own creation, then each owned object's watch
// event, then its status write), and each pass would otherwise cost one more request. A
// rotation is seen at most this much later.
constexpr std::chrono::seconds kSecretVersionFresh{5};

const kube::Resource kSecrets{"", "v1", "secrets", true};
const kube::Resource kPods{"", "v1", "pods", true};

const std::vector<const kube::Resource*>& owned_kinds() {
  static const std::vector<const kube::Resource*> kinds = {
      &owned::service_accounts, &owned::roles,
      &owned::role_bindings,    &owned::config_maps,
      &owned::deployments,      &owned::cron_jobs,
      &owned::services,         &owned::pod_disruption_budgets};
  return kinds;
}

std::string ns_of(const Json& o) {
  return o.at("metadata").value("namespace", "");
}
std::string name_of(const Json& o) {
  return o.at("metadata").value("name", "");
}

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

Controller::Controller(kube::Client& client, ControllerOptions options, metrics::Registry& registry)
    : client_(client),
      options_(std::move(options)),
      reconcile_ok_(registry.counter("outbox_controller_reconcile_total", "Reconciles by result",
                                     {{"result", "success"}})),
      reconcile_requeue_(registry.counter("outbox_controller_reconcile_total",
                                          "Reconciles by result", {{"result", "requeue"}})),
      reconcile_error_(registry.counter("outbox_controller_reconcile_total", "Reconciles by result",
                                        {{"result", "error"}})),
      applies_(registry.counter("outbox_controller_applies_total",
                                "Server-side applies of owned objects")),
      status_writes_(registry.counter("outbox_controller_status_writes_total",
                                      "Status applies of OutboxRelays")),
      events_(registry.counter("outbox_controller_events_total", "Events recorded")),
      duration_(registry.histogram("outbox_controller_reconcile_duration_seconds",
                                   "Time per reconcile", metrics::latency_buckets())),
      queue_depth_(registry.gauge("outbox_controller_queue_depth", "Keys ready in the work queue")),
      leader_(registry.gauge("outbox_controller_leader", "1 while this process leads")),
      relays_(registry.gauge("outbox_controller_relays", "OutboxRelays in the cache")) {
  if (options_.leader_election) {
    client_.set_write_guard([this](const std::string& method, const std::string& target) {
      const kube::LeaseElector* elector = elector_.load();
      if (elector == nullptr || !elector->holds_lease()) {
        throw kube::WriteRefused(method + " " + target +
                                 " not sent: this process does not hold the leader Lease");
      }
    });
  }
  std::vector<std::string> namespaces = options_.namespaces;
  if (namespaces.empty()) {
    namespaces.push_back("");
  }
  for (const std::string& ns : namespaces) {
    // The caches hold every OutboxRelay and every object they own: managedFields would about
    // double their memory, and nothing here reads them.
    kube::InformerOptions relay_options;
    relay_options.transform = kube::strip_managed_fields;
    relay_informers_.push_back(std::make_unique<kube::Informer>(
        client_, kOutboxRelays, ns,
        kube::InformerHandlers{
            [this](const Json& o) { queue_.add(kube::Informer::key_of(o)); },
            [this](const Json&, const Json& o) { queue_.add(kube::Informer::key_of(o)); },
            [this](const Json& o) { queue_.add(kube::Informer::key_of(o)); }},
        relay_options));
    // Only objects carrying our managed-by label: never the whole cluster's ConfigMaps.
    kube::InformerOptions owned_options;
    owned_options.label_selector = std::string(kManagedByLabel) + "=outbox-operator";
    owned_options.transform = kube::strip_managed_fields;
    for (const kube::Resource* kind : owned_kinds()) {
      owned_informers_[{kind->plural, ns}] = std::make_unique<kube::Informer>(
          client_, *kind, ns,
          // On update, the old owner too: an edit that removed the ownerReference is drift
          // of the resource that owned it.
          kube::InformerHandlers{[this](const Json& o) { enqueue_owner(o); },
                                 [this](const Json& old_o, const Json& o) {
                                   enqueue_owner(old_o);
                                   enqueue_owner(o);
                                 },
                                 [this](const Json& o) { enqueue_owner(o); }},
          owned_options);
    }
  }
}

Controller::~Controller() {
  stop_workers();
  queue_.shutdown();
  if (options_.leader_election) {
    client_.set_write_guard({});
  }
}

bool Controller::synced() const {
  for (const auto& i : relay_informers_) {
    if (!i->has_synced()) {
      return false;
    }
  }
  for (const auto& [k, i] : owned_informers_) {
    if (!i->has_synced()) {
      return false;
    }
  }
  return true;
}

void Controller::enqueue_owner(const Json& owned_object) {
  const Json refs = owned_object.at("metadata").value("ownerReferences", Json::array());
  for (const Json& ref : refs) {
    if (ref.value("kind", "") == "OutboxRelay" && ref.value("controller", false)) {
      queue_.add(ns_of(owned_object) + "/" + ref.value("name", ""));
    }
  }
}

void Controller::enqueue_all() {
  for (auto& i : relay_informers_) {
    for (const Json& o : i->list()) {
      queue_.add(kube::Informer::key_of(o));
    }
  }
}

bool Controller::run(std::stop_token stop) {
  std::vector<kube::Informer*> all;
  for (auto& i : relay_informers_) {
    all.push_back(i.get());
  }
  for (auto& [k, i] : owned_informers_) {
    all.push_back(i.get());
  }
  for (kube::Informer* informer : all) {
    informer_threads_.emplace_back([informer](std::stop_token s) { informer->run(s); });
  }
  std::jthread gauges([this](std::stop_token s) {
    while (sleep_unless_stopped(s, std::chrono::milliseconds(500))) {
      queue_depth_.set(static_cast<double>(queue_.size()));
      double n = 0;
      for (auto& i : relay_informers_) {
        n += static_cast<double>(i->size());
      }
      relays_.set(n);
    }
  });
  // Keys queued while standing by are harmless: the queue dedupes, and only workers take.
  std::jthread resync([this](std::stop_token s) {
    if (options_.resync_period.count() <= 0) {
      return;
    }
    while (sleep_unless_stopped(s, options_.resync_period)) {
      enqueue_all();
    }
  });

  bool kept_leadership = true;
  if (options_.leader_election) {
    kube::LeaseElectorConfig config = *options_.leader_election;
    config.identity = options_.identity;
    config.on_started_leading = [this] {
      spdlog::info("{} leads: starting {} workers", options_.identity, options_.workers);
      start_workers();
    };
    // Returns only once no worker can write any more: the Lease is released right after.
    config.on_stopped_leading = [this] {
      spdlog::warn("{} stopped leading: stopping workers", options_.identity);
      stop_workers();
    };
    config.on_new_leader = [this](const std::string& who) {
      spdlog::info("leader is now {}", who.empty() ? "(none)" : who);
    };
    // Renewals must not wait behind reconcile traffic in the shared client's rate limiter, nor
    // pass its write guard (which asks this very elector): a client of their own. As
    // client-go, one lease call may take at most max(1 s, renew_deadline / 2).
    kube::ClientOptions lease_options = client_.options();
    lease_options.timeout =
        std::max<std::chrono::milliseconds>(std::chrono::seconds(1), config.renew_deadline / 2);
    kube::Client lease_client(client_.config(), lease_options);
    kube::LeaseElector elector(lease_client, config);
    elector_ = &elector;
    kept_leadership = elector.run(stop);
    elector_ = nullptr;  // the workers were stopped in on_stopped_leading
  } else {
    start_workers();
    sleep_unless_stopped(stop, std::chrono::hours(24 * 365 * 100));
    stop_workers();
  }
  for (auto& t : informer_threads_) {
    t.request_stop();
  }
  informer_threads_.clear();
  return kept_leadership;
}

void Controller::start_workers() {
  std::lock_guard lock(workers_mu_);
  leading_ = true;
  leader_.set(1);
  enqueue_all();
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this](std::stop_token s) { worker(s); });
  }
}

void Controller::stop_workers() {
  std::lock_guard lock(workers_mu_);
  for (auto& w : workers_) {
    w.request_stop();
  }
  workers_.clear();  // joins: a reconcile in flight finishes its current request first
  leading_ = false;
  leader_.set(0);
}

void Controller::worker(std::stop_token stop) {
  // Reconciling from a partial cache would re-create objects the apiserver already has.
  while (!synced()) {
    if (!sleep_unless_stopped(stop, std::chrono::milliseconds(100))) {
      return;
    }
  }
  while (!stop.stop_requested()) {
    std::optional<std::string> key = queue_.get_for(std::chrono::milliseconds(200));
    if (key) {
      process(*key);
      queue_.done(*key);
    }
  }
}

// controller-runtime's result handling: an error backs off per key; a requested delay resets
// the backoff and waits that long; success resets the backoff.
void Controller::process(const std::string& key) {
  const auto start = Clock::now();
  ReconcileResult result;
  try {
    result = reconcile(key);
  } catch (const std::exception& e) {
    result = {Outcome::kError, {}, e.what()};
  }
  duration_.observe(std::chrono::duration<double>(Clock::now() - start).count());
  switch (result.outcome) {
    case Outcome::kError:
      reconcile_error_.inc();
      spdlog::warn(
          "reconcile {} failed (retry in {} ms): {}", key,
          std::chrono::duration_cast<std::chrono::milliseconds>(queue_.next_backoff(key)).count(),
          result.error);
      queue_.add_rate_limited(key);
      break;
    case Outcome::kRequeueAfter:
      reconcile_requeue_.inc();
      queue_.forget(key);
      queue_.add_after(key, result.requeue_after);
      break;
    case Outcome::kDone:
      reconcile_ok_.inc();
      queue_.forget(key);
      break;
  }
}

// Everything one OutboxRelay needs, from the top: read it, check its inputs, apply what it
// owns, report. Any step may end the pass early; an exception is an error to retry.
ReconcileResult Controller::reconcile(const std::string& key) {
  std::optional<Json> relay;
  for (auto& informer : relay_informers_) {
    if ((relay = informer->get(key))) {
      break;
    }
  }
  if (!relay || relay->at("metadata").contains("deletionTimestamp")) {
    return {};  // gone or going: the garbage collector removes what it owned
  }

  RenderOptions render = options_.render;
  if (std::optional<Problem> problem = check_secrets(*relay, render)) {
    update_status(*relay, problem);
    return {Outcome::kRequeueAfter, options_.secret_retry, {}};
  }

  RenderedRelay rendered;
  try {
    rendered = render_relay(*relay, render);
  } catch (const std::invalid_argument& e) {
    update_status(*relay, Problem{"InvalidSpec", e.what()});
    return {};
  }
  // Every object is tried even after one is refused: they do not depend on each other at
  // admission, and a half-applied resource is easier to read when the status names exactly
  // what is missing. A refusal (the apiserver answered) is the user's to see: Degraded with the
  // apiserver's words, then a retry with backoff, as the cause may lie outside the spec (an
  // admission policy, a quota). No answer at all (TransportError) stays a plain error.
  std::vector<std::string> refusals;
  for (const OwnedObject& object : rendered.objects) {
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
    update_status(*relay, Problem{"ApplyFailed", message});
    return {Outcome::kError, {}, message};
  }
  if (!rendered.wants_pdb) {
    delete_pdb(ns_of(*relay), rendered.pdb_name);
  }

  // Pods that cannot start (a missing Secret key, an image that cannot be pulled, a crash
  // loop) change nothing the informers see once the Deployment reports them unready: look
  // again after a while, until they are ready.
  if (update_status(*relay, std::nullopt)) {
    return {Outcome::kRequeueAfter, options_.not_ready_recheck, {}};
  }
  return {};
}

std::optional<Problem> Controller::check_secrets(const Json& relay, RenderOptions& render) {
  const std::string ns = ns_of(relay);
  // By name and metadata only: the operator never lists, watches or reads the values of a
  // Secret. Whether a key exists is the kubelet's to say (CreateContainerConfigError, which
  // the Ready condition then quotes).
  auto version_of = [&](const std::string& name) -> std::optional<std::string> {
    const std::string key = ns + "/" + name;
    const auto now = Clock::now();
    {
      std::lock_guard lock(applied_mu_);
      auto it = secret_versions_.find(key);
      if (it != secret_versions_.end() && now - it->second.second < kSecretVersionFresh) {
        return it->second.first;
      }
    }
    try {
      Json meta = client_.get_metadata(kSecrets, ns, name);
      std::string version =
          name + "=" + meta.value("/metadata/resourceVersion"_json_pointer, std::string()) + "\n";
      std::lock_guard lock(applied_mu_);
      secret_versions_[key] = {version, now};
      return version;
    } catch (const kube::ApiError& e) {
      if (e.is_not_found()) {
        std::lock_guard lock(applied_mu_);
        secret_versions_.erase(key);
        return std::nullopt;
      }
      throw;
    }
  };
  auto not_found = [&](const std::string& name, const std::string& field, const std::string& how) {
    return Problem{"SecretNotFound", "Secret \"" + name + "\" named by " + field +
                                         " does not exist in namespace " + ns + ". " + how};
  };
  const std::string dsn_name = relay.at("/spec/database/dsnSecretRef/name"_json_pointer);
  const std::string dsn_key = relay.at("/spec/database/dsnSecretRef/key"_json_pointer);
  std::optional<std::string> dsn = version_of(dsn_name);
  if (!dsn) {
    return not_found(dsn_name, "spec.database.dsnSecretRef",
                     "Create it with the connection string under key \"" + dsn_key +
                         "\", e.g. kubectl -n " + ns + " create secret generic " + dsn_name +
                         " --from-literal=" + dsn_key + "='postgresql://...'");
  }
  render.secret_versions = *dsn;
  const std::string kafka_name =
      value_at<std::string>(relay, "/spec/kafka/configSecretRef/name", "");
  if (!kafka_name.empty()) {
    std::optional<std::string> kafka = version_of(kafka_name);
    if (!kafka) {
      return not_found(kafka_name, "spec.kafka.configSecretRef",
                       "Create it with one key per librdkafka property (e.g. "
                       "security.protocol, sasl.username), or remove configSecretRef.");
    }
    render.secret_versions += *kafka;
  }
  return std::nullopt;
}

kube::Informer* Controller::informer_for(const kube::Resource& resource, const std::string& ns) {
  auto it = owned_informers_.find({resource.plural, options_.namespaces.empty() ? "" : ns});
  return it == owned_informers_.end() ? nullptr : it->second.get();
}

// Skips the request when this process already applied exactly this object and the live one
// has not changed since (same resourceVersion), or when the cached live object was applied
// from this same desired form (its applied-hash annotation) and still has every desired field
// and value. Anything else, including deletion or an edit by someone else, is applied again.
void Controller::apply_owned(const OwnedObject& owned) {
  const std::string ns = ns_of(owned.object);
  const std::string name = name_of(owned.object);
  const std::string id = owned.resource->plural + "/" + ns + "/" + name;
  const std::string hash = stable_hash(owned.object.dump());
  Json desired = owned.object;
  desired["metadata"]["annotations"][kAppliedHashAnnotation] = hash;
  kube::Informer* informer = informer_for(*owned.resource, ns);
  std::optional<Json> live = informer ? informer->get(ns + "/" + name) : std::nullopt;
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

void Controller::delete_pdb(const std::string& ns, const std::string& name) {
  kube::Informer* informer = informer_for(owned::pod_disruption_budgets, ns);
  if (informer == nullptr || !informer->get(ns + "/" + name)) {
    return;
  }
  try {
    client_.remove(owned::pod_disruption_budgets, ns, name);
    spdlog::info("deleted PodDisruptionBudget {}/{}: one relay replica or fewer", ns, name);
  } catch (const kube::ApiError& e) {
    if (!e.is_not_found()) {
      throw;
    }
  }
}

bool Controller::update_status(const Json& relay, const std::optional<Problem>& problem) {
  const std::string ns = ns_of(relay);
  const std::string name = name_of(relay);
  std::optional<Json> deployment;
  if (kube::Informer* d = informer_for(owned::deployments, ns)) {
    deployment = d->get(ns + "/" + RelayNames(name).deployment);
  }
  std::string detail;
  auto compute = [&](const Json& observed) {
    return compute_status({observed, deployment ? &*deployment : nullptr, problem,
                           std::chrono::system_clock::now(), detail});
  };
  Json desired = compute(relay);
  // Only for a resource whose Deployment has pods that are not all ready, and one list per
  // look: no pod informer, whose cache would hold every relay pod of the cluster. Served from
  // the apiserver's watch cache (resourceVersion 0), not from etcd.
  if (relays_not_ready(desired) && deployment &&
      deployment->value("/status/replicas"_json_pointer, 0) > 0) {
    kube::ListOptions by_relay;
    by_relay.label_selector = relay_selector(name);
    by_relay.resource_version = "0";
    detail =
        not_ready_detail(client_.list(kPods, ns, by_relay), relay.value("status", Json::object()),
                         std::chrono::system_clock::now());
    desired = compute(relay);
  }
  const bool not_ready = relays_not_ready(desired);
  clear_relay_problem(relay, not_ready);
  if (status_matches(desired, relay.value("status", Json::object()))) {
    return not_ready;
  }
  // About to write. Transitions must be judged against what the apiserver has: a cache that
  // has not seen this process's previous status write yet would move lastTransitionTime and
  // repeat Events, so then the live status is read first. The cache is known to be current
  // when it shows the resourceVersion our last write returned, or when this process never
  // wrote this status (its informer has watched it since before it led).
  const std::string key = ns + "/" + name;
  const std::string cached_version = relay.at("metadata").value("resourceVersion", "");
  bool cache_current;
  {
    std::lock_guard lock(applied_mu_);
    auto it = status_written_.find(key);
    cache_current = it == status_written_.end() || it->second == cached_version;
  }
  Json observed = relay;
  if (!cache_current) {
    observed["status"] = client_.get(kOutboxRelays, ns, name).value("status", Json::object());
    desired = compute(observed);
  }
  const Json before = observed.value("status", Json::object());
  if (status_matches(desired, before)) {
    return not_ready;
  }
  Json written = client_.apply_status(kOutboxRelays, ns,
                                      {{"apiVersion", "outbox.dev/v1alpha1"},
                                       {"kind", "OutboxRelay"},
                                       {"metadata", {{"name", name}, {"namespace", ns}}},
                                       {"status", desired}},
                                      kFieldManager, true);
  status_writes_.inc();
  {
    std::lock_guard lock(applied_mu_);
    status_written_[key] = written.at("metadata").value("resourceVersion", "");
  }

  for (const char* type : {"Degraded", "Stalled", "JobFailed"}) {
    Json now = find_condition(desired, type);
    Json was = find_condition(before, type);
    // An Event when the condition turns on, or stays on for a different reason (a missing
    // Secret fixed, then an object refused): each is a new thing for a person to act on.
    bool news = now.value("status", "") == "True" &&
                (!was.is_object() || was.value("status", "") != "True" ||
                 was.value("reason", "") != now.value("reason", ""));
    if (news) {
      record_event(relay, now.at("reason"), now.at("message"));
    }
  }
  return not_ready;
}

// The relay pod that wrote status.relayProblem clears it once ready, but a pod replaced while
// not ready (the usual way its problem gets fixed: a new Secret, a new spec) never comes back
// to. So the operator removes it once every relay pod is ready, or once no pod has repeated it
// for kRelayProblemFresh. A merge patch, as it is another manager's field.
void Controller::clear_relay_problem(const Json& relay, bool not_ready) {
  const Json status = relay.value("status", Json::object());
  if (!status.contains("relayProblem")) {
    return;
  }
  if (not_ready &&
      relay_problem_fresh(status.at("relayProblem"), std::chrono::system_clock::now())) {
    return;
  }
  client_.merge_patch(kOutboxRelays, ns_of(relay), name_of(relay),
                      {{"status", {{"relayProblem", nullptr}}}}, "status");
  status_writes_.inc();
}

// Best effort: an Event that cannot be written is logged, never retried.
void Controller::record_event(const Json& relay, const std::string& reason,
                              const std::string& message) {
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
                    {"type", "Warning"},
                    {"reason", reason},
                    {"message", message},
                    {"source", {{"component", "outbox-operator"}}},
                    {"reportingComponent", "outbox-operator"},
                    {"reportingInstance", options_.identity},
                    {"firstTimestamp", now},
                    {"lastTimestamp", now},
                    {"count", 1}});
    events_.inc();
  } catch (const std::exception& e) {
    spdlog::warn("could not record Event {} for {}/{}: {}", reason, ns_of(relay), name_of(relay),
                 e.what());
  }
}

}  // namespace outbox::controller
