#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <stop_token>
#include <string>

#include "kube/client.hpp"

// Leader election on a coordination.k8s.io/v1 Lease, following client-go's algorithm
// (tools/leaderelection/leaderelection.go).
//
// Clock model: a candidate never compares timestamps from the Lease with its own wall clock.
// It notes, on its local monotonic clock, when it last saw the Lease record change, and
// considers the holder's claim valid for leaseDurationSeconds from that moment. This tolerates
// arbitrary clock skew between machines, but not clocks running at different rates: the
// margin between lease_duration and renew_deadline is what absorbs rate differences.
//
// Guarantees (given the assumption above):
//  - Mutual exclusion: holds_lease() turns false once renew_deadline has passed since the
//    start of the last successful renew attempt, or the moment a read shows another holder,
//    whichever comes first, and stays false; the same condition makes run() call
//    on_stopped_leading and return. A standby only takes over lease_duration after it saw the
//    record change, which is after that attempt started, and renew_deadline < lease_duration
//    is enforced, so a guarded write checked with holds_lease() just before it is sent cannot
//    overlap another leader's term, even when this process was paused (SIGSTOP, a long GC-like
//    stall) for longer than the lease: the monotonic clock keeps running through the pause.
//  - Writes are optimistic: every update is a PUT carrying the resourceVersion last read, so
//    of two racing candidates exactly one wins; a 409 just loses that round.
//  - Takeover after the leader dies: within lease_duration + retry_period (plus request
//    latency) of the kill. One deliberate refinement of client-go: while the Lease is validly
//    held by another, a standby polls every retry_period without jitter (GETs do not contend)
//    and wakes exactly when the claim expires, so its observation lags the last renewal by at
//    most retry_period. Jitter (retry_period * [1, 2.2], as client-go) is kept for retries after
//    conflicts and errors, where candidates do contend. Clean shutdown with release_on_cancel
//    clears the holder, so a standby takes over at its next poll (within retry_period).
// Caveats: holds_lease() is a check, not a fence: a write already on the wire when it turns
// false still lands. After losing leadership the process should exit (as controller-runtime
// does) rather than try to lead again with stale in-memory state.
// Callbacks run on the thread calling run(), between Lease calls, so while one runs nothing is
// renewed. on_stopped_leading may (and should) block until all work guarded by the lease has
// stopped: it runs after renewing has ended, and the lease is released only once it returns.
// on_started_leading and on_new_leader must return quickly: their time counts against
// renew_deadline (an on_started_leading that outlasts it ends the term as a failed renew would).
namespace outbox::kube {

// What one call on the Lease gave: the object the server returned, or why there is none.
struct LeaseReply {
  std::optional<Json> lease;
  bool not_found = false;  // no Lease by that name (yet)
  bool conflict = false;   // someone else wrote first (409 Conflict or AlreadyExists)
};

// The three calls client-go's resource lock makes on one coordination.k8s.io/v1 Lease, each
// within `timeout`. They never throw: a failure is logged here (a 404 or 409, a normal round
// of an election, only at debug level) and returned as a LeaseReply.
class LeaseLock {
 public:
  LeaseLock(Client& client, std::string lease_namespace, std::string lease_name);

  LeaseReply get(std::chrono::milliseconds timeout);
  LeaseReply create(const Json& spec, std::chrono::milliseconds timeout);
  // A PUT of `lease`, conditional on the resourceVersion it carries: of two candidates that
  // read the same version, exactly one wins.
  LeaseReply update(const Json& lease, std::chrono::milliseconds timeout);

 private:
  template <typename Call>
  LeaseReply call(const char* step, Call&& attempt);

  Client& client_;
  std::string namespace_;
  std::string name_;
};

struct LeaseElectorConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per process, e.g. pod name or hostname_uuid
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  bool release_on_cancel = true;

  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // any holder change seen
};

class LeaseElector {
 public:
  // Throws std::invalid_argument for a config client-go would reject.
  LeaseElector(Client& client, LeaseElectorConfig config);

  // Acquires, then renews until the renew deadline passes or `stop` is requested. Returns true
  // after a clean stop, false when leadership was lost.
  bool run(std::stop_token stop);

  // Whether a write guarded by this lease may be sent now; safe from any thread. See the
  // mutual-exclusion guarantee above.
  bool holds_lease() const;

  // One acquire-or-renew attempt; public for tests. True when we hold the lease after it.
  bool try_acquire_or_renew();

 private:
  bool acquire(std::stop_token stop);
  bool renew(std::stop_token stop);
  bool renew_before_deadline(std::stop_token stop);
  bool record_says_me() const;
  std::chrono::steady_clock::time_point claim_expiry() const;
  Json claim(const Json& previous, const std::string& now_text) const;
  bool adopt(const LeaseReply& reply, std::chrono::steady_clock::time_point now);
  void observe(const Json& lease, std::chrono::steady_clock::time_point now);
  std::chrono::milliseconds time_left() const;
  std::chrono::steady_clock::time_point renew_deadline_at() const;
  void release();
  std::chrono::milliseconds request_timeout() const;

  LeaseElectorConfig config_;
  LeaseLock lock_;
  std::atomic<bool> leading_{false};
  // steady_clock ticks at the start of the last successful acquire or renew attempt.
  std::atomic<std::chrono::steady_clock::rep> renewed_at_{0};
  std::mt19937_64 rng_{std::random_device{}()};

  Json observed_lease_;        // last Lease object read or written (carries resourceVersion)
  std::string observed_spec_;  // its spec, serialized: any byte change counts as a renewal
  std::chrono::steady_clock::time_point observed_time_{};
  std::string reported_leader_;
  std::chrono::steady_clock::time_point attempt_deadline_{};
  // Set by a failed attempt that found the lease validly held by another: when it expires.
  std::optional<std::chrono::steady_clock::time_point> held_until_;
};

}  // namespace outbox::kube
