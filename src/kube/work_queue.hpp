#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

// A rate-limited work queue of object keys ("namespace/name"), with client-go's semantics.
//
// Guarantees:
//  - Dedup: a key added many times before a worker takes it is processed once.
//  - Stingy: a key is never handed to two workers at once; a key added while it is being
//    processed is queued again when done() is called, so the change is not lost.
//  - Due first: a key whose add_after delay ran out comes out before every key made ready by
//    add or add_rate_limited, even one that was queued already (it moves ahead). The delay was
//    asked for a moment that no watch event marks (a status report turning stale), so
//    the pass then must not wait behind a backlog of events, resyncs or retries: it waits at
//    most for the passes in flight and the other keys that came due before it.
//  - Fair: within each of the two lanes, keys come out in the order they became ready.
//  - add_rate_limited delays a key by 5 ms * 2^(failures), capped (1000 s by default), and then
//    queues it behind the due keys; forget() resets its failure count once it succeeds.
//  - add_after(key, d) makes the key due after d. A key has one pending delay: of several, the
//    earliest deadline wins, and it comes out due first if any of them was an add_after.
// Caveat: after shutdown(), get() returns nullopt; keys still queued are dropped.
namespace outbox::kube {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkQueue(std::chrono::milliseconds base_delay = std::chrono::milliseconds(5),
                     std::chrono::milliseconds max_delay = std::chrono::seconds(1000));

  void add(const std::string& key);
  void add_after(const std::string& key, Clock::duration delay);
  void add_rate_limited(const std::string& key);
  // Blocks until a key is ready (nullopt after shutdown). The caller must call done(key).
  std::optional<std::string> get();
  // Like get() but gives up after `timeout` (nullopt), so a worker can check other state.
  std::optional<std::string> get_for(Clock::duration timeout);
  void done(const std::string& key);
  void forget(const std::string& key);
  int num_requeues(const std::string& key) const;
  // The delay add_rate_limited would use next for this key (without recording a failure).
  Clock::duration next_backoff(const std::string& key) const;

  size_t size() const;  // ready keys, not counting delayed or in-flight ones
  void shutdown();
  bool shutting_down() const;

 private:
  // `due`: the key's delay ran out (the lane ahead).
  void add_locked(const std::string& key, bool due);
  void delay_locked(const std::string& key, Clock::duration delay, bool due);
  void promote_due_locked(Clock::time_point now);
  std::optional<std::string> get_until(std::optional<Clock::time_point> give_up);
  Clock::duration backoff_for(int failures) const;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> due_;    // ready keys whose add_after delay ran out, handed out first
  std::deque<std::string> queue_;  // the other ready keys
  std::unordered_set<std::string> dirty_;       // needs processing (queued or to re-queue)
  std::unordered_set<std::string> dirty_due_;   // of dirty_, those that go in due_
  std::unordered_set<std::string> processing_;  // handed out, done() not yet called
  struct Wait {
    Clock::time_point ready;
    bool due;  // an add_after's: queued in due_ when ready
  };
  std::unordered_map<std::string, Wait> waiting_;  // delayed key -> its one pending delay
  std::set<std::pair<Clock::time_point, std::string>> waiting_order_;
  std::unordered_map<std::string, int> failures_;
  std::chrono::milliseconds base_delay_, max_delay_;
  bool shutdown_ = false;
};

}  // namespace outbox::kube
