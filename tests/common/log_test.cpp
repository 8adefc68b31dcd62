#include "common/log.hpp"
#include "common/redact.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace outbox {
namespace {

// A password that ends a quoted value early for anyone who ignores `\'`.
const std::string kTrickyDsn =
    R"(host=db user=app password='p\'ss word' sslpassword=k3y dbname=orders)";
// What libpq says about a wrong password, newline and all.
const std::string kLibpqError =
    "connection to server at \"db\" (10.0.0.1), port 5432 failed: FATAL:  password "
    "authentication failed for user \"app\"\n";
const std::string kAwkward = "quote \" backslash \\ tab \t newline \n second line \x01 end";

// Runs `log` with configure_logging's logger (stderr) and returns what reached stderr, split
// into lines.
std::vector<std::string> lines_logged(const std::string& format, const LogFields& fields,
                                      const std::function<void()>& log) {
  char path[] = "/tmp/outbox-log-test-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  EXPECT_TRUE(configure_logging("info", format, fields));
  log();
  spdlog::default_logger()->flush();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  std::remove(path);
  return lines;
}

// Three awkward messages through the real logger.
std::vector<std::string> log_through_real_logger(const std::string& format,
                                                 const LogFields& fields = {}) {
  return lines_logged(format, fields, [] {
    spdlog::error("database unreachable ({}): {}", redact_dsn(kTrickyDsn), kLibpqError);
    spdlog::warn("{}", kAwkward);
    spdlog::info("plain line");
  });
}

// The relay and job pods log which resource they serve in every JSON line, so a log
// pipeline can filter one OutboxRelay; values are escaped (a % or a quote stays as is).
TEST(Logging, EveryJsonLineCarriesTheFieldsItWasGiven) {
  const LogFields fields = {
      {"namespace", "shop"}, {"outboxrelay", "orders"}, {"replica", "orders-relay-7d9 \"%s\""}};
  const auto lines = log_through_real_logger("json", fields);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    nlohmann::json record;
    ASSERT_NO_THROW(record = nlohmann::json::parse(line)) << line;
    EXPECT_EQ(record.at("namespace"), "shop") << line;
    EXPECT_EQ(record.at("outboxrelay"), "orders") << line;
    EXPECT_EQ(record.at("replica"), "orders-relay-7d9 \"%s\"") << line;
    EXPECT_TRUE(record.contains("msg")) << line;
  }
  EXPECT_EQ(logging_format(), "json");
  setenv("OUTBOX_LOG_NAMESPACE", "shop", 1);
  setenv("OUTBOX_LOG_REPLICA", "orders-relay-1", 1);
  unsetenv("OUTBOX_LOG_OUTBOXRELAY");
  EXPECT_EQ(log_fields_from_environment(),
            (LogFields{{"namespace", "shop"}, {"replica", "orders-relay-1"}}));
  unsetenv("OUTBOX_LOG_NAMESPACE");
  unsetenv("OUTBOX_LOG_REPLICA");
}

// A line about one event names it; the lines before and after it do not.
TEST(Logging, ALineAboutOneEventCarriesItsEventId) {
  const auto lines = lines_logged("json", {{"outboxrelay", "orders"}}, [] {
    spdlog::info("before");
    {
      const ScopedLogField field("event_id", "0b9f\"%s");
      spdlog::warn("event moved to FAILED");
    }
    spdlog::info("after");
  });
  ASSERT_EQ(lines.size(), 3u);
  std::vector<nlohmann::json> records;
  for (const auto& line : lines) {
    records.push_back(nlohmann::json::parse(line));
  }
  EXPECT_FALSE(records[0].contains("event_id"));
  EXPECT_EQ(records[1].at("event_id"), "0b9f\"%s");
  EXPECT_EQ(records[1].at("outboxrelay"), "orders");
  EXPECT_FALSE(records[2].contains("event_id"));
}

TEST(Logging, EveryJsonLineParsesAndKeepsTheMessage) {
  const auto lines = log_through_real_logger("json");
  ASSERT_EQ(lines.size(), 3u);
  std::vector<std::string> messages;
  for (const auto& line : lines) {
    nlohmann::json record;
    ASSERT_NO_THROW(record = nlohmann::json::parse(line)) << line;
    EXPECT_TRUE(record.at("ts").is_string());
    EXPECT_TRUE(record.at("level").is_string());
    messages.push_back(record.at("msg").get<std::string>());
  }
  EXPECT_EQ(messages[0], "database unreachable (" + redact_dsn(kTrickyDsn) + "): " + kLibpqError);
  EXPECT_EQ(messages[1], kAwkward);
  EXPECT_EQ(messages[2], "plain line");
  for (const auto& line : lines) {
    EXPECT_EQ(line.find("ss word"), std::string::npos) << line;
    EXPECT_EQ(line.find("k3y"), std::string::npos) << line;
  }
}

TEST(Logging, EveryTextRecordIsOneLine) {
  const auto lines = log_through_real_logger("text");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find(" error database unreachable ("), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("for user \"app\"\\n"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(R"(quote " backslash \ tab \t newline \n second line \x01 end)"),
            std::string::npos)
      << lines[1];
  for (const auto& line : lines) {
    EXPECT_EQ(line.find("ss word"), std::string::npos) << line;
    EXPECT_EQ(line.find("k3y"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace outbox
