#pragma once

#include <chrono>
#include <stop_token>

namespace outbox {

// Sleeps for `duration` unless `stop` is requested first (then it wakes at once); returns false
// if stopped. The one interruptible sleep of the long-running loops.
bool sleep_unless_stopped(std::stop_token stop, std::chrono::nanoseconds duration);

}  // namespace outbox
