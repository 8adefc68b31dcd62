#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// The OutboxRelay spec as types, parsed once per reconcile (parse_spec) from the resource's
// JSON with every default applied from one table (spec_fields()). The CRD carries the same
// defaults and bounds so that `kubectl get -o yaml` shows them; tests/api/spec_table_test.cpp
// proves the two agree, field by field.
namespace outbox::api {

using Json = nlohmann::json;

// A spec the operator cannot use; the message starts with the field's path
// ("spec.relay.batchSize: ...").
class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One row of the table: a field of the spec (a JSON pointer below `spec`; `*` stands for any
// item of a list) with its default (null: none), numeric bounds and allowed values.
struct SpecField {
  std::string path;
  Json default_value;
  std::optional<double> minimum;
  std::optional<double> maximum;
  std::vector<std::string> one_of;
};

// The one table of defaults and bounds.
const std::vector<SpecField>& spec_fields();

// The table's row for a path; throws std::out_of_range for a path it does not hold.
const SpecField& spec_field(const std::string& path);

struct SecretKeyRef {
  std::string name;
  std::string key;
};

struct DatabaseTlsSpec {
  std::string mode;  // verify-full | verify-ca | require
  // The CA: a key of a Secret or of a ConfigMap (secret_ca false).
  std::optional<SecretKeyRef> ca;
  bool ca_in_secret = true;
  struct ClientCertificate {
    std::string secret_name;
    std::string certificate;
    std::string key;
  };
  std::optional<ClientCertificate> client_certificate;
};

struct DatabaseSpec {
  SecretKeyRef dsn_secret;
  std::string table;
  bool manage_schema = false;
  std::optional<std::string> mode;             // Status | Log
  std::optional<std::string> on_cluster_move;  // Rebase | Refuse
  std::optional<std::string> payload;          // Json | Text | Bytes
  Json columns;                                // an adopted table's columns by role, or null
  std::optional<DatabaseTlsSpec> tls;
};

struct Route {
  std::string biz_type;
  std::string topic;
};

struct KafkaSpec {
  std::string bootstrap_servers;
  std::string topic;
  std::vector<Route> routes;
  std::optional<std::string> dead_letter_topic;
  // configSecretRef, tls and authentication, as written (kafka_mounts renders them).
  Json credentials = Json::object();
};

struct RelaySpec {
  std::optional<std::string> image;
  int replicas = 0;
  int batch_size = 0;
  std::string poll_interval;
  std::string coalesce_window;
  bool per_key_order = true;    // ordering PerKey (false: None)
  bool delete_on_sent = false;  // onSent Delete (false: Mark)
  std::optional<int> shards;
  Json resources;                 // corev1 ResourceRequirements (the defaults when left out)
  Json pod_template;              // spec.relay.template.pod, or null
  Json service_account_metadata;  // spec.relay.template.serviceAccount.metadata, or null
};

struct RetrySpec {
  int max_attempts = 0;
  std::string initial_backoff;
  std::string max_backoff;
  double jitter = 0;
};

struct CompensationSpec {
  std::optional<std::string> schedule;  // none: spread over the fleet (controller/schedules)
  std::string time_zone;
  std::string stale_after;
  int batch_size = 0;
};

struct RetentionSpec {
  std::optional<std::string> schedule;
  std::string time_zone;
  std::string keep_sent;
  int batch_size = 0;
  std::optional<std::string> archive_table;
};

struct NetworkPolicySpec {
  bool enabled = false;
  Json metrics_from = Json::array();  // NetworkPolicyPeers, as written
  Json egress = Json::array();        // NetworkPolicyEgressRules, as written
};

struct OutboxRelaySpec {
  DatabaseSpec database;
  KafkaSpec kafka;
  RelaySpec relay;
  RetrySpec retry;
  CompensationSpec compensation;
  RetentionSpec retention;
  std::string stuck_after;  // spec.monitoring.stuckAfter
  bool suspend = false;
  NetworkPolicySpec network_policy;
};

// Parses `spec` (the resource's .spec), applying the table's defaults and checking its
// bounds and allowed values: what the CRD's schema already guarantees for a resource the
// apiserver admitted, checked again so a resource that bypassed it (an older CRD, a direct
// etcd write) is refused with the field named instead of rendered wrong.
OutboxRelaySpec parse_spec(const Json& spec);

}  // namespace outbox::api
