#include "outbox/retention.hpp"

#include "outbox/event_status.hpp"
#include "outbox/log_partitions.hpp"
#include "outbox/schema.hpp"

#include <thread>

namespace outbox {
namespace {

RetentionReport drop_partitions(pqxx::connection& conn, const TableName& table,
                                std::chrono::seconds keep, std::int64_t position_offset,
                                const std::string& lock_key) {
  RetentionReport report;
  report.ran = pqxx::nontransaction(conn)
                   .exec_params("SELECT pg_try_advisory_lock(hashtext($1))", lock_key)[0][0]
                   .as<bool>();
  if (!report.ran) {
    return report;
  }
  try {
    PartitionCleanup c = drop_passed_partitions(conn, table, keep, position_offset);
    report.partitions_dropped = c.dropped;
    report.held_back = c.held_back;
    report.removed = c.default_rows_deleted;
    report.batches = static_cast<int>(c.dropped.size());
  } catch (...) {
    pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_unlock(hashtext($1))", lock_key);
    throw;
  }
  pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_unlock(hashtext($1))", lock_key);
  return report;
}

}  // namespace

RetentionReport run_retention(pqxx::connection& conn, const TableName& table,
                              const RetentionConfig& config) {
  const std::string lock_key = "outbox-cleanup:" + table.plain();
  if (const TableInfo info = inspect_table(conn, table); info.mode == TableMode::kLog) {
    if (config.archive) {
      throw std::invalid_argument(
          "a log-mode table cannot be archived row by row: its partitions are dropped whole");
    }
    return drop_partitions(conn, table, config.keep_sent, info.position_offset, lock_key);
  }
  RetentionReport report;
  pqxx::nontransaction session(conn);
  if (!session.exec_params("SELECT pg_try_advisory_lock(hashtext($1))", lock_key)[0][0]
           .as<bool>()) {
    return report;
  }
  report.ran = true;
  if (config.archive) {
    // A plain copy of the columns (LIKE without GENERATED makes shard an ordinary column).
    session.exec("CREATE TABLE IF NOT EXISTS " + config.archive->quoted() + " (LIKE " +
                 table.quoted() + ")");
    // An archive made before version 4 lacks the headers column that rows now have.
    session.exec("ALTER TABLE " + config.archive->quoted() +
                 " ADD COLUMN IF NOT EXISTS headers jsonb");
  }
  const std::string doomed =
      "SELECT id FROM " + table.quoted() + " WHERE status = " + sql(EventStatus::kSent) +
      " AND created_at < now() - $1 * interval '1 second' ORDER BY created_at "
      "LIMIT $2 FOR UPDATE SKIP LOCKED";
  const std::string sql = config.archive
                              ? "WITH moved AS (DELETE FROM " + table.quoted() + " WHERE id IN (" +
                                    doomed + ") RETURNING *) INSERT INTO " +
                                    config.archive->quoted() + " SELECT * FROM moved"
                              : "DELETE FROM " + table.quoted() + " WHERE id IN (" + doomed + ")";
  try {
    while (report.batches < config.max_batches) {
      // Each batch is its own short transaction (autocommit statement).
      auto r = session.exec_params(sql, static_cast<std::int64_t>(config.keep_sent.count()),
                                   config.batch_size);
      ++report.batches;
      report.removed += static_cast<std::int64_t>(r.affected_rows());
      if (r.affected_rows() < static_cast<std::size_t>(config.batch_size)) {
        break;
      }
      std::this_thread::sleep_for(config.pause);
    }
  } catch (...) {
    session.exec_params("SELECT pg_advisory_unlock(hashtext($1))", lock_key);
    throw;
  }
  session.exec_params("SELECT pg_advisory_unlock(hashtext($1))", lock_key);
  return report;
}

}  // namespace outbox
