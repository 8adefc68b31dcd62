#pragma once

#include <memory>

namespace outbox::testbed {

// A TCP forwarder on loopback that a test points at one server and then at another: what a
// client sees when the address it was given (a Service, a DNS name, a proxy) moves to a new
// server. Listens on 127.0.0.1 on a port the kernel picks and forwards each connection to
// 127.0.0.1:<target>; connects to nothing else. Everything stops on destruction.
class TcpForwarder {
 public:
  explicit TcpForwarder(int target_port);
  ~TcpForwarder();
  TcpForwarder(const TcpForwarder&) = delete;
  TcpForwarder& operator=(const TcpForwarder&) = delete;

  int port() const;  // where clients connect
  // New connections go to 127.0.0.1:target_port from now on; those open now are cut (both of
  // their ends closed), so that their clients reconnect, to the new target.
  void retarget(int target_port);
  // Closes every forwarded connection at both ends, as a server restart or a network cut does.
  void cut_connections();
  int open_connections() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace outbox::testbed
