#pragma once

#include <cstddef>
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

// What a slow route's handler is told of the request: the path and the query's parameters
// (percent-decoded; a repeated name keeps its last value).
struct Request {
  std::string path;
  std::map<std::string, std::string> query;
};

// A route whose handler may take a while (a database query): it runs on a worker thread of its
// own, one request at a time, so the probes on the other routes never wait behind it. At most
// `max_waiting` requests are in hand (the one running and those waiting for the worker); more
// are answered 429 at once, so a client that loops cannot pile work up behind it.
struct SlowRoute {
  std::function<Response(const Request&)> handler;
  std::size_t max_waiting = 4;
};

// A small HTTP/1.1 server for /healthz, /readyz and /metrics (and the relay's /inspect, a slow
// route). GET and HEAD only: nothing it serves can change anything; one handler per exact
// path; runs on its own thread so a busy relay loop never delays a probe.
class HealthServer {
 public:
  using Handler = std::function<Response()>;

  // Binds to address:port (port 0 picks a free one). Throws on bind failure.
  HealthServer(const std::string& address, unsigned short port,
               std::map<std::string, Handler> routes,
               std::map<std::string, SlowRoute> slow_routes = {});
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  unsigned short port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The parameters of a query string ("a=1&b=x%20y"), percent-decoded; "+" is a space.
std::map<std::string, std::string> parse_query(const std::string& query);

}  // namespace outbox::http
