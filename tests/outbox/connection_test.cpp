// Integration: needs PostgreSQL from scripts/testbed/up.sh.
#include <pqxx/pqxx>

#include <gtest/gtest.h>

#include "outbox/connection.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

// A session the server ends (restart, failover, pg_terminate_backend) reaches
// libpqxx 6 as "Could not obtain client encoding"; the line the relay logs says
// what happened instead.
TEST(ConnectionFailure, ASessionTheServerEndedIsNamedAsSuch) {
  const std::string dsn = testbed::postgres_dsn();
  pqxx::connection victim(dsn);
  pqxx::connection killer(dsn);
  {
    pqxx::nontransaction tx(killer);
    tx.exec("SELECT pg_terminate_backend(" + std::to_string(victim.backendpid()) + ")");
  }
  std::string message;
  try {
    pqxx::nontransaction tx(victim);
    tx.exec("SELECT 1");
    FAIL() << "the terminated session still answered";
  } catch (const pqxx::broken_connection& e) {
    message = e.what();
  }
  const std::string why = connection_failure(dsn, message);
  EXPECT_EQ(why,
            "the server closed the session (a restart, a failover or pg_terminate_backend); "
            "it accepts connections again")
      << "pqxx said: " << message;
}

}  // namespace
}  // namespace outbox
