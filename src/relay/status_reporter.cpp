#include "relay/status_reporter.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "api/outbox_relay.hpp"
#include "common/redact.hpp"
#include "common/stop.hpp"

namespace outbox::relay {
namespace {
// The status contract with the operator, which reads what this writes.
using api::format_time;
using api::kOutboxRelays;
using api::kRelayFieldManager;
using api::kRelayProblemFieldManager;
using Json = nlohmann::json;
}  // namespace

StatusReporter::StatusReporter(kube::Client& client, StatusReporterOptions options, Sampler sampler)
    : client_(client), options_(std::move(options)), sampler_(std::move(sampler)) {
  thread_ = std::jthread([this](std::stop_token stop) {
    // The first measurement needs a database round trip; give it a moment.
    while (sleep_unless_stopped(stop, std::chrono::milliseconds(1000))) {
      report_once();
      if (!sleep_unless_stopped(stop, options_.interval - std::chrono::milliseconds(1000))) {
        return;
      }
    }
  });
}

bool StatusReporter::report_once() {
  RelayReport report = sampler_();
  const std::string now = format_time(std::chrono::system_clock::now());
  auto apply = [&](Json status, const char* field_manager) {
    Json patch = {{"apiVersion", "outbox.dev/v1alpha1"},
                  {"kind", "OutboxRelay"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}},
                  {"status", std::move(status)}};
    try {
      client_.apply_status(kOutboxRelays, options_.ns, patch, field_manager, true);
      return true;
    } catch (const std::exception& e) {
      spdlog::warn("status report to outboxrelay {}/{} failed: {}", options_.ns, options_.name,
                   e.what());
      return false;
    }
  };
  bool reported = false;
  bool ok = true;
  if (report.backlog) {
    const Backlog& b = *report.backlog;
    Json status = {{"backlog",
                    {{"pending", b.pending},
                     {"failed", b.failed},
                     {"oldestPendingSeconds", b.oldest_pending_seconds},
                     {"measuredAt", now}}}};
    // In the same apply: fields this manager owned and leaves out would be removed.
    if (!report.database.tls.empty()) {
      status["database"]["tls"] = report.database.tls;
    }
    if (const auto& move = report.database.cluster_move) {
      Json reported = {{"from", move->from}, {"to", move->to}, {"positionOffset", move->offset}};
      if (!move->at.empty()) {  // "" is no date-time: the API server would refuse the apply
        reported["at"] = move->at;
      }
      status["database"]["clusterMove"] = std::move(reported);
    }
    ok = apply(std::move(status), kRelayFieldManager);
    reported = true;
  }
  if (!report.problem.empty()) {
    // The operator copies it into conditions and Events: never a credential, whichever path
    // the words took.
    Json problem = {
        {"pod", options_.pod}, {"message", redact(report.problem)}, {"reportedAt", now}};
    if (!report.reason.empty()) {
      problem["reason"] = report.reason;
    }
    const bool applied = apply({{"relayProblem", std::move(problem)}}, kRelayProblemFieldManager);
    problem_reported_ = problem_reported_ || applied;
    ok = ok && applied;
    reported = true;
  } else if (problem_reported_) {
    // Applying nothing under the manager that wrote relayProblem removes it.
    const bool applied = apply(Json::object(), kRelayProblemFieldManager);
    problem_reported_ = !applied;
    ok = ok && applied;
    reported = true;
  }
  return reported && ok;
}

std::pair<std::string, std::string> StatusReporter::parse_target(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string::npos) {
    throw std::invalid_argument("--report-status must be <namespace>/<name>, got \"" + text + "\"");
  }
  return {text.substr(0, slash), text.substr(slash + 1)};
}

}  // namespace outbox::relay
