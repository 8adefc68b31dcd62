#include "cli/signals.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>
#include <system_error>
#include <thread>

namespace outbox::cli {
namespace {

// The self-pipe: a signal handler may only do async-signal-safe things, and
// std::stop_source::request_stop may lock and runs callbacks. So the handler
// writes a byte, and a thread reading the pipe requests the stop.
int g_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int) {
  const int saved = errno;
  const char byte = 1;
  // Non-blocking: once a byte is waiting, further signals add nothing.
  [[maybe_unused]] ssize_t n = ::write(g_pipe[1], &byte, 1);
  errno = saved;
}

}  // namespace

std::stop_token install_stop_signals() {
  static std::stop_source source;
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_pipe, O_CLOEXEC) != 0 || ::fcntl(g_pipe[1], F_SETFL, O_NONBLOCK) != 0) {
      throw std::system_error(errno, std::generic_category(), "signal pipe");
    }
    // Detached: it lives as long as the process, blocked in read() until a signal.
    std::thread([] {
      char byte = 0;
      while (::read(g_pipe[0], &byte, 1) < 0 && errno == EINTR) {
      }
      source.request_stop();
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
  });
  return source.get_token();
}

}  // namespace outbox::cli
