#include "controller/builders/pod.hpp"

#include <algorithm>

namespace outbox::controller {
namespace {

using builders::kKafkaCaDir;
using builders::kKafkaConfigDir;
using builders::kKafkaUserDir;

// `default_from`: the spec table's row that holds the key's default.
Json key_to_path(const Json& ref, const char* field, const char* default_from, const char* path) {
  return {{"key", ref.value(field, api::spec_field(default_from).default_value.get<std::string>())},
          {"path", path}};
}

// `kafka`: spec.kafka as written (only configSecretRef, tls and authentication are read).
std::vector<KafkaMount> mounts_of(const Json& kafka) {
  std::vector<KafkaMount> mounts;
  if (kafka.contains("configSecretRef")) {
    mounts.push_back({"kafka-config", kafka.at("/configSecretRef/name"_json_pointer),
                      "spec.kafka.configSecretRef", kKafkaConfigDir, Json()});
  }
  if (kafka.contains("tls")) {
    const Json& ca = kafka.at("/tls/trustedCertificates/0"_json_pointer);
    mounts.push_back(
        {"kafka-ca", ca.at("secretName"), "spec.kafka.tls.trustedCertificates", kKafkaCaDir,
         Json::array({key_to_path(ca, "certificate", "/kafka/tls/trustedCertificates/*/certificate",
                                  "ca.crt")})});
  }
  const Json auth = kafka.value("authentication", Json::object());
  if (auth.contains("certificateAndKey")) {
    const Json& ck = auth.at("certificateAndKey");
    mounts.push_back(
        {"kafka-user", ck.at("secretName"), "spec.kafka.authentication.certificateAndKey",
         kKafkaUserDir,
         Json::array(
             {key_to_path(ck, "certificate", "/kafka/authentication/certificateAndKey/certificate",
                          "user.crt"),
              key_to_path(ck, "key", "/kafka/authentication/certificateAndKey/key", "user.key")})});
  } else if (auth.contains("passwordSecret")) {
    const Json& pw = auth.at("passwordSecret");
    mounts.push_back(
        {"kafka-user", pw.at("secretName"), "spec.kafka.authentication.passwordSecret",
         kKafkaUserDir,
         Json::array({key_to_path(pw, "password", "/kafka/authentication/passwordSecret/password",
                                  "password")})});
  }
  return mounts;
}

}  // namespace

std::vector<KafkaMount> kafka_mounts(const Json& relay) {
  return mounts_of(relay.at("spec").value("kafka", Json::object()));
}

namespace builders {
namespace {

Json pod_security_context() {
  return {{"runAsNonRoot", true},
          {"runAsUser", 65532},
          {"runAsGroup", 65532},
          {"fsGroup", 65532},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

// No uid here: the pod's security context sets it (replaceable through
// spec.relay.template.pod.securityContext, for OpenShift's restricted-v2).
Json container_security_context() {
  return {{"runAsNonRoot", true},
          {"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"privileged", false},
          {"capabilities", {{"drop", Json::array({"ALL"})}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

// Where the pods see the DSN: the one key of the Secret that spec.database.dsnSecretRef names,
// as a file of the same name, read through OUTBOX_DSN_FILE (a path, not a credential). Never an
// environment variable: `kubectl exec` and /proc/<pid>/environ would show it to anyone who may
// exec into the pod.
const char kDatabaseDir[] = "/etc/outbox/database";

std::string dsn_file(const api::OutboxRelaySpec& spec) {
  return std::string(kDatabaseDir) + "/" + spec.database.dsn_secret.key;
}

// Only the named key, readable by the pod's group (fsGroup) only. Not optional: a missing
// Secret or key holds the pod in ContainerCreating, and the kubelet's FailedMount Event says
// which (`secret "x" not found`, `references non-existent secret key: k`); the operator, which
// reads no Secret, turns that into SecretNotFound or SecretKeyNotFound (relay_secrets.hpp). The
// kubelet keeps trying, so the pod starts once the Secret is fixed, and it rewrites the file
// when the Secret changes: the relay reconnects with the new DSN.
Json dsn_volume(const api::OutboxRelaySpec& spec) {
  const api::SecretKeyRef& ref = spec.database.dsn_secret;
  return {{"name", "database"},
          {"secret",
           {{"secretName", ref.name},
            {"defaultMode", 0440},
            {"items", Json::array({{{"key", ref.key}, {"path", ref.key}}})}}}};
}

// spec.database.tls: the CA and the client certificate as files, under fixed names the
// OUTBOX_DATABASE_* variables point at (paths and a mode: nothing secret in the environment).
// The kubelet updates these files in place when the Secret or ConfigMap changes, and libpq reads
// them at every connection.
const char kDatabaseCaDir[] = "/etc/outbox/database-ca";
const char kDatabaseClientDir[] = "/etc/outbox/database-client";

Json database_tls_volumes(const api::OutboxRelaySpec& spec) {
  Json volumes = Json::array();
  if (!spec.database.tls) {
    return volumes;
  }
  const api::DatabaseTlsSpec& tls = *spec.database.tls;
  if (tls.ca) {
    Json items = Json::array({{{"key", tls.ca->key}, {"path", "ca.crt"}}});
    volumes.push_back(
        tls.ca_in_secret
            ? Json{{"name", "database-ca"},
                   {"secret",
                    {{"secretName", tls.ca->name}, {"defaultMode", 0440}, {"items", items}}}}
            : Json{{"name", "database-ca"},
                   {"configMap",
                    {{"name", tls.ca->name}, {"defaultMode", 0440}, {"items", items}}}});
  }
  if (const auto& c = tls.client_certificate) {
    volumes.push_back({{"name", "database-client"},
                       {"secret",
                        {{"secretName", c->secret_name},
                         {"defaultMode", 0440},
                         {"items", Json::array({{{"key", c->certificate}, {"path", "tls.crt"}},
                                                {{"key", c->key}, {"path", "tls.key"}}})}}}});
  }
  return volumes;
}

void add_database_tls_env(const api::OutboxRelaySpec& spec, Json& env) {
  if (!spec.database.tls) {
    return;
  }
  const api::DatabaseTlsSpec& tls = *spec.database.tls;
  env.push_back({{"name", "OUTBOX_DATABASE_SSLMODE"}, {"value", tls.mode}});
  if (tls.ca) {
    env.push_back(
        {{"name", "OUTBOX_DATABASE_CA_FILE"}, {"value", std::string(kDatabaseCaDir) + "/ca.crt"}});
  }
  if (tls.client_certificate) {
    env.push_back({{"name", "OUTBOX_DATABASE_CERT_FILE"},
                   {"value", std::string(kDatabaseClientDir) + "/tls.crt"}});
    env.push_back({{"name", "OUTBOX_DATABASE_KEY_FILE"},
                   {"value", std::string(kDatabaseClientDir) + "/tls.key"}});
  }
}

// The DSN, and the operator's own log settings with the fields every JSON line of the pod
// then carries: its namespace, OutboxRelay and pod name (common/log.hpp).
Json pod_env(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const PodSettings& pod) {
  Json env = Json::array({{{"name", "OUTBOX_DSN_FILE"}, {"value", dsn_file(spec)}}});
  add_database_tls_env(spec, env);
  env.push_back({{"name", "OUTBOX_LOG_LEVEL"}, {"value", pod.log_level}});
  env.push_back({{"name", "OUTBOX_LOG_FORMAT"}, {"value", pod.log_format}});
  env.push_back({{"name", "OUTBOX_LOG_NAMESPACE"},
                 {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}});
  env.push_back({{"name", "OUTBOX_LOG_OUTBOXRELAY"}, {"value", relay.name}});
  env.push_back({{"name", "OUTBOX_LOG_REPLICA"},
                 {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  return env;
}

}  // namespace

std::vector<KafkaMount> kafka_mounts(const api::OutboxRelaySpec& spec) {
  return mounts_of(spec.kafka.credentials);
}

Json container(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const std::string& name,
               const PodSettings& pod, std::vector<std::string> args, bool kafka) {
  Json mounts =
      Json::array({{{"name", "tmp"}, {"mountPath", "/tmp"}},
                   {{"name", "database"}, {"mountPath", kDatabaseDir}, {"readOnly", true}}});
  for (const Json& v : database_tls_volumes(spec)) {
    const std::string volume = v.at("name");
    mounts.push_back({{"name", volume},
                      {"mountPath", volume == "database-ca" ? kDatabaseCaDir : kDatabaseClientDir},
                      {"readOnly", true}});
  }
  for (const KafkaMount& m : kafka ? kafka_mounts(spec) : std::vector<KafkaMount>{}) {
    mounts.push_back({{"name", m.volume}, {"mountPath", m.path}, {"readOnly", true}});
  }
  return {{"name", name},
          {"image", pod.image},
          {"imagePullPolicy", "IfNotPresent"},
          {"args", args},
          {"env", pod_env(relay, spec, pod)},
          {"securityContext", container_security_context()},
          // A container that exits with nothing written to the message file leaves the tail
          // of its log there instead: the operator quotes its last line in the Ready condition.
          {"terminationMessagePolicy", "FallbackToLogsOnError"},
          {"volumeMounts", std::move(mounts)}};
}

Json container_for_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                       const std::string& name, const PodSettings& pod,
                       std::vector<std::string> args) {
  Json c = container(relay, spec, name, pod, std::move(args), name == "compensate");
  if (!spec.relay.resources.is_null()) {
    c["resources"] = spec.relay.resources;
  }
  return c;
}

Json pod_spec(const api::OutboxRelaySpec& spec, const RelayNames& names, Json container,
              PodRuns runs) {
  Json volumes =
      Json::array({{{"name", "tmp"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "16Mi"}}}},
                   dsn_volume(spec)});
  for (Json& v : database_tls_volumes(spec)) {
    volumes.push_back(std::move(v));
  }
  const Json& mounts = container.at("volumeMounts");
  for (const KafkaMount& m : kafka_mounts(spec)) {
    const bool mounted = std::any_of(mounts.begin(), mounts.end(), [&](const Json& mount) {
      return mount.at("name") == m.volume;
    });
    if (!mounted) {
      continue;
    }
    // Readable by the pod's group (fsGroup) only: the container runs as that group.
    Json secret = {{"secretName", m.secret}, {"defaultMode", 0440}};
    if (!m.items.is_null()) {
      secret["items"] = m.items;
    }
    volumes.push_back({{"name", m.volume}, {"secret", std::move(secret)}});
  }
  Json out = {{"serviceAccountName", names.deployment},
              // Every pod writes its own part of the OutboxRelay's status (the relay
              // status.backlog, the jobs status.lastCompensation, status.lastCleanup and
              // status.lastRequeue) with this ServiceAccount's token.
              {"automountServiceAccountToken", true},
              {"securityContext", pod_security_context()},
              {"containers", Json::array({std::move(container)})},
              {"volumes", std::move(volumes)}};
  if (runs == PodRuns::kJob) {
    out["restartPolicy"] = "Never";
  }
  return out;
}

void apply_pod_template(const api::OutboxRelaySpec& spec, Json& pod) {
  if (spec.relay.pod_template.is_null()) {
    return;
  }
  const Json& t = spec.relay.pod_template;
  if (t.contains("metadata")) {
    add_metadata(t.at("metadata"), pod["metadata"]);
  }
  for (const char* field : {"nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
                            "priorityClassName", "imagePullSecrets", "securityContext"}) {
    if (t.contains(field)) {
      pod["spec"][field] = t.at(field);
    }
  }
}

}  // namespace builders
}  // namespace outbox::controller
