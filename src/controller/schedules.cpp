#include "controller/schedules.hpp"

#include <cstdint>

namespace outbox::controller {
namespace {

// FNV-1a 64: the same value on every build and platform (std::hash is not), so a resource's
// schedule stays put across operator upgrades.
std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Separate draws for the minute and the hour, so resources sharing a minute do not also share
// their hours.
struct Draw {
  int minute;
  int hour;
};

Draw draw(const std::string& ns, const std::string& name, const char* purpose) {
  const std::uint64_t h = fnv1a(std::string(purpose) + "\n" + ns + "\n" + name);
  return {static_cast<int>(h % 60), static_cast<int>((h / 60) % 24)};
}

}  // namespace

std::string spread_compensation_schedule(const std::string& ns, const std::string& name) {
  const Draw d = draw(ns, name, "compensation");
  const int first = d.hour % 8;
  return std::to_string(d.minute) + " " + std::to_string(first) + "," + std::to_string(first + 8) +
         "," + std::to_string(first + 16) + " * * *";
}

std::string spread_retention_schedule(const std::string& ns, const std::string& name) {
  const Draw d = draw(ns, name, "retention");
  return std::to_string(d.minute) + " " + std::to_string(d.hour) + " * * *";
}

}  // namespace outbox::controller
