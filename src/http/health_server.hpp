#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace outbox::http {

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// A small HTTP/1.1 server for /healthz, /readyz and /metrics. GET only; one
// handler per exact path; runs on its own thread so a busy relay loop never
// delays a probe.
class HealthServer {
 public:
  using Handler = std::function<Response()>;

  // Binds to address:port (port 0 picks a free one). Throws on bind failure.
  HealthServer(const std::string& address, unsigned short port,
               std::map<std::string, Handler> routes);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  unsigned short port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::http
