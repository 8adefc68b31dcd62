#pragma once

#include <string>
#include <vector>

#include "api/spec.hpp"
#include "controller/builders/common.hpp"

// The pod template every workload shares (the relay Deployment, the CronJobs, the one-shot
// Jobs): non-root and read-only, the DSN and the database TLS files mounted from their Secrets,
// the Kafka credentials as files, the operator's log settings, and spec.relay.template.pod.
namespace outbox::controller {

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
// Of `relay` as read from the apiserver (the Secret checks run before the spec is parsed).
std::vector<KafkaMount> kafka_mounts(const Json& relay);

namespace builders {

// The same from the parsed spec (spec.kafka.credentials holds those fields as written).
std::vector<KafkaMount> kafka_mounts(const api::OutboxRelaySpec& spec);

// Where the pods see the Kafka Secrets: the properties (one file per key, read by
// --kafka-config-dir), the CA and the client's certificate or password (under fixed file names
// the relay's flags point at, Strimzi's key names by default, see the CRD).
inline constexpr char kKafkaConfigDir[] = "/etc/outbox/kafka";
inline constexpr char kKafkaCaDir[] = "/etc/outbox/kafka-ca";
inline constexpr char kKafkaUserDir[] = "/etc/outbox/kafka-user";

// A container of the relay's image running `args`, with the DSN and database TLS files and,
// with `kafka`, the Kafka Secrets' files (the relay and compensation read them; the cleanup job
// never talks to Kafka).
Json container(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const std::string& name,
               const PodSettings& pod, std::vector<std::string> args, bool kafka);

// A job's container: as container(), with the relay's resources (a namespace with a
// ResourceQuota admits no pod without them). Only `compensate` talks to Kafka.
Json container_for_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                       const std::string& name, const PodSettings& pod,
                       std::vector<std::string> args);

// What a pod spec runs: the long-running relay (a Deployment's) or a Job's run to completion.
enum class PodRuns { kRelay, kJob };

// The pod spec around `container`: the relay's ServiceAccount (its token writes the pod's part
// of the status), the pod security context, and the volumes of what the container mounts.
// A Job's: restartPolicy Never.
Json pod_spec(const api::OutboxRelaySpec& spec, const RelayNames& names, Json container,
              PodRuns runs);

// Adds spec.relay.template.pod to a pod template ({metadata, spec}): its labels and
// annotations under the operator's own, placement, pull secrets, priority and
// (replacing the default) the security context.
void apply_pod_template(const api::OutboxRelaySpec& spec, Json& pod);

}  // namespace builders
}  // namespace outbox::controller
