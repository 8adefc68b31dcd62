#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace outbox {

// Parses a Go-style duration ("500ms", "2s", "1m", "1h30m"), as used in the
// OutboxRelay spec. Throws std::invalid_argument with the offending text.
std::chrono::milliseconds parse_duration(std::string_view text);

// The inverse, for logs and rendered configuration ("90s" -> "1m30s").
std::string format_duration(std::chrono::milliseconds d);

}  // namespace outbox
