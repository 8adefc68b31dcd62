#include "controller/builders/network_policy.hpp"

namespace outbox::controller::builders {
namespace {

Json port(int number, const char* protocol) {
  return {{"port", number}, {"protocol", protocol}};
}

}  // namespace

Json network_policy(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                    const RelayNames& names, const std::vector<std::string>& api_server_cidrs) {
  Json ingress = Json::array();
  // An ingress rule with no `from` admits everyone: without peers there is no rule at all.
  if (!spec.network_policy.metrics_from.empty()) {
    ingress.push_back({{"from", spec.network_policy.metrics_from},
                       {"ports", Json::array({port(kRelayPort, "TCP")})}});
  }
  Json api_server = {{"ports", Json::array({port(443, "TCP"), port(6443, "TCP")})}};
  if (!api_server_cidrs.empty()) {
    Json to = Json::array();
    for (const std::string& cidr : api_server_cidrs) {
      to.push_back({{"ipBlock", {{"cidr", cidr}}}});
    }
    api_server["to"] = std::move(to);
  }
  Json egress = Json::array(
      {{{"ports", Json::array({port(53, "UDP"), port(53, "TCP")})}}, std::move(api_server)});
  for (const Json& rule : spec.network_policy.egress) {
    egress.push_back(rule);
  }
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", metadata(relay, names.deployment, "relay")},
          {"spec",
           {{"podSelector",
             {{"matchLabels",
               {{"app.kubernetes.io/name", "outbox-relay"},
                {"app.kubernetes.io/instance", relay.name}}}}},
            {"policyTypes", Json::array({"Ingress", "Egress"})},
            {"ingress", std::move(ingress)},
            {"egress", std::move(egress)}}}};
}

}  // namespace outbox::controller::builders
