#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox {

// Configures spdlog once per process: level from a name ("info", "debug", ...),
// and "json" or "text" output. Unknown names are a usage error, reported by the caller.
// `fields` go into every JSON line after the message (namespace, outboxrelay, replica:
// what a log pipeline filters one resource's pods by).
using LogFields = std::vector<std::pair<std::string, std::string>>;
bool configure_logging(std::string_view level, std::string_view format,
                       const LogFields& fields = {});
// A field the JSON lines this thread logs carry while it lives, after the constant ones: a line
// about one event names it as `event_id`, so a log pipeline can follow an event. Text lines
// do not show it (their message says it already).
class ScopedLogField {
 public:
  ScopedLogField(std::string name, std::string value);
  ~ScopedLogField();
  ScopedLogField(const ScopedLogField&) = delete;
  ScopedLogField& operator=(const ScopedLogField&) = delete;
};

// What configure_logging was last given ("info", "text" before it ran): the operator
// hands its own settings to the pods it starts.
std::string logging_level();
std::string logging_format();
// The fields the environment names: OUTBOX_LOG_NAMESPACE, OUTBOX_LOG_OUTBOXRELAY and
// OUTBOX_LOG_REPLICA become namespace, outboxrelay and replica (the operator sets them
// in the relay and job pods). The relay labels its metrics with the first two.
LogFields log_fields_from_environment();

}  // namespace outbox
