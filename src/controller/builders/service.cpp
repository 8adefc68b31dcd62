#include "controller/builders/service.hpp"

namespace outbox::controller::builders {

Json metrics_service(const RelayMeta& relay, const RelayNames& names) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", metadata(relay, names.service, "relay")},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", selector_labels(relay.name)},
            {"ports", Json::array({{{"name", "metrics"},
                                    {"port", kRelayPort},
                                    {"targetPort", "metrics"},
                                    {"protocol", "TCP"}}})}}}};
}

Json disruption_budget(const RelayMeta& relay, const RelayNames& names) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", metadata(relay, names.deployment, "relay")},
          {"spec",
           {{"maxUnavailable", 1}, {"selector", {{"matchLabels", selector_labels(relay.name)}}}}}};
}

}  // namespace outbox::controller::builders
