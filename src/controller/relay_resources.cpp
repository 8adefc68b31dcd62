#include "controller/relay_resources.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <regex>
#include <stdexcept>
#include <string_view>

#include "api/spec.hpp"
#include "common/duration.hpp"
#include "controller/network_policy.hpp"
#include "controller/schedules.hpp"
#include "outbox/column_map.hpp"

namespace outbox::controller {

using api::OutboxRelaySpec;

namespace {

// Kubernetes expands $(VAR) in container args from the container's environment: a spec
// string must reach the process as written, whatever the environment holds now or later.
// `$$` is Kubernetes' escape for a literal `$`, so every `$` of a spec string is doubled.
std::string literal(std::string_view spec_text) {
  std::string out;
  for (char c : spec_text) {
    if (c == '$') {
      out.push_back('$');
    }
    out.push_back(c);
  }
  return out;
}

// `--name=value` with the value taken literally (see literal()).
std::string flag(std::string_view name, std::string_view spec_value) {
  return "--" + std::string(name) + "=" + literal(spec_value);
}

Json labels_for(const std::string& relay_name, const std::string& component) {
  return {{"app.kubernetes.io/name", "outbox-relay"},
          {"app.kubernetes.io/instance", relay_name},
          {"app.kubernetes.io/component", component},
          {"app.kubernetes.io/part-of", "outbox-operator"},
          {kManagedByLabel, "outbox-operator"}};
}

Json selector_labels(const std::string& relay_name) {
  return {{"app.kubernetes.io/name", "outbox-relay"},
          {"app.kubernetes.io/instance", relay_name},
          {"app.kubernetes.io/component", "relay"}};
}

// controller=true makes the OutboxRelay the one managing controller of the object (a second
// controller reference is refused by the apiserver); blockOwnerDeletion makes a foreground
// deletion of the OutboxRelay wait for it.
Json owner_reference(const Json& relay) {
  return Json::array({{{"apiVersion", relay.value("apiVersion", "outbox.dev/v1alpha1")},
                       {"kind", "OutboxRelay"},
                       {"name", relay.at("metadata").at("name")},
                       {"uid", relay.at("metadata").at("uid")},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

Json metadata(const Json& relay, const std::string& name, const std::string& component) {
  return {{"name", name},
          {"namespace", relay.at("metadata").at("namespace")},
          {"labels", labels_for(relay.at("metadata").at("name"), component)},
          {"ownerReferences", owner_reference(relay)}};
}

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

std::string image_of(const OutboxRelaySpec& spec, const RenderOptions& options) {
  std::string image = spec.relay.image.value_or(options.relay_image);
  if (image.empty()) {
    throw InvalidSpec("no relay image: set spec.relay.image or OUTBOX_RELAY_IMAGE");
  }
  return image;
}

// A request token names its Job through a hash, but is passed as it is in --request.
constexpr std::size_t kMaxRequeueToken = 63;

// Where the pods see the Kafka Secret: one file per key, read by --kafka-config-dir.
const char kKafkaConfigDir[] = "/etc/outbox/kafka";

// Where the pods see the DSN: the one key of the Secret that spec.database.dsnSecretRef names,
// as a file of the same name, read through OUTBOX_DSN_FILE (a path, not a credential). Never an
// environment variable: `kubectl exec` and /proc/<pid>/environ would show it to anyone who may
// exec into the pod.
const char kDatabaseDir[] = "/etc/outbox/database";

std::string dsn_file(const OutboxRelaySpec& spec) {
  return std::string(kDatabaseDir) + "/" + spec.database.dsn_secret.key;
}

// Only the named key, readable by the pod's group (fsGroup) only. `optional`: a key the Secret
// lacks leaves the file out instead of holding the pod in ContainerCreating with the reason in
// an Event only; the process then exits naming the missing file, and the Ready condition
// quotes that (the operator reads Secrets' metadata only, so this is where a missing key shows).
Json dsn_volume(const OutboxRelaySpec& spec) {
  const api::SecretKeyRef& ref = spec.database.dsn_secret;
  return {{"name", "database"},
          {"secret",
           {{"secretName", ref.name},
            {"defaultMode", 0440},
            {"optional", true},
            {"items", Json::array({{{"key", ref.key}, {"path", ref.key}}})}}}};
}

// spec.database.tls: the CA and the client certificate as files, under fixed names the
// OUTBOX_DATABASE_* variables point at (paths and a mode: nothing secret in the environment).
// The kubelet updates these files in place when the Secret or ConfigMap changes, and libpq reads
// them at every connection.
const char kDatabaseCaDir[] = "/etc/outbox/database-ca";
const char kDatabaseClientDir[] = "/etc/outbox/database-client";

Json database_tls_volumes(const OutboxRelaySpec& spec) {
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

void add_database_tls_env(const OutboxRelaySpec& spec, Json& env) {
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
Json pod_env(const Json& relay, const OutboxRelaySpec& spec, const PodSettings& pod) {
  Json env = Json::array({{{"name", "OUTBOX_DSN_FILE"}, {"value", dsn_file(spec)}}});
  add_database_tls_env(spec, env);
  env.push_back({{"name", "OUTBOX_LOG_LEVEL"}, {"value", pod.log_level}});
  env.push_back({{"name", "OUTBOX_LOG_FORMAT"}, {"value", pod.log_format}});
  env.push_back({{"name", "OUTBOX_LOG_NAMESPACE"},
                 {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}});
  env.push_back({{"name", "OUTBOX_LOG_OUTBOXRELAY"}, {"value", relay.at("metadata").at("name")}});
  env.push_back({{"name", "OUTBOX_LOG_REPLICA"},
                 {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  return env;
}

// Where the pods see TLS and authentication Secrets: only the keys the spec names, under fixed
// file names the relay's flags point at (Strimzi's key names by default, see the CRD).
const char kKafkaCaDir[] = "/etc/outbox/kafka-ca";
const char kKafkaUserDir[] = "/etc/outbox/kafka-user";

// `default_from`: the spec table's row that holds the key's default.
Json key_to_path(const Json& ref, const char* field, const char* default_from, const char* path) {
  return {{"key", ref.value(field, api::spec_field(default_from).default_value.get<std::string>())},
          {"path", path}};
}

}  // namespace

std::vector<KafkaMount> kafka_mounts(const Json& relay) {
  std::vector<KafkaMount> mounts;
  const Json kafka = relay.at("spec").value("kafka", Json::object());
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

namespace {

// The relay's flags for the mounted credentials (PublishOptions reads the files).
void add_kafka_credential_args(const Json& relay, std::vector<std::string>& args) {
  const Json kafka = relay.at("spec").value("kafka", Json::object());
  if (kafka.contains("configSecretRef")) {
    args.push_back(flag("kafka-config-dir", kKafkaConfigDir));
  }
  if (kafka.contains("tls")) {
    args.push_back(flag("kafka-ca-file", std::string(kKafkaCaDir) + "/ca.crt"));
  }
  const Json auth = kafka.value("authentication", Json::object());
  const std::string type = auth.value("type", "");
  if (type == "tls") {
    args.push_back(flag("kafka-cert-file", std::string(kKafkaUserDir) + "/user.crt"));
    args.push_back(flag("kafka-key-file", std::string(kKafkaUserDir) + "/user.key"));
  } else if (!type.empty()) {
    const std::map<std::string, std::string> mechanisms = {
        {"scram-sha-512", "SCRAM-SHA-512"}, {"scram-sha-256", "SCRAM-SHA-256"}, {"plain", "PLAIN"}};
    const auto mechanism = mechanisms.find(type);
    if (mechanism == mechanisms.end() || !auth.contains("username")) {
      throw InvalidSpec("spec.kafka.authentication: type " + type +
                        " needs username and passwordSecret");
    }
    args.push_back(flag("kafka-sasl-mechanism", mechanism->second));
    args.push_back(flag("kafka-sasl-username", auth.at("username").get<std::string>()));
    args.push_back(flag("kafka-sasl-password-file", std::string(kKafkaUserDir) + "/password"));
  }
}

// --table, and for an adopted table (spec.database.columns) one --column per
// role, defaults spelled out: every command then refuses a table adopted with
// other columns than the resource says.
std::vector<std::string> table_args(const OutboxRelaySpec& spec) {
  std::vector<std::string> args = {flag("table", spec.database.table)};
  if (spec.database.columns.is_null()) {
    return args;
  }
  std::vector<std::string> entries;
  for (const auto& [role, column] : spec.database.columns.items()) {
    entries.push_back(role + "=" + column.get<std::string>());
  }
  try {
    for (const auto& [role, column] : ColumnMap::parse(entries).entries()) {
      args.push_back(flag("column", role + "=" + column));
    }
  } catch (const std::invalid_argument& e) {
    throw InvalidSpec(std::string("spec.database.") + e.what());
  }
  return args;
}

// Flags shared by `relay` and `compensate`: the table, Kafka and the publishing rules.
std::vector<std::string> publish_args(const Json& relay, const OutboxRelaySpec& spec) {
  std::vector<std::string> args = table_args(spec);
  args.push_back(flag("brokers", spec.kafka.bootstrap_servers));
  args.push_back(flag("topic", spec.kafka.topic));
  for (const api::Route& route : spec.kafka.routes) {
    args.push_back(flag("route", route.biz_type + "=" + route.topic));
  }
  if (spec.kafka.dead_letter_topic) {
    args.push_back(flag("dead-letter-topic", *spec.kafka.dead_letter_topic));
  }
  add_kafka_credential_args(relay, args);
  if (!spec.relay.per_key_order) {
    args.push_back("--ordering=none");
  }
  args.push_back(std::string("--on-sent=") + (spec.relay.delete_on_sent ? "delete" : "mark"));
  args.push_back("--max-attempts=" + std::to_string(spec.retry.max_attempts));
  args.push_back(flag("initial-backoff", spec.retry.initial_backoff));
  args.push_back(flag("max-backoff", spec.retry.max_backoff));
  char jitter[32];
  std::snprintf(jitter, sizeof jitter, "%g", spec.retry.jitter);
  args.push_back(std::string("--jitter=") + jitter);
  return args;
}

// The relay and both jobs report into the OutboxRelay they were rendered from.
std::string report_status_arg(const Json& relay) {
  return flag("report-status", relay.at("metadata").at("namespace").get<std::string>() + "/" +
                                   relay.at("metadata").at("name").get<std::string>());
}

// `kafka`: the container reads the Kafka Secrets' files (the relay and compensation do; the
// cleanup job never talks to Kafka).
Json container(const Json& relay, const OutboxRelaySpec& spec, const std::string& name,
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
  for (const KafkaMount& m : kafka ? kafka_mounts(relay) : std::vector<KafkaMount>{}) {
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

// Volumes for what `container` mounts (see container()).
// Adds the labels and annotations of `extra` (a template's metadata) to `meta`; the
// operator's own keys win.
void add_metadata(const Json& extra, Json& meta) {
  for (const char* kind : {"labels", "annotations"}) {
    if (extra.contains(kind)) {
      Json merged = extra.at(kind);
      merged.update(meta.value(kind, Json::object()));
      meta[kind] = std::move(merged);
    }
  }
}

// Adds spec.relay.template.pod to a pod template ({metadata, spec}): its labels and
// annotations under the operator's own, placement, pull secrets, priority and
// (replacing the default) the security context.
void apply_pod_template(const OutboxRelaySpec& spec, Json& pod) {
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

Json pod_spec(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
              Json container, bool job) {
  Json volumes =
      Json::array({{{"name", "tmp"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "16Mi"}}}},
                   dsn_volume(spec)});
  for (Json& v : database_tls_volumes(spec)) {
    volumes.push_back(std::move(v));
  }
  const Json& mounts = container.at("volumeMounts");
  for (const KafkaMount& m : kafka_mounts(relay)) {
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
  if (job) {
    out["restartPolicy"] = "Never";
  }
  return out;
}

// A job's container: as container(), with the relay's resources (a namespace with a
// ResourceQuota admits no pod without them). Only `compensate` talks to Kafka.
Json container_for_job(const Json& relay, const OutboxRelaySpec& spec, const std::string& name,
                       const PodSettings& pod, std::vector<std::string> args) {
  Json c = container(relay, spec, name, pod, std::move(args), name == "compensate");
  if (!spec.relay.resources.is_null()) {
    c["resources"] = spec.relay.resources;
  }
  return c;
}

Json cron_job(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
              const std::string& name, const std::string& component, const std::string& schedule,
              const std::string& time_zone, Json container) {
  Json template_labels = labels_for(relay.at("metadata").at("name"), component);
  Json pod = {{"metadata", {{"labels", template_labels}}},
              {"spec", pod_spec(relay, spec, names, std::move(container), true)}};
  apply_pod_template(spec, pod);
  return {{"apiVersion", "batch/v1"},
          {"kind", "CronJob"},
          {"metadata", metadata(relay, name, component)},
          {"spec",
           {{"schedule", schedule},
            {"timeZone", time_zone},
            // A run still going when the next is due is left to finish: two compensation runs
            // would only contend for the same shard locks.
            {"concurrencyPolicy", "Forbid"},
            {"suspend", spec.suspend},
            {"startingDeadlineSeconds", 120},
            {"successfulJobsHistoryLimit", 1},
            {"failedJobsHistoryLimit", 3},
            {"jobTemplate",
             {{"metadata", {{"labels", template_labels}}},
              {"spec",
               {{"backoffLimit", 0},
                {"ttlSecondsAfterFinished", 3600},
                {"template", std::move(pod)}}}}}}}};
}

int desired_replicas(const OutboxRelaySpec& spec) {
  return spec.suspend ? 0 : spec.relay.replicas;
}

// With spec.relay.template.serviceAccount's labels and annotations (IRSA, Workload
// Identity), under the operator's own.
Json service_account(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names) {
  Json meta = metadata(relay, names.deployment, "relay");
  if (!spec.relay.service_account_metadata.is_null()) {
    add_metadata(spec.relay.service_account_metadata, meta);
  }
  return {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", std::move(meta)}};
}

// Exactly what the status reports of the relay and the jobs need (a server-side apply and a
// merge patch of the status subresource), on this one OutboxRelay; the operator's own
// ClusterRole holds all of it, which is what lets it grant this without `escalate`.
Json status_role(const Json& relay, const RelayNames& names) {
  const std::string name = relay.at("metadata").at("name");
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "Role"},
      {"metadata", metadata(relay, names.deployment, "relay")},
      {"rules",
       Json::array(
           {{{"apiGroups", {"outbox.dev"}},
             {"resources", {"outboxrelays"}},
             {"resourceNames", {name}},
             {"verbs", {"get"}}},
            {{"apiGroups", {"outbox.dev"}},
             {"resources", {"outboxrelays/status"}},
             {"resourceNames", {name}},
             {"verbs", {"get", "patch", "update"}}},
            {{"apiGroups", {""}}, {"resources", {"events"}}, {"verbs", {"create", "patch"}}}})}};
}

Json role_binding(const Json& relay, const RelayNames& names) {
  const std::string ns = relay.at("metadata").at("namespace");
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", metadata(relay, names.deployment, "relay")},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", names.deployment}}},
      {"subjects",
       Json::array({{{"kind", "ServiceAccount"}, {"name", names.deployment}, {"namespace", ns}}})}};
}

// The rendered settings, one `--flag=value` per line: what the relay pods were started with.
std::string relay_config(const Json& relay, const std::vector<std::string>& args) {
  const std::string name = relay.at("metadata").at("name");
  const std::string ns = relay.at("metadata").at("namespace");
  std::string conf = "# Rendered by outbox-operator from OutboxRelay " + ns + "/" + name +
                     "; the relay Deployment runs with exactly these arguments.\n";
  for (const auto& a : args) {
    conf += a + "\n";
  }
  return conf;
}

Json config_map(const Json& relay, const RelayNames& names, const std::string& conf) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(relay, names.config_map, "relay")},
          {"data", {{"relay.args", conf}}}};
}

// The pod template's hashes: a change of either rolls the relay pods.
struct TemplateHashes {
  std::string config;
  std::string secrets;
};

Json deployment(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
                const PodSettings& settings, const std::vector<std::string>& args,
                const TemplateHashes& hashes) {
  const std::string name = relay.at("metadata").at("name");
  Json relay_container = container(relay, spec, "relay", settings, args, true);
  relay_container["ports"] =
      Json::array({{{"name", "metrics"}, {"containerPort", kRelayPort}, {"protocol", "TCP"}}});
  relay_container["livenessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", "metrics"}}},
                                      {"periodSeconds", 10},
                                      {"failureThreshold", 6}};
  relay_container["readinessProbe"] = {{"httpGet", {{"path", "/readyz"}, {"port", "metrics"}}},
                                       {"periodSeconds", 5}};
  if (!spec.relay.resources.is_null()) {
    relay_container["resources"] = spec.relay.resources;
  }
  Json pod = {
      {"metadata",
       {{"labels", labels_for(name, "relay")},
        {"annotations",
         {{kConfigHashAnnotation, hashes.config}, {kSecretsHashAnnotation, hashes.secrets}}}}},
      {"spec", pod_spec(relay, spec, names, std::move(relay_container), false)}};
  apply_pod_template(spec, pod);
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", metadata(relay, names.deployment, "relay")},
          {"spec",
           {{"replicas", desired_replicas(spec)},
            {"revisionHistoryLimit", 3},
            {"selector", {{"matchLabels", selector_labels(name)}}},
            {"template", std::move(pod)}}}};
}

Json compensation_cron_job(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
                           const PodSettings& pod, bool relays_alive) {
  std::vector<std::string> args = {"compensate"};
  for (auto& a : publish_args(relay, spec)) {
    args.push_back(std::move(a));
  }
  args.push_back("--batch-size=" + std::to_string(spec.compensation.batch_size));
  args.push_back(flag("stale-after", spec.compensation.stale_after));
  args.push_back(report_status_arg(relay));
  // While no relay is alive the safety net is all that publishes: every minute, whatever the
  // spec says. Otherwise the spec's schedule, or a rare one spread over the fleet.
  const std::string schedule =
      !relays_alive ? kRescueCompensationSchedule
                    : spec.compensation.schedule.value_or(
                          spread_compensation_schedule(ns_of(relay), name_of(relay)));
  return cron_job(relay, spec, names, names.compensation, "compensation", schedule,
                  spec.compensation.time_zone,
                  container_for_job(relay, spec, "compensate", pod, args));
}

Json retention_cron_job(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
                        const PodSettings& pod) {
  std::vector<std::string> args = {"cleanup"};
  for (std::string& arg : table_args(spec)) {
    args.push_back(std::move(arg));
  }
  args.push_back(flag("keep-sent", spec.retention.keep_sent));
  args.push_back("--batch-size=" + std::to_string(spec.retention.batch_size));
  if (spec.retention.archive_table && !spec.retention.archive_table->empty()) {
    args.push_back(flag("archive-table", *spec.retention.archive_table));
  }
  args.push_back(report_status_arg(relay));
  return cron_job(
      relay, spec, names, names.retention, "retention",
      spec.retention.schedule.value_or(spread_retention_schedule(ns_of(relay), name_of(relay))),
      spec.retention.time_zone, container_for_job(relay, spec, "cleanup", pod, args));
}

// `migrate` for the spec's table: --adopt with the columns of an adopted table, the
// shard count and mode when set.
std::vector<std::string> migrate_args(const OutboxRelaySpec& spec) {
  std::vector<std::string> args = {"migrate"};
  for (std::string& arg : table_args(spec)) {
    args.push_back(std::move(arg));
  }
  if (!spec.database.columns.is_null()) {
    args.push_back("--adopt");
  }
  if (spec.relay.shards) {
    args.push_back("--shards=" + std::to_string(*spec.relay.shards));
  }
  if (spec.database.payload) {
    std::string type = *spec.database.payload;
    std::transform(type.begin(), type.end(), type.begin(), ::tolower);
    args.push_back("--payload=" + type);
  }
  if (spec.database.mode) {
    args.push_back(std::string("--mode=") + (*spec.database.mode == "Log" ? "log" : "status"));
  }
  return args;
}

// A Job that runs once in the relay's image with the relay's pod settings (the DSN from its
// Secret, the relay's ServiceAccount, non-root and read-only, spec.relay.template.pod).
struct OneShotJob {
  std::string name;
  std::string component;
  int backoff_limit;
  int deadline_seconds;
  std::optional<int> ttl_seconds;  // ttlSecondsAfterFinished; nullopt: kept with the relay
};

Json one_shot_job(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
                  const OneShotJob& job, Json container) {
  Json labels = labels_for(relay.at("metadata").at("name"), job.component);
  Json pod = {{"metadata", {{"labels", labels}}},
              {"spec", pod_spec(relay, spec, names, std::move(container), true)}};
  apply_pod_template(spec, pod);
  Json job_spec = {{"backoffLimit", job.backoff_limit},
                   {"activeDeadlineSeconds", job.deadline_seconds},
                   {"template", std::move(pod)}};
  if (job.ttl_seconds) {
    job_spec["ttlSecondsAfterFinished"] = *job.ttl_seconds;
  }
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", metadata(relay, job.name, job.component)},
          {"spec", std::move(job_spec)}};
}

// The Job behind schema_job_name(). Never rerun by the Job controller beyond a few
// tries: migrate is idempotent, and a table it cannot create needs a person.
Json schema_job(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
                const std::string& name, const PodSettings& settings) {
  return one_shot_job(relay, spec, names, {name, "schema", 3, 900, std::nullopt},
                      container_for_job(relay, spec, "migrate", settings, migrate_args(spec)));
}

// `migrate --drop` for the spec's table; --adopt makes it refuse a table the spec calls
// someone else's that outbox_meta records as made by migrate.
std::vector<std::string> drop_args(const OutboxRelaySpec& spec) {
  std::vector<std::string> args = {"migrate", "--drop"};
  for (std::string& arg : table_args(spec)) {
    args.push_back(std::move(arg));
  }
  if (!spec.database.columns.is_null()) {
    args.push_back("--adopt");
  }
  return args;
}

// The Job behind a change request (change_request()): the requeue or replay of the selected
// events, one transaction, so a failed try of a requeue changed nothing and a few more are safe
// (a replay retried after a commit whose answer was lost publishes its events once more, which
// consumers dedupe on event_id). Deleted a day after it ends (its log is read until then): by
// then its pod has answered the request in status, or the operator has for a pod that could
// not, so nothing renders it again.
Json change_job(const Json& relay, const OutboxRelaySpec& spec, const RelayNames& names,
                const ChangeKind& kind, const ChangeRequest& request, const PodSettings& settings) {
  std::vector<std::string> args = {kind.verb};
  for (std::string& arg : table_args(spec)) {
    args.push_back(std::move(arg));
  }
  for (const std::string& arg : request.selector_args) {
    args.push_back(arg);
  }
  // Validated (requeue_token_problem): no `$`, space or `=` can reach the argument.
  args.push_back(flag("request", request.token));
  args.push_back(report_status_arg(relay));
  return one_shot_job(relay, spec, names, {request.job, kind.verb, 2, 600, 86400},
                      container_for_job(relay, spec, kind.verb, settings, args));
}

// Headless: scraping reaches each pod through the endpoints, and a ClusterIP per resource
// would exhaust a /24 service range at ~250.
Json metrics_service(const Json& relay, const RelayNames& names) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", metadata(relay, names.service, "relay")},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", selector_labels(relay.at("metadata").at("name"))},
            {"ports", Json::array({{{"name", "metrics"},
                                    {"port", kRelayPort},
                                    {"targetPort", "metrics"},
                                    {"protocol", "TCP"}}})}}}};
}

