#include <utility>  // before Boost: asio/awaitable.hpp in 1.74 uses std::exchange

#include "http/health_server.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace outbox::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

struct HealthServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::map<std::string, Handler> routes;
  std::thread thread;

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
    auto req = std::make_shared<beast::http::request<beast::http::string_body>>();
    beast::http::async_read(*socket, *buffer, *req,
                            [this, socket, buffer, req](beast::error_code ec, std::size_t) {
                              if (ec) {
                                return;
                              }
                              respond(socket, *req);
                            });
  }

  void respond(std::shared_ptr<tcp::socket> socket,
               const beast::http::request<beast::http::string_body>& req) {
    Response r;
    std::string target(req.target());
    target = target.substr(0, target.find('?'));
    auto it = routes.find(target);
    if (req.method() != beast::http::verb::get && req.method() != beast::http::verb::head) {
      r = {405, "text/plain", "method not allowed\n"};
    } else if (it == routes.end()) {
      r = {404, "text/plain", "not found\n"};
    } else {
      try {
        r = it->second();
      } catch (const std::exception& e) {
        r = {500, "text/plain", std::string("error: ") + e.what() + "\n"};
      }
    }
    auto res = std::make_shared<beast::http::response<beast::http::string_body>>(
        static_cast<beast::http::status>(r.status), req.version());
    res->set(beast::http::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    res->keep_alive(false);
    res->prepare_payload();
    beast::http::async_write(*socket, *res, [socket, res](beast::error_code, std::size_t) {
      beast::error_code ignored;
      socket->shutdown(tcp::socket::shutdown_send, ignored);
    });
  }
};

HealthServer::HealthServer(const std::string& address, unsigned short port,
                           std::map<std::string, Handler> routes)
    : impl_(std::make_unique<Impl>()) {
  impl_->routes = std::move(routes);
  tcp::endpoint endpoint(asio::ip::make_address(address), port);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

HealthServer::~HealthServer() {
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
