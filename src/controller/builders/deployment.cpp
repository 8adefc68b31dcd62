#include "controller/builders/deployment.hpp"

#include "controller/builders/arguments.hpp"
#include "controller/builders/pod.hpp"

namespace outbox::controller {

std::vector<std::string> relay_args(const Json& relay) {
  return builders::relay_args(builders::RelayMeta::of(relay), builders::parse_relay_spec(relay));
}

namespace builders {

std::vector<std::string> relay_args(const RelayMeta& relay, const api::OutboxRelaySpec& spec) {
  std::vector<std::string> args = {"relay"};
  for (auto& a : publish_args(spec)) {
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

std::string relay_config(const RelayMeta& relay, const std::vector<std::string>& args) {
  std::string conf = "# Rendered by outbox-operator from OutboxRelay " + relay.ns + "/" +
                     relay.name + "; the relay Deployment runs with exactly these arguments.\n";
  for (const auto& a : args) {
    conf += a + "\n";
  }
  return conf;
}

Json config_map(const RelayMeta& relay, const RelayNames& names, const std::string& conf) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(relay, names.config_map, "relay")},
          {"data", {{"relay.args", conf}}}};
}

int desired_replicas(const api::OutboxRelaySpec& spec) {
  return spec.suspend ? 0 : spec.relay.replicas;
}

Json deployment(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                const PodSettings& settings, const std::vector<std::string>& args,
                const std::string& config_hash) {
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
  Json pod = {{"metadata",
               {{"labels", labels_for(relay.name, "relay")},
                {"annotations", {{kConfigHashAnnotation, config_hash}}}}},
              {"spec", pod_spec(spec, names, std::move(relay_container), PodRuns::kRelay)}};
  // Soft, so a single-node cluster or a full node still schedules every replica; a node's
  // loss then takes one relay of each resource rather than all. spec.relay.template.pod's
  // topologySpreadConstraints replace it (an empty list: none).
  pod["spec"]["topologySpreadConstraints"] =
      Json::array({{{"maxSkew", 1},
                    {"topologyKey", "kubernetes.io/hostname"},
                    {"whenUnsatisfiable", "ScheduleAnyway"},
                    {"labelSelector", {{"matchLabels", selector_labels(relay.name)}}}}});
  apply_pod_template(spec, pod);
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", metadata(relay, names.deployment, "relay")},
          {"spec",
           {{"replicas", desired_replicas(spec)},
            {"revisionHistoryLimit", 3},
            {"selector", {{"matchLabels", selector_labels(relay.name)}}},
            {"template", std::move(pod)}}}};
}

}  // namespace builders
}  // namespace outbox::controller
