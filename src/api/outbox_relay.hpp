#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "kube/resource.hpp"

// The OutboxRelay contract between the operator and the pods it runs (relay, compensation,
// cleanup, schema and requeue Jobs), who read and write the same resource: its REST
// collection, who owns which status fields (server-side apply field managers), the annotations
// users set, and the time format of every timestamp in the status. controller/ and relay/ both
// include this, never each other.
namespace outbox::api {

inline const kube::Resource kOutboxRelays{"outbox.dev", "v1alpha1", "outboxrelays", true};
inline const char kApiVersion[] = "outbox.dev/v1alpha1";
inline const char kKind[] = "OutboxRelay";

// Field managers of the status: the operator's conditions and relay counts; the relay pods'
// backlog and database report; the relay pods' status.relayProblem, a manager of its own so a
// round that measured no backlog (the database is down) can still say why without removing
// the last backlog.
inline const char kFieldManager[] = "outbox-operator";
inline const char kRelayFieldManager[] = "outbox-relay";
inline const char kRelayProblemFieldManager[] = "outbox-relay-problem";

// The annotation a GitOps user sets on an OutboxRelay to requeue every FAILED event. Its value
// is an opaque request token (a timestamp by convention): each new value runs one requeue Job,
// which writes it back as status.lastRequeue.request.
// The value may also be a JSON object that selects the events and names the requester, as the
// replay annotation's (`kubectl outbox requeue` writes that form).
inline const char kRequeueAnnotation[] = "outbox.dev/requeue-failed";

// The annotation that asks for a replay of sent events: a JSON object with a request token
// ("request"), the selectors (eventIds, bizType, from, to, fromId, toId) and who asks
// ("requestedBy"). Each new token runs one replay Job, which writes it back as
// status.lastReplay.request.
inline const char kReplayAnnotation[] = "outbox.dev/replay";

// The annotation that holds one OutboxRelay still: while its value is "true" the operator
// creates, changes and deletes none of the resource's objects (the relays keep running as
// they are) and says so in the Reconciling condition; removing it resumes.
inline const char kPauseAnnotation[] = "outbox.dev/pause-reconciliation";

// The finalizer on an OutboxRelay whose spec.deletionPolicy is Drop: its deletion waits until
// the operator's Drop Job (`migrate --drop`) removed what the operator created in the database.
// Removing it by hand lets the resource go without that.
inline const char kDropFinalizer[] = "outbox.dev/drop-database-objects";

// The port of the relay's /healthz, /readyz and /metrics.
inline constexpr int kRelayPort = 8080;

// RFC 3339 in UTC with second precision (metav1.Time): every timestamp in the status.
std::string format_time(std::chrono::system_clock::time_point t);
// Parses what format_time writes; nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> parse_time(const std::string& text);

}  // namespace outbox::api
