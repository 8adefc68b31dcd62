#include "api/spec.hpp"

#include <algorithm>
#include <type_traits>

#include "api/defaults.hpp"
#include "common/duration.hpp"

namespace outbox::api {
namespace {

namespace d = defaults;

// A duration as the CRD writes it: format_duration's text, except zero, which the CRD writes
// "0s" (format_duration: "0ms").
std::string seconds_text(std::chrono::milliseconds d) {
  return d.count() == 0 ? "0s" : format_duration(d);
}

std::vector<SpecField> make_table() {
  const Json none;
  return {
      // spec.database
      {"/database/table", d::kTable, {}, {}, {}},
      {"/database/manageSchema", false, {}, {}, {}},
      {"/database/mode", none, {}, {}, {"Status", "Log"}},
      {"/database/onClusterMove", none, {}, {}, {"Rebase", "Refuse"}},
      {"/database/payload", none, {}, {}, {"Json", "Text", "Bytes"}},
      {"/database/tls/mode", d::kDatabaseTlsMode, {}, {}, {"verify-full", "verify-ca", "require"}},
      {"/database/tls/ca/secretRef/key", "ca.crt", {}, {}, {}},
      {"/database/tls/ca/configMapRef/key", "ca.crt", {}, {}, {}},
      {"/database/tls/clientCertificate/certificate", "tls.crt", {}, {}, {}},
      {"/database/tls/clientCertificate/key", "tls.key", {}, {}, {}},
      // spec.kafka (the credentials' key names are Strimzi's)
      {"/kafka/topic", d::kTopic, {}, {}, {}},
      {"/kafka/tls/trustedCertificates/*/certificate", "ca.crt", {}, {}, {}},
      {"/kafka/authentication/type",
       none,
       {},
       {},
       {"tls", "scram-sha-512", "scram-sha-256", "plain"}},
      {"/kafka/authentication/certificateAndKey/certificate", "user.crt", {}, {}, {}},
      {"/kafka/authentication/certificateAndKey/key", "user.key", {}, {}, {}},
      {"/kafka/authentication/passwordSecret/password", "password", {}, {}, {}},
      // spec.relay
      {"/relay", Json::object(), {}, {}, {}},
      {"/relay/replicas", d::kReplicas, 0, d::kMaxReplicas, {}},
      {"/relay/batchSize", d::kBatchSize, 1, d::kMaxBatchSize, {}},
      {"/relay/pollInterval", seconds_text(d::kPollInterval), {}, {}, {}},
      {"/relay/coalesceWindow", d::kCoalesceWindow, {}, {}, {}},
      {"/relay/ordering", "PerKey", {}, {}, {"PerKey", "None"}},
      {"/relay/onSent", "Mark", {}, {}, {"Mark", "Delete"}},
      {"/relay/shards", none, 1, d::kMaxShards, {}},
      {"/relay/resources",
       {{"requests", {{"cpu", d::kRelayCpuRequest}, {"memory", d::kRelayMemoryRequest}}},
        {"limits", {{"memory", d::kRelayMemoryLimit}}}},
       {},
       {},
       {}},
      // spec.retry
      {"/retry", Json::object(), {}, {}, {}},
      {"/retry/maxAttempts", d::kMaxAttempts, 1, d::kMaxMaxAttempts, {}},
      {"/retry/initialBackoff", d::kInitialBackoff, {}, {}, {}},
      {"/retry/maxBackoff", d::kMaxBackoff, {}, {}, {}},
      {"/retry/jitter", d::kJitter, 0, 1, {}},
      // spec.compensation
      {"/compensation", Json::object(), {}, {}, {}},
      {"/compensation/timeZone", d::kScheduleTimeZone, {}, {}, {}},
      {"/compensation/staleAfter", d::kStaleAfter, {}, {}, {}},
      {"/compensation/batchSize", d::kCompensationBatchSize, 1, d::kMaxCompensationBatchSize, {}},
      // spec.retention
      {"/retention", Json::object(), {}, {}, {}},
      {"/retention/timeZone", d::kScheduleTimeZone, {}, {}, {}},
      {"/retention/keepSent", d::kKeepSent, {}, {}, {}},
      {"/retention/batchSize", d::kRetentionBatchSize, 1, d::kMaxRetentionBatchSize, {}},
      // spec.monitoring
      {"/monitoring", Json::object(), {}, {}, {}},
      {"/monitoring/stuckAfter", format_duration(d::kStuckAfter), {}, {}, {}},
      {"/suspend", false, {}, {}, {}},
      {"/deletionPolicy", "Retain", {}, {}, {"Retain", "Drop"}},
      // spec.networkPolicy
      {"/networkPolicy/enabled", false, {}, {}, {}},
      {"/networkPolicy/egress/*/ports/*/protocol", none, {}, {}, {"TCP", "UDP", "SCTP"}},
      {"/networkPolicy/egress/*/ports/*/endPort", none, 1, 65535, {}},
  };
}

// The table's row for `path`, or nullptr.
const SpecField* find_row(const std::string& path) {
  const auto& rows = spec_fields();
  const auto row =
      std::find_if(rows.begin(), rows.end(), [&](const SpecField& f) { return f.path == path; });
  return row == rows.end() ? nullptr : &*row;
}

// "/relay/batchSize" -> "spec.relay.batchSize"
std::string field_name(const std::string& path) {
  std::string out = "spec" + path;
  std::replace(out.begin(), out.end(), '/', '.');
  return out;
}

// Reads the fields of one spec through the table.
class Reader {
 public:
  explicit Reader(const Json& spec) : spec_(spec) {}

