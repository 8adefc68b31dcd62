#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "relay/batch_publisher.hpp"

namespace outbox::relay {

// Settled batches whose outcome is not written back yet, and the one write-back
// running for them on a thread of its own, so that sending the next batch does not
// wait for a commit (a WAL flush, whose tail on a busy database is the relay's).
// Settlements that arrive while a write-back runs are merged and written together
// when it ends: one statement per write-back, however many batches it covers. With
// none running, a settlement waits up to `linger` for others to join it (unless the
// caller waits for it): under load that halves the write-backs or better.
//
// What the relay must keep while a settlement is behind: its ids out of every claim
// (ids()), and its undelivered keys held in every batch claimed before it is written
// (held_keys()), since such a claim cannot see its failures or parked events yet.
//
// Not thread-safe: one caller thread (the relay's) calls every member; only `write`
// runs on the other thread.
class WriteBehind {
 public:
  using Clock = std::chrono::steady_clock;
  using Write = std::function<BatchOutcome(const Settlement&)>;
  using Written = std::function<void(const BatchOutcome&)>;

  // `write` writes a (merged) settlement back and returns its outcome; it runs on the
  // write-back's thread and may throw. `written` gets each outcome on the caller's
  // thread, from whichever member found the write-back done.
  WriteBehind(Write write, Written written,
              std::chrono::milliseconds linger = std::chrono::milliseconds(0));
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;
  // Waits for a running write-back (its outcome and any error are dropped) and ends
  // the write-back's thread.
  ~WriteBehind();

  // Queues `s`, and starts writing it when no write-back runs and there is no linger.
  void add(Settlement s);
  // Collects a write-back that has ended (rethrowing what `write` threw) and starts
  // the next one for everything queued meanwhile, or for a queue older than the
  // linger. Never waits.
  void poll();
  // Waits for the running write-back if it started more than `limit` ago: a send after
  // this follows, within `limit`, the start of a write that has either ended or is
  // still young. Rethrows what `write` threw.
  void wait_unless_younger_than(std::chrono::milliseconds limit);
  // Waits until everything added is written back. Rethrows what `write` threw.
  void finish();
  // Starts what is queued, then waits at most `limit` for the running write-back;
  // returns empty(). Rethrows what `write` threw.
  bool wait_for(std::chrono::milliseconds limit);

  bool empty() const { return !running_ && !queued_; }
  bool running() const { return running_ != nullptr; }
  // Settlements added so far, and how many of the first of them are written back.
  std::uint64_t added() const { return added_; }
  std::uint64_t written_through() const { return written_through_; }
  // How long the queue may still linger before poll() starts it (zero when none).
  std::chrono::milliseconds linger_left() const;
  // Every id of the settlements not yet written back (running or queued).
  std::vector<std::int64_t> ids() const;
  // The undelivered keys of the settlements not yet written back.
  std::set<std::string> held_keys() const;

 private:
  void start();    // writes the queued settlement, if any, on the write-back's thread
  void collect();  // waits for the running write-back, reports its outcome
  // Collects the running write-back if it ends within `limit`, then starts the next.
  void collect_within(std::chrono::milliseconds limit);
  std::vector<const Settlement*> not_written() const;  // running, then queued

  void work();  // the write-back's thread: runs each job handed over by start()

  Write write_;
  Written written_;
  std::chrono::milliseconds linger_;
  Clock::time_point queued_since_;  // when the queue's first settlement came
  std::uint64_t added_ = 0;
  std::uint64_t running_through_ = 0;  // added_ when the running write-back started
  std::uint64_t written_through_ = 0;
  std::unique_ptr<Settlement> running_;  // what the running write-back writes
  std::future<BatchOutcome> done_;
  Clock::time_point started_;
  std::optional<Settlement> queued_;  // every settlement added while one ran, merged
  // The hand-over to one long-lived thread (started with the first write-back), rather
  // than a thread per write-back: several hundred a second under load.
  std::mutex mu_;
  std::condition_variable wake_;
  std::packaged_task<BatchOutcome()> job_;  // guarded by mu_
  bool quit_ = false;                       // guarded by mu_
  std::thread worker_;
};

}  // namespace outbox::relay
