#pragma once

#include "api/spec.hpp"
#include "controller/builders/common.hpp"

// The two CronJobs of an OutboxRelay: compensation "<name>-compensate" (`compensate`: releases
// the claims of dead relays and publishes what no live relay owns) and retention "<name>-cleanup"
// (`cleanup`: deletes or archives sent events). Both run in the relay's pod settings and report
// into the OutboxRelay's status; without a schedule in the spec, each gets one spread over the
// fleet (controller/schedules.hpp).
namespace outbox::controller::builders {

// `relays_alive` false: every minute whatever the spec says (RenderOptions::relays_alive).
Json compensation_cron_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                           const RelayNames& names, const PodSettings& pod, bool relays_alive);

Json retention_cron_job(const RelayMeta& relay, const api::OutboxRelaySpec& spec,
                        const RelayNames& names, const PodSettings& pod);

}  // namespace outbox::controller::builders
