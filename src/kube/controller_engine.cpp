#include "kube/controller_engine.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/stop.hpp"
#include "kube/errors.hpp"

namespace outbox::kube {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ControllerEngine::ControllerEngine(Client& client, EngineOptions options, EngineMetrics metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      caches_(client, options_.watches,
              {[this](const Json& o) { queue_.add(Informer::key_of(o)); },
               [this](const Json&, const Json& o) { queue_.add(Informer::key_of(o)); },
               [this](const Json& o) { queue_.add(Informer::key_of(o)); }},
              [this](const Resource& kind) { return owned_handlers(kind); }) {
  if (options_.leader_election) {
    client_.set_write_guard([this](const std::string& method, const std::string& target) {
      const LeaseElector* elector = elector_.load();
      if (elector == nullptr || !elector->holds_lease()) {
        throw WriteRefused(method + " " + target +
                           " not sent: this process does not hold the leader Lease");
      }
    });
  }
}

ControllerEngine::~ControllerEngine() {
  stop_workers();
  queue_.shutdown();
  if (options_.leader_election) {
    client_.set_write_guard({});
  }
}

// On update, the old owners too: an edit that removed an ownerReference is drift of the
// object that owned it.
InformerHandlers ControllerEngine::owned_handlers(const Resource& kind) {
  return {[this, &kind](const Json& o) { owned_changed(kind, o, OwnedChange::kAddedOrUpdated); },
          [this, &kind](const Json& old_o, const Json& o) {
            owned_changed(kind, o, OwnedChange::kAddedOrUpdated);
            enqueue_owners(old_o);
          },
          [this, &kind](const Json& o) { owned_changed(kind, o, OwnedChange::kDeleted); }};
}

void ControllerEngine::owned_changed(const Resource& kind, const Json& object, OwnedChange change) {
  reconciler_->observe_owned(kind, object, change);
  enqueue_owners(object);
}

void ControllerEngine::enqueue_owners(const Json& owned) {
  for (const std::string& key : reconciler_->owners_of(owned)) {
    queue_.add(key);
  }
}

void ControllerEngine::enqueue_all() {
  for (const std::string& key : caches_.primary_keys()) {
    queue_.add(key);
  }
}

bool ControllerEngine::run(Reconciler& reconciler, std::stop_token stop) {
  reconciler_ = &reconciler;
  std::vector<std::jthread> informers = caches_.start();
  std::vector<std::pair<const Resource*, metrics::Gauge*>> cached_bytes;
  if (metrics_.cached_bytes) {
    for (const Resource* kind : caches_.kinds()) {
      cached_bytes.emplace_back(kind, &metrics_.cached_bytes(kind->plural));
    }
  }
  std::jthread gauges([this, cached_bytes](std::stop_token s) {
    while (sleep_unless_stopped(s, std::chrono::milliseconds(500))) {
      metrics_.queue_depth.set(static_cast<double>(queue_.size()));
      metrics_.primaries.set(static_cast<double>(caches_.primary_count()));
      for (const auto& [kind, gauge] : cached_bytes) {
        gauge->set(static_cast<double>(caches_.cached_bytes(*kind)));
      }
    }
  });
  // Keys queued while standing by are harmless: the queue dedupes, and only workers take.
  std::jthread resync([this](std::stop_token s) {
    while (options_.resync_period.count() > 0 && sleep_unless_stopped(s, options_.resync_period)) {
      enqueue_all();
    }
  });
  return lead_until_stopped(stop);  // then the threads above stop, informers last
}

// Runs the workers while this process leads (always, without leader election) until `stop`;
// false if leadership was lost.
bool ControllerEngine::lead_until_stopped(std::stop_token stop) {
  if (!options_.leader_election) {
    start_workers();
    sleep_unless_stopped(stop, std::chrono::hours(24 * 365 * 100));
    stop_workers();
    return true;
  }
  LeaseElectorConfig config = *options_.leader_election;
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
  config.on_new_leader = [](const std::string& who) {
    spdlog::info("leader is now {}", who.empty() ? "(none)" : who);
  };
  // Renewals must not wait behind reconcile traffic in the shared client's rate limiter, nor
  // pass its write guard (which asks this very elector): a client of their own. As
  // client-go, one lease call may take at most max(1 s, renew_deadline / 2).
  ClientOptions lease_options = client_.options();
  lease_options.timeout =
      std::max<std::chrono::milliseconds>(std::chrono::seconds(1), config.renew_deadline / 2);
  Client lease_client(client_.config(), lease_options);
  LeaseElector elector(lease_client, config);
  elector_ = &elector;
  const bool kept_leadership = elector.run(stop);
  elector_ = nullptr;  // the workers were stopped in on_stopped_leading
  return kept_leadership;
}

void ControllerEngine::start_workers() {
  std::lock_guard lock(workers_mu_);
  leading_ = true;
  metrics_.leader.set(1);
  enqueue_all();
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this](std::stop_token s) { worker(s); });
  }
}

void ControllerEngine::stop_workers() {
  std::lock_guard lock(workers_mu_);
  for (auto& w : workers_) {
    w.request_stop();
  }
  workers_.clear();  // joins: a reconcile in flight finishes its current request first
  leading_ = false;
  metrics_.leader.set(0);
}

void ControllerEngine::worker(std::stop_token stop) {
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

// The result switch (controller-runtime's): an error backs off per key; a terminal error and
// success reset the backoff and wait for the next change; a requested delay resets the backoff
// and waits that long. `stop` (the worker's) cancels the pass in flight.
void ControllerEngine::process(const std::string& key, std::stop_token stop) {
  const auto start = Clock::now();
  auto observe = [&] {
    metrics_.duration.observe(std::chrono::duration<double>(Clock::now() - start).count());
  };
  try {
    const ReconcileResult result = reconciler_->reconcile(key, stop);
    observe();
    queue_.forget(key);
    if (result.outcome == Outcome::kRequeueAfter) {
      metrics_.reconcile_requeue.inc();
      queue_.add_after(key, result.requeue_after);
    } else {
      metrics_.reconcile_ok.inc();
    }
  } catch (const ReconcileCancelled&) {
    // Only stop_workers() requests it; whoever runs the workers next queues every key again.
    observe();
    spdlog::info("reconcile {} cancelled: the workers are stopping", key);
  } catch (const TerminalError& e) {
    observe();
    metrics_.reconcile_error.inc();
    queue_.forget(key);
    spdlog::warn("reconcile {} failed, not retried until the object changes: {}", key, e.what());
  } catch (const std::exception& e) {
    observe();
    metrics_.reconcile_error.inc();
    spdlog::warn(
        "reconcile {} failed (retry in {} ms): {}", key,
        std::chrono::duration_cast<std::chrono::milliseconds>(queue_.next_backoff(key)).count(),
        e.what());
    queue_.add_rate_limited(key);
  }
}

}  // namespace outbox::kube
