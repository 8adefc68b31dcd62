// order-service: the producer side. Each order is paid in one local
// transaction that updates the order row and enqueues ORDER_PAID in the outbox
// (update first, then insert: the row lock orders events of one order by commit).
// Every --rollback-every-th transaction fails after both writes and rolls back, as a
// business exception would: its event must never be published.
// Each event carries the W3C trace context of the request that paid the order in
// the outbox's headers column; the relay copies it into Kafka headers, so the
// consumer's span joins the same trace (docs/relay.md, "Headers and tracing").
#include <unistd.h>

#include <iostream>
#include <random>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/store.hpp"

int main(int argc, char** argv) {
  CLI::App app{"order-service: commits paid orders with their outbox events"};
  std::string dsn, table = "public.outbox_event";
  int orders = 100, rollback_every = 5, users = 10;
  app.add_option("--dsn", dsn, "PostgreSQL connection string")->envname("ORDERS_DSN")->required();
  app.add_option("--table", table, "outbox table")->capture_default_str();
  app.add_option("--orders", orders, "orders to pay")->capture_default_str();
  app.add_option("--rollback-every", rollback_every, "roll back every n-th transaction (0: never)")
      ->capture_default_str();
  app.add_option("--users", users, "distinct buyers")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto outbox_table = outbox::TableName::parse(table);
  pqxx::connection conn(dsn);
  {
    pqxx::work tx(conn);
    tx.exec(
        "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, user_id text NOT NULL, "
        "amount bigint NOT NULL, status text NOT NULL)");
    tx.commit();
  }
  std::mt19937_64 ids(std::random_device{}());
  // What a tracing SDK's propagator writes: version-traceid-parentid-flags.
  auto traceparent = [&ids] {
    char text[56];
    std::snprintf(text, sizeof text, "00-%016llx%016llx-%016llx-01",
                  static_cast<unsigned long long>(ids()), static_cast<unsigned long long>(ids()),
                  static_cast<unsigned long long>(ids()));
    return std::string(text);
  };
  int committed = 0, rolled_back = 0;
  long long committed_amount = 0;
  for (int i = 1; i <= orders; ++i) {
    std::string id = "order-" + std::to_string(i) + "-" + std::to_string(::getpid());
    std::string user = "user-" + std::to_string(i % users);
    long long amount = 100 + (i % 7) * 10;
    pqxx::work tx(conn);
    tx.exec_params("INSERT INTO orders VALUES ($1, $2, $3, 'CREATED')", id, user, amount);
    tx.exec_params("UPDATE orders SET status = 'PAID' WHERE id = $1", id);
    outbox::enqueue(tx, outbox_table, "ORDER_PAID", id,
                    nlohmann::json{{"order", id}, {"user", user}, {"amount", amount}}.dump(),
                    nlohmann::json{{"traceparent", traceparent()}}.dump());
    if (rollback_every > 0 && i % rollback_every == 0) {
      tx.abort();  // the business step after the writes failed
      ++rolled_back;
      continue;
    }
    tx.commit();
    ++committed;
    committed_amount += amount;
  }
  std::cout << "order-service: committed " << committed << ", rolled back " << rolled_back
            << R"(, {"committed":)" << committed << R"(,"rolledBack":)" << rolled_back
            << R"(,"committedAmount":)" << committed_amount << "}" << std::endl;
  return 0;
}
