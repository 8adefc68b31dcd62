#pragma once

#include <stop_token>
#include <string>

#include "controller/relay_reconciler.hpp"
#include "kube/client.hpp"
#include "kube/controller_engine.hpp"
#include "metrics/registry.hpp"

// The OutboxRelay controller: the generic engine (kube/controller_engine.hpp: informers, work
// queue, workers, Lease election, the result switch) running the OutboxRelay reconciler
// (relay_reconciler.hpp) on the caches relay_watches() names. The guarantees are the engine's
// (only the leader writes, resync, backoff, cancellation) and the reconciler's (what a change
// requeues, what is applied, what is retried).
namespace outbox::controller {

class Controller {
 public:
  Controller(kube::Client& client, ControllerOptions options, metrics::Registry& registry);

  // Runs until `stop`; returns false if leadership was lost (the caller should exit non-zero).
  // No worker runs once it has returned.
  bool run(std::stop_token stop) { return engine_.run(reconciler_, stop); }

  bool synced() const { return engine_.synced(); }
  // Why /readyz fails: "" once every cache is synced; else the first informer's problem
  // (a missing OutboxRelay CRD says how to install it) or that the caches are syncing.
  std::string not_ready_reason() const { return engine_.not_ready_reason(); }
  bool leading() const { return engine_.leading(); }

  // One pass for one "namespace/name" key; public for tests (see RelayReconciler::reconcile).
  ReconcileResult reconcile(const std::string& key, std::stop_token stop = {}) {
    return reconciler_.reconcile(key, stop);
  }

 private:
  kube::ControllerEngine engine_;  // first: the reconciler reads its caches
  RelayReconciler reconciler_;
};

}  // namespace outbox::controller
