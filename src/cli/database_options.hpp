#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/defaults.hpp"
#include "outbox/column_map.hpp"
#include "outbox/connection.hpp"

namespace CLI {
class App;
}

namespace outbox::cli {

// --dsn / --dsn-file / OUTBOX_DSN(_FILE) and --table, shared by every command
// that talks to the outbox table. The DSN is a secret: it comes from a Secret
// (as an environment variable or a mounted file) and is never logged unredacted.
struct DatabaseOptions {
  std::string dsn;
  std::string dsn_file;
  std::string table = api::defaults::kTable;
  std::vector<std::string> columns;  // role=column: the table is adopted with these
  DatabaseTls tls;                   // --database-sslmode and the certificate files

  void add_to(CLI::App& cmd);
  // The --column entries as a map; nullopt when none is given.
  std::optional<ColumnMap> column_map() const;
  // The DSN from --dsn or the file, with the TLS settings in place of its own; throws
  // std::invalid_argument if neither is given. Its secrets join the process's (redact()).
  std::string resolve_dsn() const;
  // The files resolve_dsn() reads (the DSN file unless --dsn is given, the TLS files): what a
  // rotated Secret rewrites.
  std::vector<std::string> credential_files() const;

 private:
  std::string dsn_without_tls() const;
};

// Reads a whole file, trimming one trailing newline (as Secret files often have).
std::string read_secret_file(const std::string& path);

}  // namespace outbox::cli
