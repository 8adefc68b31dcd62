#pragma once

#include <string>
#include <vector>

#include "controller/builders/common.hpp"

// The opt-in NetworkPolicy "<name>-relay" of one OutboxRelay (spec.networkPolicy).
namespace outbox::controller::builders {

// Over every pod of the resource (relay, CronJobs, Jobs: their common labels
// app.kubernetes.io/name and instance):
//  - ingress only to the metrics port, from spec.networkPolicy.metricsFrom (none when empty);
//  - egress to DNS (port 53, UDP and TCP, any address: a node-local cache has no pod label),
//    to the API server (ports 443 and 6443: before and after the kubernetes Service's
//    translation; restricted to `api_server_cidrs` when given, any address otherwise) and
//    through spec.networkPolicy.egress, which must reach the database and the brokers (their
//    addresses are in Secrets the operator never reads).
Json network_policy(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                    const RelayNames& names, const std::vector<std::string>& api_server_cidrs);

}  // namespace outbox::controller::builders
