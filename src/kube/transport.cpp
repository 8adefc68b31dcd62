// <utility> first: Boost 1.74's asio headers use std::exchange without including it.
#include <utility>

#include "kube/transport.hpp"

#include <array>

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "kube/errors.hpp"

namespace outbox::kube {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using error_code = boost::system::error_code;
using TimePoint = std::chrono::steady_clock::time_point;

constexpr size_t kMaxIdleConnections = 8;
// A list of a few thousand objects is megabytes; refuse only the absurd.
constexpr std::uint64_t kMaxResponseBody = 512ull * 1024 * 1024;

// Starts one async operation and runs the connection's io_context until it completes. The
// handler must only record the result: the io_context is private to this connection, so
// nothing else runs on it except a stop request posted by stream().
template <class Start>
error_code run_step(asio::io_context& ioc, Start&& start) {
  error_code result = asio::error::would_block;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

http::verb parse_verb(const std::string& method) {
  http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) {
    throw std::invalid_argument("unknown HTTP method " + method);
  }
  return verb;
}

bool is_stale_connection_error(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::ssl::error::stream_truncated;
}

}  // namespace

struct Transport::TlsContext {
  asio::ssl::context context{asio::ssl::context::tls_client};
};

struct Transport::Connection {
  asio::io_context ioc;
  beast::ssl_stream<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  bool reused = false;

  explicit Connection(asio::ssl::context& tls) : stream(ioc, tls) {}
};

Transport::Transport(const Config& config, std::string user_agent)
    : config_(config), user_agent_(std::move(user_agent)), tls_(std::make_unique<TlsContext>()) {
  auto& ctx = tls_->context;
  ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                  asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                  asio::ssl::context::no_tlsv1_1);
  try {
    if (config_.insecure_skip_tls_verify) {
      ctx.set_verify_mode(asio::ssl::verify_none);
    } else {
      ctx.set_verify_mode(asio::ssl::verify_peer);
      if (config_.ca_pem.empty()) {
        ctx.set_default_verify_paths();
      } else {
        ctx.add_certificate_authority(asio::buffer(config_.ca_pem));
      }
    }
  } catch (const boost::system::system_error& e) {
    throw ConfigError("certificate authority is not a usable PEM certificate: " +
                      std::string(e.what()));
  }
  if (!config_.client_cert_pem.empty()) {
    try {
      ctx.use_certificate_chain(asio::buffer(config_.client_cert_pem));
    } catch (const boost::system::system_error& e) {
      throw ConfigError("client certificate is not a usable PEM certificate: " +
                        std::string(e.what()));
    }
    try {
      ctx.use_private_key(asio::buffer(config_.client_key_pem), asio::ssl::context::pem);
    } catch (const boost::system::system_error& e) {
      throw ConfigError("client key is not a usable PEM key (or does not match the certificate): " +
                        std::string(e.what()));
    }
  }
}

Transport::~Transport() = default;

