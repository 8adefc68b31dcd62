#pragma once

#include "controller/builders/common.hpp"

// What reaches the relay pods from outside: the metrics Service "<name>-metrics" and, above one
// replica, the PodDisruptionBudget "<name>-relay" that lets voluntary evictions take one pod at
// a time.
namespace outbox::controller::builders {

// Headless: scraping reaches each pod through the endpoints, and a ClusterIP per resource
// would exhaust a /24 service range at ~250.
Json metrics_service(const RelayMeta& relay, const RelayNames& names);

Json disruption_budget(const RelayMeta& relay, const RelayNames& names);

}  // namespace outbox::controller::builders
