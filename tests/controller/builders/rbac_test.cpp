// The ServiceAccount, Role and RoleBinding (builders/rbac), built from the typed spec.
#include <gtest/gtest.h>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

// The relay pods' token may read this one OutboxRelay and write its status (and Events), nothing
// else; the binding names the relay's own ServiceAccount, in the relay's namespace. The builders
// render from the typed spec what render_relay() applies.
TEST(Rbac, TheRoleGrantsTheRelaysServiceAccountThisRelaysStatusOnly) {
  const Json r = relay();
  const builders::RelayMeta meta = builders::RelayMeta::of(r);
  const api::OutboxRelaySpec spec = builders::parse_relay_spec(r);
  const RelayNames names(meta.name);
  const Json role = builders::status_role(meta, names);
  ASSERT_EQ(role.at("rules").size(), 3u) << role.dump();
  for (const Json& rule : role.at("rules")) {
    if (rule.at("apiGroups") == Json::array({"outbox.dev"})) {
      EXPECT_EQ(rule.at("resourceNames"), Json::array({"orders"})) << rule.dump();
    } else {
      EXPECT_EQ(rule.at("resources"), Json::array({"events"})) << rule.dump();
    }
  }
  const Json binding = builders::role_binding(meta, names);
  EXPECT_EQ(binding.at("/roleRef/name"_json_pointer), "orders-relay");
  EXPECT_EQ(binding.at("subjects"),
            Json::parse(R"([{"kind":"ServiceAccount","name":"orders-relay","namespace":"shop"}])"));
  const Json account = builders::service_account(meta, spec, names);
  EXPECT_EQ(account.at("/metadata/name"_json_pointer), "orders-relay");
  EXPECT_EQ(account.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
  // What render_relay applies, in its order: identity and RBAC first.
  const RenderedRelay rendered = render_relay(r, RenderOptions{"img:1"});
  EXPECT_EQ(*find(rendered, "ServiceAccount", "orders-relay"), account);
  EXPECT_EQ(*find(rendered, "Role", "orders-relay"), role);
  EXPECT_EQ(*find(rendered, "RoleBinding", "orders-relay"), binding);
  EXPECT_EQ(rendered.objects.at(0).resource, &owned::service_accounts);
  EXPECT_EQ(rendered.objects.at(1).resource, &owned::roles);
  EXPECT_EQ(rendered.objects.at(2).resource, &owned::role_bindings);
}

}  // namespace
}  // namespace outbox::controller
