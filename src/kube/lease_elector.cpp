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

Json with_spec(Json lease, Json spec) {
  lease["spec"] = std::move(spec);
  return lease;
}

}  // namespace

LeaseLock::LeaseLock(Client& client, std::string lease_namespace, std::string lease_name)
    : client_(client), namespace_(std::move(lease_namespace)), name_(std::move(lease_name)) {}

template <typename Call>
LeaseReply LeaseLock::call(const char* step, Call&& attempt) {
  LeaseReply reply;
  try {
    reply.lease = attempt();
  } catch (const std::exception& e) {
    // The elector's one catch clause: whatever failed, this round is lost and the caller
    // decides from the reply whether to read again, create, or wait.
    const auto* api = dynamic_cast<const ApiError*>(&e);
    reply.not_found = api != nullptr && api->is_not_found();
    reply.conflict = api != nullptr && api->code() == 409;
    spdlog::log(reply.not_found || reply.conflict ? spdlog::level::debug : spdlog::level::warn,
                "lease {}: {} failed: {}", name_, step, e.what());
  }
  return reply;
}

LeaseReply LeaseLock::get(milliseconds timeout) {
  return call("get", [&] { return client_.get(resources::leases, namespace_, name_, timeout); });
}

LeaseReply LeaseLock::create(const Json& spec, milliseconds timeout) {
  const Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                      {"kind", "Lease"},
                      {"metadata", {{"name", name_}, {"namespace", namespace_}}},
                      {"spec", spec}};
  return call("create",
              [&] { return client_.create(resources::leases, namespace_, lease, timeout); });
}

LeaseReply LeaseLock::update(const Json& lease, milliseconds timeout) {
  return call("update",
              [&] { return client_.update(resources::leases, namespace_, lease, timeout); });
}

LeaseElector::LeaseElector(Client& client, LeaseElectorConfig config)
    : config_(std::move(config)), lock_(client, config_.lease_namespace, config_.lease_name) {
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

SteadyClock::time_point LeaseElector::claim_expiry() const {
  // Measured from when we saw the record change, on our own monotonic clock, never from
  // renewTime.
  auto seconds = observed_lease_.value("/spec/leaseDurationSeconds"_json_pointer, 0);
  return observed_time_ + std::chrono::seconds(seconds);
}

Json LeaseElector::claim(const Json& previous, const std::string& now_text) const {
  // `previous` is the Lease as last read, null when there is none yet. Renewing keeps
  // acquireTime and leaseTransitions; taking over counts one more transition.
  const Json spec = previous.is_null() ? Json::object() : previous.value("spec", Json::object());
  const bool renewing = spec.value("holderIdentity", std::string()) == config_.identity;
  int transitions = spec.value("leaseTransitions", 0);
  if (!previous.is_null() && !renewing) {
    ++transitions;
  }
  return {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds",
           std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count()},
          {"acquireTime", renewing ? spec.value("acquireTime", now_text) : now_text},
          {"renewTime", now_text},
          {"leaseTransitions", transitions}};
}

