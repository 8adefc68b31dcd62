#include "controller/controller.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/stop.hpp"
#include "kube/errors.hpp"

// The engine: informers, the work queue, the workers, leader election and the result switch.
// Nothing here knows what an OutboxRelay owns beyond the list of kinds to watch.
namespace outbox::controller {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<const kube::Resource*>& owned_kinds() {
  static const std::vector<const kube::Resource*> kinds = {&owned::service_accounts,
                                                           &owned::roles,
                                                           &owned::role_bindings,
                                                           &owned::config_maps,
                                                           &owned::deployments,
                                                           &owned::cron_jobs,
                                                           &owned::jobs,
                                                           &owned::services,
                                                           &owned::pod_disruption_budgets,
                                                           &owned::network_policies};
  return kinds;
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
    add_informers(ns);
  }
}

void Controller::add_informers(const std::string& ns) {
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
    // Deployments also keep the rollout summary the rollout budget counts (hold_rollout).
    const bool deployments = kind == &owned::deployments;
    owned_informers_[{kind->plural, ns}] = std::make_unique<kube::Informer>(
        client_, *kind, ns,
        // On update, the old owner too: an edit that removed the ownerReference is drift
        // of the resource that owned it.
        kube::InformerHandlers{[this, deployments](const Json& o) {
                                 if (deployments) {
                                   observe_deployment(o, false);
                                 }
                                 enqueue_owner(o);
                               },
                               [this, deployments](const Json& old_o, const Json& o) {
                                 if (deployments) {
                                   observe_deployment(o, false);
                                 }
                                 enqueue_owner(old_o);
                                 enqueue_owner(o);
                               },
                               [this, deployments](const Json& o) {
                                 if (deployments) {
                                   observe_deployment(o, true);
                                 }
                                 enqueue_owner(o);
                               }},
        owned_options);
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

std::string Controller::not_ready_reason() const {
  if (synced()) {
    return {};
  }
  for (const auto& i : relay_informers_) {
    if (std::string problem = i->problem(); !problem.empty()) {
      if (i->not_served()) {
        problem +=
            "; install it with the chart (helm install) or: kubectl apply --server-side "
            "-f charts/outbox-operator/crds/";
      }
      return problem;
    }
  }
  for (const auto& [k, i] : owned_informers_) {
    if (std::string problem = i->problem(); !problem.empty()) {
      return problem;
    }
  }
  return "informer caches not synced yet";
}

std::optional<Json> Controller::cached_relay(const std::string& key) const {
  for (const auto& informer : relay_informers_) {
    if (std::optional<Json> relay = informer->get(key)) {
      return relay;
    }
  }
  return std::nullopt;
}

kube::Informer* Controller::informer_for(const kube::Resource& resource, const std::string& ns) {
  auto it = owned_informers_.find({resource.plural, options_.namespaces.empty() ? "" : ns});
  return it == owned_informers_.end() ? nullptr : it->second.get();
}

// The Drop Job has no ownerReference (drop_job says why): its labels name the resource.
void Controller::enqueue_owner(const Json& owned_object) {
  const std::string ns = owned_object.at("metadata").value("namespace", "");
  const Json refs = owned_object.at("metadata").value("ownerReferences", Json::array());
  for (const Json& ref : refs) {
    if (ref.value("kind", "") == "OutboxRelay" && ref.value("controller", false)) {
      queue_.add(ns + "/" + ref.value("name", ""));
    }
  }
  const Json labels = owned_object.at("metadata").value("labels", Json::object());
  if (refs.empty() && labels.value("app.kubernetes.io/component", "") == "drop") {
    queue_.add(ns + "/" + labels.value("app.kubernetes.io/instance", ""));
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

  const bool kept_leadership = lead_until_stopped(stop);
  for (auto& t : informer_threads_) {
    t.request_stop();
  }
  informer_threads_.clear();
  return kept_leadership;
}

// Runs the workers while this process leads (always, without leader election) until `stop`;
// false if leadership was lost.
bool Controller::lead_until_stopped(std::stop_token stop) {
  if (!options_.leader_election) {
    start_workers();
    sleep_unless_stopped(stop, std::chrono::hours(24 * 365 * 100));
    stop_workers();
    return true;
  }
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
  const bool kept_leadership = elector.run(stop);
  elector_ = nullptr;  // the workers were stopped in on_stopped_leading
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
      process(*key, stop);
      queue_.done(*key);
    }
  }
}

// controller-runtime's result handling: an error backs off per key; a terminal error (an
// invalid spec) and success reset the backoff and wait for the next change; a requested delay
// resets the backoff and waits that long. `stop` (the worker's) cancels the pass in flight.
void Controller::process(const std::string& key, std::stop_token stop) {
  const auto start = Clock::now();
  auto observe = [&] {
    duration_.observe(std::chrono::duration<double>(Clock::now() - start).count());
  };
  try {
    const ReconcileResult result = reconcile(key, stop);
    observe();
    queue_.forget(key);
    if (result.outcome == Outcome::kRequeueAfter) {
      reconcile_requeue_.inc();
      queue_.add_after(key, result.requeue_after);
    } else {
      reconcile_ok_.inc();
    }
  } catch (const ReconcileCancelled&) {
    // Only stop_workers() requests it; whoever runs the workers next queues every key again.
    observe();
    spdlog::info("reconcile {} cancelled: the workers are stopping", key);
  } catch (const TerminalError& e) {
    observe();
    reconcile_error_.inc();
    queue_.forget(key);
    spdlog::warn("reconcile {} failed, not retried until the object changes: {}", key, e.what());
  } catch (const std::exception& e) {
    observe();
    reconcile_error_.inc();
    spdlog::warn(
        "reconcile {} failed (retry in {} ms): {}", key,
        std::chrono::duration_cast<std::chrono::milliseconds>(queue_.next_backoff(key)).count(),
        e.what());
    queue_.add_rate_limited(key);
  }
}

}  // namespace outbox::controller
