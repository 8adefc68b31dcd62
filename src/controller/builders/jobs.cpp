#include "controller/builders/jobs.hpp"

#include <algorithm>
#include <optional>

#include "controller/builders/arguments.hpp"
#include "controller/builders/pod.hpp"

namespace outbox::controller {
namespace builders {
namespace {

// `migrate` for the spec's table: --adopt with the columns of an adopted table, the
// shard count and mode when set.
std::vector<std::string> migrate_args(const api::OutboxRelaySpec& spec) {
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
  if (spec.database.on_cluster_move) {
    args.push_back(std::string("--on-cluster-move=") +
                   (*spec.database.on_cluster_move == "Refuse" ? "refuse" : "rebase"));
  }
  return args;
}

// `migrate --drop` for the spec's table; --adopt makes it refuse a table the spec calls
// someone else's that outbox_meta records as made by migrate.
std::vector<std::string> drop_args(const api::OutboxRelaySpec& spec) {
  std::vector<std::string> args = {"migrate", "--drop"};
  for (std::string& arg : table_args(spec)) {
    args.push_back(std::move(arg));
  }
  if (!spec.database.columns.is_null()) {
    args.push_back("--adopt");
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

Json one_shot_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                  const OneShotJob& job, Json container) {
  Json labels = labels_for(relay.name, job.component);
  Json pod = {{"metadata", {{"labels", labels}}},
              {"spec", pod_spec(spec, names, std::move(container), PodRuns::kJob)}};
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

}  // namespace

Json schema_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                const std::string& name, const PodSettings& settings) {
  return one_shot_job(relay, spec, names, {name, "schema", 3, 900, std::nullopt},
                      container_for_job(relay, spec, "migrate", settings, migrate_args(spec)));
}

Json change_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
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

}  // namespace builders

std::string schema_job_name(const std::string& relay_name, const api::OutboxRelaySpec& spec,
                            const RenderOptions& options) {
  if (!spec.database.manage_schema) {
    return {};
  }
  std::string signature = builders::image_of(spec, options);
  for (const std::string& arg : builders::migrate_args(spec)) {
    signature += "\n" + arg;
  }
  return relay_name + "-schema-" + stable_hash(signature).substr(0, 8);
}

std::string schema_job_name(const Json& relay, const RenderOptions& options) {
  return schema_job_name(relay.at("metadata").at("name").get<std::string>(),
                         builders::parse_relay_spec(relay), options);
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
    const api::OutboxRelaySpec spec = builders::parse_relay_spec(relay);
    const PodSettings pod{builders::image_of(spec, options), options.log_level, options.log_format};
    const builders::RelayMeta meta = builders::RelayMeta::of(relay);
    // Failed tries changed nothing (one transaction): a couple more are safe.
    Json job = builders::one_shot_job(
        meta, spec, names, {drop_job_name(relay), "drop", 2, 900, 86400},
        builders::container_for_job(meta, spec, "drop", pod, builders::drop_args(spec)));
    job["metadata"].erase("ownerReferences");
    Json& pod_spec = job["spec"]["template"]["spec"];
    pod_spec.erase("serviceAccountName");
    pod_spec["automountServiceAccountToken"] = false;
    return {&owned::jobs, std::move(job)};
  } catch (const Json::exception& e) {
    throw InvalidSpec(std::string("the spec cannot be rendered: ") + e.what());
  }
}

}  // namespace outbox::controller
