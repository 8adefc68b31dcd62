#include "support/tcp_forwarder.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace outbox::testbed {
namespace {

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

// Small protocol messages (PostgreSQL's) pass one by one: without this, Nagle's algorithm
// and delayed ACKs can hold each for 40 ms, which the real server does not.
void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// -1 when nothing listens there (the server is down): the client's connection is closed then.
int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in a = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  no_delay(fd);
  return fd;
}

// Passes on what `from` has to read; false once it ended or either side failed.
bool copy_some(int from, int to) {
  char buf[65536];
  ssize_t n = ::recv(from, buf, sizeof buf, 0);
  if (n < 0) {
    return errno == EINTR || errno == EAGAIN;
  }
  if (n == 0) {
    return false;
  }
  for (ssize_t done = 0; done < n;) {
    // MSG_NOSIGNAL: a peer gone is an ended connection, not a SIGPIPE for the test.
    ssize_t w = ::send(to, buf + done, static_cast<std::size_t>(n - done), MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    done += w;
  }
  return true;
}

}  // namespace

struct TcpForwarder::State {
  struct Connection {
    int client = -1;
    int server = -1;
  };

  int listener = -1;
  int port = 0;
  std::atomic<int> target{0};
  std::atomic<bool> stopping{false};
  mutable std::mutex mutex;
  // Under `mutex`: the connections open now. A pump closes its sockets only under it, so
  // cut() never shuts down a descriptor that was closed and reused meanwhile.
  std::list<Connection> open;
  std::uint64_t cuts = 0;
  std::vector<std::thread> pumps;
  std::thread acceptor;

  void accept_loop() {
    while (!stopping) {
      pollfd p{listener, POLLIN, 0};
      // A timeout, so that the destructor's stop is seen without a wake-up descriptor.
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        continue;
      }
      no_delay(client);
      std::uint64_t cuts_before = 0;
      {
        std::lock_guard lock(mutex);
        cuts_before = cuts;
      }
      int server = connect_to(target);
      if (server < 0) {
        ::close(client);
        continue;
      }
      std::lock_guard lock(mutex);
      // A cut while this one was connecting did not see it: it goes too (it may lead to the
      // old target).
      if (cuts != cuts_before) {
        ::close(client);
        ::close(server);
        continue;
      }
      auto it = open.insert(open.end(), Connection{client, server});
      pumps.emplace_back([this, it] { pump(it); });
    }
  }

  void pump(std::list<Connection>::iterator it) {
    const int client = it->client;
    const int server = it->server;
    while (!stopping) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      int n = ::poll(p, 2, 100);
      if (n < 0 && errno != EINTR) {
        break;
      }
      if (n <= 0) {
        continue;
      }
      // POLLHUP/POLLERR: recv() then reports the end or the error.
      if ((p[0].revents != 0 && !copy_some(client, server)) ||
          (p[1].revents != 0 && !copy_some(server, client))) {
        break;
      }
    }
    std::lock_guard lock(mutex);
    ::close(client);
    ::close(server);
    open.erase(it);
  }

  void cut() {
    std::lock_guard lock(mutex);
    ++cuts;
    for (const auto& c : open) {
      // Both ends see the connection end at once; the pump then closes the sockets.
      ::shutdown(c.client, SHUT_RDWR);
      ::shutdown(c.server, SHUT_RDWR);
    }
  }
};

TcpForwarder::TcpForwarder(int target_port) : state_(std::make_unique<State>()) {
  state_->target = target_port;
  state_->listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (state_->listener < 0) {
    throw std::runtime_error(std::string("forwarder: socket: ") + std::strerror(errno));
  }
  int one = 1;
  ::setsockopt(state_->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (::bind(state_->listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(state_->listener, 64) != 0 ||
      ::getsockname(state_->listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(state_->listener);
    throw std::runtime_error("forwarder: listening on 127.0.0.1: " + why);
  }
  state_->port = ntohs(a.sin_port);
  state_->acceptor = std::thread([s = state_.get()] { s->accept_loop(); });
}

TcpForwarder::~TcpForwarder() {
  state_->stopping = true;
  state_->acceptor.join();
  state_->cut();
  std::vector<std::thread> pumps;
  {
    std::lock_guard lock(state_->mutex);
    pumps.swap(state_->pumps);
  }
  // Outside the lock: each pump takes it to close its sockets.
  for (auto& t : pumps) {
    t.join();
  }
  ::close(state_->listener);
}

int TcpForwarder::port() const {
  return state_->port;
}

void TcpForwarder::retarget(int target_port) {
  state_->target = target_port;
  state_->cut();
}

void TcpForwarder::cut_connections() {
  state_->cut();
}

int TcpForwarder::open_connections() const {
  std::lock_guard lock(state_->mutex);
  return static_cast<int>(state_->open.size());
}

}  // namespace outbox::testbed
