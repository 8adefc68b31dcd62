#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kube/config.hpp"

// HTTPS to one apiserver with Boost.Beast, exposed as blocking calls so that the informer, the
// work-queue workers and the elector can each run on a plain thread. Every connection owns a
// private io_context; each step runs as an async operation under a deadline (Beast's
// tcp_stream timeouts only apply to async operations), and the calling thread runs that
// io_context until the step completes. Idle keep-alive connections are pooled.
namespace outbox::kube {

struct HttpRequest {
  std::string method;  // "GET", "POST", "PUT", "PATCH", "DELETE"
  std::string target;  // path and query, without the server's base path
  std::string body;
  std::string content_type;
  std::string bearer_token;
  std::string accept = "application/json";
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retry_after;  // raw Retry-After header, if any
};

class Transport {
 public:
  // Throws ConfigError when the TLS material is unusable (bad PEM, key not matching cert).
  Transport(const Config& config, std::string user_agent);
  ~Transport();

  // One request/response exchange, all of it within `timeout`. Throws TransportError when no
  // HTTP response arrived (DNS, connect, TLS verification, deadline, connection lost).
  HttpResponse send(const HttpRequest& request, std::chrono::milliseconds timeout);

  // A streaming GET (watch): the response head must arrive within `connect_timeout`, after
  // which each body read must make progress within `idle_timeout` (a silent peer is a dead
  // connection). Body bytes are handed to `on_data` as they arrive, with no framing
  // guarantee. Returns the HTTP status; for a non-200 status the body (its first 64 KiB, ample
  // for a Status) is returned in `error_body` and on_data is not called. Returns normally when the
  // server ends the body, or when `stop` is requested (then `stopped` is set). Throws
  // TransportError otherwise.
  int stream(const HttpRequest& request, std::chrono::milliseconds connect_timeout,
             std::chrono::milliseconds idle_timeout,
             const std::function<void(std::string_view)>& on_data, std::string& error_body,
             std::stop_token stop, bool& stopped);

 private:
  struct Connection;
  std::unique_ptr<Connection> connect(std::chrono::steady_clock::time_point deadline);
  std::unique_ptr<Connection> take_idle();
  void put_idle(std::unique_ptr<Connection> connection);
  HttpResponse exchange(Connection& connection, const HttpRequest& request,
                        std::chrono::steady_clock::time_point deadline, bool& keep_alive);

  struct TlsContext;
  Config config_;
  std::string user_agent_;
  std::unique_ptr<TlsContext> tls_;
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace outbox::kube
