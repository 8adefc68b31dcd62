#include "controller/status_reporter.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "kube/informer.hpp"

namespace outbox::controller {

StatusReporter::StatusReporter(kube::Client& client, StatusReporterOptions options, Sampler sampler)
    : client_(client), options_(std::move(options)), sampler_(std::move(sampler)) {
  thread_ = std::jthread([this](std::stop_token stop) {
    // The first measurement needs a database round trip; give it a moment.
    while (kube::sleep_unless_stopped(stop, std::chrono::milliseconds(1000))) {
      report_once();
      if (!kube::sleep_unless_stopped(stop, options_.interval - std::chrono::milliseconds(1000))) {
        return;
      }
    }
  });
}

StatusReporter::~StatusReporter() {
  thread_.request_stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool StatusReporter::report_once() {
  std::optional<Backlog> b = sampler_();
  if (!b) {
    return false;
  }
  Json patch = {{"apiVersion", "outbox.dev/v1alpha1"},
                {"kind", "OutboxRelay"},
                {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}},
                {"status",
                 {{"backlog",
                   {{"pending", b->pending},
                    {"failed", b->failed},
                    {"oldestPendingSeconds", b->oldest_pending_seconds},
                    {"measuredAt", format_time(std::chrono::system_clock::now())}}}}}};
  try {
    client_.apply_status(kOutboxRelays, options_.ns, patch, kRelayFieldManager, true);
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("status report to outboxrelay {}/{} failed: {}", options_.ns, options_.name,
                 e.what());
    return false;
  }
}

std::pair<std::string, std::string> StatusReporter::parse_target(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string::npos) {
    throw std::invalid_argument("--report-status must be <namespace>/<name>, got \"" + text + "\"");
  }
  return {text.substr(0, slash), text.substr(slash + 1)};
}

}  // namespace outbox::controller
