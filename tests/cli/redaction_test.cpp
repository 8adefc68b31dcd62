// The real binary with a Secret whose password libpq (or librdkafka) quotes back: neither the
// CLI's error, nor the relay's log, /readyz or /inspect shows it. Unit: no services (a DSN libpq
// cannot parse never reaches a server; the producer is never asked to reach a broker).
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "support/child_process.hpp"
#include "support/loopback_http.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;

// A password with a bare %: libpq says `invalid percent-encoded token: "Hunter2%zzSecret"`.
const std::string kDsn = "postgresql://outbox:Hunter2%zzSecret@127.0.0.1:1/outbox";

std::string write_file(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << content << "\n";  // a Secret file's trailing newline
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CliRun run(const std::string& args) {
  // --dsn (OUTBOX_DSN) would win over --dsn-file.
  const std::string command =
      "env -u OUTBOX_DSN " + std::string(OUTBOX_BINARY) + " " + args + " 2>&1";
  CliRun r;
  FILE* p = ::popen(command.c_str(), "r");
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) {
    r.output.append(buf, n);
  }
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool shows_password(const std::string& text) {
  return text.find("Hunter2") != std::string::npos || text.find("zzSecret") != std::string::npos;
}

TEST(Redaction, InspectSaysWhyItCannotConnectWithoutThePassword) {
  const std::string file = write_file("redaction-inspect.dsn", kDsn);
  for (const std::string& args :
       {"inspect --dsn-file " + file, "inspect --dsn-file " + file + " --database-sslmode require",
        "--log-format json inspect --dsn-file " + file}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("invalid percent-encoded token"), std::string::npos) << r.output;
    EXPECT_FALSE(shows_password(r.output)) << r.output;
    // One line, ending in a newline, not in libpq's newline spelled out as "\n".
    EXPECT_EQ(r.output.find("\\n"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  }
}

// Starts the relay; returns its /readyz body once it names `problem` (or the last one seen).
std::string readyz_once_it_says(unsigned short port, const std::string& problem) {
  std::string body;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(200ms)) {
    body = testbed::http_get(port, "/readyz");
    if (body.find(problem) != std::string::npos) {
      break;
    }
  }
  return body;
}

TEST(Redaction, TheRelaySaysWhyItIsNotReadyWithoutThePassword) {
  ::unsetenv("OUTBOX_DSN");  // it would win over --dsn-file
  const std::string file = write_file("redaction-relay.dsn", kDsn);
  const std::string log = ::testing::TempDir() + "redaction-relay.log";
  std::remove(log.c_str());
  const unsigned short port = testbed::free_port();
  {
    testbed::ChildProcess relay(
        {OUTBOX_BINARY, "relay", "--dsn-file=" + file, "--brokers=127.0.0.1:1",
         "--initial-backoff=100ms", "--listen=127.0.0.1:" + std::to_string(port)},
        {}, log);
    const std::string readyz = readyz_once_it_says(port, "invalid percent-encoded token");
    EXPECT_NE(readyz.find("invalid percent-encoded token"), std::string::npos) << readyz;
    EXPECT_FALSE(shows_password(readyz)) << readyz;
    const std::string inspect = testbed::http_get(port, "/inspect");
    EXPECT_NE(inspect.find("invalid percent-encoded token"), std::string::npos) << inspect;
    EXPECT_FALSE(shows_password(inspect)) << inspect;
    EXPECT_EQ(relay.terminate(), 0);
  }
  const std::string logged = read_file(log);
  EXPECT_NE(logged.find("invalid percent-encoded token"), std::string::npos) << logged;
  EXPECT_FALSE(shows_password(logged)) << logged;
}

TEST(Redaction, TheRelaySaysWhyKafkaRefusedItsPropertiesWithoutThePassword) {
  ::unsetenv("OUTBOX_DSN");
  const std::string file = write_file("redaction-kafka.dsn", "host=127.0.0.1 port=1");
  // Two settings run together on one line: librdkafka quotes the value it refuses.
  const std::string properties =
      write_file("redaction-kafka.properties",
                 "security.protocol=SASL_PLAINTEXT\n"
                 "sasl.mechanism=SCRAM-SHA-512 sasl.password=Hunter2zzSecret");
  const std::string log = ::testing::TempDir() + "redaction-kafka.log";
  std::remove(log.c_str());
  const unsigned short port = testbed::free_port();
  {
    testbed::ChildProcess relay(
        {OUTBOX_BINARY, "relay", "--dsn-file=" + file, "--brokers=127.0.0.1:1",
         "--kafka-properties-file=" + properties, "--listen=127.0.0.1:" + std::to_string(port)},
        {}, log);
    const std::string readyz = readyz_once_it_says(port, "sasl.mechanism rejected");
    EXPECT_NE(readyz.find("kafka property sasl.mechanism rejected"), std::string::npos) << readyz;
    EXPECT_FALSE(shows_password(readyz)) << readyz;
    EXPECT_EQ(relay.terminate(), 0);
  }
  const std::string logged = read_file(log);
  EXPECT_NE(logged.find("sasl.mechanism rejected"), std::string::npos) << logged;
  EXPECT_FALSE(shows_password(logged)) << logged;
}

}  // namespace
}  // namespace outbox
