#include "kube/work_queue.hpp"

#include <algorithm>

#include "common/backoff.hpp"

namespace outbox::kube {

WorkQueue::WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay)
    : base_delay_(base_delay), max_delay_(max_delay) {}

void WorkQueue::add_locked(const std::string& key, bool due) {
  if (shutdown_) {
    return;
  }
  const bool queued = processing_.count(key) == 0;
  if (!dirty_.insert(key).second) {
    if (due && dirty_due_.insert(key).second && queued) {
      // Waiting in the other lane: it moves ahead.
      queue_.erase(std::find(queue_.begin(), queue_.end(), key));
      due_.push_back(key);
    }
    return;
  }
  if (due) {
    dirty_due_.insert(key);
  }
  if (queued) {
    (due ? due_ : queue_).push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mutex_);
  add_locked(key, false);
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mutex_);
  delay_locked(key, delay, true);
}

void WorkQueue::delay_locked(const std::string& key, Clock::duration delay, bool due) {
  if (shutdown_) {
    return;
  }
  if (delay <= Clock::duration::zero()) {
    add_locked(key, due);
    return;
  }
  auto ready = Clock::now() + delay;
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    it->second.due = it->second.due || due;
    if (it->second.ready <= ready) {
      return;  // an earlier wake-up is already scheduled
    }
    waiting_order_.erase({it->second.ready, key});
    it->second.ready = ready;
  } else {
    waiting_.emplace(key, Wait{ready, due});
  }
  waiting_order_.emplace(ready, key);
  // A worker sleeping until a later deadline must recompute its wait.
  cv_.notify_all();
}

WorkQueue::Clock::duration WorkQueue::backoff_for(int failures) const {
  // client-go's per-item exponential limiter: no jitter, as one key's retries do not contend.
  return exponential_delay(base_delay_, max_delay_, failures);
}

WorkQueue::Clock::duration WorkQueue::next_backoff(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = failures_.find(key);
  return backoff_for(it == failures_.end() ? 0 : it->second);
}

void WorkQueue::add_rate_limited(const std::string& key) {
  std::lock_guard lock(mutex_);
  delay_locked(key, backoff_for(failures_[key]++), false);
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int WorkQueue::num_requeues(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::promote_due_locked(Clock::time_point now) {
  while (!waiting_order_.empty() && waiting_order_.begin()->first <= now) {
    std::string key = waiting_order_.begin()->second;
    waiting_order_.erase(waiting_order_.begin());
    auto it = waiting_.find(key);
    const bool due = it->second.due;
    waiting_.erase(it);
    add_locked(key, due);
  }
}

std::optional<std::string> WorkQueue::get_until(std::optional<Clock::time_point> give_up) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (shutdown_) {
      return std::nullopt;
    }
    auto now = Clock::now();
    promote_due_locked(now);
    if (std::deque<std::string>& lane = due_.empty() ? queue_ : due_; !lane.empty()) {
      std::string key = std::move(lane.front());
      lane.pop_front();
      processing_.insert(key);
      dirty_.erase(key);
      dirty_due_.erase(key);
      return key;
    }
    if (give_up && now >= *give_up) {
      return std::nullopt;
    }
    std::optional<Clock::time_point> wake = give_up;
    if (!waiting_order_.empty() && (!wake || waiting_order_.begin()->first < *wake)) {
      wake = waiting_order_.begin()->first;
    }
    if (wake) {
      cv_.wait_until(lock, *wake);
    } else {
      cv_.wait(lock);
    }
  }
}

std::optional<std::string> WorkQueue::get() {
  return get_until(std::nullopt);
}

std::optional<std::string> WorkQueue::get_for(Clock::duration timeout) {
  return get_until(Clock::now() + timeout);
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.count(key) > 0 && !shutdown_) {
    (dirty_due_.count(key) > 0 ? due_ : queue_).push_back(key);
    cv_.notify_one();
  }
}

size_t WorkQueue::size() const {
  std::lock_guard lock(mutex_);
  return due_.size() + queue_.size();
}

void WorkQueue::shutdown() {
  std::lock_guard lock(mutex_);
  shutdown_ = true;
  cv_.notify_all();
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(mutex_);
  return shutdown_;
}

}  // namespace outbox::kube
