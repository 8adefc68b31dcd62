#include "controller/job_status.hpp"

#include <string_view>

#include <spdlog/spdlog.h>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"

namespace outbox::controller {
namespace {

// The CRD caps the message; an exception text (a libpq error with its context) can be long.
constexpr std::size_t kMaxMessage = 1024;
constexpr std::size_t kMaxRequeueToken = 63;

}  // namespace

std::string requeue_token_problem(const std::string& token) {
  if (token.empty()) {
    return "the request token is empty";
  }
  if (token.size() > kMaxRequeueToken) {
    return "the request token is " + std::to_string(token.size()) + " characters long (at most " +
           std::to_string(kMaxRequeueToken) + ")";
  }
  for (char c : token) {
    // ASCII only, whatever the locale (std::isalnum is not).
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view(":._+-").find(c) == std::string_view::npos) {
      return "the request token has a character other than A-Z a-z 0-9 : . _ + - (a timestamp "
             "such as 2026-12-04T10:00:00Z is the convention)";
    }
  }
  return {};
}

Json job_status_patch(const JobRun& run) {
  Json body = {{"time", format_time(run.finished)},
               {"outcome", run.succeeded ? "Succeeded" : "Failed"}};
  for (const auto& [name, value] : run.counts) {
    body[name] = value ? Json(*value) : Json(nullptr);
  }
  if (run.message.empty()) {
    body["message"] = nullptr;
  } else if (run.message.size() > kMaxMessage) {
    body["message"] = run.message.substr(0, kMaxMessage - 3) + "...";
  } else {
    body["message"] = run.message;
  }
  if (!run.request.empty()) {
    body["request"] = run.request;
  }
  return {{"status", {{run.field, body}}}};
}

bool report_job_run(const std::string& kubeconfig, const std::string& ns, const std::string& name,
                    const JobRun& run) {
  try {
    kube::Client client(kubeconfig.empty() ? kube::load_default_config()
                                           : kube::load_kubeconfig(kubeconfig));
    client.merge_patch(kOutboxRelays, ns, name, job_status_patch(run), "status");
    spdlog::info("reported status.{} ({}) to outboxrelay {}/{}", run.field,
                 run.succeeded ? "Succeeded" : "Failed", ns, name);
    return true;
  } catch (const std::exception& e) {
    spdlog::error(
        "could not report status.{} to outboxrelay {}/{}: {} (the job's exit code is unchanged)",
        run.field, ns, name, e.what());
    return false;
  }
}

}  // namespace outbox::controller
