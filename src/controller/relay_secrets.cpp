#include "controller/relay_reconciler.hpp"

#include "kube/errors.hpp"

// The Secret checks: whether the Secrets a spec names exist, and their versions (hashed into
// the pod template, so a rotation rolls the pods).
namespace outbox::controller {
namespace {

using Clock = std::chrono::steady_clock;

// A Secret's resourceVersion read this recently is used again without asking: a new resource
// is reconciled several times within seconds (its own creation, then each owned object's watch
// event, then its status write), and each pass would otherwise cost one more request. A
// rotation is seen at most this much later.
constexpr std::chrono::seconds kSecretVersionFresh{5};

const kube::Resource kSecrets{"", "v1", "secrets", true};

// One Secret a spec names: where, and what to do when it is missing.
struct SecretRef {
  std::string name;
  std::string field;
  std::string how_to_create;
};

// In the order their versions are hashed: the DSN's, the database TLS ones, then the Kafka
// Secrets' (kafka_mounts).
std::vector<SecretRef> secret_refs(const Json& relay) {
  const std::string ns = ns_of(relay);
  const std::string dsn_name = value_at<std::string>(relay, "/spec/database/dsnSecretRef/name", "");
  const std::string dsn_key = value_at<std::string>(relay, "/spec/database/dsnSecretRef/key", "");
  if (dsn_name.empty() || dsn_key.empty()) {
    throw InvalidSpec("spec.database.dsnSecretRef needs a name and a key");
  }
  std::vector<SecretRef> refs = {{dsn_name, "spec.database.dsnSecretRef",
                                  "Create it with the connection string under key \"" + dsn_key +
                                      "\", e.g. kubectl -n " + ns + " create secret generic " +
                                      dsn_name + " --from-literal=" + dsn_key +
                                      "='postgresql://...'"}};
  // spec.database.tls's Secrets (a CA in a ConfigMap is the kubelet's to find).
  const Json tls = relay.value("/spec/database/tls"_json_pointer, Json::object());
  if (tls.contains("/ca/secretRef"_json_pointer)) {
    refs.push_back({tls.at("/ca/secretRef/name"_json_pointer), "spec.database.tls.ca.secretRef",
                    "Create it with the PostgreSQL server's CA certificate (for CloudNativePG: "
                    "the cluster's <cluster>-ca Secret, key ca.crt)."});
  }
  if (tls.contains("clientCertificate")) {
    refs.push_back({tls.at("/clientCertificate/secretName"_json_pointer),
                    "spec.database.tls.clientCertificate",
                    "Create it with the client certificate and key (a kubernetes.io/tls Secret)."});
  }
  for (const KafkaMount& m : kafka_mounts(relay)) {
    refs.push_back({m.secret, m.field,
                    m.volume == "kafka-config"
                        ? "Create it with one key per librdkafka property (e.g. "
                          "security.protocol, sasl.username), or remove configSecretRef."
                        : "Create it (for Strimzi: the cluster CA Secret or the KafkaUser's "
                          "Secret, copied into this namespace if the cluster runs elsewhere)."});
  }
  return refs;
}

}  // namespace

std::optional<Problem> RelayReconciler::check_secrets(const Json& relay, RenderOptions& render) {
  const std::string ns = ns_of(relay);
  render.secret_versions.clear();
  for (const SecretRef& ref : secret_refs(relay)) {
    std::optional<std::string> version = secret_version(ns, ref.name);
    if (!version) {
      return Problem{"SecretNotFound", "Secret \"" + ref.name + "\" named by " + ref.field +
                                           " does not exist in namespace " + ns + ". " +
                                           ref.how_to_create};
    }
    render.secret_versions += *version;
  }
  return std::nullopt;
}

// By name and metadata only: the operator never lists, watches or reads the values of a
// Secret. Whether a key exists is the kubelet's to say (CreateContainerConfigError, which
// the Ready condition then quotes).
std::optional<std::string> RelayReconciler::secret_version(const std::string& ns,
                                                           const std::string& name) {
  const std::string key = ns + "/" + name;
  const auto now = Clock::now();
  {
    std::lock_guard lock(applied_mu_);
    auto it = secret_versions_.find(key);
    if (it != secret_versions_.end() && now - it->second.second < kSecretVersionFresh) {
      return it->second.first;
    }
  }
  try {
    Json meta = client_.get_metadata(kSecrets, ns, name);
    std::string version =
        name + "=" + meta.value("/metadata/resourceVersion"_json_pointer, std::string()) + "\n";
    std::lock_guard lock(applied_mu_);
    secret_versions_[key] = {version, now};
    return version;
  } catch (const kube::ApiError& e) {
    if (e.is_not_found()) {
      std::lock_guard lock(applied_mu_);
      secret_versions_.erase(key);
      return std::nullopt;
    }
    throw;
  }
}

}  // namespace outbox::controller
