#include "controller/relay_secrets.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "controller/relay_resources.hpp"

namespace outbox::controller {
namespace {

// One Secret a spec names: the pod volume that mounts it, where the spec names it, and what to
// do when it is missing.
struct SecretRef {
  std::string volume;
  std::string name;
  std::string field;
  std::string how_to_create;
};

std::vector<SecretRef> secret_refs(const Json& relay) {
  const std::string ns = ns_of(relay);
  const std::string dsn_name = value_at<std::string>(relay, "/spec/database/dsnSecretRef/name", "");
  const std::string dsn_key = value_at<std::string>(relay, "/spec/database/dsnSecretRef/key", "");
  std::vector<SecretRef> refs = {{"database", dsn_name, "spec.database.dsnSecretRef",
                                  "Create it with the connection string under key \"" + dsn_key +
                                      "\", e.g. kubectl -n " + ns + " create secret generic " +
                                      dsn_name + " --from-literal=" + dsn_key +
                                      "='postgresql://...'"}};
  // spec.database.tls's Secrets (a CA in a ConfigMap is not a Secret).
  const Json tls = relay.value("/spec/database/tls"_json_pointer, Json::object());
  if (tls.contains("/ca/secretRef/name"_json_pointer)) {
    refs.push_back({"database-ca", tls.at("/ca/secretRef/name"_json_pointer),
                    "spec.database.tls.ca.secretRef",
                    "Create it with the PostgreSQL server's CA certificate (for CloudNativePG: "
                    "the cluster's <cluster>-ca Secret, key ca.crt)."});
  }
  if (tls.contains("/clientCertificate/secretName"_json_pointer)) {
    refs.push_back({"database-client", tls.at("/clientCertificate/secretName"_json_pointer),
                    "spec.database.tls.clientCertificate",
                    "Create it with the client certificate and key (a kubernetes.io/tls Secret)."});
  }
  for (const KafkaMount& m : kafka_mounts(relay)) {
    refs.push_back({m.volume, m.secret, m.field,
                    m.volume == "kafka-config"
                        ? "Create it with one key per librdkafka property (e.g. "
                          "security.protocol, sasl.username), or remove configSecretRef."
                        : "Create it (for Strimzi: the cluster CA Secret or the KafkaUser's "
                          "Secret, copied into this namespace if the cluster runs elsewhere)."});
  }
  return refs;
}

// The text between `prefix` and the next `end` in `text`, or "" when `prefix` is not in it.
std::string quoted_after(const std::string& text, const std::string& prefix, char end = '"') {
  const std::size_t at = text.find(prefix);
  if (at == std::string::npos) {
    return {};
  }
  const std::size_t from = at + prefix.size();
  return text.substr(from, text.find(end, from) - from);
}

// What the kubelet said of one pod, in its words: a volume (when known), the Secret that does
// not exist or the key it lacks.
struct Refusal {
  std::string volume;
  std::string secret;  // `secret "x" not found`
  std::string key;     // `references non-existent secret key: k`
};

std::optional<Refusal> refusal_in(const std::string& message) {
  // The kubelet's Secret manager says `secret "x" not found`; the API server `secrets "x"`.
  Refusal r{quoted_after(message, "volume \""), quoted_after(message, "secret \""), ""};
  if (r.secret.empty()) {
    r.secret = quoted_after(message, "secrets \"");
  }
  if (message.find("\" not found") == std::string::npos) {
    r.secret.clear();
  }
  r.key = quoted_after(message, "references non-existent secret key: ", '\n');
  while (!r.key.empty() && (r.key.back() == ' ' || r.key.back() == '"')) {
    r.key.pop_back();
  }
  if (r.secret.empty() && r.key.empty()) {
    return std::nullopt;
  }
  return r;
}

// The Problem for what the kubelet refused, when it is about a Secret the spec names (matched
// by the volume that mounts it, else by name).
std::optional<Problem> problem_for(const Json& relay, const Refusal& r) {
  for (const SecretRef& ref : secret_refs(relay)) {
    const bool same = r.volume.empty() ? ref.name == r.secret : ref.volume == r.volume;
    if (!same) {
      continue;
    }
    const std::string ns = ns_of(relay);
    if (!r.key.empty()) {
      return Problem{"SecretKeyNotFound",
                     "Secret \"" + ref.name + "\" named by " + ref.field + " has no key \"" +
                         r.key + "\" (the kubelet cannot mount it, so the relay pods wait). Add " +
                         "the key to the Secret, or name one it has in " + ref.field + "."};
    }
    return Problem{"SecretNotFound", "Secret \"" + ref.name + "\" named by " + ref.field +
                                         " does not exist in namespace " + ns +
                                         " (the kubelet cannot mount it, so the relay pods "
                                         "wait). " +
                                         ref.how_to_create};
  }
  return std::nullopt;
}

// A container waiting for a Secret an environment variable names (a pod template may add one).
std::optional<Refusal> config_error(const Json& pod) {
  for (const Json& cs : pod.value("/status/containerStatuses"_json_pointer, Json::array())) {
    const Json waiting = cs.value("/state/waiting"_json_pointer, Json::object());
    if (waiting.value("reason", "") == "CreateContainerConfigError") {
      if (auto r = refusal_in(waiting.value("message", "")); r && !r->secret.empty()) {
        return Refusal{"", r->secret, ""};
      }
    }
  }
  return std::nullopt;
}

// When the kubelet last said it, to the second ("YYYY-MM-DDTHH:MM:SS", which compares as
// text): it repeats a failed mount as one Event whose count and lastTimestamp it updates.
std::string last_said(const Json& event) {
  for (const char* at : {"/lastTimestamp", "/series/lastObservedTime", "/eventTime",
                         "/metadata/creationTimestamp"}) {
    if (const std::string t = value_at<std::string>(event, at, ""); t.size() >= 19) {
      return t.substr(0, 19);
    }
  }
  return {};
}

}  // namespace

bool waiting_for_volumes(const Json& pod) {
  const Json status = pod.value("status", Json::object());
  if (status.value("phase", "") != "Pending" || pod.at("metadata").contains("deletionTimestamp")) {
    return false;
  }
  for (const Json& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "PodReadyToStartContainers" && c.value("status", "") == "True") {
      return false;
    }
  }
  for (const Json& cs : status.value("containerStatuses", Json::array())) {
    if (cs.contains("/state/running"_json_pointer) ||
        cs.contains("/state/terminated"_json_pointer) ||
        cs.contains("/lastState/terminated"_json_pointer)) {
      return false;
    }
  }
  return true;
}

