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
inline const char kLastReplayField[] = "lastReplay";

struct JobRun {
  // kLastCompensationField, kLastCleanupField, kLastRequeueField or kLastReplayField
  std::string field;
  bool succeeded = true;
  // Named counts, e.g. {"resent", 3}. nullopt (a run that failed before it could count) is
  // sent as null, which removes the count a previous run left.
  std::vector<std::pair<std::string, std::optional<std::int64_t>>> counts;
  std::string message;  // why it failed, or a note; empty: the field is removed
  // lastRequeue, lastReplay: the request token the run answers; empty: not sent
  std::string request;
  std::chrono::system_clock::time_point finished = std::chrono::system_clock::now();
};

// The merge patch body: {"status": {<field>: {time, outcome, <counts>, message[, request]}}}. A
// merge patch merges nested objects key by key, so an empty message is sent as null to remove the
// one a previous failed run left.
Json job_status_patch(const JobRun& run);

struct ChangeKind;

// The operator's answer for a requeue or replay Job (`job`, as read from the apiserver) that
// ended without its pod writing one (the pod could not start, ran past the Job's deadline, or
// its report was refused): the Job's outcome, no count, `token` as the request. nullopt while
// the Job runs.
std::optional<JobRun> ended_change_run(const Json& job, const ChangeKind& kind,
                                       const std::string& token);
std::optional<JobRun> ended_requeue_run(const Json& job, const std::string& token);

// Patches the status of OutboxRelay ns/name with `run`. Never throws: a failure (no kubeconfig,
// apiserver unreachable, RBAC) is logged as an error and returns false, so the job's exit code
// stays the outcome of its database work.
bool report_job_run(const std::string& kubeconfig, const std::string& ns, const std::string& name,
                    const JobRun& run);

}  // namespace outbox::controller
