#include "common/stop.hpp"

#include <condition_variable>
#include <mutex>

namespace outbox {

bool sleep_unless_stopped(std::stop_token stop, std::chrono::nanoseconds duration) {
  std::mutex mutex;
  std::condition_variable_any cv;
  std::unique_lock lock(mutex);
  return !cv.wait_for(lock, stop, duration, [] { return false; }) && !stop.stop_requested();
}

}  // namespace outbox
