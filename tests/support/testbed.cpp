#include "support/testbed.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include <gtest/gtest.h>

namespace outbox::testbed {

std::string require_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw std::runtime_error(std::string(name) +
                             " is not set: run the tests through scripts/test.sh, "
                             "or source the env file that scripts/testbed/up.sh prints");
  }
  return value;
}

std::string postgres_dsn() {
  return require_env("OUTBOX_TEST_PG_DSN");
}
std::string postgres2_dsn() {
  return require_env("OUTBOX_TEST_PG2_DSN");
}
std::string postgres_bin() {
  return require_env("OUTBOX_TEST_PG_BIN");
}
std::string kafka_bootstrap() {
  return require_env("OUTBOX_TEST_KAFKA_BOOTSTRAP");
}
std::string kafka3_bootstrap() {
  const char* value = std::getenv("OUTBOX_TEST_KAFKA3_BOOTSTRAP");
  return value == nullptr ? "" : value;
}
std::string kubeconfig_path() {
  return require_env("OUTBOX_TEST_KUBECONFIG");
}

void control(const std::string& service, const std::string& action) {
  std::string ctl = require_env("OUTBOX_TESTBED_CTL");
  std::string cmd = ctl + " " + service + " " + action;
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    throw std::runtime_error("test bed command failed: " + cmd);
  }
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
         std::to_string(now % 100000);
}

}  // namespace outbox::testbed
