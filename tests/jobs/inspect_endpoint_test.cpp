// The relay's GET /inspect against a real PostgreSQL over real HTTP: what `outbox-operator
// inspect` prints, bounded, cached, read-only, without payloads or the DSN; and the relay
// binary serving it on its --listen port beside /healthz.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "cli/inspect_endpoint.hpp"
#include "http/health_server.hpp"
#include "relay_fixture.hpp"
#include "support/child_process.hpp"
#include "support/loopback_http.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testing::OutboxTestTable;

// 10 events: 7 pending (one of them carrying a marker in its payload), 3 FAILED with an error.
void seed(OutboxTestTable& t) {
  t.insert(10, 5);
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction tx(conn);
  const std::string q = t.table.quoted();
  tx.exec("UPDATE " + q + " SET status = 2, last_error = 'poison pill', retry_count = 3 " +
          "WHERE id IN (SELECT id FROM " + q + " ORDER BY id DESC LIMIT 3)");
  tx.exec("UPDATE " + q +
          " SET payload = '{\"card\": \"PAYLOAD-MARKER-4111\"}' WHERE id = (SELECT min(id) "
          "FROM " +
          q + ")");
}

// The whole answer (status line, headers, body) of one request.
std::string raw(unsigned short port, const std::string& method, const std::string& target) {
  return testbed::http_request(port, method + " " + target + " HTTP/1.1\r\nHost: t\r\n\r\n");
}

int status_of(const std::string& answer) {
  return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : 0;
}

std::string body_of(const std::string& answer) {
  const std::size_t at = answer.find("\r\n\r\n");
  return at == std::string::npos ? "" : answer.substr(at + 4);
}

struct Served {
  explicit Served(cli::InspectEndpointOptions o)
      : endpoint(std::move(o)),
        server("127.0.0.1", 0, {},
               {{"/inspect", {[this](const http::Request& r) { return endpoint.handle(r); }}}}) {}
  cli::InspectEndpoint endpoint;
  http::HealthServer server;
};

cli::InspectEndpointOptions options_for(const OutboxTestTable& t) {
  cli::InspectEndpointOptions o;
  const std::string dsn = t.dsn;
  o.dsn = [dsn] { return dsn; };
  o.table = t.table;
  return o;
}

TEST(InspectEndpoint, AnswersWhatInspectPrintsAsJsonAndTextWithoutPayloads) {
  OutboxTestTable t;
  seed(t);
  Served s(options_for(t));
  const std::string json = raw(s.server.port(), "GET", "/inspect?format=json&top=2");
  ASSERT_EQ(status_of(json), 200) << json;
  EXPECT_NE(json.find("application/json"), std::string::npos) << json;
  const nlohmann::json j = nlohmann::json::parse(body_of(json));
  EXPECT_EQ(j.at("pending"), 7) << j.dump();
  EXPECT_EQ(j.at("failed"), 3) << j.dump();
  EXPECT_EQ(j.at("lastErrors").size(), 2u) << "top=2 bounds every list: " << j.dump();
  EXPECT_EQ(j.at("lastErrors").at(0).at("error"), "poison pill") << j.dump();

  const std::string text = raw(s.server.port(), "GET", "/inspect");
  ASSERT_EQ(status_of(text), 200) << text;
  EXPECT_NE(text.find("pending 7, sent 0, FAILED 3"), std::string::npos) << text;
  for (const std::string& answer : {json, text}) {
    EXPECT_EQ(answer.find("PAYLOAD-MARKER"), std::string::npos) << "a payload was served";
  }
}

TEST(InspectEndpoint, RefusesWritesAndUnboundedOrUnknownParameters) {
  OutboxTestTable t;
  seed(t);
  Served s(options_for(t));
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    EXPECT_EQ(status_of(raw(s.server.port(), method, "/inspect")), 405) << method;
  }
  for (const char* target : {"/inspect?top=0", "/inspect?top=101", "/inspect?top=5x",
                             "/inspect?format=yaml", "/inspect?requeue=all"}) {
    EXPECT_EQ(status_of(raw(s.server.port(), "GET", target)), 400) << target;
  }
  EXPECT_EQ(s.endpoint.queries(), 0) << "a refused request never reaches the database";
  EXPECT_EQ(t.count("status = 2"), 3);
}

TEST(InspectEndpoint, AnAnswerIsReusedForAFewSecondsSoPollingCostsOneQuery) {
  OutboxTestTable t;
  seed(t);
  cli::InspectEndpointOptions o = options_for(t);
  o.fresh = 2s;
  Served s(o);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(status_of(raw(s.server.port(), "GET", "/inspect?format=json")), 200);
  }
  EXPECT_EQ(s.endpoint.queries(), 1);
  t.insert(1, 1, 100);
  std::this_thread::sleep_for(2100ms);
  const std::string after = raw(s.server.port(), "GET", "/inspect?format=json");
  EXPECT_EQ(nlohmann::json::parse(body_of(after)).at("pending"), 8) << after;
  EXPECT_EQ(s.endpoint.queries(), 2);
}

TEST(InspectEndpoint, ADatabaseFailureIsA503ThatNeverQuotesTheDsn) {
  OutboxTestTable t;
  cli::InspectEndpointOptions o = options_for(t);
  const std::string dsn =
      "postgresql://outbox:S3cretPassw0rd@127.0.0.1:" + std::to_string(testbed::free_port()) +
      "/outbox?connect_timeout=2";
  o.dsn = [dsn] { return dsn; };
  Served s(o);
  const std::string answer = raw(s.server.port(), "GET", "/inspect");
  EXPECT_EQ(status_of(answer), 503) << answer;
  EXPECT_EQ(answer.find("S3cretPassw0rd"), std::string::npos) << answer;
}

// The relay process serves /inspect on its --listen port: one binary, the probes' server.
TEST(InspectEndpoint, TheRelayBinaryServesItBesideItsProbes) {
  OutboxTestTable t;
  seed(t);
  const unsigned short port = testbed::free_port();
  const std::string log = std::filesystem::temp_directory_path() /
                          ("inspect-relay-" + std::to_string(::getpid()) + ".log");
  testbed::ChildProcess relay(
      {OUTBOX_BINARY, "relay", "--table", t.table.plain(), "--brokers", testbed::kafka_bootstrap(),
       "--topic", t.topic, "--listen", "127.0.0.1:" + std::to_string(port)},
      {{"OUTBOX_DSN", t.dsn}}, log);
  std::string answer;
  for (int i = 0; i < 100 && status_of(answer) != 200; ++i) {
    std::this_thread::sleep_for(100ms);
    try {
      answer = raw(port, "GET", "/inspect?format=json");
    } catch (const std::exception&) {
    }
  }
  ASSERT_EQ(status_of(answer), 200) << answer << "\nlog: " << log;
  const nlohmann::json j = nlohmann::json::parse(body_of(answer));
  EXPECT_EQ(j.at("failed"), 3) << j.dump();
  EXPECT_EQ(status_of(raw(port, "POST", "/inspect")), 405);
}

}  // namespace
}  // namespace outbox
