#pragma once

// A NAIVE relay, built only as the benchmark's baseline (c). It is
// what the relay's design avoids: select pending rows, send each one synchronously
// (produce, then wait for that one delivery report), update each row on its
// own, and poll every 2 s when nothing is pending. Never use it for real.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "outbox/table.hpp"

namespace outbox::bench {

struct NaiveRelayConfig {
  std::string dsn;
  std::string brokers;
  std::string topic;
  int select_limit = 100;                         // rows per SELECT
  std::chrono::milliseconds poll_interval{2000};  // sleep when nothing is pending
};

class NaiveRelay {
 public:
  NaiveRelay(NaiveRelayConfig config, TableName table);

  // Loops until `stop`; every published-and-updated row increments `marked`.
  void run(const std::atomic<bool>& stop, std::atomic<std::int64_t>& marked);

 private:
  NaiveRelayConfig config_;
  TableName table_;
};

}  // namespace outbox::bench
