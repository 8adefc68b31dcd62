#include "controller/builders/cron_jobs.hpp"

#include "controller/builders/arguments.hpp"
#include "controller/builders/pod.hpp"
#include "controller/schedules.hpp"

namespace outbox::controller::builders {
namespace {

Json cron_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec, const RelayNames& names,
              const std::string& name, const std::string& component, const std::string& schedule,
              const std::string& time_zone, Json container) {
  Json template_labels = labels_for(relay.name, component);
  Json pod = {{"metadata", {{"labels", template_labels}}},
              {"spec", pod_spec(spec, names, std::move(container), PodRuns::kJob)}};
  apply_pod_template(spec, pod);
  return {{"apiVersion", "batch/v1"},
          {"kind", "CronJob"},
          {"metadata", metadata(relay, name, component)},
          {"spec",
           {{"schedule", schedule},
            {"timeZone", time_zone},
            // A run still going when the next is due is left to finish: two compensation runs
            // would only contend for the same shard locks.
            {"concurrencyPolicy", "Forbid"},
            {"suspend", spec.suspend},
            {"startingDeadlineSeconds", 120},
            {"successfulJobsHistoryLimit", 1},
            {"failedJobsHistoryLimit", 3},
            {"jobTemplate",
             {{"metadata", {{"labels", template_labels}}},
              {"spec",
               {{"backoffLimit", 0},
                {"ttlSecondsAfterFinished", 3600},
                {"template", std::move(pod)}}}}}}}};
}

}  // namespace

Json compensation_cron_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                           const RelayNames& names, const PodSettings& pod, bool relays_alive) {
  std::vector<std::string> args = {"compensate"};
  for (auto& a : publish_args(spec)) {
    args.push_back(std::move(a));
  }
  args.push_back("--batch-size=" + std::to_string(spec.compensation.batch_size));
  args.push_back(flag("stale-after", spec.compensation.stale_after));
  args.push_back(report_status_arg(relay));
  // While no relay is alive the safety net is all that publishes: every minute, whatever the
  // spec says. Otherwise the spec's schedule, or a rare one spread over the fleet.
  const std::string schedule =
      !relays_alive
          ? kRescueCompensationSchedule
          : spec.compensation.schedule.value_or(spread_compensation_schedule(relay.ns, relay.name));
  return cron_job(relay, spec, names, names.compensation, "compensation", schedule,
                  spec.compensation.time_zone,
                  container_for_job(relay, spec, "compensate", pod, args));
}

Json retention_cron_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                        const RelayNames& names, const PodSettings& pod) {
  std::vector<std::string> args = {"cleanup"};
  for (std::string& arg : table_args(spec)) {
    args.push_back(std::move(arg));
  }
  args.push_back(flag("keep-sent", spec.retention.keep_sent));
  args.push_back("--batch-size=" + std::to_string(spec.retention.batch_size));
  if (spec.retention.archive_table && !spec.retention.archive_table->empty()) {
    args.push_back(flag("archive-table", *spec.retention.archive_table));
  }
  args.push_back(report_status_arg(relay));
  return cron_job(relay, spec, names, names.retention, "retention",
                  spec.retention.schedule.value_or(spread_retention_schedule(relay.ns, relay.name)),
                  spec.retention.time_zone, container_for_job(relay, spec, "cleanup", pod, args));
}

}  // namespace outbox::controller::builders
