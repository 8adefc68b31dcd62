#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

// The jobs' side of the OutboxRelay status: at the end of a run, `compensate` writes
// status.lastCompensation, `cleanup` writes status.lastCleanup and the Job of a requeue request
// writes status.lastRequeue. Each is a JSON merge patch of that one field on the status
// subresource, so it never touches the operator's conditions, the relay's backlog or another
// job's field.
namespace outbox::controller {

using Json = nlohmann::json;

inline const char kLastCompensationField[] = "lastCompensation";
inline const char kLastCleanupField[] = "lastCleanup";
inline const char kLastRequeueField[] = "lastRequeue";

// The annotation a GitOps user sets on an OutboxRelay to requeue every FAILED event. Its value
// is an opaque request token (a timestamp by convention): each new value runs one requeue Job,
// which writes it back as status.lastRequeue.request.
inline const char kRequeueAnnotation[] = "outbox.dev/requeue-failed";

// What is wrong with `token` as a request token, or "" when nothing is: 1 to 63 characters of
// A-Z a-z 0-9 : . _ + -, so it passes as one command-line argument as it is (no `$` for
// Kubernetes to expand, no space, no `=`). The value itself is not quoted back: it may be long
// or not printable.
std::string requeue_token_problem(const std::string& token);

struct JobRun {
  std::string field;  // kLastCompensationField or kLastCleanupField
  bool succeeded = true;
  // Named counts, e.g. {"resent", 3}. nullopt (a run that failed before it could count) is
  // sent as null, which removes the count a previous run left.
  std::vector<std::pair<std::string, std::optional<std::int64_t>>> counts;
  std::string message;  // why it failed, or a note; empty: the field is removed
  std::string request;  // lastRequeue: the request token the run answers; empty: not sent
  std::chrono::system_clock::time_point finished = std::chrono::system_clock::now();
};

// The merge patch body: {"status": {<field>: {time, outcome, <counts>, message[, request]}}}. A
// merge patch merges nested objects key by key, so an empty message is sent as null to remove the
// one a previous failed run left.
Json job_status_patch(const JobRun& run);

// Patches the status of OutboxRelay ns/name with `run`. Never throws: a failure (no kubeconfig,
// apiserver unreachable, RBAC) is logged as an error and returns false, so the job's exit code
// stays the outcome of its database work.
bool report_job_run(const std::string& kubeconfig, const std::string& ns, const std::string& name,
                    const JobRun& run);

}  // namespace outbox::controller
