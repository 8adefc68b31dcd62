#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "controller/relay_status.hpp"

// The Secrets an OutboxRelay's pods mount, as the kubelet reports them. The operator reads no
// Secret (its ClusterRole grants none): a Secret or key that is missing is what the kubelet says
// of the relay pods that wait for it, and a rotated Secret reaches the running relays through
// their mounted files (relay/relay.hpp, CredentialFiles), so nothing about a Secret is in the
// pod template either.
namespace outbox::controller {

using Json = nlohmann::json;

// Whether a pod may still be waiting for its volumes: Pending, no container started, and the
// kubelet has not set PodReadyToStartContainers (it does once the volumes are mounted and the
// sandbox runs), so an old FailedMount Event of a pod that has mounted since is not believed.
bool waiting_for_volumes(const Json& pod);

// A Secret the relay pods wait for, from what the kubelet reports: a FailedMount Event of a
// pod of `pods` (a PodList) that is waiting_for_volumes, among `events` (an EventList), saying
// `secret "x" not found` (SecretNotFound) or `references non-existent secret key: k`
// (SecretKeyNotFound); or a container waiting with CreateContainerConfigError for
// `secret "x" not found`. The message names the Secret, the spec field of `relay` that names it
// and how to create it. nullopt when no pod says so.
std::optional<Problem> missing_secret(const Json& relay, const Json& pods, const Json& events);

}  // namespace outbox::controller
