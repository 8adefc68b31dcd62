#pragma once

#include <string>

namespace CLI {
class App;
}

namespace outbox::cli {

// Where a long-running command (relay, controller) serves /healthz, /readyz and /metrics: one
// flag, --listen address:port (env OUTBOX_LISTEN), the same for every such command.
struct ListenAddress {
  std::string address;
  unsigned short port = 0;  // 0: any free port
};

inline constexpr const char* kDefaultListen = "0.0.0.0:8080";

void add_listen_option(CLI::App& cmd, std::string& listen);

// "address:port", the address possibly in brackets (IPv6). Throws std::invalid_argument
// naming --listen.
ListenAddress parse_listen(const std::string& listen);

}  // namespace outbox::cli
