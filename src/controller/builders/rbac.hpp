#pragma once

#include "api/spec.hpp"
#include "controller/builders/common.hpp"

// The identity every pod of an OutboxRelay runs as: the ServiceAccount "<name>-relay", and the
// Role and RoleBinding that let its token write the pods' part of that one OutboxRelay's status.
namespace outbox::controller::builders {

// With spec.relay.template.serviceAccount's labels and annotations (IRSA, Workload
// Identity), under the operator's own.
Json service_account(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                     const RelayNames& names);

// Exactly what the status reports of the relay and the jobs need (a server-side apply and a
// merge patch of the status subresource), on this one OutboxRelay; the operator's own
// ClusterRole holds all of it, which is what lets it grant this without `escalate`.
Json status_role(const RelayMeta& relay, const RelayNames& names);

// Binds status_role() to service_account().
Json role_binding(const RelayMeta& relay, const RelayNames& names);

}  // namespace outbox::controller::builders
