#pragma once

#include <cstdio>
#include <string>

namespace outbox::testing {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a command line through the shell, with OUTBOX_DSN set as a Secret would set it.
inline CliResult run_cli(const std::string& dsn, const std::string& command) {
  std::string full = "OUTBOX_DSN='" + dsn + "' " + command + " 2>&1";
  CliResult r;
  FILE* p = ::popen(full.c_str(), "r");
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) {
    r.output.append(buf, n);
  }
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace outbox::testing
