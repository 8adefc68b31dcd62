#include "relay/relay_health.hpp"

#include <utility>

#include <spdlog/spdlog.h>

#include "common/stop.hpp"

namespace outbox::relay {
namespace {

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RelayHealth::RelayHealth() : last_beat_ms_(now_ms()) {}

std::string RelayHealth::problem() const {
  std::lock_guard lock(mu_);
  return problem_;
}

std::string RelayHealth::problem_reason() const {
  std::lock_guard lock(mu_);
  return problem_reason_;
}

std::chrono::milliseconds RelayHealth::since_last_beat() const {
  return std::chrono::milliseconds(now_ms() - last_beat_ms_.load());
}

std::optional<Backlog> RelayHealth::backlog() const {
  std::lock_guard lock(mu_);
  return backlog_;
}

DatabaseReport RelayHealth::database() const {
  std::lock_guard lock(mu_);
  return database_;
}

void RelayHealth::beat() {
  last_beat_ms_ = now_ms();
}

std::optional<std::string> RelayHealth::set_problem(const std::string& problem,
                                                    const std::string& reason) {
  std::lock_guard lock(mu_);
  problem_reason_ = reason;
  if (problem == problem_) {
    return std::nullopt;
  }
  return std::exchange(problem_, problem);
}

void RelayHealth::set_backlog(const std::optional<Backlog>& backlog) {
  std::lock_guard lock(mu_);
  backlog_ = backlog;
}

void RelayHealth::set_database(DatabaseReport report) {
  std::lock_guard lock(mu_);
  database_ = std::move(report);
}

RunEnd stay_not_ready(RelayHealth& health, const std::string& problem, FileWatch kafka_files,
                      std::stop_token stop) {
  spdlog::error(
      "{} (fix the Kafka properties: a change to their files restarts the relay); not "
      "ready until then",
      problem);
  health.set_problem(problem, {});
  // The files are looked at once a second, the heart beats every 50 ms.
  for (int beats = 1;; ++beats) {
    health.beat();
    if (beats % 20 == 0 && !kafka_files.changed().empty()) {
      spdlog::warn("the Kafka credential files changed; exiting, to be started again with them");
      return RunEnd::kKafkaCredentialsChanged;
    }
    if (!sleep_unless_stopped(stop, std::chrono::milliseconds(50))) {
      return RunEnd::kStopped;
    }
  }
}

}  // namespace outbox::relay
