// Unit: no database (the probe goes to a port where nothing listens).
#include "outbox/connection.hpp"

#include <stdexcept>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

namespace outbox {
namespace {

TEST(ConnectionFailure, SaysWhyReconnectingFailsInsteadOfTheClientEncoding) {
  const std::string why = connection_failure("host=127.0.0.1 port=1 user=app password=s3cret",
                                             "Could not obtain client encoding: not connected.");
  EXPECT_EQ(why.find("client encoding"), std::string::npos) << why;
  EXPECT_NE(why.find("the session was lost and reconnecting fails: connection to server at "
                     "\"127.0.0.1\", port 1 failed: Connection refused"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  EXPECT_EQ(why.find("s3cret"), std::string::npos) << why;
}

TEST(ConnectionFailure, KeepsAnInformativeMessageOnOneLine) {
  EXPECT_EQ(connection_failure("host=db",
                               "connection to server at \"db\" failed: FATAL:  password "
                               "authentication failed for user \"app\"\n"),
            "connection to server at \"db\" failed: FATAL: password authentication failed for "
            "user \"app\"");
  EXPECT_EQ(one_line("refused\n\tIs the server running?\n"), "refused Is the server running?");
}

// libpq quotes the part of a connection string it cannot parse: of a URI whose password holds a
// bare %, the password. The reason the relay gives (on /readyz, in status and its log) and the
// one with_tls() throws keep what libpq says, without it.
TEST(ConnectionFailure, ADsnLibpqCannotParseIsExplainedWithoutItsPassword) {
  const std::string dsn = "postgresql://outbox:Hunter2%zzSecret@127.0.0.1:1/outbox";
  std::string said;
  try {
    pqxx::connection conn(dsn);
  } catch (const pqxx::broken_connection& e) {
    said = e.what();
  }
  ASSERT_NE(said.find("Hunter2%zzSecret"), std::string::npos) << said;  // what libpq says
  const std::string why = connection_failure(dsn, said);
  EXPECT_EQ(why, "invalid percent-encoded token: \"***\"");
  try {
    with_tls(dsn, DatabaseTls{"verify-full", "/ca.crt", "", ""});
    ADD_FAILURE() << "a DSN libpq cannot parse was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "the database connection string cannot be parsed: invalid percent-encoded "
                 "token: \"***\"");
  }
  // The key=value form, a password with a space: libpq quotes its second word.
  const std::string spaced = "host=127.0.0.1 port=1 password=Hunter2 zzSecret dbname=outbox";
  const std::string spaced_why = connection_failure(spaced, "missing \"=\" after \"zzSecret\"");
  EXPECT_EQ(spaced_why, "missing \"=\" after \"***\"");
}

}  // namespace
}  // namespace outbox
