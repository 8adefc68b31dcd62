#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "kafka/producer.hpp"
#include "outbox/column_map.hpp"
#include "outbox/store.hpp"
#include "relay/batch_publisher.hpp"

namespace outbox::relay {

struct CompensationConfig {
  std::string dsn;  // a secret
  std::string table = "public.outbox_event";
  std::optional<ColumnMap> columns;  // set: the table is adopted with these (see RelayConfig)
  kafka::ProducerConfig kafka;
  PublishPolicy publish;
  int batch_size = 200;
  std::chrono::seconds stale_after{300};          // pending this long counts as stuck in the report
  std::chrono::milliseconds time_budget{50'000};  // stay inside a one-minute schedule
};

struct CompensationReport {
  int shards_total = 0;
  int shards_taken = 0;  // shards no live relay held, which this run published
  std::size_t resent = 0;
  std::size_t failed = 0;
  std::size_t retried = 0;
  std::size_t deferred = 0;
  bool kafka_unreachable = false;
  Backlog backlog;  // after the run; stuck = pending older than stale_after

  std::string summary_line() const;  // for people
  std::string json() const;          // for machines (the controller, alerting)
};

// The safety net for shards no relay holds, made safe beside live relays: it publishes only
// the shards no live relay holds (the same advisory locks), with the same claim,
// ordering and retry rules, so it never reorders a key or sends twice against a
// live relay. Claims are not stored in rows, so a dead relay leaves nothing to
// reclaim: its shards come free with its session. Throws on database errors.
CompensationReport compensate(const CompensationConfig& config);

}  // namespace outbox::relay
