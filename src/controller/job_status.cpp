#include "controller/job_status.hpp"

#include <spdlog/spdlog.h>

#include "common/redact.hpp"
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
  // Redacted before it is cut, so a cut cannot split a secret; the jobs' messages quote libpq.
  const std::string message = redact(run.message);
  if (message.empty()) {
    body["message"] = nullptr;
  } else if (message.size() > kMaxMessage) {
    body["message"] = message.substr(0, kMaxMessage - 3) + "...";
  } else {
    body["message"] = message;
  }
  if (!run.request.empty()) {
    body["request"] = run.request;
  }
  return {{"status", {{run.field, body}}}};
}

std::optional<JobRun> ended_requeue_run(const Json& job, const std::string& token) {
  return ended_change_run(job, kRequeueKind, token);
}

std::optional<JobRun> ended_change_run(const Json& job, const ChangeKind& kind,
                                       const std::string& token) {
  const std::string name = job.at("metadata").value("name", "");
  const std::string logs = "kubectl logs job/" + name;
  for (const Json& c : job.value("/status/conditions"_json_pointer, Json::array())) {
    const std::string type = c.value("type", "");
    if (c.value("status", "") != "True" || (type != "Complete" && type != "Failed")) {
      continue;
    }
    JobRun run;
    run.field = kind.field;
    run.request = token;
    run.succeeded = type == "Complete";
    run.counts = {{kind.count, std::nullopt}};
    run.message = run.succeeded
                      ? "The Job " + name + " completed, but its pod's report did not arrive, " +
                            "so the count is unknown (" + logs + " has it)."
                      : "The Job " + name + " failed before its pod reported (" +
                            c.value("reason", "") + ": " + c.value("message", "") + "); " + logs +
                            " may say why. Set a new " + kind.annotation +
                            " request token to run it again.";
    run.finished =
        parse_time(c.value("lastTransitionTime", "")).value_or(std::chrono::system_clock::now());
    return run;
  }
  return std::nullopt;
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