std::optional<Problem> missing_secret(const Json& relay, const Json& pods, const Json& events) {
  // Only the pods of the newest template speak for the spec: a rollout that cannot finish (the
  // new pods not ready) leaves the old ones waiting for the Secret the spec no longer names.
  std::string newest_created;
  std::string newest_template;
  for (const Json& pod : pods.value("items", Json::array())) {
    const std::string created = value_at<std::string>(pod, "/metadata/creationTimestamp", "");
    if (created >= newest_created) {
      newest_created = created;
      newest_template = value_at<std::string>(pod, "/metadata/labels/pod-template-hash", "");
    }
  }
  std::vector<std::string> waiting;  // uids
  for (const Json& pod : pods.value("items", Json::array())) {
    if (value_at<std::string>(pod, "/metadata/labels/pod-template-hash", "") != newest_template) {
      continue;
    }
    if (const std::optional<Refusal> r = config_error(pod)) {
      if (auto p = problem_for(relay, *r)) {
        return p;
      }
    }
    if (waiting_for_volumes(pod)) {
      waiting.push_back(pod.at("metadata").value("uid", ""));
    }
  }
  // The latest one: a volume mounted since (its Secret created) is no longer retried, and its
  // Event, which outlives it, stops being repeated.
  std::optional<Problem> latest;
  std::string latest_said;
  for (const Json& event : events.value("items", Json::array())) {
    const std::string uid = value_at<std::string>(event, "/involvedObject/uid", "");
    if (event.value("reason", "") != "FailedMount" ||
        std::find(waiting.begin(), waiting.end(), uid) == waiting.end()) {
      continue;
    }
    const std::optional<Refusal> r = refusal_in(value_at<std::string>(event, "/message", ""));
    std::optional<Problem> p = r ? problem_for(relay, *r) : std::nullopt;
    if (const std::string said = last_said(event); p && (!latest || said >= latest_said)) {
      latest = std::move(p);
      latest_said = said;
    }
  }
  return latest;
}

}  // namespace outbox::controller
