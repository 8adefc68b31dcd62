#pragma once

#include <chrono>

#include "api/defaults.hpp"
#include "common/backoff.hpp"

namespace outbox::relay {

// An event's retry schedule (1, 2, 4 ... minutes; docs/relay.md), capped, with proportional jitter
// (common/backoff.hpp); the relay stores the resulting time in the event's row.
struct BackoffPolicy {
  std::chrono::milliseconds initial{60'000};
  std::chrono::milliseconds max{64 * 60'000};
  double jitter = api::defaults::kJitter;  // the delay is scaled by a factor drawn from [1 -
                                           // jitter, 1 + jitter]

  // Delay before attempt number `attempt` + 1, where `attempt` >= 1 failures happened.
  // `unit_random` in [0, 1) makes it deterministic in tests.
  std::chrono::milliseconds delay(int attempt, double unit_random) const {
    return proportional_jitter(exponential_delay(initial, max, attempt - 1), jitter, unit_random);
  }
};

}  // namespace outbox::relay
