#include "kube/work_queue.hpp"

#include <algorithm>

#include "common/backoff.hpp"

namespace outbox::kube {

WorkQueue::WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay)
    : base_delay_(base_delay), max_delay_(max_delay) {}

void WorkQueue::add_locked(const std::string& key) {
  if (shutdown_ || dirty_.count(key) > 0) {
    return;
  }
  dirty_.insert(key);
  if (processing_.count(key) == 0) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mutex_);
  add_locked(key);
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mutex_);
  if (shutdown_) {
    return;
  }
  if (delay <= Clock::duration::zero()) {
    add_locked(key);
    return;
  }
  auto ready = Clock::now() + delay;
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second <= ready) {
      return;  // an earlier wake-up is already scheduled
    }
    waiting_order_.erase({it->second, key});
    it->second = ready;
  } else {
    waiting_.emplace(key, ready);
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
  Clock::duration delay;
  {
    std::lock_guard lock(mutex_);
    delay = backoff_for(failures_[key]++);
  }
  add_after(key, delay);
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
    waiting_.erase(key);
    add_locked(key);
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
    if (!queue_.empty()) {
      std::string key = std::move(queue_.front());
      queue_.pop_front();
      processing_.insert(key);
      dirty_.erase(key);
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
    queue_.push_back(key);
    cv_.notify_one();
  }
}

size_t WorkQueue::size() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
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
