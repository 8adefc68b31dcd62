// The probe and metrics server on a free loopback port, spoken to over a plain socket.
#include "http/health_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace outbox::http {
namespace {

// Sends `request` as is and returns everything the server wrote before closing.
std::string round_trip(unsigned short port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    throw std::runtime_error("socket failed");
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    throw std::runtime_error("connect failed");
  }
  std::size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) {
      break;
    }
    sent += static_cast<std::size_t>(n);
  }
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

std::string get(unsigned short port, const std::string& target, const std::string& method = "GET") {
  return round_trip(port, method + " " + target + " HTTP/1.1\r\nHost: test\r\n\r\n");
}

class HealthServerTest : public ::testing::Test {
 protected:
  HealthServer server{"127.0.0.1",
                      0,
                      {{"/healthz",
                        [] {
                          return Response{200, "text/plain", "ok\n"};
                        }},
                       {"/readyz",
                        [] {
                          return Response{503, "text/plain", "not ready: db\n"};
                        }},
                       {"/metrics", []() -> Response { throw std::runtime_error("boom"); }}}};
};

TEST_F(HealthServerTest, PortZeroPicksAFreePortAndAnsweredRoutesCarryTheirStatusAndBody) {
  ASSERT_NE(server.port(), 0);
  std::string ok = get(server.port(), "/healthz");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_NE(ok.find("\r\n\r\nok\n"), std::string::npos) << ok;
  std::string not_ready = get(server.port(), "/readyz");
  EXPECT_EQ(not_ready.rfind("HTTP/1.1 503", 0), 0u) << not_ready;
  EXPECT_NE(not_ready.find("not ready: db"), std::string::npos) << not_ready;
}

TEST_F(HealthServerTest, TheQueryIsIgnoredWhenMatchingARoute) {
  std::string ok = get(server.port(), "/healthz?verbose=1");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
}

TEST_F(HealthServerTest, UnknownPathsWritesAndThrowingHandlersGetTheirOwnStatus) {
  std::string missing = get(server.port(), "/nope");
  EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u) << missing;
  std::string post = get(server.port(), "/healthz", "POST");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  std::string failed = get(server.port(), "/metrics");
  EXPECT_EQ(failed.rfind("HTTP/1.1 500", 0), 0u) << failed;
  EXPECT_NE(failed.find("error: boom"), std::string::npos) << failed;
}

// The last stop before the network (issue 42): an answer that quotes a credential, which no
// handler should give, leaves without it.
TEST(HealthServer, AnAnswerLeavesWithoutACredential) {
  HealthServer server(
      "127.0.0.1", 0,
      {{"/readyz", [] {
          return Response{503, "text/plain", "unreachable: postgresql://app:s3cret@db/x\n"};
        }}});
  const std::string said = get(server.port(), "/readyz");
  EXPECT_NE(said.find("unreachable: postgresql://app:***@db/x"), std::string::npos) << said;
  EXPECT_EQ(said.find("s3cret"), std::string::npos) << said;
}

// A slow route (the relay's /inspect, a database query) runs on a worker of its own: the
// probes answer while it works, its handler sees the query, and requests past max_waiting are
// turned away at once instead of piling up.
TEST(HealthServer, ASlowRouteNeitherDelaysTheProbesNorQueuesWithoutBound) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> started{0};
  HealthServer server("127.0.0.1", 0,
                      {{"/healthz",
                        [] {
                          return Response{200, "text/plain", "ok\n"};
                        }}},
                      {{"/slow",
                        {[&](const Request& r) {
                           ++started;
                           std::unique_lock lock(mu);
                           cv.wait(lock, [&] { return release; });
                           return Response{200, "text/plain", "top=" + r.query.at("top")};
                         },
                         2}}});
  std::vector<std::future<std::string>> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(
        std::async(std::launch::async, [&] { return get(server.port(), "/slow?top=7&x=a%20b"); }));
  }
  while (started.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string probe = get(server.port(), "/healthz");
  EXPECT_EQ(probe.rfind("HTTP/1.1 200", 0), 0u) << "the probe waited for the slow route";
  const std::string turned_away = get(server.port(), "/slow?top=1");
  EXPECT_EQ(turned_away.rfind("HTTP/1.1 429", 0), 0u) << turned_away;
  EXPECT_NE(turned_away.find("Retry-After: 1"), std::string::npos) << turned_away;
  EXPECT_EQ(get(server.port(), "/slow", "POST").rfind("HTTP/1.1 405", 0), 0u);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& f : slow) {
    const std::string answer = f.get();
    EXPECT_NE(answer.find("\r\n\r\ntop=7"), std::string::npos) << answer;
  }
  EXPECT_EQ(started.load(), 2);
}

TEST(HealthServer, QueryStringsAreDecoded) {
  const auto q = parse_query("top=5&format=json&x=a%20b+c&flag&=v");
  EXPECT_EQ(q.at("top"), "5");
  EXPECT_EQ(q.at("format"), "json");
  EXPECT_EQ(q.at("x"), "a b c");
  EXPECT_EQ(q.at("flag"), "");
}

TEST(HealthServer, ABusyPortIsRefusedWithAnException) {
  HealthServer first("127.0.0.1", 0, {});
  // reuse_address lets a port in TIME_WAIT be bound again, not one with a live listener.
  EXPECT_ANY_THROW(HealthServer("127.0.0.1", first.port(), {}));
}

}  // namespace
}  // namespace outbox::http