Json disruption_budget(const Json& relay, const RelayNames& names) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", metadata(relay, names.deployment, "relay")},
          {"spec",
           {{"maxUnavailable", 1},
            {"selector", {{"matchLabels", selector_labels(relay.at("metadata").at("name"))}}}}}};
}

}  // namespace

RelayNames::RelayNames(const std::string& relay_name)
    : deployment(relay_name + "-relay"),
      config_map(relay_name + "-config"),
      compensation(relay_name + "-compensate"),
      retention(relay_name + "-cleanup"),
      service(relay_name + "-metrics") {}

std::string relay_selector(const std::string& relay_name) {
  std::string out;
  const Json labels = selector_labels(relay_name);
  for (const auto& [k, v] : labels.items()) {
    out += (out.empty() ? "" : ",") + k + "=" + v.get<std::string>();
  }
  return out;
}

std::string stable_hash(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

namespace {

// The typed spec of `relay`; a spec it cannot read is InvalidSpec, naming the field.
OutboxRelaySpec spec_of(const Json& relay) {
  try {
    return api::parse_spec(relay.at("spec"));
  } catch (const api::SpecError& e) {
    throw InvalidSpec(e.what());
  }
}

std::string schema_job_name(const Json& relay, const OutboxRelaySpec& spec,
                            const RenderOptions& options) {
  if (!spec.database.manage_schema) {
    return {};
  }
  std::string signature = image_of(spec, options);
  for (const std::string& arg : migrate_args(spec)) {
    signature += "\n" + arg;
  }
  return relay.at("metadata").at("name").get<std::string>() + "-schema-" +
         stable_hash(signature).substr(0, 8);
}

std::vector<std::string> relay_args(const Json& relay, const OutboxRelaySpec& spec) {
  std::vector<std::string> args = {"relay"};
  for (auto& a : publish_args(relay, spec)) {
    args.push_back(std::move(a));
  }
  args.push_back("--batch-size=" + std::to_string(spec.relay.batch_size));
  args.push_back(flag("poll-interval", spec.relay.poll_interval));
  args.push_back(flag("coalesce-window", spec.relay.coalesce_window));
  args.push_back(flag("stuck-after", spec.stuck_after));
  if (spec.relay.shards) {
    args.push_back("--shards=" + std::to_string(*spec.relay.shards));
  }
  args.push_back("--listen=0.0.0.0:" + std::to_string(kRelayPort));
  args.push_back(report_status_arg(relay));
  return args;
}

}  // namespace

std::string schema_job_name(const Json& relay, const RenderOptions& options) {
  return schema_job_name(relay, spec_of(relay), options);
}

bool drops_on_deletion(const Json& relay) {
  return value_at<std::string>(
             relay, "/spec/deletionPolicy",
             api::spec_field("/deletionPolicy").default_value.get<std::string>()) == "Drop";
}

bool has_drop_finalizer(const Json& relay) {
  const Json finalizers = relay.at("metadata").value("finalizers", Json::array());
  return std::find(finalizers.begin(), finalizers.end(), kDropFinalizer) != finalizers.end();
}

std::string drop_job_name(const Json& relay) {
  return name_of(relay) + "-drop-" +
         stable_hash(relay.at("metadata").value("uid", "")).substr(0, 8);
}

OwnedObject drop_job(const Json& relay, const RenderOptions& options) {
  try {
    const RelayNames names(name_of(relay));
    const OutboxRelaySpec spec = spec_of(relay);
    const PodSettings pod{image_of(spec, options), options.log_level, options.log_format};
    // Failed tries changed nothing (one transaction): a couple more are safe.
    Json job = one_shot_job(relay, spec, names, {drop_job_name(relay), "drop", 2, 900, 86400},
                            container_for_job(relay, spec, "drop", pod, drop_args(spec)));
    job["metadata"].erase("ownerReferences");
    Json& pod_spec = job["spec"]["template"]["spec"];
    pod_spec.erase("serviceAccountName");
    pod_spec["automountServiceAccountToken"] = false;
    return {&owned::jobs, std::move(job)};
  } catch (const Json::exception& e) {
    throw InvalidSpec(std::string("the spec cannot be rendered: ") + e.what());
  }
}

std::string requeue_token_problem(const std::string& token) {
  if (token.empty()) {
    return "the request token is empty";
  }
  if (token.size() > kMaxRequeueToken) {
    return "the request token is " + std::to_string(token.size()) + " characters long (at most " +
           std::to_string(kMaxRequeueToken) + ")";
  }
  for (char c : token) {
    // ASCII only, whatever the locale (std::isalnum is not).
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view(":._+-").find(c) == std::string_view::npos) {
      return "the request token has a character other than A-Z a-z 0-9 : . _ + - (a timestamp "
             "such as 2026-12-04T10:00:00Z is the convention)";
    }
  }
  return {};
}

