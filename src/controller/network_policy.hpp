#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// The opt-in NetworkPolicy of one OutboxRelay (spec.networkPolicy): a pure function of the spec
// and the operator's own settings, unit-tested without an apiserver.
namespace outbox::controller {

// Whether spec.networkPolicy.enabled is true.
bool wants_network_policy(const nlohmann::json& relay);

// The NetworkPolicy "<name>-relay" over every pod of `relay` (relay, CronJobs, Jobs: their
// common labels app.kubernetes.io/name and instance):
//  - ingress only to the metrics port, from spec.networkPolicy.metricsFrom (none when empty);
//  - egress to DNS (port 53, UDP and TCP, any address: a node-local cache has no pod label),
//    to the API server (ports 443 and 6443: before and after the kubernetes Service's
//    translation; restricted to `api_server_cidrs` when given, any address otherwise) and
//    through spec.networkPolicy.egress, which must reach the database and the brokers (their
//    addresses are in Secrets the operator never reads).
// `metadata` is the object's metadata (name, namespace, labels, ownerReferences) as the other
// owned objects get it.
nlohmann::json network_policy(const nlohmann::json& relay, nlohmann::json metadata,
                              const std::vector<std::string>& api_server_cidrs);

}  // namespace outbox::controller
