#include "kube/decode.hpp"

#include <algorithm>

namespace outbox::kube {

nlohmann::json decode_json(std::string_view text, const DroppedKeys& dropped) {
  if (dropped.empty()) {
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
  // A key the callback refuses is skipped with its value, and the parser builds nothing below a
  // skipped value.
  auto keep = [&dropped](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event != nlohmann::json::parse_event_t::key || !parsed.is_string()) {
      return true;
    }
    const auto& key = parsed.get_ref<const std::string&>();
    return std::find(dropped.begin(), dropped.end(), key) == dropped.end();
  };
  return nlohmann::json::parse(text, keep, /*allow_exceptions=*/false);
}

const DroppedKeys& bookkeeping_keys() {
  static const DroppedKeys keys = {"managedFields",
                                   "kubectl.kubernetes.io/last-applied-configuration"};
  return keys;
}

}  // namespace outbox::kube
