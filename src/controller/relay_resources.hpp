#pragma once

#include <string>
#include <vector>

#include "controller/builders/change_requests.hpp"
#include "controller/builders/common.hpp"
#include "controller/builders/cron_jobs.hpp"
#include "controller/builders/deployment.hpp"
#include "controller/builders/jobs.hpp"
#include "controller/builders/network_policy.hpp"
#include "controller/builders/pod.hpp"
#include "controller/builders/rbac.hpp"
#include "controller/builders/service.hpp"

// What the operator runs for one OutboxRelay, rendered from its spec as plain objects ready for
// server-side apply. Pure functions: no I/O, so every rule here is unit-tested without an
// apiserver. One builder per kind renders each object from the typed spec
// (controller/builders/, as CloudNativePG's pkg/specs): the relay Deployment and its ConfigMap
// (deployment), the CronJobs (cron_jobs), RBAC (rbac), Service and PodDisruptionBudget
// (service), the one-shot Jobs (jobs), the opt-in NetworkPolicy (network_policy), on the pod
// template (pod), flags (arguments) and
// metadata (common) they share; the annotations' change requests are read in change_requests.
// This header offers all of it; render_relay() parses the spec once and puts the objects in
// apply order.
namespace outbox::controller {

// Whether `relay` carries kPauseAnnotation set to "true".
bool reconciliation_paused(const Json& relay);

struct RenderedRelay {
  // In apply order: identity and RBAC first, then configuration, then workloads.
  std::vector<OwnedObject> objects;
  bool wants_pdb = false;  // false: delete a PodDisruptionBudget left from a larger scale
  std::string pdb_name;
  // false: delete a NetworkPolicy left from spec.networkPolicy.enabled
  bool wants_network_policy = false;
  std::string network_policy_name;
};

// Renders every owned object of `relay` (an OutboxRelay as read from the apiserver, with the
// CRD's defaults filled in), in apply order. Throws InvalidSpec for a spec it cannot render.
RenderedRelay render_relay(const Json& relay, const RenderOptions& options);

}  // namespace outbox::controller
