#pragma once

#include <string>
#include <string_view>

namespace outbox {

// Configures spdlog once per process: level from a name ("info", "debug", ...),
// and "json" or "text" output. Unknown names are a usage error, reported by the caller.
bool configure_logging(std::string_view level, std::string_view format);

// Replaces the password in a libpq DSN (key=value or URI form) with "***", so that
// a connection string can appear in a log line or an error without leaking it.
std::string redact_dsn(std::string_view dsn);

}  // namespace outbox
