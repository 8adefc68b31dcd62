#pragma once

#include <algorithm>
#include <chrono>
#include <random>

// Exponential backoff, the one implementation behind every retry delay in the project: the
// informer's re-list and re-watch, the work queue's per-key requeue, and the relay's per-event
// retry schedule (stored in the database). The maths is stateless and deterministic: callers
// pass the retry number and, for jitter, a number drawn from [0, 1), so tests can pin both.
namespace outbox {

// The delay before retry number `retry` (0 for the first): initial * factor^retry, never
// above cap (the first delay included). Growth is computed in doubles and stops at the cap,
// so no retry count can overflow. Expects factor > 1 and a non-negative initial delay.
template <typename Rep, typename Period>
std::chrono::duration<Rep, Period> exponential_delay(std::chrono::duration<Rep, Period> initial,
                                                     std::chrono::duration<Rep, Period> cap,
                                                     int retry, double factor = 2.0) {
  double delay = static_cast<double>(initial.count());
  const double limit = static_cast<double>(cap.count());
  for (int i = 0; i < retry && delay > 0.0 && delay < limit; ++i) {
    delay *= factor;
  }
  return std::chrono::duration<Rep, Period>(static_cast<Rep>(std::min(delay, limit)));
}

// Equal jitter: uniform in [delay / 2, delay]. Half fixed, half random: clients that failed
// together spread out, yet none retries at once, as full jitter's near-zero draws would.
template <typename Rep, typename Period>
std::chrono::duration<Rep, Period> equal_jitter(std::chrono::duration<Rep, Period> delay,
                                                double unit_random) {
  return std::chrono::duration<Rep, Period>(
      static_cast<Rep>(static_cast<double>(delay.count()) * (0.5 + 0.5 * unit_random)));
}

// Proportional jitter: delay scaled by a factor uniform in [1 - fraction, 1 + fraction]. The
// mean stays on the schedule (1, 2, 4 ... minutes for an event's retries) while
// events that failed together retry apart.
template <typename Rep, typename Period>
std::chrono::duration<Rep, Period> proportional_jitter(std::chrono::duration<Rep, Period> delay,
                                                       double fraction, double unit_random) {
  const double factor = 1.0 + fraction * (2.0 * unit_random - 1.0);
  return std::chrono::duration<Rep, Period>(
      static_cast<Rep>(static_cast<double>(delay.count()) * factor));
}

// The stateful form, for a loop retrying one thing: delays grow initial, 2x, 4x ... up to cap,
// each drawn with equal jitter; reset() after a success starts again from initial.
class Backoff {
 public:
  using Duration = std::chrono::nanoseconds;

  // Throws std::invalid_argument unless factor > 1.
  Backoff(Duration initial, Duration cap, double factor = 2.0);
  // The delay to wait before the next retry; moves one step up the schedule.
  Duration next();
  void reset() { retry_ = 0; }
  // The undithered delay the next call is drawn around (its upper bound).
  Duration peek() const { return exponential_delay(initial_, cap_, retry_, factor_); }

 private:
  Duration initial_, cap_;
  double factor_;
  int retry_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace outbox
