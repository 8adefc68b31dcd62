// The probe and metrics server on a free loopback port, spoken to over a plain socket.
#include "http/health_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

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

TEST(HealthServer, ABusyPortIsRefusedWithAnException) {
  HealthServer first("127.0.0.1", 0, {});
  // reuse_address lets a port in TIME_WAIT be bound again, not one with a live listener.
  EXPECT_ANY_THROW(HealthServer("127.0.0.1", first.port(), {}));
}

}  // namespace
}  // namespace outbox::http