std::unique_ptr<Transport::Connection> Transport::connect(TimePoint deadline) {
  auto connection = std::make_unique<Connection>(tls_->context);
  auto& ioc = connection->ioc;
  auto& stream = connection->stream;
  const std::string where = config_.address.authority();

  asio::ip::tcp::resolver resolver(ioc);
  asio::ip::tcp::resolver::results_type endpoints;
  error_code ec = run_step(ioc, [&](auto handler) {
    resolver.async_resolve(config_.address.host, config_.address.port,
                           [&endpoints, handler](error_code e, auto results) mutable {
                             endpoints = results;
                             handler(e);
                           });
  });
  if (ec) {
    throw TransportError("cannot resolve " + where + ": " + ec.message());
  }
  beast::get_lowest_layer(stream).expires_at(deadline);
  ec = run_step(ioc, [&](auto handler) {
    beast::get_lowest_layer(stream).async_connect(endpoints, handler);
  });
  if (ec) {
    throw TransportError("cannot connect to " + where + ": " +
                         (ec == beast::error::timeout ? "deadline exceeded" : ec.message()));
  }

  // The name the certificate must carry: tls-server-name when set, else the URL's host.
  // IP literals are checked against IP SANs and are never sent as SNI (RFC 6066).
  const std::string& expected =
      config_.tls_server_name.empty() ? config_.address.host : config_.tls_server_name;
  bool expected_is_ip = config_.tls_server_name.empty() && config_.address.host_is_ip;
  SSL* ssl = stream.native_handle();
  if (!expected_is_ip && !SSL_set_tlsext_host_name(ssl, expected.c_str())) {
    throw TransportError("cannot set TLS SNI " + expected);
  }
  if (!config_.insecure_skip_tls_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    int ok = expected_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, expected.c_str())
                            : X509_VERIFY_PARAM_set1_host(param, expected.c_str(), 0);
    if (ok != 1) {
      throw TransportError("cannot set TLS peer name " + expected);
    }
  }
  ec = run_step(
      ioc, [&](auto handler) { stream.async_handshake(asio::ssl::stream_base::client, handler); });
  if (ec) {
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      throw TransportError("TLS verification of " + where + " (expected name " + expected +
                           ") failed: " + X509_verify_cert_error_string(verify));
    }
    throw TransportError("TLS handshake with " + where + " failed: " +
                         (ec == beast::error::timeout ? "deadline exceeded" : ec.message()));
  }
  return connection;
}

std::unique_ptr<Transport::Connection> Transport::take_idle() {
  std::lock_guard lock(pool_mutex_);
  if (idle_.empty()) {
    return nullptr;
  }
  auto connection = std::move(idle_.back());
  idle_.pop_back();
  connection->reused = true;
  return connection;
}

void Transport::put_idle(std::unique_ptr<Connection> connection) {
  std::lock_guard lock(pool_mutex_);
  if (idle_.size() < kMaxIdleConnections) {
    idle_.push_back(std::move(connection));
  }
}

namespace {

http::request<http::string_body> build_request(const Config& config, const std::string& agent,
                                               const HttpRequest& request) {
  http::request<http::string_body> req{parse_verb(request.method),
                                       config.address.base_path + request.target, 11};
  req.set(http::field::host, config.address.host_is_ip || config.address.port != "443"
                                 ? config.address.authority()
                                 : config.address.host);
  req.set(http::field::user_agent, agent);
  req.set(http::field::accept, request.accept);
  if (!request.bearer_token.empty()) {
    req.set(http::field::authorization, "Bearer " + request.bearer_token);
  }
  if (!request.content_type.empty()) {
    req.set(http::field::content_type, request.content_type);
  }
  req.keep_alive(true);
  req.body() = request.body;
  req.prepare_payload();
  return req;
}

// Bytes of a streamed body: a 200's go to `on_data`; another status's, up to 64 KiB, to
// `error_body` (the error it explains).
void deliver_chunk(int status, std::string_view received,
                   const std::function<void(std::string_view)>& on_data, std::string& error_body) {
  if (received.empty()) {
    return;
  }
  if (status == 200) {
    on_data(received);
  } else if (error_body.size() < 64 * 1024) {
    error_body.append(received);
  }
}

// Why a streamed body stopped short: no data within `idle_timeout`, or the connection's error.
std::string stream_failure(const error_code& ec, std::chrono::milliseconds idle_timeout) {
  return ec == beast::error::timeout ? "no data for " + std::to_string(idle_timeout.count()) +
                                           " ms (connection presumed dead)"
                                     : ec.message();
}

}  // namespace

