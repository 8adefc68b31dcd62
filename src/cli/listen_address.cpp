#include "cli/listen_address.hpp"

#include <charconv>
#include <stdexcept>

#include <CLI/CLI.hpp>

namespace outbox::cli {

void add_listen_option(CLI::App& cmd, std::string& listen) {
  cmd.add_option("--listen", listen, "address:port for /healthz, /readyz, /metrics (port 0: any)")
      ->envname("OUTBOX_LISTEN")
      ->capture_default_str();
}

ListenAddress parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    throw std::invalid_argument("--listen must be address:port");
  }
  std::string address = listen.substr(0, colon);
  if (address.size() > 2 && address.front() == '[') {
    address = address.substr(1, address.size() - 2);
  }
  const std::string port_text = listen.substr(colon + 1);
  int port_number = -1;
  const char* end = port_text.data() + port_text.size();
  if (auto [ptr, ec] = std::from_chars(port_text.data(), end, port_number);
      ec != std::errc() || ptr != end) {
    port_number = -1;
  }
  if (port_number < 0 || port_number > 65535) {
    throw std::invalid_argument("--listen port \"" + port_text +
                                "\" is not a number from 0 to 65535");
  }
  return {address, static_cast<unsigned short>(port_number)};
}

}  // namespace outbox::cli
