#pragma once

#include <chrono>

// Every default and bound of the OutboxRelay spec and of the commands its pods run, defined
// once. The spec's table (api/spec.cpp, spec_fields()) maps each spec field to these, the CRD
// is checked against that table (tests/api/spec_table_test.cpp), and the relay's and the jobs'
// flags default to the same constants, so a command run by hand behaves as the operator's pods.
namespace outbox::api::defaults {

// spec.database
inline constexpr char kTable[] = "public.outbox_event";
inline constexpr char kDatabaseTlsMode[] = "verify-full";

// spec.kafka
inline constexpr char kTopic[] = "outbox.{biz_type}";

// spec.relay
inline constexpr int kReplicas = 2;
inline constexpr int kMaxReplicas = 64;
inline constexpr int kBatchSize = 500;
inline constexpr int kMaxBatchSize = 10'000;
inline constexpr std::chrono::milliseconds kPollInterval{2000};
// "auto": after a claim that found events, the next waits about as long as two more events
// take at the rate seen, at most 30 ms (relay/turn_policy.hpp, CoalesceWindow); a duration
// fixes the window, and 0s claims on every wake-up.
inline constexpr char kCoalesceWindow[] = "auto";
inline constexpr std::chrono::milliseconds kMaxCoalesceWindow{10'000};
inline constexpr int kMaxShards = 1024;
inline constexpr std::chrono::milliseconds kWriteBehindLimit{250};
inline constexpr std::chrono::milliseconds kWriteBehindLinger{10};
// Compute resources of the relay and job containers when spec.relay.resources is left out: a
// namespace whose ResourceQuota counts requests or memory limits admits them, and they stay
// Burstable (no cpu limit, so a drain is not throttled). The relay's measured peak RSS is
// 30.1 MiB (docs/benchmarks.md, "Relay memory"); its /tmp is a memory-backed emptyDir of up to
// 16 Mi, charged to the same cgroup. The request covers that peak twice; the limit is 2.8 times
// the 46 MiB both add up to, and stops a runaway relay before it starves its node.
inline constexpr char kRelayCpuRequest[] = "50m";
inline constexpr char kRelayMemoryRequest[] = "64Mi";
inline constexpr char kRelayMemoryLimit[] = "128Mi";

// spec.retry
inline constexpr int kMaxAttempts = 10;
inline constexpr int kMaxMaxAttempts = 100;
inline constexpr char kInitialBackoff[] = "1m";
inline constexpr char kMaxBackoff[] = "64m";
inline constexpr double kJitter = 0.2;

// spec.compensation
inline constexpr int kCompensationBatchSize = 200;
inline constexpr int kMaxCompensationBatchSize = 10'000;
inline constexpr char kStaleAfter[] = "5m";

// spec.retention
inline constexpr int kRetentionBatchSize = 1000;
inline constexpr int kMaxRetentionBatchSize = 100'000;
inline constexpr char kKeepSent[] = "168h";

// spec.compensation.timeZone and spec.retention.timeZone: the schedules mean the same
// wall-clock time whatever zone the cluster's controller-manager runs in.
inline constexpr char kScheduleTimeZone[] = "UTC";

// spec.monitoring
inline constexpr std::chrono::seconds kStuckAfter{600};

}  // namespace outbox::api::defaults
