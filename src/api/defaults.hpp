#pragma once

#include <chrono>

// The relay's defaults, defined once: RelayConfig, the relay command's flags and the
// operator's rendering of an OutboxRelay (for the fields its spec leaves out) use these.
namespace outbox::api::defaults {

inline constexpr int kBatchSize = 500;
inline constexpr std::chrono::milliseconds kPollInterval{2000};
inline constexpr std::chrono::seconds kStuckAfter{600};
inline constexpr std::chrono::milliseconds kWriteBehindLimit{250};
inline constexpr std::chrono::milliseconds kWriteBehindLinger{10};
// 0: every wake-up claims at once (lowest latency); spec.relay.coalesceWindow.
inline constexpr std::chrono::milliseconds kCoalesceWindow{0};
inline constexpr std::chrono::milliseconds kMaxCoalesceWindow{10'000};

}  // namespace outbox::api::defaults
