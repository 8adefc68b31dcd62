#pragma once

#include <string>

namespace outbox {

// Why a database session to `dsn` failed, as one line a person can act on, from
// the message of the pqxx::broken_connection that said so. A session lost
// mid-query surfaces in libpqxx 6 as "Could not obtain client encoding: not
// connected." (it reads the encoding before it looks at the result), which names
// neither cause nor cure; then the reason comes from libpq, by connecting afresh
// (at most 5 s). Never contains a secret of `dsn` (libpq quotes the part of a malformed DSN it
// cannot parse, which may be the password: redact() removes it).
std::string connection_failure(const std::string& dsn, const std::string& pqxx_message);

// How to verify the PostgreSQL server (and, optionally, who this client is), from files the
// operator mounts: spec.database.tls.
struct DatabaseTls {
  std::string sslmode;    // libpq's sslmode; empty: the DSN's own (libpq's default: prefer)
  std::string ca_file;    // sslrootcert
  std::string cert_file;  // sslcert
  std::string key_file;   // sslkey
  bool empty() const {
    return sslmode.empty() && ca_file.empty() && cert_file.empty() && key_file.empty();
  }
};

// `dsn` (a URI or key=value string) as a key=value connection string with the settings of `tls`
// in place of the DSN's own: a DSN saying sslmode=require must not weaken a verify-full the
// resource asks for. Throws std::invalid_argument, without the DSN's secrets, when libpq cannot
// parse it.
std::string with_tls(const std::string& dsn, const DatabaseTls& tls);

// Whether the session `conn_sslmode` describes verifies the server: "verify-full" or
// "verify-ca" when it does, "unverified" for TLS that verifies nothing (require, prefer), "off"
// without TLS. `ssl_in_use` from pg_stat_ssl.
std::string tls_verification(const std::string& sslmode, bool ssl_in_use);

// Whether libpq's `message` says the server failed TLS verification or TLS could not be set up
// (a certificate signed by another CA, issued for another host name, no TLS on the server, a
// CA file that cannot be read).
bool is_tls_refusal(const std::string& message);

// The sslmode `dsn` asks for (libpq's default, prefer, when it names none).
std::string sslmode_of(const std::string& dsn);

// `text` with each run of whitespace (libpq's messages carry newlines and tabs)
// turned into one space, and trimmed.
std::string one_line(const std::string& text);

}  // namespace outbox
