#include "controller/job_status.hpp"

#include <spdlog/spdlog.h>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"

namespace outbox::controller {
namespace {

// The CRD caps the message; an exception text (a libpq error with its context) can be long.
constexpr std::size_t kMaxMessage = 1024;

}  // namespace

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
