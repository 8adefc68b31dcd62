#pragma once

#include <string>

#include "api/spec.hpp"
#include "controller/builders/change_requests.hpp"
#include "controller/builders/common.hpp"

// The one-shot Jobs of an OutboxRelay, each in the relay's image and pod settings (the DSN from
// its Secret, non-root and read-only, spec.relay.template.pod): the schema migration of
// spec.database.manageSchema, the requeue or replay of a change request (change_requests.hpp),
// and the Drop Job of a resource deleted with deletionPolicy Drop.
namespace outbox::controller {

// With spec.database.manageSchema, the name of the Job that runs `migrate` for the spec as it
// is: "<name>-schema-<hash of image and arguments>" (at most 56 characters), so a new image (an
// operator upgrade that may need a newer schema) or another table runs a new Job, and the same
// ones never run twice. Empty without manageSchema. Throws InvalidSpec like render_relay.
std::string schema_job_name(const std::string& relay_name, const api::OutboxRelaySpec& spec,
                            const RenderOptions& options);
// The same for `relay` as read from the apiserver: parses its spec (a caller that holds the
// parsed spec passes it instead).
std::string schema_job_name(const Json& relay, const RenderOptions& options);

// spec.deletionPolicy is Drop: deleting the resource runs the Drop Job first (drop_job).
bool drops_on_deletion(const Json& relay);
// Whether metadata.finalizers holds kDropFinalizer.
bool has_drop_finalizer(const Json& relay);
// "<name>-drop-<hash of the resource's uid>" (at most 54 characters): one per resource, so a
// resource created again under the same name never meets the Job of the one before.
std::string drop_job_name(const Json& relay);

// The Drop Job of a resource being deleted with deletionPolicy Drop: `migrate --drop` for the
// spec's table (--adopt with columns), in the relay's image with the DSN as a mounted file like
// the schema Job. Unlike every other object it has no ownerReference, and its pod no
// ServiceAccount token: it must outlive the owned objects that a foreground deletion removes
// first (the relay's ServiceAccount among them), and it talks to the database only. Removed a
// day after it ends (ttlSecondsAfterFinished). Throws InvalidSpec like render_relay.
OwnedObject drop_job(const Json& relay, const RenderOptions& options);

namespace builders {

// The Job behind schema_job_name() (`name`). Never rerun by the Job controller beyond a few
// tries: migrate is idempotent, and a table it cannot create needs a person.
Json schema_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                const std::string& name, const PodSettings& settings);

// The Job behind a change request (change_request()): the requeue or replay of the selected
// events, one transaction, so a failed try of a requeue changed nothing and a few more are safe
// (a replay retried after a commit whose answer was lost publishes its events once more, which
// consumers dedupe on event_id). Deleted a day after it ends (its log is read until then): by
// then its pod has answered the request in status, or the operator has for a pod that could
// not, so nothing renders it again.
Json change_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                const ChangeKind& kind, const ChangeRequest& request, const PodSettings& settings);

}  // namespace builders
}  // namespace outbox::controller
