#include "relay/write_behind.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace outbox::relay {
namespace {

template <typename T>
void append(std::vector<T>& into, std::vector<T>& from) {
  into.insert(into.end(), std::make_move_iterator(from.begin()),
              std::make_move_iterator(from.end()));
}

void add_counts(std::map<std::string, std::size_t>& into,
                const std::map<std::string, std::size_t>& from) {
  for (const auto& [topic, n] : from) {
    into[topic] += n;
  }
}

// One settlement that writes back what `into` and `from` would, one after the other.
// Their batches share no event with a verdict: an event leaves the claims when its
// settlement is queued and comes back only once that is written.
void merge(Settlement& into, Settlement from) {
  append(into.delivered, from.delivered);
  append(into.decisions, from.decisions);
  append(into.ids, from.ids);
  append(into.batch, from.batch);
  into.held_keys.merge(from.held_keys);
  into.event_ids.merge(from.event_ids);
  BatchOutcome& o = into.outcome;
  const BatchOutcome& f = from.outcome;
  o.delivered += f.delivered;
  o.failed += f.failed;
  o.retried += f.retried;
  o.deferred += f.deferred;
  o.order_anomalies += f.order_anomalies;
  o.kafka_unreachable = o.kafka_unreachable || f.kafka_unreachable;
  add_counts(o.delivered_by_topic, f.delivered_by_topic);
  add_counts(o.failed_by_topic, f.failed_by_topic);
  o.dead_lettered += f.dead_lettered;
  o.dead_letter_refused += f.dead_letter_refused;
}

}  // namespace

WriteBehind::WriteBehind(Write write, Written written, std::chrono::milliseconds linger)
    : write_(std::move(write)), written_(std::move(written)), linger_(linger) {}

WriteBehind::~WriteBehind() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  wake_.notify_one();
  if (worker_.joinable()) {
    worker_.join();  // after the job it was given, if any
  }
}

void WriteBehind::work() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return job_.valid() || quit_; });
    if (!job_.valid()) {
      return;
    }
    std::packaged_task<BatchOutcome()> job = std::move(job_);
    lock.unlock();
    job();  // what write_ throws goes to done_
    lock.lock();
  }
}

void WriteBehind::add(Settlement s) {
  ++added_;
  if (queued_) {
    merge(*queued_, std::move(s));
  } else {
    queued_ = std::move(s);
    queued_since_ = Clock::now();
  }
  if (!running_ && linger_.count() == 0) {
    start();
  }
}

void WriteBehind::poll() {
  collect_within(std::chrono::milliseconds(0));
  if (!running_ && queued_ && Clock::now() - queued_since_ >= linger_) {
    start();
  }
}

void WriteBehind::wait_unless_younger_than(std::chrono::milliseconds limit) {
  poll();
  if (running_ && Clock::now() - started_ >= limit) {
    collect();
    start();
  }
}

void WriteBehind::finish() {
  while (!empty()) {
    if (running_) {
      collect();
    }
    start();
  }
}

bool WriteBehind::wait_for(std::chrono::milliseconds limit) {
  if (!running_) {
    start();  // the caller waits for it: nothing to linger for
  }
  collect_within(limit);
  return empty();
}

void WriteBehind::collect_within(std::chrono::milliseconds limit) {
  if (running_ && done_.wait_for(limit) == std::future_status::ready) {
    collect();
    start();
  }
}

std::chrono::milliseconds WriteBehind::linger_left() const {
  if (!queued_) {
    return std::chrono::milliseconds(0);
  }
  const auto left = queued_since_ + linger_ - Clock::now();
  return std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(left));
}

std::vector<const Settlement*> WriteBehind::not_written() const {
  std::vector<const Settlement*> all;
  if (running_) {
    all.push_back(running_.get());
  }
  if (queued_) {
    all.push_back(&*queued_);
  }
  return all;
}

std::vector<std::int64_t> WriteBehind::ids() const {
  std::vector<std::int64_t> ids;
  for (const Settlement* s : not_written()) {
    ids.insert(ids.end(), s->ids.begin(), s->ids.end());
  }
  return ids;
}

std::set<std::string> WriteBehind::held_keys() const {
  std::set<std::string> keys;
  for (const Settlement* s : not_written()) {
    keys.insert(s->held_keys.begin(), s->held_keys.end());
  }
  return keys;
}

void WriteBehind::start() {
  if (!queued_) {
    return;
  }
  running_ = std::make_unique<Settlement>(std::move(*queued_));
  queued_.reset();
  running_through_ = added_;
  started_ = Clock::now();
  std::packaged_task<BatchOutcome()> job([this, s = running_.get()] { return write_(*s); });
  done_ = job.get_future();
  {
    std::lock_guard lock(mu_);
    job_ = std::move(job);
  }
  wake_.notify_one();
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { work(); });
  }
}

void WriteBehind::collect() {
  // get() rethrows what the write threw; the settlement is gone either way (a failed
  // write-back leaves its events pending: they are published again).
  std::unique_ptr<Settlement> written = std::move(running_);
  const BatchOutcome outcome = done_.get();
  written_through_ = running_through_;
  written_(outcome);
}

}  // namespace outbox::relay
