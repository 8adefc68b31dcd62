#include "controller/controller.hpp"

// The reconcile function: the one place that says, in order, what one OutboxRelay needs.
namespace outbox::controller {

// Everything one OutboxRelay needs, from the top: read it, check its inputs, apply what it
// owns, report. Any step may end the pass early. Failures are thrown: process() retries them
// with backoff, except an invalid spec, which is terminal (see TerminalError).
ReconcileResult Controller::reconcile(const std::string& key, std::stop_token stop) {
  const std::optional<Json> relay = cached_relay(key);
  if (!relay) {
    forget(key);
    return {};  // gone: the garbage collector removes what it owned
  }
  if (relay->at("metadata").contains("deletionTimestamp")) {
    return finalize(*relay, stop);
  }
  // Before the pause check: a resource paused and then deleted must still be held for its Drop.
  keep_drop_finalizer(*relay, stop);

  if (reconciliation_paused(*relay)) {
    // Hands off: no Secret check, no render, no apply, no Job; the status still reports what
    // the relays do, and says why nothing follows the spec.
    update_status(*relay, std::nullopt, stop);
    return {};
  }

  RenderOptions render = options_.render;
  render.relays_alive = relays_alive(*relay, std::chrono::system_clock::now());
  std::optional<Problem> secret_problem;
  RenderedRelay rendered;
  try {
    secret_problem = check_secrets(*relay, render);
    if (!secret_problem) {
      rendered = render_relay(*relay, render);
    }
  } catch (const InvalidSpec& e) {
    // No retry can fix a spec; the edit that does is a watch event, which reconciles again.
    update_status(*relay, Problem{"InvalidSpec", e.what()}, stop);
    throw TerminalError(std::string("invalid spec: ") + e.what());
  }
  if (secret_problem) {
    update_status(*relay, secret_problem, stop);
    return {Outcome::kRequeueAfter, options_.secret_retry};
  }

  const bool rollout_queued = hold_rollout(rendered);
  const bool schema_job_queued = hold_schema_job(*relay, rendered);
  const std::set<std::string> request_jobs = existing_request_jobs(*relay);
  apply_all(*relay, rendered, stop);
  announce_requests(*relay, request_jobs);
  answer_ended_requeue(*relay, stop);

  // Pods that cannot start (a missing Secret key, an image that cannot be pulled, a crash
  // loop) change nothing the informers see once the Deployment reports them unready: look
  // again after a while, until they are ready. Nor does anything mark the moment the relays'
  // last backlog report turns stale: look again then.
  const bool not_ready =
      update_status(*relay, std::nullopt, stop, rollout_queued, schema_job_queued);
  std::optional<std::chrono::milliseconds> recheck;
  if (auto stale_in = backlog_report_turns_stale_in(relay->value("status", Json::object()),
                                                    std::chrono::system_clock::now())) {
    recheck = std::chrono::ceil<std::chrono::milliseconds>(*stale_in);
  }
  if (not_ready) {
    recheck = recheck ? std::min(*recheck, options_.not_ready_recheck) : options_.not_ready_recheck;
  }
  if (rollout_queued || schema_job_queued) {
    constexpr std::chrono::milliseconds kRolloutQueueRecheck{5'000};
    recheck = recheck ? std::min(*recheck, kRolloutQueueRecheck) : kRolloutQueueRecheck;
  }
  if (recheck) {
    return {Outcome::kRequeueAfter, *recheck};
  }
  return {};
}

}  // namespace outbox::controller
