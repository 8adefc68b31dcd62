#include "controller/controller.hpp"

// Puts the engine and the OutboxRelay reconciler together, with the metric names the
// operator has always exported.
namespace outbox::controller {
namespace {

kube::EngineOptions engine_options(const ControllerOptions& options) {
  kube::EngineOptions engine;
  engine.watches = relay_watches(options.namespaces);
  engine.workers = options.workers;
  engine.identity = options.identity;
  engine.leader_election = options.leader_election;
  engine.resync_period = options.resync_period;
  return engine;
}

kube::EngineMetrics engine_metrics(metrics::Registry& registry) {
  // Each name literal in its call: tests/monitoring/exported_metrics.sh greps them.
  return {registry.counter("outbox_controller_reconcile_total", "Reconciles by result",
                           {{"result", "success"}}),
          registry.counter("outbox_controller_reconcile_total", "Reconciles by result",
                           {{"result", "requeue"}}),
          registry.counter("outbox_controller_reconcile_total", "Reconciles by result",
                           {{"result", "error"}}),
          registry.histogram("outbox_controller_reconcile_duration_seconds", "Time per reconcile",
                             metrics::latency_buckets()),
          registry.gauge("outbox_controller_queue_depth", "Keys ready in the work queue"),
          registry.gauge("outbox_controller_leader", "1 while this process leads"),
          registry.gauge("outbox_controller_relays", "OutboxRelays in the cache"),
          [&registry](const std::string& kind) -> metrics::Gauge& {
            return registry.gauge("outbox_controller_cache_bytes",
                                  "Bytes the informer caches hold, by kind", {{"kind", kind}});
          }};
}

}  // namespace

Controller::Controller(kube::Client& client, ControllerOptions options, metrics::Registry& registry)
    : engine_(client, engine_options(options), engine_metrics(registry)),
      reconciler_(client, std::move(options), registry, engine_.caches()) {}

}  // namespace outbox::controller
