#pragma once

#include <string>

namespace outbox {

// Why a database session to `dsn` failed, as one line a person can act on, from
// the message of the pqxx::broken_connection that said so. A session lost
// mid-query surfaces in libpqxx 6 as "Could not obtain client encoding: not
// connected." (it reads the encoding before it looks at the result), which names
// neither cause nor cure; then the reason comes from libpq, by connecting afresh
// (at most 5 s). Never contains a secret of `dsn`.
std::string connection_failure(const std::string& dsn, const std::string& pqxx_message);

// `text` with each run of whitespace (libpq's messages carry newlines and tabs)
// turned into one space, and trimmed.
std::string one_line(const std::string& text);

}  // namespace outbox
