#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "kube/caches.hpp"
#include "kube/client.hpp"
#include "kube/lease_elector.hpp"
#include "kube/reconciler.hpp"
#include "kube/work_queue.hpp"
#include "metrics/registry.hpp"

// A controller without a kind of its own (controller-runtime's Controller and Manager in one):
// the informer caches of what the Watches name, a work queue of primary keys with per-key
// backoff, N workers calling a Reconciler, and optional Lease leader election.
//
// Guarantees:
//  - Only the leader writes. Standbys run the informers (warm caches, synced() passes) but start
//    no worker until they lead; a leader that loses its Lease stops its workers before run()
//    returns false (the process then exits, as controller-runtime does). Every write through
//    the client is checked against the elector's holds_lease() just before it is sent (after
//    rate limiting and retry waits), so a leader paused past its renew deadline, or that saw
//    another holder, sends nothing more even before its workers have stopped. The Lease
//    itself is kept through a client of its own, never queued behind reconcile traffic.
//  - A change to a primary object queues its key; a change to (or the deletion of) an owned
//    object queues the keys Reconciler::owners_of names. A key is never reconciled by two
//    workers at once, and no worker starts before every cache has synced.
//  - Every primary object is queued again each resync_period, whether or not anything changed.
//  - The result switch: success and TerminalError reset the key's backoff and wait for the next
//    change; kRequeueAfter resets it and queues the key again after the delay, then ahead of
//    keys queued by events, resyncs and retries (WorkQueue::add_after: a requested delay ends
//    at a moment no event marks, which a busy queue must not postpone); any other exception
//    queues it again with per-key backoff (WorkQueue::add_rate_limited).
//  - Stopping the workers (shutdown, leadership lost) requests their stop tokens, which
//    cancels a reconcile in flight before its next write (throw_if_stopped), and joins them.
namespace outbox::kube {

struct EngineOptions {
  Watches watches;
  int workers = 2;
  std::string identity;                               // the Lease holder
  std::optional<LeaseElectorConfig> leader_election;  // lease fields only
  std::chrono::milliseconds resync_period{600'000};   // zero: never
};

// The engine's metrics, registered (and so named) by whoever runs it.
struct EngineMetrics {
  metrics::Counter& reconcile_ok;
  metrics::Counter& reconcile_requeue;
  metrics::Counter& reconcile_error;
  metrics::Histogram& duration;
  metrics::Gauge& queue_depth;
  metrics::Gauge& leader;     // 1 while leading
  metrics::Gauge& primaries;  // primary objects in the caches
  // The gauge of the bytes the caches of one kind hold (Caches::cached_bytes), by its plural.
  std::function<metrics::Gauge&(const std::string& kind)> cached_bytes;
};

class ControllerEngine {
 public:
  ControllerEngine(Client& client, EngineOptions options, EngineMetrics metrics);
  ~ControllerEngine();

  // Runs the caches, and the workers calling `reconciler` while this process leads, until
  // `stop`; returns false if leadership was lost (the caller should exit non-zero).
  bool run(Reconciler& reconciler, std::stop_token stop);

  const Caches& caches() const { return caches_; }
  bool synced() const { return caches_.synced(); }
  std::string not_ready_reason() const { return caches_.not_ready_reason(); }
  bool leading() const { return leading_.load(); }
  // Queues a key as a watch event would.
  void enqueue(const std::string& key) { queue_.add(key); }

 private:
  InformerHandlers owned_handlers(const Resource& kind);
  void owned_changed(const Resource& kind, const Json& object, OwnedChange change);
  void enqueue_owners(const Json& owned);
  void enqueue_all();
  bool lead_until_stopped(std::stop_token stop);
  void start_workers();
  void stop_workers();
  void worker(std::stop_token stop);
  void process(const std::string& key, std::stop_token stop);

  Client& client_;
  EngineOptions options_;
  EngineMetrics metrics_;
  WorkQueue queue_;
  Caches caches_;
  Reconciler* reconciler_ = nullptr;  // set by run() before any thread that calls it starts

  std::mutex workers_mu_;
  std::vector<std::jthread> workers_;
  std::atomic<bool> leading_{false};
  std::atomic<const LeaseElector*> elector_{nullptr};  // set while run() elects
};

}  // namespace outbox::kube
