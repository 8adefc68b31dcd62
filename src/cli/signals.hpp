#pragma once

#include <stop_token>

namespace outbox::cli {

// A token that SIGTERM or SIGINT stops; long-running commands pass it down and shut
// down cleanly. Installs the handlers on the first call; every call returns a token
// of the same source.
std::stop_token install_stop_signals();

}  // namespace outbox::cli