const ChangeKind kRequeueKind{kRequeueAnnotation, "requeue", "lastRequeue", "requeued", "Requeue"};
const ChangeKind kReplayKind{kReplayAnnotation, "replay", "lastReplay", "replayed", "Replay"};

namespace {

constexpr std::size_t kMaxAnnotationValue = 8192;
constexpr std::size_t kMaxEventIds = 100;
constexpr std::size_t kMaxText = 253;

bool is_uuid(const std::string& s) {
  static const std::regex uuid(
      "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
      "[0-9a-fA-F]{12}$");
  return std::regex_match(s, uuid);
}

bool is_rfc3339(const std::string& s) {
  static const std::regex time(
      R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$)");
  return std::regex_match(s, time);
}

// Printable ASCII without quotes or backslashes: what reaches an argument or an Event message
// reads as it is.
bool plain_text(const std::string& s) {
  return !s.empty() && s.size() <= kMaxText && std::all_of(s.begin(), s.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '`';
  });
}

// The selectors of a JSON request into `out`; returns why they are refused, or "".
std::string parse_selectors(const Json& v, const ChangeKind& kind, ChangeRequest& out) {
  std::string summary;
  auto add_summary = [&](const std::string& part) {
    summary += (summary.empty() ? "" : ", ") + part;
  };
  for (const auto& [key, value] : v.items()) {
    if (key != "request" && key != "requestedBy" && key != "eventIds" && key != "bizType" &&
        key != "from" && key != "to" && key != "fromId" && key != "toId" && key != "all") {
      return "unknown key \"" + (plain_text(key) ? key : std::string("?")) +
             "\" (request, requestedBy, eventIds, bizType, from, to, fromId, toId" +
             (kind.verb == std::string("requeue") ? ", all)" : ")");
    }
  }
  if (v.contains("requestedBy")) {
    if (!v.at("requestedBy").is_string() || !plain_text(v.at("requestedBy").get<std::string>())) {
      return "requestedBy must be a user name of printable characters (at most 253)";
    }
    out.requested_by = v.at("requestedBy").get<std::string>();
  }
  bool all = false;
  if (v.contains("all")) {
    if (kind.verb != std::string("requeue")) {
      return "\"all\" is not offered for a replay: select event ids or a bounded range";
    }
    if (!v.at("all").is_boolean()) {
      return "all must be true or false";
    }
    all = v.at("all").get<bool>();
  }
  bool ids = false;
  if (v.contains("eventIds")) {
    const Json& list = v.at("eventIds");
    if (!list.is_array() || list.empty() || list.size() > kMaxEventIds) {
      return "eventIds must be a list of 1 to " + std::to_string(kMaxEventIds) + " UUIDs";
    }
    for (const Json& id : list) {
      if (!id.is_string() || !is_uuid(id.get<std::string>())) {
        return "eventIds holds something that is not a UUID";
      }
      out.selector_args.push_back("--event-id=" + id.get<std::string>());
    }
    ids = true;
    add_summary(std::to_string(list.size()) + " event id(s)");
  }
  if (v.contains("bizType")) {
    if (!v.at("bizType").is_string() || !plain_text(v.at("bizType").get<std::string>())) {
      return "bizType must be text of printable characters (at most 253)";
    }
    out.selector_args.push_back(flag("biz-type", v.at("bizType").get<std::string>()));
    add_summary("biz_type " + v.at("bizType").get<std::string>());
  }
  for (const char* key : {"from", "to"}) {
    if (!v.contains(key)) {
      continue;
    }
    if (!v.at(key).is_string() || !is_rfc3339(v.at(key).get<std::string>())) {
      return std::string(key) + " must be an RFC 3339 time such as 2026-12-04T10:00:00Z";
    }
    out.selector_args.push_back("--" + std::string(key) + "=" + v.at(key).get<std::string>());
  }
  if (v.contains("from") || v.contains("to")) {
    add_summary("created in [" + v.value("from", std::string("-")) + ", " +
                v.value("to", std::string("-")) + ")");
  }
  for (const auto& [key, option] : {std::pair{"fromId", "from-id"}, std::pair{"toId", "to-id"}}) {
    if (!v.contains(key)) {
      continue;
    }
    if (!v.at(key).is_number_integer() || v.at(key).get<std::int64_t>() < 0) {
      return std::string(key) + " must be a whole number, 0 or more";
    }
    out.selector_args.push_back("--" + std::string(option) + "=" +
                                std::to_string(v.at(key).get<std::int64_t>()));
  }
  if (v.contains("fromId") && v.contains("toId") &&
      v.at("fromId").get<std::int64_t>() > v.at("toId").get<std::int64_t>()) {
    return "fromId is above toId: the range selects nothing";
  }
  if (v.contains("fromId") || v.contains("toId")) {
    add_summary("id in [" + (v.contains("fromId") ? v.at("fromId").dump() : "-") + ", " +
                (v.contains("toId") ? v.at("toId").dump() : "-") + "]");
  }
  if (all) {
    if (!out.selector_args.empty()) {
      return "all selects every FAILED event: give it alone, or selectors without it";
    }
    out.selector_args.push_back("--all");
    add_summary("every FAILED event");
  }
  if (out.selector_args.empty()) {
    return "no events are selected (eventIds, bizType, from/to, fromId/toId" +
           std::string(kind.verb == std::string("requeue") ? ", or all)" : ")");
  }
  const bool time_range = v.contains("from") && v.contains("to");
  const bool id_range = v.contains("fromId") && v.contains("toId");
  if (kind.verb == std::string("replay") && !ids && !time_range && !id_range) {
    return "a replay must be bounded: event ids, or both from and to, or both fromId and toId "
           "(an open range replays everything on one side of it)";
  }
  out.summary = summary;
  return "";
}

}  // namespace

