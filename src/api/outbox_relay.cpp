#include "api/outbox_relay.hpp"

#include <ctime>

namespace outbox::api {

std::string format_time(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::chrono::system_clock::time_point> parse_time(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace outbox::api
