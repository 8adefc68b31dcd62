#pragma once

// Phase (u) of relay_bench: a backlog inserted in bulk into a table that nothing
// has analyzed yet (an outage, a replay, a batch job that finishes before
// autovacuum), drained by relay::Relay, against the same backlog after ANALYZE.
// Issue 16: the claim's plan must not depend on fresh statistics.

#include <string>
#include <vector>

#include "outbox/schema.hpp"

namespace outbox::bench {

struct FloodParams {
  std::string dsn;
  std::string brokers;
  std::string id;  // run id: table and topic names
  long long events = 100000;
  int keys = 1000;
  int batch = 500;
  int rounds = 1;
  TableMode mode = TableMode::kStatus;  // log mode: the partitions are what goes un-analyzed
};

struct FloodDrain {
  double rate = 0;      // events/s, from constructing the relay until all are marked
  double claim_ms = 0;  // median of a few claim_batch calls before the drain
  bool analyzed = false;
};

struct FloodResult {
  std::vector<FloodDrain> unanalyzed;
  std::vector<FloodDrain> analyzed;
};

// Drains `events` bulk-inserted events with relay::Relay, `rounds` times each
// way, un-analyzed first then analyzed in every round (fresh tables and topics).
FloodResult run_flood(const FloodParams& p);

}  // namespace outbox::bench
