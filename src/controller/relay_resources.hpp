#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/outbox_relay.hpp"
#include "kube/resource.hpp"

// What the operator runs for one OutboxRelay, rendered from its spec as plain objects ready for
// server-side apply. Pure functions: no I/O, so every rule here is unit-tested without an
// apiserver.
//
// Names: an OutboxRelay name is a DNS label of at most 40 characters (the CRD enforces it). The
// names derived for objects that live on add a suffix of at most 11 characters (CronJob names
// must leave room for the Job controller's 11-character suffix: 40 + 11 <= 52); the one-shot
// Jobs add "-schema-" or "-requeue-" and 8 hex digits, at most 57 characters in all, so their
// pods' generated names (a 58-character prefix and 5 random ones) keep the whole Job name.
namespace outbox::controller {

using Json = nlohmann::json;

// The contract shared with the relay pods (api/outbox_relay.hpp), by their names here.
using api::kDropFinalizer;
using api::kFieldManager;
using api::kOutboxRelays;
using api::kPauseAnnotation;
using api::kRelayFieldManager;
using api::kRelayPort;
using api::kRelayProblemFieldManager;
using api::kReplayAnnotation;
using api::kRequeueAnnotation;

inline const char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline const char kConfigHashAnnotation[] = "outbox.dev/config-hash";
// The referenced Secrets' resourceVersions, hashed: a rotated credential changes the pod
// template, so the relay pods roll and start with the new value (the DSN is read when the
// process starts).
inline const char kSecretsHashAnnotation[] = "outbox.dev/secrets-hash";

// What is wrong with `token` as a request token, or "" when nothing is: 1 to 63 characters of
// A-Z a-z 0-9 : . _ + -, so it passes as one command-line argument as it is (no `$` for
// Kubernetes to expand, no space, no `=`). The value itself is not quoted back: it may be long
// or not printable.
std::string requeue_token_problem(const std::string& token);

// Whether `relay` carries kPauseAnnotation set to "true".
bool reconciliation_paused(const Json& relay);

// Every kind the operator owns, with the REST resource it is applied through.
namespace owned {
inline const kube::Resource config_maps{"", "v1", "configmaps", true};
inline const kube::Resource service_accounts{"", "v1", "serviceaccounts", true};
inline const kube::Resource services{"", "v1", "services", true};
inline const kube::Resource deployments{"apps", "v1", "deployments", true};
inline const kube::Resource cron_jobs{"batch", "v1", "cronjobs", true};
inline const kube::Resource jobs{"batch", "v1", "jobs", true};
inline const kube::Resource roles{"rbac.authorization.k8s.io", "v1", "roles", true};
inline const kube::Resource role_bindings{"rbac.authorization.k8s.io", "v1", "rolebindings", true};
inline const kube::Resource pod_disruption_budgets{"policy", "v1", "poddisruptionbudgets", true};
inline const kube::Resource network_policies{"networking.k8s.io", "v1", "networkpolicies", true};
}  // namespace owned

struct RelayNames {
  explicit RelayNames(const std::string& relay_name);
  std::string deployment;    // <name>-relay (also the ServiceAccount, Role, RoleBinding, PDB)
  std::string config_map;    // <name>-config
  std::string compensation;  // <name>-compensate
  std::string retention;     // <name>-cleanup
  std::string service;       // <name>-metrics
};

struct RenderOptions {
  std::string relay_image;  // OUTBOX_RELAY_IMAGE, unless spec.relay.image is set
  // "<name>=<resourceVersion>" of every Secret the pods read, in a fixed order.
  std::string secret_versions;
  // The operator's own --log-level and --log-format, handed to every pod it starts.
  std::string log_level = "info";
  std::string log_format = "text";
  // Whether a relay of the resource is alive (it reported within kBacklogReportStale, or the
  // resource is younger than that). False puts the compensation CronJob on its every-minute
  // rescue schedule (controller/schedules.hpp).
  bool relays_alive = true;
  // Where the API server listens (CIDRs), for the egress of spec.networkPolicy; empty: any
  // address on the API server's ports (--network-policy-api-server).
  std::vector<std::string> api_server_cidrs = {};
};

// With spec.database.manageSchema, the name of the Job that runs `migrate` for the spec as it
// is: "<name>-schema-<hash of image and arguments>" (at most 56 characters), so a new image (an
// operator upgrade that may need a newer schema) or another table runs a new Job, and the same
// ones never run twice. Empty without manageSchema. Throws InvalidSpec like render_relay.
std::string schema_job_name(const Json& relay, const RenderOptions& options);

// A change of events asked for through an annotation: a requeue (kRequeueAnnotation) or a replay
// (kReplayAnnotation). A request is answered once its token is status.<field>.request, which
// the Job writes when it ends (or the operator, for a Job that ended without doing so).
//
// The requeue annotation's value is a request token (every FAILED event), or a JSON object; the
// replay annotation's is a JSON object:
//   {"request": "<token>", "requestedBy": "<who>", "eventIds": ["<uuid>", ...], "bizType": "t",
//    "from": "<RFC 3339>", "to": "<RFC 3339>", "fromId": 1, "toId": 9, "all": true}
// `all` (every FAILED event) only for a requeue. A replay must be bounded: event ids, or both
// ends of a time or id range (bizType alone would replay that type's whole history). Anything
// else (an unknown key, a malformed id or time, an empty selection) is refused with the reason
// in `problem`, and no Job runs.
struct ChangeRequest {
  std::string token;         // the request token once validated; empty: none, or refused
  std::string requested_by;  // as the annotation says (unverified); empty when it names none
  std::vector<std::string> selector_args;  // --all, --event-id=..., --biz-type=..., ...
  std::string summary;                     // the selection in words, for the Event
  std::string job;      // "<name>-<verb>-<hash of token>" while unanswered; else empty
  std::string problem;  // why the value is refused, naming the annotation; else empty
};
using RequeueRequest = ChangeRequest;

// What each kind of request is: its annotation, its Job's verb and component, its status field
// and the count its Job reports.
struct ChangeKind {
  const char* annotation;
  const char* verb;        // "requeue", "replay": the subcommand and the Job name's infix
  const char* field;       // "lastRequeue", "lastReplay"
  const char* count;       // "requeued", "replayed"
  const char* event_noun;  // "Requeue", "Replay": Event reasons <noun>Requested
};
extern const ChangeKind kRequeueKind;
extern const ChangeKind kReplayKind;

ChangeRequest change_request(const Json& relay, const ChangeKind& kind);
inline ChangeRequest requeue_request(const Json& relay) {
  return change_request(relay, kRequeueKind);
}
inline ChangeRequest replay_request(const Json& relay) {
  return change_request(relay, kReplayKind);
}

// spec.deletionPolicy is Drop: deleting the resource runs the Drop Job first (drop_job).
bool drops_on_deletion(const Json& relay);
// Whether metadata.finalizers holds kDropFinalizer.
bool has_drop_finalizer(const Json& relay);
// "<name>-drop-<hash of the resource's uid>" (at most 54 characters): one per resource, so a
// resource created again under the same name never meets the Job of the one before.
std::string drop_job_name(const Json& relay);

// Label selector string of the relay pods (status.relay.selector, for the scale subresource).
std::string relay_selector(const std::string& relay_name);

// What every container the operator renders shares: its image and log settings.
struct PodSettings {
  std::string image;
  std::string log_level;
  std::string log_format;
};

struct OwnedObject {
  const kube::Resource* resource;
  Json object;
};

struct RenderedRelay {
  // In apply order: identity and RBAC first, then configuration, then workloads.
  std::vector<OwnedObject> objects;
  bool wants_pdb = false;  // false: delete a PodDisruptionBudget left from a larger scale
  std::string pdb_name;
  // false: delete a NetworkPolicy left from spec.networkPolicy.enabled
  bool wants_network_policy = false;
  std::string network_policy_name;
};

// A spec no retry can fix (the CRD should have refused it, or no image is known): the
// reconciler reports it as Degraded with reason InvalidSpec and does not retry.
class InvalidSpec : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Renders every owned object of `relay` (an OutboxRelay as read from the apiserver, with the
// CRD's defaults filled in), in apply order. Throws InvalidSpec for a spec it cannot render.
RenderedRelay render_relay(const Json& relay, const RenderOptions& options);

// The Drop Job of a resource being deleted with deletionPolicy Drop: `migrate --drop` for the
// spec's table (--adopt with columns), in the relay's image with the DSN as a mounted file like
// the schema Job. Unlike every other object it has no ownerReference, and its pod no
// ServiceAccount token: it must outlive the owned objects that a foreground deletion removes
// first (the relay's ServiceAccount among them), and it talks to the database only. Removed a
// day after it ends (ttlSecondsAfterFinished). Throws InvalidSpec like render_relay.
OwnedObject drop_job(const Json& relay, const RenderOptions& options);

// A Secret the relay and compensation pods mount for Kafka: the librdkafka properties of
// spec.kafka.configSecretRef (every key), the CA of spec.kafka.tls, the client certificate or
// password of spec.kafka.authentication (only the keys named, as `items`).
struct KafkaMount {
  std::string volume;
  std::string secret;
  std::string field;  // the spec field that names the Secret, for messages
  std::string path;
  Json items;  // null: every key
};
std::vector<KafkaMount> kafka_mounts(const Json& relay);

// The relay's command line (after the image's entrypoint), for tests and docs.
std::vector<std::string> relay_args(const Json& relay);

// FNV-1a 64 of `text` in hex: stable across builds, unlike std::hash.
std::string stable_hash(const std::string& text);

// Value at a JSON pointer, or `fallback` when absent or null.
template <typename T>
T value_at(const Json& object, const char* pointer, T fallback) {
  Json::json_pointer p(pointer);
  if (!object.contains(p) || object.at(p).is_null()) {
    return fallback;
  }
  return object.at(p).get<T>();
}

// metadata.namespace and metadata.name of an object ("" when absent).
inline std::string ns_of(const Json& object) {
  return object.at("metadata").value("namespace", "");
}
inline std::string name_of(const Json& object) {
  return object.at("metadata").value("name", "");
}

}  // namespace outbox::controller
