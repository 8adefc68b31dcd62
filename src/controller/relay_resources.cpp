#include "controller/relay_resources.hpp"

#include <algorithm>

#include "api/spec.hpp"

namespace outbox::controller {
namespace {

// The order objects are applied in, by kind: identity and RBAC first, then configuration and
// the NetworkPolicy (so that the workloads' pods start confined), then the workloads and what
// serves them.
std::size_t apply_rank(const kube::Resource* kind) {
  static const std::vector<const kube::Resource*> order = {&owned::service_accounts,
                                                           &owned::roles,
                                                           &owned::role_bindings,
                                                           &owned::config_maps,
                                                           &owned::network_policies,
                                                           &owned::deployments,
                                                           &owned::cron_jobs,
                                                           &owned::services,
                                                           &owned::jobs,
                                                           &owned::pod_disruption_budgets};
  return static_cast<std::size_t>(std::find(order.begin(), order.end(), kind) - order.begin());
}

}  // namespace

bool reconciliation_paused(const Json& relay) {
  return value_at<std::string>(relay, "/metadata/annotations/outbox.dev~1pause-reconciliation",
                               "") == "true";
}

RenderedRelay render_relay(const Json& relay, const RenderOptions& options) {
  using namespace builders;
  try {
    const api::OutboxRelaySpec spec = parse_relay_spec(relay);
    const RelayNames names(relay.at("metadata").at("name").get<std::string>());
    const PodSettings pod{image_of(spec, options), options.log_level, options.log_format};
    const RelayMeta meta = RelayMeta::of(relay);
    const std::vector<std::string> args = relay_args(meta, spec);
    const std::string conf = relay_config(meta, args);
    RenderedRelay out;
    out.objects = {
        {&owned::service_accounts, service_account(meta, spec, names)},
        {&owned::roles, status_role(meta, names)},
        {&owned::role_bindings, role_binding(meta, names)},
        {&owned::config_maps, config_map(meta, names, conf)},
        {&owned::deployments, deployment(meta, spec, names, pod, args, stable_hash(conf))},
        {&owned::cron_jobs, compensation_cron_job(meta, spec, names, pod, options.relays_alive)},
        {&owned::cron_jobs, retention_cron_job(meta, spec, names, pod)},
        {&owned::services, metrics_service(meta, names)},
    };
    if (const std::string job = schema_job_name(meta.name, spec, options); !job.empty()) {
      out.objects.push_back({&owned::jobs, schema_job(meta, spec, names, job, pod)});
    }
    for (const ChangeKind* kind : {&kRequeueKind, &kReplayKind}) {
      if (const ChangeRequest request = change_request(relay, *kind); !request.job.empty()) {
        out.objects.push_back({&owned::jobs, change_job(meta, spec, names, *kind, request, pod)});
      }
    }
    out.pdb_name = names.deployment;
    out.wants_pdb = desired_replicas(spec) > 1;
    if (out.wants_pdb) {
      out.objects.push_back({&owned::pod_disruption_budgets, disruption_budget(meta, names)});
    }
    out.network_policy_name = names.deployment;
    out.wants_network_policy = spec.network_policy.enabled;
    if (out.wants_network_policy) {
      out.objects.push_back(
          {&owned::network_policies, network_policy(meta, spec, names, options.api_server_cidrs)});
    }
    std::stable_sort(out.objects.begin(), out.objects.end(),
                     [](const OwnedObject& a, const OwnedObject& b) {
                       return apply_rank(a.resource) < apply_rank(b.resource);
                     });
    return out;
  } catch (const Json::exception& e) {
    // A field missing or of another type: the CRD's schema should have refused the spec.
    throw InvalidSpec(std::string("the spec cannot be rendered: ") + e.what());
  }
}

}  // namespace outbox::controller
