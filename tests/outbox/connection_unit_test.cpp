// Unit: no database (the probe goes to a port where nothing listens).
#include "outbox/connection.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace outbox
