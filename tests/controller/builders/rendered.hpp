#pragma once

#include <string>
#include <vector>

#include "controller/relay_resources.hpp"
#include "controller/relay_sample.hpp"

// What the builders' tests share: the sample OutboxRelay with a spec patch, and lookups in what
// render_relay() returns.
namespace outbox::controller::testing {

inline Json relay(const Json& spec_patch = Json::object()) {
  return sample_relay(spec_patch);
}

inline const Json* find(const RenderedRelay& r, const std::string& kind, const std::string& name) {
  for (const auto& o : r.objects) {
    if (o.object.at("kind") == kind && o.object.at("/metadata/name"_json_pointer) == name) {
      return &o.object;
    }
  }
  return nullptr;
}

// The OutboxRelay with the requeue annotation set to `token`, and `status` when given.
inline Json requeue_requested(const std::string& token, const Json& status = Json(),
                              const Json& spec_patch = Json::object()) {
  Json r = relay(spec_patch);
  r["metadata"]["annotations"] = {{kRequeueAnnotation, token}, {"other", "kept"}};
  if (!status.is_null()) {
    r["status"] = status;
  }
  return r;
}

inline std::vector<Json> requeue_jobs(const RenderedRelay& r) {
  std::vector<Json> out;
  for (const auto& o : r.objects) {
    if (o.object.at("kind") == "Job" &&
        o.object.at("/metadata/name"_json_pointer).get<std::string>().find("-requeue-") !=
            std::string::npos) {
      out.push_back(o.object);
    }
  }
  return out;
}

}  // namespace outbox::controller::testing
