#include "controller/relay_reconciler.hpp"

// The reconcile function: the one place that says, in order, what one OutboxRelay needs; and
// what the engine watches for it.
namespace outbox::controller {
namespace {

const std::vector<const kube::Resource*>& owned_kinds() {
  static const std::vector<const kube::Resource*> kinds = {&owned::service_accounts,
                                                           &owned::roles,
                                                           &owned::role_bindings,
                                                           &owned::config_maps,
                                                           &owned::deployments,
                                                           &owned::cron_jobs,
                                                           &owned::jobs,
                                                           &owned::services,
                                                           &owned::pod_disruption_budgets,
                                                           &owned::network_policies};
  return kinds;
}

constexpr int kListPageSize = 100;

// A resource held back by the rollout budget is looked at again this often: the queue moves
// as rollouts end.
constexpr std::chrono::milliseconds kHeldRecheck{5'000};

// The earlier of `recheck` and `after`.
void recheck_within(std::optional<std::chrono::milliseconds>& recheck,
                    std::chrono::milliseconds after) {
  recheck = recheck ? std::min(*recheck, after) : after;
}

}  // namespace

kube::Watches relay_watches(const std::vector<std::string>& namespaces) {
  kube::Watches watches;
  watches.primary = &kOutboxRelays;
  watches.owned = owned_kinds();
  watches.namespaces = namespaces;
  // The caches hold every OutboxRelay and every object they own: managedFields would about
  // double their memory, and nothing here reads them (annotation_manager reads them live).
  // Dropped while parsing, so that a relist of a whole fleet never holds them either.
  watches.primary_options.dropped_keys = kube::bookkeeping_keys();
  // A page of a hundred: what a relist holds parsed at once (a few MiB), at the cost of a few
  // more list requests over a large fleet.
  watches.primary_options.page_size = kListPageSize;
  watches.owned_options.page_size = kListPageSize;
  // Only objects carrying our managed-by label: never the whole cluster's ConfigMaps.
  watches.owned_options.label_selector = std::string(kManagedByLabel) + "=outbox-operator";
  watches.owned_options.dropped_keys = kube::bookkeeping_keys();
  watches.not_served_hint =
      "; install it with the chart (helm install) or: kubectl apply --server-side "
      "-f charts/outbox-operator/crds/";
  return watches;
}

RelayReconciler::RelayReconciler(kube::Client& client, ControllerOptions options,
                                 metrics::Registry& registry, const kube::Caches& caches)
    : client_(client),
      options_(std::move(options)),
      caches_(caches),
      budget_(options_.max_rolling_relays),
      applies_(registry.counter("outbox_controller_applies_total",
                                "Server-side applies of owned objects")),
      status_writes_(registry.counter("outbox_controller_status_writes_total",
                                      "Status applies of OutboxRelays")),
      events_(registry.counter("outbox_controller_events_total", "Events recorded")),
      renders_(registry.counter("outbox_controller_renders_total",
                                "OutboxRelays rendered into their owned objects")) {}

// The Drop Job has no ownerReference (drop_job says why): its labels name the resource.
std::vector<std::string> RelayReconciler::owners_of(const Json& owned) const {
  std::vector<std::string> keys;
  const std::string ns = owned.at("metadata").value("namespace", "");
  const Json refs = owned.at("metadata").value("ownerReferences", Json::array());
  for (const Json& ref : refs) {
    if (ref.value("kind", "") == "OutboxRelay" && ref.value("controller", false)) {
      keys.push_back(ns + "/" + ref.value("name", ""));
    }
  }
  const Json labels = owned.at("metadata").value("labels", Json::object());
  if (refs.empty() && labels.value("app.kubernetes.io/component", "") == "drop") {
    keys.push_back(ns + "/" + labels.value("app.kubernetes.io/instance", ""));
  }
  return keys;
}

// Everything one OutboxRelay needs, from the top: read it, check its inputs, apply what it
// owns, report. Any step may end the pass early. Failures are thrown: the engine retries them
// with backoff, except an invalid spec, which is terminal (see TerminalError).
ReconcileResult RelayReconciler::reconcile(const std::string& key, std::stop_token stop) {
  const std::optional<Json> relay = caches_.primary(key);
  if (!relay) {
    forget(key);
    {
      std::lock_guard lock(rollout_mu_);
      budget_.release(key);
    }
    return {};  // gone: the garbage collector removes what it owned
  }
  if (relay->at("metadata").contains("deletionTimestamp")) {
    return finalize(*relay, stop);
  }
  // Before the pause check: a resource paused and then deleted must still be held for its Drop.
  keep_drop_finalizer(*relay, stop);

  if (reconciliation_paused(*relay)) {
    // Hands off: no render, no apply, no Job; the status still reports what the relays do,
    // and says why nothing follows the spec.
    update_status(*relay, {}, stop);
    return {};
  }
  // Held back by the rollout budget, and nothing changed since: the same render would be held
  // back the same way, and the status says so already.
  const std::string versions = relay->at("metadata").value("resourceVersion", "");
  {
    std::lock_guard lock(rollout_mu_);
    if (budget_.still_held(key, versions, BudgetClock::now())) {
      return {Outcome::kRequeueAfter, kHeldRecheck};
    }
    budget_.judging(key, versions);
  }
  RenderedRelay rendered = render_or_report(*relay, stop);
  return apply_and_report(*relay, rendered, stop);
}

RenderedRelay RelayReconciler::render_or_report(const Json& relay, std::stop_token stop) {
  RenderOptions render = options_.render;
  render.relays_alive = relays_alive(relay, std::chrono::system_clock::now());
  renders_.inc();
  try {
    return render_relay(relay, render);
  } catch (const InvalidSpec& e) {
    // No retry can fix a spec; the edit that does is a watch event, which reconciles again.
    update_status(relay, Findings::degraded(Problem{"InvalidSpec", e.what()}), stop);
    throw TerminalError(std::string("invalid spec: ") + e.what());
  }
}

ReconcileResult RelayReconciler::apply_and_report(const Json& relay, RenderedRelay& rendered,
                                                  std::stop_token stop) {
  const HeldBack held = hold_back(relay, rendered);
  const std::set<std::string> request_jobs = existing_request_jobs(relay);
  apply_all(relay, rendered, stop);
  announce_requests(relay, request_jobs);
  answer_ended_requeue(relay, stop);
  const StatusReport report = update_status(relay, Findings::holding(held), stop);

  std::optional<std::chrono::milliseconds> recheck = status_due_in(relay, report);
  const std::string key = ns_of(relay) + "/" + name_of(relay);
  {
    std::lock_guard lock(rollout_mu_);
    if (held.any()) {
      // Until the status is due anyway, and at the latest a resync period on: whatever the
      // resync would repair is not left waiting behind a long hold.
      std::chrono::milliseconds stands = recheck.value_or(std::chrono::milliseconds::max());
      if (options_.resync_period.count() > 0) {
        stands = std::min(stands, options_.resync_period);
      }
      const auto now = BudgetClock::now();
      budget_.held(key, stands == std::chrono::milliseconds::max() ? BudgetClock::time_point::max()
                                                                   : now + stands);
    } else {
      budget_.release(key);
    }
  }
  if (held.any()) {
    recheck_within(recheck, kHeldRecheck);  // the rollout queue moves
  }
  if (recheck) {
    return {Outcome::kRequeueAfter, *recheck};
  }
  return {};
}

// Pods that cannot start (a missing Secret or key, an image that cannot be pulled, a crash
// loop) change nothing the informers see once the Deployment reports them unready: look again
// after a while, until they are ready. Nor does anything mark the moment the relays' last
// backlog report turns stale (BacklogStuck turns Unknown), nor the moment the relays stop
// counting as alive, which may be later for a new resource (the compensation CronJob switches
// to every minute): look again at each.
std::optional<std::chrono::milliseconds> RelayReconciler::status_due_in(
    const Json& relay, const StatusReport& report) {
  std::optional<std::chrono::milliseconds> due;
  const auto now = std::chrono::system_clock::now();
  for (const auto& moment :
       {backlog_report_turns_stale_in(relay.value("status", Json::object()), now),
        relays_alive_ends_in(relay, now)}) {
    if (moment) {
      recheck_within(due, std::chrono::ceil<std::chrono::milliseconds>(*moment));
    }
  }
  if (report.relays_not_ready) {
    recheck_within(due, options_.not_ready_recheck);
  }
  return due;
}

}  // namespace outbox::controller
