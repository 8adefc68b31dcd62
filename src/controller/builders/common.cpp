#include "controller/builders/common.hpp"

#include <cstdint>
#include <cstdio>

namespace outbox::controller {

RelayNames::RelayNames(const std::string& relay_name)
    : deployment(relay_name + "-relay"),
      config_map(relay_name + "-config"),
      compensation(relay_name + "-compensate"),
      retention(relay_name + "-cleanup"),
      service(relay_name + "-metrics") {}

std::string relay_selector(const std::string& relay_name) {
  std::string out;
  const Json labels = builders::selector_labels(relay_name);
  for (const auto& [k, v] : labels.items()) {
    out += (out.empty() ? "" : ",") + k + "=" + v.get<std::string>();
  }
  return out;
}

std::string stable_hash(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

namespace builders {
namespace {

// controller=true makes the OutboxRelay the one managing controller of the object (a second
// controller reference is refused by the apiserver); blockOwnerDeletion makes a foreground
// deletion of the OutboxRelay wait for it.
Json owner_reference(const RelayMeta& relay) {
  return Json::array({{{"apiVersion", relay.api_version},
                       {"kind", "OutboxRelay"},
                       {"name", relay.name},
                       {"uid", relay.uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

}  // namespace

RelayMeta RelayMeta::of(const Json& relay) {
  const Json& meta = relay.at("metadata");
  return {relay.value("apiVersion", "outbox.dev/v1alpha1"), meta.at("name").get<std::string>(),
          meta.at("namespace").get<std::string>(), meta.at("uid").get<std::string>()};
}

api::OutboxRelaySpec parse_relay_spec(const Json& relay) {
  try {
    return api::parse_spec(relay.at("spec"));
  } catch (const api::SpecError& e) {
    throw InvalidSpec(e.what());
  }
}

std::string image_of(const api::OutboxRelaySpec& spec, const RenderOptions& options) {
  std::string image = spec.relay.image.value_or(options.relay_image);
  if (image.empty()) {
    throw InvalidSpec("no relay image: set spec.relay.image or OUTBOX_RELAY_IMAGE");
  }
  return image;
}

Json labels_for(const std::string& relay_name, const std::string& component) {
  return {{"app.kubernetes.io/name", "outbox-relay"},
          {"app.kubernetes.io/instance", relay_name},
          {"app.kubernetes.io/component", component},
          {"app.kubernetes.io/part-of", "outbox-operator"},
          {kManagedByLabel, "outbox-operator"}};
}

Json selector_labels(const std::string& relay_name) {
  return {{"app.kubernetes.io/name", "outbox-relay"},
          {"app.kubernetes.io/instance", relay_name},
          {"app.kubernetes.io/component", "relay"}};
}

Json metadata(const RelayMeta& relay, const std::string& name, const std::string& component) {
  return {{"name", name},
          {"namespace", relay.ns},
          {"labels", labels_for(relay.name, component)},
          {"ownerReferences", owner_reference(relay)}};
}

void add_metadata(const Json& extra, Json& meta) {
  for (const char* kind : {"labels", "annotations"}) {
    if (extra.contains(kind)) {
      Json merged = extra.at(kind);
      merged.update(meta.value(kind, Json::object()));
      meta[kind] = std::move(merged);
    }
  }
}

}  // namespace builders
}  // namespace outbox::controller
