#include "controller/network_policy.hpp"

#include "api/outbox_relay.hpp"

namespace outbox::controller {
namespace {

using Json = nlohmann::json;

Json port(int number, const char* protocol) {
  return {{"port", number}, {"protocol", protocol}};
}

Json spec_list(const Json& relay, const char* field) {
  const Json::json_pointer p("/spec/networkPolicy/" + std::string(field));
  if (!relay.contains(p) || !relay.at(p).is_array()) {
    return Json::array();
  }
  return relay.at(p);
}

}  // namespace

bool wants_network_policy(const Json& relay) {
  const auto p = "/spec/networkPolicy/enabled"_json_pointer;
  return relay.contains(p) && relay.at(p).is_boolean() && relay.at(p).get<bool>();
}

Json network_policy(const Json& relay, Json metadata,
                    const std::vector<std::string>& api_server_cidrs) {
  const std::string name = relay.at("metadata").at("name");
  Json ingress = Json::array();
  const Json metrics_from = spec_list(relay, "metricsFrom");
  // An ingress rule with no `from` admits everyone: without peers there is no rule at all.
  if (!metrics_from.empty()) {
    ingress.push_back(
        {{"from", metrics_from}, {"ports", Json::array({port(api::kRelayPort, "TCP")})}});
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
  for (const Json& rule : spec_list(relay, "egress")) {
    egress.push_back(rule);
  }
  return {
      {"apiVersion", "networking.k8s.io/v1"},
      {"kind", "NetworkPolicy"},
      {"metadata", std::move(metadata)},
      {"spec",
       {{"podSelector",
         {{"matchLabels",
           {{"app.kubernetes.io/name", "outbox-relay"}, {"app.kubernetes.io/instance", name}}}}},
        {"policyTypes", Json::array({"Ingress", "Egress"})},
        {"ingress", std::move(ingress)},
        {"egress", std::move(egress)}}}};
}

}  // namespace outbox::controller
