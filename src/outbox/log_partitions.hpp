#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "outbox/table.hpp"

namespace outbox {

// The partitions of a log-mode table. Partition n holds the rows of transactions
// with ids in [n * size, (n + 1) * size) and is named <table>_p<n>; rows of
// transactions beyond the partitions made so far land in <table>_pdefault, so an
// insert never fails for want of a partition.
//
// Guarantees: partitions are created and dropped with a short lock_timeout, so a
// long transaction on the table delays the step (retried later) rather than
// queueing the services' inserts behind it. Only partitions that every shard's
// progress has passed are dropped: nothing unpublished is removed.
// Caveats: rows that went to the default partition (no relay made partitions
// ahead for a long time) keep their range from ever getting a partition; they
// are still read, and cleanup deletes them row by row once passed.
struct LogPartition {
  std::string name;
  std::uint64_t from = 0;  // first transaction id
  std::uint64_t to = 0;    // one past the last
};

// SQL for a position bound of this snapshot: `bound` is "xmin" (every row below it is
// final: the read watermark) or "xmax" (the next position), plus the table's position
// offset (TableInfo::position_offset). Positions are transaction ids (schema.cpp,
// version_5), so partitions are ranges of them.
std::string position_bound_sql(const std::string& bound, std::int64_t offset);

// Makes the partition of the next position and the one after it, when missing. Returns
// the names created. Safe to call from several relays at once.
std::vector<std::string> ensure_log_partitions(pqxx::dbtransaction& tx, const TableName& table,
                                               std::int64_t partition_xids,
                                               std::int64_t position_offset);

// The numbered partitions, oldest first (the default partition left out).
std::vector<LogPartition> list_log_partitions(pqxx::transaction_base& tx, const TableName& table);

struct PartitionCleanup {
  std::vector<std::string> dropped;
  std::int64_t default_rows_deleted = 0;
  std::string held_back;  // why the oldest partition stays, in words; empty when none stays
};

// Drops the partitions that every shard's progress has passed, whose transactions
// are all over and whose newest row is older than `keep`; deletes such rows of the
// default partition. One statement at a time (autocommit).
PartitionCleanup drop_passed_partitions(pqxx::connection& conn, const TableName& table,
                                        std::chrono::seconds keep, std::int64_t position_offset);

}  // namespace outbox
