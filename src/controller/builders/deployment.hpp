#pragma once

#include <string>
#include <vector>

#include "api/spec.hpp"
#include "controller/builders/common.hpp"

// The relay Deployment "<name>-relay" and the ConfigMap "<name>-config" that shows its
// arguments: `relay` in the relay's image, its metrics port probed for liveness and readiness.
namespace outbox::controller {

inline const char kConfigHashAnnotation[] = "outbox.dev/config-hash";
// The referenced Secrets' resourceVersions, hashed: a rotated credential changes the pod
// template, so the relay pods roll and start with the new value (the DSN is read when the
// process starts).
inline const char kSecretsHashAnnotation[] = "outbox.dev/secrets-hash";

// The relay's command line (after the image's entrypoint), for tests and docs. Throws
// InvalidSpec for a spec it cannot read.
std::vector<std::string> relay_args(const Json& relay);

namespace builders {

// The same from the parsed spec.
std::vector<std::string> relay_args(const RelayMeta& relay, const api::OutboxRelaySpec& spec);

// The rendered settings, one `--flag=value` per line: what the relay pods were started with.
std::string relay_config(const RelayMeta& relay, const std::vector<std::string>& args);

Json config_map(const RelayMeta& relay, const RelayNames& names, const std::string& conf);

// spec.relay.replicas, or 0 while spec.suspend.
int desired_replicas(const api::OutboxRelaySpec& spec);

// The pod template's hashes (annotations): a change of either rolls the relay pods.
struct TemplateHashes {
  std::string config;   // of relay_config()
  std::string secrets;  // of RenderOptions::secret_versions
};

Json deployment(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                const PodSettings& settings, const std::vector<std::string>& args,
                const TemplateHashes& hashes);

}  // namespace builders
}  // namespace outbox::controller