  // The field's value, or the table's default when the spec leaves it out.
  template <typename T>
  T get(const std::string& path) const {
    const std::optional<T> value = find<T>(path);
    if (value) {
      return *value;
    }
    const SpecField* row = find_row(path);
    if (row == nullptr || row->default_value.is_null()) {
      throw SpecError(field_name(path) + ": required");
    }
    return row->default_value.template get<T>();
  }

  // The field's value, checked against its row; nullopt when the spec leaves it out (the
  // table's default, if any, is not applied).
  template <typename T>
  std::optional<T> find(const std::string& path) const {
    const Json::json_pointer pointer(path);
    if (!spec_.contains(pointer) || spec_.at(pointer).is_null()) {
      return std::nullopt;
    }
    const Json& value = spec_.at(pointer);
    check_type<T>(path, value);
    check_row(path, value);
    return value.template get<T>();
  }

  bool has(const std::string& path) const { return spec_.contains(Json::json_pointer(path)); }
  const Json& at(const std::string& path) const { return spec_.at(Json::json_pointer(path)); }

 private:
  template <typename T>
  static void check_type(const std::string& path, const Json& value) {
    const char* want = nullptr;
    if constexpr (std::is_same_v<T, Json>) {
      want = value.is_object() ? nullptr : "an object";
    } else if constexpr (std::is_same_v<T, bool>) {
      want = value.is_boolean() ? nullptr : "true or false";
    } else if constexpr (std::is_integral_v<T>) {
      want = value.is_number_integer() ? nullptr : "an integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      want = value.is_number() ? nullptr : "a number";
    } else {
      want = value.is_string() ? nullptr : "a string";
    }
    if (want != nullptr) {
      throw SpecError(field_name(path) + ": must be " + want + ", not " + value.dump());
    }
  }

  static void check_row(const std::string& path, const Json& value) {
    const SpecField* row = find_row(path);
    if (row == nullptr) {
      return;
    }
    if (value.is_number()) {
      const double number = value.get<double>();
      if (row->minimum && number < *row->minimum) {
        throw SpecError(field_name(path) + ": " + value.dump() + " is less than the minimum " +
                        Json(*row->minimum).dump());
      }
      if (row->maximum && number > *row->maximum) {
        throw SpecError(field_name(path) + ": " + value.dump() + " is more than the maximum " +
                        Json(*row->maximum).dump());
      }
    }
    if (!row->one_of.empty() && value.is_string() &&
        std::find(row->one_of.begin(), row->one_of.end(), value.get<std::string>()) ==
            row->one_of.end()) {
      throw SpecError(field_name(path) + ": " + value.dump() + " is not one of " +
                      Json(row->one_of).dump());
    }
  }

