#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>

// Pacing primitives of the REST client. (The watcher's and the work queue's exponential backoff
// is common/backoff.hpp.)
namespace outbox::kube {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;

// Client-side QPS limit with a burst allowance (client-go's flowcontrol token bucket).
// Protects the apiserver from a hot loop in our own code; qps <= 0 disables it.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst);
  // Blocks until a token is available.
  void acquire();
  // How long acquire() would block now, having taken the token (for tests and callers that
  // sleep in their own way).
  Duration reserve();

 private:
  std::mutex mutex_;
  double qps_;
  double burst_;
  double tokens_;
  Clock::time_point last_;
};

// Parses an HTTP Retry-After value: delta-seconds ("3") or an IMF-fixdate
// ("Wed, 21 Oct 2015 07:28:00 GMT"), relative to `now`. Returns nullopt when unparseable;
// dates in the past give zero.
std::optional<std::chrono::seconds> parse_retry_after(
    std::string_view value,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// The REST client's retry rule, as client-go's: a 429, or a 5xx that carries Retry-After, is
// retried while attempts remain, after what the server asked (1 s when a 429 does not say),
// capped at `max_wait`. Anything else is final. Returns the wait, or nullopt for "do not retry".
std::optional<std::chrono::milliseconds> retry_delay(int http_status, std::string_view retry_after,
                                                     int attempt, int max_retries,
                                                     std::chrono::milliseconds max_wait);

}  // namespace outbox::kube
