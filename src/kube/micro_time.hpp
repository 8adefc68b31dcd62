#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

// meta/v1 MicroTime, the wire format of Lease acquireTime/renewTime:
// RFC 3339 in UTC with exactly six fractional digits, e.g. "2024-05-01T12:03:04.000123Z".
namespace outbox::kube {

std::string format_micro_time(std::chrono::system_clock::time_point time);

// Accepts any RFC 3339 timestamp (0-9 fractional digits, 'Z' or a +hh:mm offset), since
// other writers of the Lease may use a coarser format. Returns nullopt on malformed input.
std::optional<std::chrono::system_clock::time_point> parse_micro_time(std::string_view text);

}  // namespace outbox::kube
