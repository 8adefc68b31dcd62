#include "controller/rollout_budget.hpp"

namespace outbox::controller {

void RolloutBudget::observe_deployment(const std::string& key, DeploymentSeen seen) {
  const auto [generation, rolling] = seen;
  if (rolling) {
    rolling_.insert(key);
  } else {
    rolling_.erase(key);
  }
  // The generation this process waits for, seen and rolled out: that rollout is done.
  if (auto it = changed_.find(key); it != changed_.end() && generation >= it->second && !rolling) {
    changed_.erase(it);
  }
}

void RolloutBudget::forget_deployment(const std::string& key) {
  rolling_.erase(key);
  changed_.erase(key);
}

void RolloutBudget::observe_schema_job(const std::string& key, JobSeen seen) {
  created_jobs_.erase(key);  // the cache shows it now: counted (or not) from what it shows
  if (seen == JobSeen::kFinished) {
    running_jobs_.erase(key);
  } else {
    running_jobs_.insert(key);
  }
}

void RolloutBudget::forget_schema_job(const std::string& key) {
  running_jobs_.erase(key);
  created_jobs_.erase(key);
}

bool RolloutBudget::may_roll(const std::string& key, long long live_generation,
                             BudgetClock::time_point now) {
  if (limit_ <= 0) {
    return true;
  }
  // A second change to a Deployment already rolling lands in the same rollout: it adds no
  // Deployment rolling, so waiting would only delay it.
  const bool joins = rolling_.contains(key) || changed_.contains(key);
  if (!joins && in_use(now) >= limit_) {
    return false;
  }
  changed_[key] = live_generation + 1;
  return true;
}

bool RolloutBudget::may_migrate(const std::string& key, BudgetClock::time_point now) {
  if (limit_ <= 0) {
    return true;
  }
  if (created_jobs_.contains(key)) {
    return true;  // created a moment ago, not in the cache yet: counted already
  }
  if (in_use(now) >= limit_) {
    return false;
  }
  created_jobs_[key] = now;
  return true;
}

void RolloutBudget::expire_unseen_jobs(BudgetClock::time_point now) {
  std::erase_if(created_jobs_, [&](const auto& job) { return now - job.second > kUnseenJobGrace; });
}

int RolloutBudget::in_use(BudgetClock::time_point now) {
  expire_unseen_jobs(now);
  std::size_t count = rolling_.size() + running_jobs_.size() + created_jobs_.size();
  for (const auto& [key, generation] : changed_) {
    count += rolling_.contains(key) ? 0 : 1;  // its new generation not in the cache yet
  }
  return static_cast<int>(count);
}

void RolloutBudget::judging(const std::string& relay, std::string versions) {
  holds_[relay] = {std::move(versions), BudgetClock::time_point::min()};
}

void RolloutBudget::held(const std::string& relay, BudgetClock::time_point until) {
  if (auto it = holds_.find(relay); it != holds_.end()) {
    it->second.until = until;  // not voided by a change while it was judged
  }
}

bool RolloutBudget::still_held(const std::string& relay, const std::string& versions,
                               BudgetClock::time_point now) {
  auto it = holds_.find(relay);
  if (it == holds_.end()) {
    return false;
  }
  if (it->second.versions != versions || now >= it->second.until || !spent(now)) {
    holds_.erase(it);
    return false;
  }
  return true;
}

}  // namespace outbox::controller
