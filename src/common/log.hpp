#pragma once

#include <string>
#include <string_view>

namespace outbox {

// Configures spdlog once per process: level from a name ("info", "debug", ...),
// and "json" or "text" output. Unknown names are a usage error, reported by the caller.
bool configure_logging(std::string_view level, std::string_view format);

// A libpq DSN (key=value or URI form) rewritten as key=value with every secret
// (password, sslpassword) shown as "***", so that a connection string can appear
// in a log line or an error without leaking it. A DSN libpq cannot parse is not
// shown at all.
std::string redact_dsn(std::string_view dsn);

}  // namespace outbox
