#include <utility>  // before Boost: asio/awaitable.hpp in 1.74 uses std::exchange

#include "http/health_server.hpp"

#include <atomic>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/percent.hpp"
#include "common/redact.hpp"

namespace outbox::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

std::string decode(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out.push_back(' ');
    } else if (text[i] == '%' && i + 2 < text.size() && hex_digit(text[i + 1]) >= 0 &&
               hex_digit(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> parse_query(const std::string& query) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string::npos) {
      end = query.size();
    }
    const std::string part = query.substr(start, end - start);
    if (!part.empty()) {
      const std::size_t eq = part.find('=');
      out[decode(part.substr(0, eq))] =
          eq == std::string::npos ? std::string() : decode(part.substr(eq + 1));
    }
    start = end + 1;
  }
  return out;
}

struct HealthServer::Impl {
  using HttpRequest = beast::http::request<beast::http::string_body>;

  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::map<std::string, Handler> routes;
  std::map<std::string, SlowRoute> slow_routes;
  std::thread thread;
  // The slow routes' worker: one handler at a time, off the probes' thread.
  asio::io_context slow_io;
  asio::executor_work_guard<asio::io_context::executor_type> slow_work =
      asio::make_work_guard(slow_io);
  std::thread slow_thread;
  std::atomic<std::size_t> slow_waiting{0};

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        return;  // acceptor closed: shutting down
      }
      serve(std::make_shared<tcp::socket>(std::move(socket)));
      accept();
    });
  }

  void serve(std::shared_ptr<tcp::socket> socket) {
    auto buffer = std::make_shared<beast::flat_buffer>();
    auto req = std::make_shared<HttpRequest>();
    beast::http::async_read(*socket, *buffer, *req,
                            [this, socket, buffer, req](beast::error_code ec, std::size_t) {
                              if (ec) {
                                return;
                              }
                              respond(socket, *req);
                            });
  }

  void respond(std::shared_ptr<tcp::socket> socket, const HttpRequest& req) {
    const std::string full(req.target());
    const std::size_t q = full.find('?');
    const std::string target = full.substr(0, q);
    if (req.method() != beast::http::verb::get && req.method() != beast::http::verb::head) {
      write(socket, req.version(), {405, "text/plain", "method not allowed\n"});
      return;
    }
    if (auto slow = slow_routes.find(target); slow != slow_routes.end()) {
      respond_slow(socket, req.version(), slow->second,
                   {target, parse_query(q == std::string::npos ? "" : full.substr(q + 1))});
      return;
    }
    auto it = routes.find(target);
    Response r;
    if (it == routes.end()) {
      r = {404, "text/plain", "not found\n"};
    } else {
      r = run([&] { return it->second(); });
    }
    write(socket, req.version(), std::move(r));
  }

  void respond_slow(std::shared_ptr<tcp::socket> socket, unsigned version, const SlowRoute& route,
                    Request request) {
    if (slow_waiting.fetch_add(1) >= route.max_waiting) {
      slow_waiting.fetch_sub(1);
      write(socket, version, {429, "text/plain", "busy: too many requests waiting; try again\n"});
      return;
    }
    asio::post(slow_io, [this, socket, version, &route, request = std::move(request)] {
      Response r = run([&] { return route.handler(request); });
      slow_waiting.fetch_sub(1);
      asio::post(io, [this, socket, version, r = std::move(r)]() mutable {
        write(socket, version, std::move(r));
      });
    });
  }

  template <typename F>
  static Response run(F&& handler) {
    try {
      return handler();
    } catch (const std::exception& e) {
      return {500, "text/plain", std::string("error: ") + e.what() + "\n"};
    }
  }

  static void write(std::shared_ptr<tcp::socket> socket, unsigned version, Response r) {
    auto res = std::make_shared<beast::http::response<beast::http::string_body>>(
        static_cast<beast::http::status>(r.status), version);
    res->set(beast::http::field::content_type, r.content_type);
    if (r.status == 429) {
      res->set(beast::http::field::retry_after, "1");
    }
    // The last stop before the network: /readyz and /inspect quote the relay's problems, which
    // come from libpq and librdkafka.
    res->body() = redact(r.body);
    res->keep_alive(false);
    res->prepare_payload();
    beast::http::async_write(*socket, *res, [socket, res](beast::error_code, std::size_t) {
      beast::error_code ignored;
      socket->shutdown(tcp::socket::shutdown_send, ignored);
    });
  }
};

HealthServer::HealthServer(const std::string& address, unsigned short port,
                           std::map<std::string, Handler> routes,
                           std::map<std::string, SlowRoute> slow_routes)
    : impl_(std::make_unique<Impl>()) {
  impl_->routes = std::move(routes);
  impl_->slow_routes = std::move(slow_routes);
  tcp::endpoint endpoint(asio::ip::make_address(address), port);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
  impl_->slow_thread = std::thread([this] { impl_->slow_io.run(); });
}

HealthServer::~HealthServer() {
  // The worker first: a handler still running finishes (its answer is dropped with the
  // server), none waiting starts.
  impl_->slow_work.reset();
  impl_->slow_io.stop();
  impl_->slow_thread.join();
  asio::post(impl_->io, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->io.stop();
  });
  impl_->thread.join();
}

unsigned short HealthServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

}  // namespace outbox::http
