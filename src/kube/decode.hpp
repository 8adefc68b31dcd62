#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

// Parsing API answers while leaving out what no reader of them needs.
namespace outbox::kube {

// Keys left out wherever they appear in an object. What they hold is never built: a list of a
// thousand Deployments parsed with "managedFields" dropped costs the Deployments, not twice
// that. Meant for keys that only ever appear in object metadata.
using DroppedKeys = std::vector<std::string>;

// `text` parsed, without `dropped` keys; a discarded value (is_discarded()) when it is not JSON.
nlohmann::json decode_json(std::string_view text, const DroppedKeys& dropped);

// What an informer of this project never reads: server-side apply's field ownership (about as
// large as the object it describes) and kubectl's client-side copy of the whole last applied
// object.
const DroppedKeys& bookkeeping_keys();

}  // namespace outbox::kube
