#include "common/duration.hpp"

#include <cctype>
#include <stdexcept>

namespace outbox {

std::chrono::milliseconds parse_duration(std::string_view text) {
  auto fail = [&] {
    throw std::invalid_argument("invalid duration \"" + std::string(text) +
                                "\" (expected e.g. 500ms, 2s, 1m, 1h30m)");
  };
  if (text.empty()) {
    fail();
  }
  double total_ms = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == start) {
      fail();
    }
    double value = 0;
    try {
      value = std::stod(std::string(text.substr(start, i - start)));
    } catch (const std::exception&) {
      fail();
    }
    std::size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit == "ms") {
      total_ms += value;
    } else if (unit == "s") {
      total_ms += value * 1000;
    } else if (unit == "m") {
      total_ms += value * 60'000;
    } else if (unit == "h") {
      total_ms += value * 3'600'000;
    } else {
      fail();
    }
  }
  return std::chrono::milliseconds(static_cast<long long>(total_ms));
}

std::string format_duration(std::chrono::milliseconds d) {
  long long ms = d.count();
  if (ms % 1000 != 0 || ms == 0) {
    return std::to_string(ms) + "ms";
  }
  long long s = ms / 1000;
  std::string out;
  if (s >= 3600) {
    out += std::to_string(s / 3600) + "h";
    s %= 3600;
  }
  if (s >= 60) {
    out += std::to_string(s / 60) + "m";
    s %= 60;
  }
  if (s > 0) {
    out += std::to_string(s) + "s";
  }
  return out;
}

}  // namespace outbox
