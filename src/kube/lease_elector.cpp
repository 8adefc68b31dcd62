#include "kube/lease_elector.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "common/stop.hpp"
#include "kube/micro_time.hpp"

namespace outbox::kube {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds until(SteadyClock::time_point when) {
  return std::chrono::duration_cast<milliseconds>(when - SteadyClock::now());
}

}  // namespace

LeaseElector::LeaseElector(Client& client, LeaseElectorConfig config)
    : client_(client), config_(std::move(config)) {
  // The checks of client-go's NewLeaderElector, plus the one our mutual-exclusion argument
  // needs: a leader gives up at most retry_period + renew_deadline after its last renewal.
  if (config_.lease_duration <= config_.renew_deadline) {
    throw std::invalid_argument("lease_duration must be greater than renew_deadline");
  }
  if (config_.renew_deadline.count() <= 1.2 * static_cast<double>(config_.retry_period.count())) {
    throw std::invalid_argument("renew_deadline must be greater than 1.2 * retry_period");
  }
  if (config_.renew_deadline + config_.retry_period >= config_.lease_duration) {
    throw std::invalid_argument("renew_deadline + retry_period must be less than lease_duration");
  }
  if (config_.retry_period.count() <= 0) {
    throw std::invalid_argument("retry_period must be positive");
  }
  if (config_.identity.empty() || config_.lease_name.empty() || config_.lease_namespace.empty()) {
    throw std::invalid_argument("identity, lease_name and lease_namespace are required");
  }
  if (config_.lease_duration < std::chrono::seconds(1)) {
    throw std::invalid_argument("lease_duration must be at least 1 s (whole seconds on the wire)");
  }
}

milliseconds LeaseElector::request_timeout() const {
  // client-go: max(1 s, renewDeadline / 2), so one hung call cannot eat the whole deadline.
  return std::max<milliseconds>(milliseconds(1000), config_.renew_deadline / 2);
}

SteadyClock::time_point LeaseElector::renew_deadline_at() const {
  return SteadyClock::time_point(SteadyClock::duration(renewed_at_.load())) +
         config_.renew_deadline;
}

bool LeaseElector::holds_lease() const {
  return leading_.load() && SteadyClock::now() < renew_deadline_at();
}

milliseconds LeaseElector::time_left() const {
  return std::max(milliseconds(1), until(attempt_deadline_));
}

bool LeaseElector::record_says_me() const {
  if (observed_lease_.is_null()) {
    return false;
  }
  return observed_lease_.value("/spec/holderIdentity"_json_pointer, std::string()) ==
         config_.identity;
}

void LeaseElector::observe(const Json& lease, SteadyClock::time_point now) {
  Json spec = lease.value("spec", Json::object());
  std::string serialized = spec.dump();
  if (serialized != observed_spec_) {
    // Expiry is measured from here, on our own monotonic clock, never from renewTime.
    observed_spec_ = std::move(serialized);
    observed_time_ = now;
  }
  observed_lease_ = lease;
  std::string holder = spec.value("holderIdentity", std::string());
  if (leading_ && holder != config_.identity) {
    // Someone else holds it (or it was released): whatever our clock says, we no longer lead.
    // Cleared here, before any callback, so guarded writes stop at once.
    leading_ = false;
  }
  if (holder != reported_leader_) {
    reported_leader_ = holder;
    if (config_.on_new_leader && !holder.empty()) {
      config_.on_new_leader(holder);
    }
  }
}

