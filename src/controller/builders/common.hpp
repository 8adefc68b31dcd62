#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/outbox_relay.hpp"
#include "api/spec.hpp"
#include "kube/resource.hpp"

// What every object builder (controller/builders/) shares: the names derived from an
// OutboxRelay's, the labels and ownerReference of everything it owns, the rendering options and
// the error for a spec no retry can fix. Pure functions: no I/O.
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

// A spec no retry can fix (the CRD should have refused it, or no image is known): the
// reconciler reports it as Degraded with reason InvalidSpec and does not retry.
class InvalidSpec : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Label selector string of the relay pods (status.relay.selector, for the scale subresource).
std::string relay_selector(const std::string& relay_name);

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

// The helpers the builders share; callers outside controller/builders/ use the functions above
// and those of relay_resources.hpp.
namespace builders {

// The OutboxRelay's identity, read once from its metadata: what the owned objects' metadata,
// ownerReference and status reports name. Throws Json::exception for a field that is missing.
struct RelayMeta {
  std::string api_version;  // outbox.dev/v1alpha1 when the object does not say
  std::string name;
  std::string ns;
  std::string uid;
  static RelayMeta of(const Json& relay);
};

// The typed spec of `relay`; a spec it cannot read is InvalidSpec, naming the field.
api::OutboxRelaySpec parse_relay_spec(const Json& relay);

// spec.relay.image, else the operator's OUTBOX_RELAY_IMAGE; InvalidSpec when neither is set.
std::string image_of(const api::OutboxRelaySpec& spec, const RenderOptions& options);

// The labels of every object of `relay_name` (`component`: relay, compensation, schema, ...).
Json labels_for(const std::string& relay_name, const std::string& component);
// The relay pods' labels the Deployment, Service and PodDisruptionBudget select on.
Json selector_labels(const std::string& relay_name);

// The metadata of an owned object: its name, the relay's namespace, the labels of `component`
// and the relay's controller ownerReference.
Json metadata(const RelayMeta& relay, const std::string& name, const std::string& component);

// Adds the labels and annotations of `extra` (a template's metadata) to `meta`; the
// operator's own keys win.
void add_metadata(const Json& extra, Json& meta);

}  // namespace builders
}  // namespace outbox::controller
