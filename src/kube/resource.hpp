#pragma once

#include <string>
#include <string_view>

// Which REST collection an object lives in, and the URL paths derived from it:
//   core:  /api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
//   group: /apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
namespace outbox::kube {

struct Resource {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  bool namespaced = true;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }

  // Empty `ns` on a namespaced resource means all namespaces (list and watch only).
  std::string collection_path(std::string_view ns) const;
  std::string object_path(std::string_view ns, std::string_view name,
                          std::string_view subresource = {}) const;
};

// Well-known resources the operator uses.
namespace resources {
inline const Resource config_maps{"", "v1", "configmaps", true};
inline const Resource namespaces{"", "v1", "namespaces", false};
inline const Resource events{"", "v1", "events", true};
inline const Resource leases{"coordination.k8s.io", "v1", "leases", true};
inline const Resource deployments{"apps", "v1", "deployments", true};
inline const Resource crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
}  // namespace resources

// Percent-encodes a query value (label selectors contain '=', ',', '!').
std::string url_encode(std::string_view text);

}  // namespace outbox::kube
