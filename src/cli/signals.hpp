#pragma once

#include <atomic>

namespace outbox::cli {

// Set by SIGTERM or SIGINT; long-running commands poll it and shut down cleanly.
const std::atomic<bool>& install_stop_signals();

}  // namespace outbox::cli