ChangeRequest change_request(const Json& relay, const ChangeKind& kind) {
  ChangeRequest out;
  const Json annotations = relay.at("metadata").value("annotations", Json::object());
  const auto value = annotations.find(kind.annotation);
  if (value == annotations.end() || !value->is_string()) {
    return out;
  }
  const std::string text = value->get<std::string>();
  auto refuse = [&](const std::string& problem) {
    ChangeRequest refused;
    refused.problem = "annotation " + std::string(kind.annotation) + ": " + problem + ". No " +
                      kind.verb + " runs until it is fixed.";
    return refused;
  };
  std::string token;
  const bool structured = !text.empty() && text.front() == '{';
  if (structured || kind.verb != std::string("requeue")) {
    if (text.size() > kMaxAnnotationValue) {
      return refuse("the value is longer than " + std::to_string(kMaxAnnotationValue) +
                    " characters");
    }
    // Backslashes would let a key be spelt another way ("\u0072equestedBy") and a second
    // "requestedBy" hide behind the first: the admission policy that checks the requester
    // (examples/oncall/requester-policy.yaml) reads the text as written, not as parsed.
    if (text.find('\\') != std::string::npos) {
      return refuse("the value has a backslash (no selector needs one)");
    }
    std::size_t named = 0;
    for (std::size_t at = text.find("\"requestedBy\""); at != std::string::npos;
         at = text.find("\"requestedBy\"", at + 1)) {
      ++named;
    }
    if (named > 1) {
      return refuse("\"requestedBy\" is given more than once");
    }
    const Json v = Json::parse(text, nullptr, false);
    if (v.is_discarded() || !v.is_object()) {
      return refuse(
          "the value is not a JSON object such as {\"request\": "
          "\"2026-12-04T10:00:00Z\", \"eventIds\": [\"...\"]}");
    }
    if (!v.contains("request") || !v.at("request").is_string()) {
      return refuse("\"request\" (the request token) is missing");
    }
    token = v.at("request").get<std::string>();
    if (const std::string problem = requeue_token_problem(token); !problem.empty()) {
      return refuse(problem);
    }
    if (const std::string problem = parse_selectors(v, kind, out); !problem.empty()) {
      return refuse(problem);
    }
  } else {
    token = text;
    if (const std::string problem = requeue_token_problem(token); !problem.empty()) {
      return refuse(problem);
    }
    out.selector_args = {"--all"};
    out.summary = "every FAILED event";
  }
  out.token = token;
  const std::string answered =
      value_at<std::string>(relay, ("/status/" + std::string(kind.field) + "/request").c_str(), "");
  if (answered != token) {
    out.job = relay.at("metadata").at("name").get<std::string>() + "-" + kind.verb + "-" +
              stable_hash(token).substr(0, 8);
  }
  return out;
}

