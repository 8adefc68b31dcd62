#pragma once

#include <chrono>
#include <random>

namespace outbox::relay {

// Exponential backoff with a cap and jitter (seed §3.3: 1, 2, 4 ... minutes).
struct BackoffPolicy {
  std::chrono::milliseconds initial{60'000};
  std::chrono::milliseconds max{64 * 60'000};
  double jitter = 0.2;  // the delay is scaled by a factor drawn from [1 - jitter, 1 + jitter]

  // Delay before attempt number `attempt` + 1, where `attempt` >= 1 failures happened.
  // `unit_random` in [0, 1) makes it deterministic in tests.
  std::chrono::milliseconds delay(int attempt, double unit_random) const {
    double base = static_cast<double>(initial.count());
    for (int i = 1; i < attempt && base < static_cast<double>(max.count()); ++i) {
      base *= 2;
    }
    base = std::min(base, static_cast<double>(max.count()));
    double factor = 1.0 + jitter * (2.0 * unit_random - 1.0);
    return std::chrono::milliseconds(static_cast<long long>(base * factor));
  }
};

}  // namespace outbox::relay
