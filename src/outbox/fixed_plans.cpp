#include "outbox/fixed_plans.hpp"

#include <functional>

namespace outbox {

void use_fixed_plans(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec(
      "SET enable_sort = off; SET enable_bitmapscan = off; SET enable_seqscan = off; "
      "SET jit = off; SET plan_cache_mode = force_generic_plan");
}

std::string prepared(pqxx::connection& conn, const std::string& sql) {
  const std::string name = "outbox_" + std::to_string(std::hash<std::string>{}(sql));
  conn.prepare(name, sql);
  return name;
}

}  // namespace outbox
