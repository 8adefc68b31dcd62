#pragma once

#include <string>

namespace outbox {

// Event status values stored in the status column (docs/relay.md, the table).
enum class EventStatus : int { kPending = 0, kSent = 1, kFailed = 2 };

// The status as SQL text, spliced into statements rather than bound as a parameter: the
// partial indexes (WHERE status = 0, ...) serve a query only when the planner sees the
// same constant in it, so every statement names the status by this one spelling.
inline std::string sql(EventStatus s) {
  return std::to_string(static_cast<int>(s));
}

}  // namespace outbox
