#include "controller/builders/rbac.hpp"

namespace outbox::controller::builders {

Json service_account(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                     const RelayNames& names) {
  Json meta = metadata(relay, names.deployment, "relay");
  if (!spec.relay.service_account_metadata.is_null()) {
    add_metadata(spec.relay.service_account_metadata, meta);
  }
  return {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", std::move(meta)}};
}

Json status_role(const RelayMeta& relay, const RelayNames& names) {
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "Role"},
      {"metadata", metadata(relay, names.deployment, "relay")},
      {"rules",
       Json::array(
           {{{"apiGroups", {"outbox.dev"}},
             {"resources", {"outboxrelays"}},
             {"resourceNames", {relay.name}},
             {"verbs", {"get"}}},
            {{"apiGroups", {"outbox.dev"}},
             {"resources", {"outboxrelays/status"}},
             {"resourceNames", {relay.name}},
             {"verbs", {"get", "patch", "update"}}},
            {{"apiGroups", {""}}, {"resources", {"events"}}, {"verbs", {"create", "patch"}}}})}};
}

Json role_binding(const RelayMeta& relay, const RelayNames& names) {
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", metadata(relay, names.deployment, "relay")},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", names.deployment}}},
      {"subjects",
       Json::array(
           {{{"kind", "ServiceAccount"}, {"name", names.deployment}, {"namespace", relay.ns}}})}};
}

}  // namespace outbox::controller::builders
