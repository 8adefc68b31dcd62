#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

// The status the operator writes for one OutboxRelay, computed from what it observed. Pure: the
// reconciler gathers the inputs, this decides the conditions.
namespace outbox::controller {

using Json = nlohmann::json;

// A problem the user must fix; it makes the resource Degraded.
struct Problem {
  std::string reason;  // CamelCase, e.g. SecretNotFound
  std::string message;
};

struct StatusInputs {
  const Json& relay;                 // the OutboxRelay as cached
  const Json* deployment = nullptr;  // the relay Deployment as cached, if any
  std::optional<Problem> problem;    // set: Degraded
  std::chrono::system_clock::time_point now;
};

// The controller-owned part of the status, as an apply configuration's `status` field:
// observedGeneration, conditions (Ready, Progressing, Degraded, Stalled) and relay. Conditions
// follow metav1.Condition: lastTransitionTime is copied from the current status unless the
// condition's status flips.
Json compute_status(const StatusInputs& in);

// True when `desired` (from compute_status) already matches `current` (the object's status),
// so applying it would change nothing.
bool status_matches(const Json& desired, const Json& current);

// The condition of `type` in a status (null when absent).
Json find_condition(const Json& status, const std::string& type);

// RFC 3339 in UTC with second precision (metav1.Time).
std::string format_time(std::chrono::system_clock::time_point t);

}  // namespace outbox::controller
