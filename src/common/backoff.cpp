#include "common/backoff.hpp"

#include <stdexcept>

namespace outbox {

Backoff::Backoff(Duration initial, Duration cap, double factor)
    : initial_(initial), cap_(cap), factor_(factor) {
  if (factor_ <= 1.0) {
    throw std::invalid_argument("backoff factor must be greater than 1");
  }
}

Backoff::Duration Backoff::next() {
  const Duration delay = peek();
  if (delay < cap_) {
    ++retry_;  // at the cap it stays: no count to overflow however long the failures last
  }
  return equal_jitter(delay, std::uniform_real_distribution<double>(0.0, 1.0)(rng_));
}

}  // namespace outbox
