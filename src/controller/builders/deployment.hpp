#pragma once

#include <string>
#include <vector>

#include "api/spec.hpp"
#include "controller/builders/common.hpp"

// The relay Deployment "<name>-relay" and the ConfigMap "<name>-config" that shows its
// arguments: `relay` in the relay's image, its metrics port probed for liveness and readiness.
namespace outbox::controller {

// relay_config()'s hash: a change of the relay's settings rolls its pods. A rotated Secret does
// not: the running relays notice their mounted files change (relay/relay.hpp, CredentialFiles).
inline const char kConfigHashAnnotation[] = "outbox.dev/config-hash";

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

// `config_hash`: kConfigHashAnnotation's value.
Json deployment(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
                const PodSettings& settings, const std::vector<std::string>& args,
                const std::string& config_hash);

}  // namespace builders
}  // namespace outbox::controller