bool LeaseElector::try_acquire_or_renew() {
  held_until_.reset();
  const auto now = SteadyClock::now();
  const std::string now_text = format_micro_time(std::chrono::system_clock::now());
  const auto lease_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count();
  const std::string collection = resources::leases.collection_path(config_.lease_namespace);
  const std::string path =
      resources::leases.object_path(config_.lease_namespace, config_.lease_name);

  Json desired = {{"holderIdentity", config_.identity},
                  {"leaseDurationSeconds", lease_seconds},
                  {"acquireTime", now_text},
                  {"renewTime", now_text}};

  // Fast path: we lead and our claim is still valid: renew on top of what we last wrote.
  const auto valid_until = [&](const Json& lease) {
    auto seconds = lease.value("/spec/leaseDurationSeconds"_json_pointer, 0);
    return observed_time_ + std::chrono::seconds(seconds);
  };
  if (leading_ && record_says_me() && valid_until(observed_lease_) > now) {
    Json lease = observed_lease_;
    desired["acquireTime"] = lease["spec"].value("acquireTime", now_text);
    desired["leaseTransitions"] = lease["spec"].value("leaseTransitions", 0);
    lease["spec"] = desired;
    try {
      observe(client_.request("PUT", path, lease.dump(), "application/json", time_left()), now);
      return true;
    } catch (const std::exception& e) {
      spdlog::debug("lease {}: renew failed: {}", config_.lease_name, e.what());
      // Fall through: re-read and decide again.
    }
  }

  Json current;
  try {
    current = client_.request("GET", path, "", "", time_left());
  } catch (const ApiError& e) {
    if (!e.is_not_found()) {
      spdlog::warn("lease {}: get failed: {}", config_.lease_name, e.what());
      return false;
    }
    desired["leaseTransitions"] = 0;
    Json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec", desired}};
    try {
      observe(client_.request("POST", collection, lease.dump(), "application/json", time_left()),
              now);
      return true;
    } catch (const std::exception& create_error) {
      spdlog::info("lease {}: create failed: {}", config_.lease_name, create_error.what());
      return false;
    }
  } catch (const std::exception& e) {
    spdlog::warn("lease {}: get failed: {}", config_.lease_name, e.what());
    return false;
  }

  observe(current, now);
  const Json& spec = observed_lease_["spec"];
  const std::string holder = spec.value("holderIdentity", std::string());
  if (!holder.empty() && holder != config_.identity && valid_until(observed_lease_) > now) {
    held_until_ = valid_until(observed_lease_);
    return false;
  }
  if (holder == config_.identity) {
    desired["acquireTime"] = spec.value("acquireTime", now_text);
    desired["leaseTransitions"] = spec.value("leaseTransitions", 0);
  } else {
    desired["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  Json lease = observed_lease_;
  lease["spec"] = desired;
  try {
    // observed_lease_ carries the resourceVersion we just read: if anyone wrote in between,
    // this is a 409 and we lost the round.
    observe(client_.request("PUT", path, lease.dump(), "application/json", time_left()), now);
    return true;
  } catch (const ApiError& e) {
    if (!e.is_conflict()) {
      spdlog::warn("lease {}: update failed: {}", config_.lease_name, e.what());
    }
    return false;
  } catch (const std::exception& e) {
    spdlog::warn("lease {}: update failed: {}", config_.lease_name, e.what());
    return false;
  }
}

void LeaseElector::release() {
  attempt_deadline_ = SteadyClock::now() + config_.renew_deadline;
  const std::string path =
      resources::leases.object_path(config_.lease_namespace, config_.lease_name);
  for (int attempt = 0; attempt < 5 && SteadyClock::now() < attempt_deadline_; ++attempt) {
    if (!record_says_me()) {
      return;  // someone else holds it by now: nothing of ours to release
    }
    // As client-go: an empty holder is free at once for every candidate; the 1 s duration
    // covers clients older than 1.14 that wait for expiry.
    const std::string now_text = format_micro_time(std::chrono::system_clock::now());
    Json lease = observed_lease_;
    lease["spec"] = {{"holderIdentity", ""},
                     {"leaseDurationSeconds", 1},
                     {"acquireTime", now_text},
                     {"renewTime", now_text},
                     {"leaseTransitions", observed_lease_["spec"].value("leaseTransitions", 0)}};
    try {
      observed_lease_ = client_.request("PUT", path, lease.dump(), "application/json", time_left());
      return;
    } catch (const ApiError& e) {
      if (!e.is_conflict()) {
        spdlog::warn("lease {}: release failed: {}", config_.lease_name, e.what());
        return;
      }
      try {
        observed_lease_ = client_.request("GET", path, "", "", time_left());
      } catch (const std::exception& get_error) {
        spdlog::warn("lease {}: release failed: {}", config_.lease_name, get_error.what());
        return;
      }
    } catch (const std::exception& e) {
      spdlog::warn("lease {}: release failed: {}", config_.lease_name, e.what());
      return;
    }
  }
}

bool LeaseElector::run(std::stop_token stop) {
  std::uniform_real_distribution<double> jitter(0.0, 1.2);
  // Acquire.
  while (!stop.stop_requested()) {
    const auto started = SteadyClock::now();
    attempt_deadline_ = started + request_timeout();
    if (try_acquire_or_renew()) {
      renewed_at_ = started.time_since_epoch().count();
      break;
    }
    milliseconds wait = milliseconds(static_cast<long long>(
        static_cast<double>(config_.retry_period.count()) * (1.0 + jitter(rng_))));
    if (held_until_) {
      // Held by a live leader: poll steadily so our observation stays fresh, and be there
      // the moment the claim expires.
      wait = std::min(config_.retry_period, until(*held_until_) + milliseconds(1));
    }
    sleep_unless_stopped(stop, wait);
  }
  if (stop.stop_requested()) {
    return true;
  }
  leading_ = true;
  spdlog::info("lease {}/{}: {} became leader", config_.lease_namespace, config_.lease_name,
               config_.identity);
  if (config_.on_started_leading) {
    config_.on_started_leading();
  }

  // Renew: each renewal must succeed within renew_deadline of the previous one (the same
  // clock holds_lease() reads), and another holder seen at any time ends our term at once.
  bool lost = false;
  while (!stop.stop_requested()) {
    bool renewed = false;
    while (!stop.stop_requested() && holds_lease()) {
      const auto started = SteadyClock::now();
      attempt_deadline_ = std::min(renew_deadline_at(), started + request_timeout());
      if (try_acquire_or_renew() && leading_) {
        renewed_at_ = started.time_since_epoch().count();
        renewed = true;
        break;
      }
      if (!leading_) {
        break;
      }
      sleep_unless_stopped(stop, std::min(config_.retry_period, until(renew_deadline_at())));
    }
    if (stop.stop_requested()) {
      break;
    }
    if (!renewed) {
      lost = true;
      if (!leading_) {
        spdlog::error("lease {}/{}: {} saw another holder ({}); stepping down",
                      config_.lease_namespace, config_.lease_name, config_.identity,
                      reported_leader_.empty() ? "none" : reported_leader_);
      } else {
        spdlog::error(
            "lease {}/{}: {} could not renew within {} ms of its last renewal; "
            "stepping down",
            config_.lease_namespace, config_.lease_name, config_.identity,
            config_.renew_deadline.count());
      }
      break;
    }
    sleep_unless_stopped(stop, config_.retry_period);
  }
  leading_ = false;
  // Guarded work stops first; only then is the lease handed over.
  if (config_.on_stopped_leading) {
    config_.on_stopped_leading();
  }
  if (!lost && config_.release_on_cancel) {
    release();
  }
  return !lost;
}

}  // namespace outbox::kube
