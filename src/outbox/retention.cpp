#include "outbox/retention.hpp"

#include "outbox/event_status.hpp"

#include <thread>

namespace outbox {

RetentionReport run_retention(pqxx::connection& conn, const TableName& table,
                              const RetentionConfig& config) {
  RetentionReport report;
  pqxx::nontransaction session(conn);
  const std::string lock_key = "outbox-cleanup:" + table.plain();
  if (!session.exec_params("SELECT pg_try_advisory_lock(hashtext($1))", lock_key)[0][0]
           .as<bool>()) {
    return report;
  }
  report.ran = true;
  if (config.archive) {
    // A plain copy of the columns (LIKE without GENERATED makes shard an ordinary column).
    session.exec("CREATE TABLE IF NOT EXISTS " + config.archive->quoted() + " (LIKE " +
                 table.quoted() + ")");
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