  const Json& spec_;
};

// A duration field: its text as written (the pods parse it again), checked here.
std::string duration(const Reader& r, const std::string& path) {
  std::string text = r.get<std::string>(path);
  try {
    (void)parse_duration(text);
  } catch (const std::exception& e) {
    throw SpecError(field_name(path) + ": " + e.what());
  }
  return text;
}

DatabaseSpec database(const Reader& r) {
  DatabaseSpec db;
  db.dsn_secret = {r.find<std::string>("/database/dsnSecretRef/name").value_or(""),
                   r.find<std::string>("/database/dsnSecretRef/key").value_or("")};
  if (db.dsn_secret.name.empty() || db.dsn_secret.key.empty()) {
    throw SpecError("spec.database.dsnSecretRef: needs a name and a key");
  }
  db.table = r.get<std::string>("/database/table");
  db.manage_schema = r.get<bool>("/database/manageSchema");
  db.mode = r.find<std::string>("/database/mode");
  db.on_cluster_move = r.find<std::string>("/database/onClusterMove");
  db.payload = r.find<std::string>("/database/payload");
  if (r.has("/database/columns")) {
    db.columns = r.at("/database/columns");
  }
  if (r.has("/database/tls")) {
    DatabaseTlsSpec tls;
    tls.mode = r.get<std::string>("/database/tls/mode");
    if (r.has("/database/tls/ca/secretRef")) {
      tls.ca = SecretKeyRef{r.get<std::string>("/database/tls/ca/secretRef/name"),
                            r.get<std::string>("/database/tls/ca/secretRef/key")};
    } else if (r.has("/database/tls/ca/configMapRef")) {
      tls.ca = SecretKeyRef{r.get<std::string>("/database/tls/ca/configMapRef/name"),
                            r.get<std::string>("/database/tls/ca/configMapRef/key")};
      tls.ca_in_secret = false;
    }
    if (r.has("/database/tls/clientCertificate")) {
      tls.client_certificate = DatabaseTlsSpec::ClientCertificate{
          r.get<std::string>("/database/tls/clientCertificate/secretName"),
          r.get<std::string>("/database/tls/clientCertificate/certificate"),
          r.get<std::string>("/database/tls/clientCertificate/key")};
    }
    db.tls = std::move(tls);
  }
  return db;
}

KafkaSpec kafka(const Reader& r) {
  KafkaSpec k;
  k.bootstrap_servers = r.find<std::string>("/kafka/bootstrapServers").value_or("");
  if (k.bootstrap_servers.empty()) {
    throw SpecError("spec.kafka.bootstrapServers: required");
  }
  k.topic = r.get<std::string>("/kafka/topic");
  if (r.has("/kafka/routes")) {
    for (const Json& route : r.at("/kafka/routes")) {
      k.routes.push_back(
          {route.at("bizType").get<std::string>(), route.at("topic").get<std::string>()});
    }
  }
  k.dead_letter_topic = r.find<std::string>("/kafka/deadLetterTopic");
  (void)r.find<std::string>("/kafka/authentication/type");
  for (const char* part : {"configSecretRef", "tls", "authentication"}) {
    if (r.has(std::string("/kafka/") + part)) {
      k.credentials[part] = r.at(std::string("/kafka/") + part);
    }
  }
  return k;
}

RelaySpec relay(const Reader& r) {
  RelaySpec s;
  s.image = r.find<std::string>("/relay/image");
  s.replicas = r.get<int>("/relay/replicas");
  s.batch_size = r.get<int>("/relay/batchSize");
  s.poll_interval = duration(r, "/relay/pollInterval");
  s.coalesce_window = r.get<std::string>("/relay/coalesceWindow");
  if (s.coalesce_window != "auto" &&
      parse_duration(duration(r, "/relay/coalesceWindow")) > d::kMaxCoalesceWindow) {
    throw SpecError("spec.relay.coalesceWindow: at most " + format_duration(d::kMaxCoalesceWindow));
  }
  s.per_key_order = r.get<std::string>("/relay/ordering") == "PerKey";
  s.delete_on_sent = r.get<std::string>("/relay/onSent") == "Delete";
  s.shards = r.find<int>("/relay/shards");
  // Left out, the defaults; written, as written, whole: `resources: {}` asks for none.
  s.resources = r.get<Json>("/relay/resources");
  for (auto [from, to] :
       {std::pair{"/relay/template/pod", &s.pod_template},
        std::pair{"/relay/template/serviceAccount/metadata", &s.service_account_metadata}}) {
    if (r.has(from)) {
      *to = r.at(from);
    }
  }
  return s;
}

}  // namespace

const std::vector<SpecField>& spec_fields() {
  static const std::vector<SpecField> table = make_table();
  return table;
}

const SpecField& spec_field(const std::string& path) {
  if (const SpecField* row = find_row(path)) {
    return *row;
  }
  throw std::out_of_range("the spec table has no row " + path);
}

OutboxRelaySpec parse_spec(const Json& spec) {
  if (!spec.is_object()) {
    throw SpecError("spec: must be an object");
  }
  const Reader r(spec);
  OutboxRelaySpec out;
  out.database = database(r);
  out.kafka = kafka(r);
  out.relay = relay(r);
  out.retry = {r.get<int>("/retry/maxAttempts"), duration(r, "/retry/initialBackoff"),
               duration(r, "/retry/maxBackoff"), r.get<double>("/retry/jitter")};
  out.compensation = {
      r.find<std::string>("/compensation/schedule"), r.get<std::string>("/compensation/timeZone"),
      duration(r, "/compensation/staleAfter"), r.get<int>("/compensation/batchSize")};
  out.retention = {r.find<std::string>("/retention/schedule"),
                   r.get<std::string>("/retention/timeZone"), duration(r, "/retention/keepSent"),
                   r.get<int>("/retention/batchSize"),
                   r.find<std::string>("/retention/archiveTable")};
  out.stuck_after = duration(r, "/monitoring/stuckAfter");
  out.suspend = r.get<bool>("/suspend");
  out.network_policy.enabled = r.get<bool>("/networkPolicy/enabled");
  for (auto [from, to] : {std::pair{"/networkPolicy/metricsFrom", &out.network_policy.metrics_from},
                          std::pair{"/networkPolicy/egress", &out.network_policy.egress}}) {
    if (r.has(from) && r.at(from).is_array()) {
      *to = r.at(from);
    }
  }
  return out;
}

}  // namespace outbox::api
