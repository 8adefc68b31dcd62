#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outbox/table.hpp"

namespace outbox {

struct RetentionConfig {
  std::chrono::seconds keep_sent{168 * 3600};  // a week by default
  int batch_size = 1000;
  std::optional<TableName> archive;    // move rows there instead of deleting them
  std::chrono::milliseconds pause{0};  // between batches, to leave room to the relays
  int max_batches = 1'000'000;
};

struct RetentionReport {
  bool ran = false;  // false: another cleanup held the lock, nothing was done
  std::int64_t removed = 0;
  int batches = 0;
  // Log mode: the partitions dropped whole, and why the oldest one left stays.
  std::vector<std::string> partitions_dropped;
  std::string held_back;
};

// Deletes (or archives) sent rows older than keep_sent, a bounded batch per short
// transaction: no table-wide DELETE, no long lock, pending and FAILED rows are never
// touched. Only one instance works on a table at a time (an advisory lock); rows a
// relay is writing are skipped (SKIP LOCKED), so it runs safely beside the relays.
// A log-mode table loses whole partitions instead (drop_passed_partitions); it
// cannot archive (std::invalid_argument).
RetentionReport run_retention(pqxx::connection& conn, const TableName& table,
                              const RetentionConfig& config);

}  // namespace outbox
