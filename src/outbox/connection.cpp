#include "outbox/connection.hpp"

#include <libpq-fe.h>

#include <memory>

namespace outbox {

std::string one_line(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) {
      out.push_back(' ');
      space = false;
    }
    out.push_back(c);
  }
  return out;
}

std::string connection_failure(const std::string& dsn, const std::string& pqxx_message) {
  // libpqxx's words for "the session is gone" when it has no reason to give.
  const bool says_nothing = pqxx_message.find("Could not obtain client encoding") == 0 ||
                            pqxx_message.find("Connection to database failed") == 0;
  if (!says_nothing) {
    return one_line(pqxx_message);
  }
  // The DSN first, then a bound on the wait: in PQconnectdbParams the last
  // value of a repeated keyword wins.
  const char* const keywords[] = {"dbname", "connect_timeout", nullptr};
  const char* const values[] = {dsn.c_str(), "5", nullptr};
  std::unique_ptr<PGconn, decltype(&PQfinish)> probe(PQconnectdbParams(keywords, values, 1),
                                                     &PQfinish);
  if (probe && PQstatus(probe.get()) == CONNECTION_OK) {
    return "the server closed the session (a restart, a failover or pg_terminate_backend); "
           "it accepts connections again";
  }
  return "the session was lost and reconnecting fails: " +
         one_line(probe ? PQerrorMessage(probe.get()) : "out of memory");
}

}  // namespace outbox
