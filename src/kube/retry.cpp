#include "kube/retry.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <string>
#include <thread>

namespace outbox::kube {

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(burst_), last_(Clock::now()) {}

Duration TokenBucket::reserve() {
  if (qps_ <= 0) {
    return Duration::zero();
  }
  std::lock_guard lock(mutex_);
  auto now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  tokens_ -= 1.0;  // may go negative: a debt that later callers wait out in order
  if (tokens_ >= 0) {
    return Duration::zero();
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

void TokenBucket::acquire() {
  auto wait = reserve();
  if (wait > Duration::zero()) {
    std::this_thread::sleep_for(wait);
  }
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::chrono::system_clock::time_point now) {
  while (!value.empty() && value.front() == ' ') {
    value.remove_prefix(1);
  }
  while (!value.empty() && value.back() == ' ') {
    value.remove_suffix(1);
  }
  if (value.empty()) {
    return std::nullopt;
  }
  long long seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec == std::errc() && end == value.data() + value.size()) {
    if (seconds < 0) {
      return std::nullopt;
    }
    return std::chrono::seconds(seconds);
  }
  std::tm tm{};
  std::string text(value);
  const char* parsed = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (parsed == nullptr || *parsed != '\0') {
    return std::nullopt;
  }
  auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
  if (at <= now) {
    return std::chrono::seconds(0);
  }
  return std::chrono::ceil<std::chrono::seconds>(at - now);
}

std::optional<std::chrono::milliseconds> retry_delay(int http_status, std::string_view retry_after,
                                                     int attempt, int max_retries,
                                                     std::chrono::milliseconds max_wait) {
  bool retryable = http_status == 429 || (http_status >= 500 && !retry_after.empty());
  if (!retryable || attempt >= max_retries) {
    return std::nullopt;
  }
  std::chrono::milliseconds wait(1000);
  if (auto asked = parse_retry_after(retry_after)) {
    wait = *asked;
  }
  return std::min(wait, max_wait);
}

}  // namespace outbox::kube
