#include "outbox/log_partitions.hpp"

#include <algorithm>

namespace outbox {
namespace {

// Partition DDL waits at most this long for its lock: while it waits, inserts queue
// behind it, so it gives up quickly and the caller tries again later.
constexpr const char* kLockTimeout = "SET LOCAL lock_timeout = '200ms'";

std::string partition_name(const TableName& table, std::uint64_t n) {
  return table.quoted_with_suffix("_p" + std::to_string(n));
}

}  // namespace

std::string position_bound_sql(const std::string& bound, std::int64_t offset) {
  const std::string xid = "pg_snapshot_" + bound + "(pg_current_snapshot())";
  return offset == 0 ? xid
                     : "(" + xid + "::text::bigint + " + std::to_string(offset) + ")::text::xid8";
}

std::vector<std::string> ensure_log_partitions(pqxx::dbtransaction& tx, const TableName& table,
                                               std::int64_t partition_xids,
                                               std::int64_t position_offset) {
  const auto size = static_cast<std::uint64_t>(partition_xids);
  // xmax: the next transaction id to be assigned (reading it assigns none).
  const auto next =
      tx.exec("SELECT " + position_bound_sql("xmax", position_offset) + "::text")[0][0]
          .as<std::uint64_t>();
  std::vector<std::string> created;
  for (std::uint64_t n = next / size; n <= next / size + 1; ++n) {
    const std::string name = partition_name(table, n);
    if (tx.exec_params("SELECT to_regclass($1) IS NOT NULL", name)[0][0].as<bool>()) {
      continue;
    }
    // A subtransaction: rows already in the default partition for this range make the
    // attach fail, and that must not undo the rest.
    pqxx::subtransaction sub(tx, "partition");
    try {
      sub.exec(kLockTimeout);
      // Made apart and attached: ATTACH locks the parent in SHARE UPDATE EXCLUSIVE
      // mode, which the services' inserts do not wait for.
      sub.exec("CREATE TABLE " + name + " (LIKE " + table.quoted() +
               " INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS)");
      sub.exec("ALTER TABLE " + table.quoted() + " ATTACH PARTITION " + name +
               " FOR VALUES FROM ('" + std::to_string(n * size) + "') TO ('" +
               std::to_string((n + 1) * size) + "')");
      sub.commit();
      created.push_back(name);
    } catch (const pqxx::sql_error&) {
      sub.abort();
    }
  }
  return created;
}

std::vector<LogPartition> list_log_partitions(pqxx::transaction_base& tx, const TableName& table) {
  auto rows = tx.exec_params(
      "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c "
      "ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass($1)",
      table.quoted());
  std::vector<LogPartition> parts;
  for (const auto& r : rows) {
    // "FOR VALUES FROM ('100') TO ('200')" or "DEFAULT".
    const std::string bound = r[1].as<std::string>();
    const auto a = bound.find("('");
    const auto b = bound.find("('", a == std::string::npos ? 0 : a + 2);
    if (a == std::string::npos || b == std::string::npos) {
      continue;
    }
    LogPartition p;
    p.name = r[0].as<std::string>();
    p.from = std::stoull(bound.substr(a + 2));
    p.to = std::stoull(bound.substr(b + 2));
    parts.push_back(std::move(p));
  }
  std::sort(parts.begin(), parts.end(),
            [](const LogPartition& x, const LogPartition& y) { return x.from < y.from; });
  return parts;
}

PartitionCleanup drop_passed_partitions(pqxx::connection& conn, const TableName& table,
                                        std::chrono::seconds keep, std::int64_t position_offset) {
  PartitionCleanup report;
  const auto keep_s = static_cast<std::int64_t>(keep.count());
  // Everything below `passed` is published (or parked in _retry) by every shard, and
  // no transaction below it is still running.
  const std::string passed_sql = "SELECT least(min(xid), " +
                                 position_bound_sql("xmin", position_offset) + ")::text FROM " +
                                 table.quoted_with_suffix("_progress");
  std::vector<LogPartition> parts;
  std::uint64_t passed = 0;
  {
    pqxx::nontransaction tx(conn);
    parts = list_log_partitions(tx, table);
    passed = tx.exec(passed_sql)[0][0].as<std::uint64_t>();
  }
  for (const LogPartition& p : parts) {
    if (p.to > passed) {
      report.held_back = p.name + " holds transactions the relays have not passed yet";
      break;
    }
    const std::string q = "\"" + table.schema() + "\".\"" + p.name + "\"";
    try {
      pqxx::work tx(conn);
      tx.exec(kLockTimeout);
      if (tx.exec_params("SELECT EXISTS (SELECT 1 FROM " + q +
                             " WHERE created_at >= now() - $1 * interval '1 second')",
                         keep_s)[0][0]
              .as<bool>()) {
        report.held_back = p.name + " has rows newer than the retention";
        break;
      }
      tx.exec("DROP TABLE " + q);
      tx.commit();
    } catch (const pqxx::sql_error& e) {
      // Most likely the lock timeout: a transaction on the table; the next run retries.
      report.held_back = "dropping " + p.name + " failed (" + e.what() + "); the next run retries";
      break;
    }
    report.dropped.push_back(p.name);
  }
  // The default partition's stragglers, row by row (rare: see the header).
  pqxx::nontransaction tx(conn);
  report.default_rows_deleted = static_cast<std::int64_t>(
      tx.exec_params("DELETE FROM " + table.quoted_with_suffix("_pdefault") + " WHERE xid < (" +
                         passed_sql + ")::xid8 AND created_at < now() - $1 * interval '1 second'",
                     keep_s)
          .affected_rows());
  return report;
}

}  // namespace outbox
