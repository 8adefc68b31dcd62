#pragma once

#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "kube/client.hpp"

// What a ControllerEngine (controller_engine.hpp) asks of the code that knows one kind: a
// reconcile function for one key, and which keys a change to an owned object concerns. The
// result types are controller-runtime's: a pass that did not throw says whether to look again
// after a while; failures are thrown.
namespace outbox::kube {

// What a reconcile that did not throw asks of the queue.
enum class Outcome { kDone, kRequeueAfter };

struct ReconcileResult {
  Outcome outcome = Outcome::kDone;
  std::chrono::milliseconds requeue_after{0};
};

// Thrown by reconcile() for what no retry can fix (an invalid spec): the key is not requeued, and
// the next change to the object (a watch event) reconciles it again. As controller-runtime's
// TerminalError. Any other exception is retried with backoff.
class TerminalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by reconcile() when its stop token was requested: between two writes, never inside one.
class ReconcileCancelled : public std::runtime_error {
 public:
  ReconcileCancelled() : std::runtime_error("reconcile cancelled: the workers are stopping") {}
};

// Called by a reconciler before each write. A reconcile cancelled between two writes leaves
// what it applied so far, which the next pass (here or in the next leader) finds applied.
inline void throw_if_stopped(const std::stop_token& stop) {
  if (stop.stop_requested()) {
    throw ReconcileCancelled();
  }
}

// What happened to an owned object an informer reports.
enum class OwnedChange { kAddedOrUpdated, kDeleted };

class Reconciler {
 public:
  virtual ~Reconciler() = default;

  // One pass for one "namespace/name" key of the primary kind; called by one worker at a time
  // per key. Throws on failure (TerminalError: not retried); throws ReconcileCancelled once
  // `stop` is requested, before its next write.
  virtual ReconcileResult reconcile(const std::string& key, std::stop_token stop) = 0;

  // The primary keys a change to an owned object concerns (on an update, asked of the old and
  // the new object). Runs on an informer's thread: it must not block.
  virtual std::vector<std::string> owners_of(const Json& owned) const = 0;

  // Told of each change to an owned object before owners_of, on the informer's thread, for a
  // reconciler that keeps a summary of its own (it must not block). Default: nothing.
  virtual void observe_owned(const Resource& /*kind*/, const Json& /*object*/,
                             OwnedChange /*change*/) {}
};

}  // namespace outbox::kube