void LeaseElector::observe(const Json& lease, SteadyClock::time_point now) {
  Json spec = lease.value("spec", Json::object());
  std::string serialized = spec.dump();
  if (serialized != observed_spec_) {
    // Expiry is measured from here (see claim_expiry()).
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

bool LeaseElector::adopt(const LeaseReply& reply, SteadyClock::time_point now) {
  if (!reply.lease) {
    return false;
  }
  observe(*reply.lease, now);
  return true;
}

// client-go's tryAcquireOrRenew, in its steps.
bool LeaseElector::try_acquire_or_renew() {
  held_until_.reset();
  const auto now = SteadyClock::now();
  const std::string now_text = format_micro_time(std::chrono::system_clock::now());

  // 1. We lead and our claim is still valid: renew on top of what we last wrote, unread.
  if (leading_ && record_says_me() && claim_expiry() > now) {
    Json lease = with_spec(observed_lease_, claim(observed_lease_, now_text));
    if (adopt(lock_.update(lease, time_left()), now)) {
      return true;
    }
    // Fall through: read again and decide again.
  }

  // 2. Read the record; create it when there is none.
  LeaseReply current = lock_.get(time_left());
  if (current.not_found) {
    return adopt(lock_.create(claim(Json(), now_text), time_left()), now);
  }
  if (!adopt(current, now)) {
    return false;
  }

  // 3. Validly held by another: wait, and say until when.
  const std::string holder =
      observed_lease_.value("/spec/holderIdentity"_json_pointer, std::string());
  if (!holder.empty() && holder != config_.identity && claim_expiry() > now) {
    held_until_ = claim_expiry();
    return false;
  }

  // 4. Take it over, or renew it. The update carries the resourceVersion just read: if anyone
  // wrote in between, it is a 409 and we lost the round.
  Json lease = with_spec(observed_lease_, claim(observed_lease_, now_text));
  return adopt(lock_.update(lease, time_left()), now);
}

void LeaseElector::release() {
  attempt_deadline_ = SteadyClock::now() + config_.renew_deadline;
  for (int attempt = 0; attempt < 5 && SteadyClock::now() < attempt_deadline_; ++attempt) {
    if (!record_says_me()) {
      return;  // someone else holds it by now: nothing of ours to release
    }
    // As client-go: an empty holder is free at once for every candidate; the 1 s duration
    // covers clients older than 1.14 that wait for expiry.
    const std::string now_text = format_micro_time(std::chrono::system_clock::now());
    Json lease =
        with_spec(observed_lease_,
                  {{"holderIdentity", ""},
                   {"leaseDurationSeconds", 1},
                   {"acquireTime", now_text},
                   {"renewTime", now_text},
                   {"leaseTransitions", observed_lease_["spec"].value("leaseTransitions", 0)}});
    LeaseReply reply = lock_.update(lease, time_left());
    if (!reply.conflict) {
      if (reply.lease) {
        observed_lease_ = *reply.lease;
      }
      return;
    }
    // Someone wrote since we last read: read again, and release only if it is still ours.
    LeaseReply current = lock_.get(time_left());
    if (!current.lease) {
      return;
    }
    observed_lease_ = *current.lease;
  }
}

bool LeaseElector::run(std::stop_token stop) {
  if (!acquire(stop) || stop.stop_requested()) {
    return true;
  }
  leading_ = true;
  spdlog::info("lease {}/{}: {} became leader", config_.lease_namespace, config_.lease_name,
               config_.identity);
  if (config_.on_started_leading) {
    config_.on_started_leading();
  }
  const bool kept = renew(stop);
  leading_ = false;
  // Guarded work stops first; only then is the lease handed over.
  if (config_.on_stopped_leading) {
    config_.on_stopped_leading();
  }
  if (kept && config_.release_on_cancel) {
    release();
  }
  return kept;
}

// Tries every retry_period (jittered) until the lease is ours (true) or `stop` (false).
bool LeaseElector::acquire(std::stop_token stop) {
  std::uniform_real_distribution<double> jitter(0.0, 1.2);
  while (!stop.stop_requested()) {
    const auto started = SteadyClock::now();
    attempt_deadline_ = started + request_timeout();
    if (try_acquire_or_renew()) {
      renewed_at_ = started.time_since_epoch().count();
      return true;
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
  return false;
}

// Renews every retry_period until `stop` (true) or a renewal that fails (false: the term is
// over).
bool LeaseElector::renew(std::stop_token stop) {
  while (!stop.stop_requested()) {
    if (renew_before_deadline(stop)) {
      sleep_unless_stopped(stop, config_.retry_period);
      continue;
    }
    if (stop.stop_requested()) {
      break;
    }
    if (!leading_) {
      spdlog::error("lease {}/{}: {} saw another holder ({}); stepping down",
                    config_.lease_namespace, config_.lease_name, config_.identity,
                    reported_leader_.empty() ? "none" : reported_leader_);
    } else {
      spdlog::error(
          "lease {}/{}: {} could not renew within {} ms of its last renewal; stepping down",
          config_.lease_namespace, config_.lease_name, config_.identity,
          config_.renew_deadline.count());
    }
    return false;
  }
  return true;
}

// One renewal, retried until it succeeds (true), or until renew_deadline has passed since the
// last success (the clock holds_lease() reads), another holder is seen, or `stop` (false).
bool LeaseElector::renew_before_deadline(std::stop_token stop) {
  while (!stop.stop_requested() && holds_lease()) {
    const auto started = SteadyClock::now();
    attempt_deadline_ = std::min(renew_deadline_at(), started + request_timeout());
    if (try_acquire_or_renew() && leading_) {
      renewed_at_ = started.time_since_epoch().count();
      return true;
    }
    if (!leading_) {
      return false;
    }
    sleep_unless_stopped(stop, std::min(config_.retry_period, until(renew_deadline_at())));
  }
  return false;
}

}  // namespace outbox::kube
