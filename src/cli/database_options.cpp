#include "cli/database_options.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "common/redact.hpp"

namespace outbox::cli {

void DatabaseOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--dsn", dsn,
                 "libpq connection string (prefer --dsn-file: a value here is visible in the "
                 "process's argv or environment)")
      ->envname("OUTBOX_DSN")
      ->configurable(false);  // a credential: never from the settings file
  cmd.add_option("--dsn-file", dsn_file, "file holding the connection string (a mounted Secret)")
      ->envname("OUTBOX_DSN_FILE");
  cmd.add_option("--database-sslmode", tls.sslmode,
                 "libpq sslmode that replaces the DSN's (verify-full checks the CA and the host "
                 "name)")
      ->envname("OUTBOX_DATABASE_SSLMODE")
      ->check(CLI::IsMember({"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}));
  cmd.add_option("--database-ca-file", tls.ca_file,
                 "PEM file of the CA(s) that sign the PostgreSQL server's certificate")
      ->envname("OUTBOX_DATABASE_CA_FILE");
  cmd.add_option("--database-cert-file", tls.cert_file, "client certificate (PEM) for PostgreSQL")
      ->envname("OUTBOX_DATABASE_CERT_FILE");
  cmd.add_option("--database-key-file", tls.key_file, "the client certificate's key (PEM)")
      ->envname("OUTBOX_DATABASE_KEY_FILE");
  cmd.add_option("--table", table, "outbox table, [schema.]name")
      ->envname("OUTBOX_TABLE")
      ->capture_default_str();
  cmd.add_option("--column", columns,
                 "role=column of a table adopted with migrate --adopt (repeatable; roles eventId, "
                 "bizType, bizId, payload, createdAt, headers; unnamed roles keep Debezium's "
                 "names: eventId=id bizType=aggregatetype bizId=aggregateid payload=payload). "
                 "Other commands refuse a table adopted with other columns");
}

std::optional<ColumnMap> DatabaseOptions::column_map() const {
  if (columns.empty()) {
    return std::nullopt;
  }
  return ColumnMap::parse(columns);
}

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument("cannot read " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

std::string DatabaseOptions::resolve_dsn() const {
  // Known before anything can fail on it: the log sink, the HTTP server and the status writers
  // keep what this process has read out of the text they emit.
  const std::string given = dsn_without_tls();
  Secrets secrets;
  secrets.add_dsn(given);
  remember_secrets(secrets);
  return with_tls(given, tls);
}

std::vector<std::string> DatabaseOptions::credential_files() const {
  std::vector<std::string> files;
  if (dsn.empty() && !dsn_file.empty()) {
    files.push_back(dsn_file);
  }
  for (const std::string& f : {tls.ca_file, tls.cert_file, tls.key_file}) {
    if (!f.empty()) {
      files.push_back(f);
    }
  }
  return files;
}

std::string DatabaseOptions::dsn_without_tls() const {
  if (!dsn.empty()) {
    return dsn;
  }
  if (!dsn_file.empty()) {
    // The operator mounts only the key its spec names, as a file of the same name, and leaves
    // it out when the Secret lacks that key: say so, since this line is what the OutboxRelay's
    // Ready condition quotes.
    if (!std::filesystem::exists(dsn_file)) {
      throw std::invalid_argument(
          "the DSN file " + dsn_file + " does not exist (mounted from a Secret: the Secret has " +
          "no key \"" + std::filesystem::path(dsn_file).filename().string() + "\")");
    }
    return read_secret_file(dsn_file);
  }
  throw std::invalid_argument("no database given: set --dsn-file, OUTBOX_DSN_FILE or OUTBOX_DSN");
}

}  // namespace outbox::cli