std::vector<std::string> relay_args(const Json& relay) {
  return relay_args(relay, spec_of(relay));
}

bool reconciliation_paused(const Json& relay) {
  return value_at<std::string>(relay, "/metadata/annotations/outbox.dev~1pause-reconciliation",
                               "") == "true";
}

RenderedRelay render_relay(const Json& relay, const RenderOptions& options) {
  try {
    const OutboxRelaySpec spec = spec_of(relay);
    const RelayNames names(relay.at("metadata").at("name").get<std::string>());
    const PodSettings pod{image_of(spec, options), options.log_level, options.log_format};
    const std::vector<std::string> args = relay_args(relay, spec);
    const std::string conf = relay_config(relay, args);
    RenderedRelay out;
    out.objects = {
        {&owned::service_accounts, service_account(relay, spec, names)},
        {&owned::roles, status_role(relay, names)},
        {&owned::role_bindings, role_binding(relay, names)},
        {&owned::config_maps, config_map(relay, names, conf)},
        {&owned::deployments,
         deployment(relay, spec, names, pod, args,
                    {stable_hash(conf), stable_hash(options.secret_versions)})},
        {&owned::cron_jobs, compensation_cron_job(relay, spec, names, pod, options.relays_alive)},
        {&owned::cron_jobs, retention_cron_job(relay, spec, names, pod)},
        {&owned::services, metrics_service(relay, names)},
    };
    if (const std::string job = schema_job_name(relay, spec, options); !job.empty()) {
      out.objects.push_back({&owned::jobs, schema_job(relay, spec, names, job, pod)});
    }
    for (const ChangeKind* kind : {&kRequeueKind, &kReplayKind}) {
      if (const ChangeRequest request = change_request(relay, *kind); !request.job.empty()) {
        out.objects.push_back({&owned::jobs, change_job(relay, spec, names, *kind, request, pod)});
      }
    }
    out.pdb_name = names.deployment;
    out.wants_pdb = desired_replicas(spec) > 1;
    if (out.wants_pdb) {
      out.objects.push_back({&owned::pod_disruption_budgets, disruption_budget(relay, names)});
    }
    // Before the workloads, so their pods start confined.
    out.network_policy_name = names.deployment;
    out.wants_network_policy = wants_network_policy(relay);
    if (out.wants_network_policy) {
      out.objects.insert(out.objects.begin() + 4,
                         {&owned::network_policies,
                          network_policy(relay, metadata(relay, names.deployment, "relay"),
                                         options.api_server_cidrs)});
    }
    return out;
  } catch (const Json::exception& e) {
    // A field missing or of another type: the CRD's schema should have refused the spec.
    throw InvalidSpec(std::string("the spec cannot be rendered: ") + e.what());
  }
}

}  // namespace outbox::controller