HttpResponse Transport::exchange(Connection& connection, const HttpRequest& request,
                                 TimePoint deadline, bool& keep_alive) {
  auto req = build_request(config_, user_agent_, request);
  auto& lowest = beast::get_lowest_layer(connection.stream);
  lowest.expires_at(deadline);
  error_code ec = run_step(
      connection.ioc, [&](auto handler) { http::async_write(connection.stream, req, handler); });
  if (!ec) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBody);
    ec = run_step(connection.ioc, [&](auto handler) {
      http::async_read(connection.stream, connection.buffer, parser, handler);
    });
    if (!ec) {
      auto& res = parser.get();
      keep_alive = res.keep_alive();
      HttpResponse response;
      response.status = static_cast<int>(res.result_int());
      response.retry_after = std::string(res[http::field::retry_after]);
      response.body = std::move(res.body());
      return response;
    }
  }
  throw boost::system::system_error(ec);
}

HttpResponse Transport::send(const HttpRequest& request, std::chrono::milliseconds timeout) {
  const TimePoint deadline = std::chrono::steady_clock::now() + timeout;
  auto connection = take_idle();
  // A pooled connection may have been closed by the server while idle; that shows up as EOF or
  // reset on first use and is retried once on a fresh connection. The request cannot have been
  // processed: the server closes only idle connections.
  for (int attempt = 0;; ++attempt) {
    if (!connection) {
      connection = connect(deadline);
    }
    try {
      bool keep_alive = false;
      HttpResponse response = exchange(*connection, request, deadline, keep_alive);
      if (keep_alive) {
        put_idle(std::move(connection));
      }
      return response;
    } catch (const boost::system::system_error& e) {
      if (connection->reused && attempt == 0 && is_stale_connection_error(e.code())) {
        connection.reset();
        continue;
      }
      throw TransportError(
          request.method + " " + request.target + " to " + config_.address.authority() +
          " failed: " +
          (e.code() == beast::error::timeout ? "deadline exceeded" : e.code().message()));
    }
  }
}

int Transport::stream(const HttpRequest& request, std::chrono::milliseconds connect_timeout,
                      std::chrono::milliseconds idle_timeout,
                      const std::function<void(std::string_view)>& on_data, std::string& error_body,
                      std::stop_token stop, bool& stopped) {
  stopped = false;
  const std::string what = request.method + " " + request.target;
  // A watch holds its connection for minutes: never take it from, or return it to, the pool.
  auto connection = connect(std::chrono::steady_clock::now() + connect_timeout);
  auto& lowest = beast::get_lowest_layer(connection->stream);
  // Runs in the thread that requests the stop; posting to the connection's private io_context
  // is thread-safe and makes the blocked read complete with operation_aborted.
  std::stop_callback on_stop(stop, [&connection] {
    asio::post(connection->ioc,
               [&connection] { beast::get_lowest_layer(connection->stream).cancel(); });
  });

  auto req = build_request(config_, user_agent_, request);
  lowest.expires_after(connect_timeout);
  error_code ec = run_step(
      connection->ioc, [&](auto handler) { http::async_write(connection->stream, req, handler); });
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);  // a watch body is unbounded by design
  if (!ec) {
    ec = run_step(connection->ioc, [&](auto handler) {
      http::async_read_header(connection->stream, connection->buffer, parser, handler);
    });
  }
  const int status = ec ? 0 : static_cast<int>(parser.get().result_int());
  std::array<char, 16 * 1024> buf;
  while (!ec && !parser.is_done()) {
    if (stop.stop_requested()) {
      stopped = true;
      return status;
    }
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    lowest.expires_after(idle_timeout);
    ec = run_step(connection->ioc, [&](auto handler) {
      http::async_read_some(connection->stream, connection->buffer, parser, handler);
    });
    if (ec == http::error::need_buffer) {
      ec = {};
    }
    deliver_chunk(status, std::string_view(buf.data(), buf.size() - parser.get().body().size),
                  on_data, error_body);
  }
  if (ec) {
    if (stop.stop_requested()) {
      stopped = true;
      return status;
    }
    throw TransportError(what + " to " + config_.address.authority() + ": " +
                         stream_failure(ec, idle_timeout));
  }
  return status;
}

}  // namespace outbox::kube
