#include "outbox/connection.hpp"

#include <libpq-fe.h>

#include <map>
#include <memory>
#include <stdexcept>

#include "common/redact.hpp"

namespace outbox {
namespace {

// libpq's `message` about `dsn` as one line without the DSN's secrets: libpq quotes the part of
// a connection string it cannot parse, and that part may be the password.
std::string without_secrets(const std::string& dsn, const std::string& message) {
  Secrets secrets;
  secrets.add_dsn(dsn);
  return redact(one_line(message), secrets);
}

}  // namespace

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

std::string with_tls(const std::string& dsn, const DatabaseTls& tls) {
  if (tls.empty()) {
    return dsn;
  }
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(
      PQconninfoParse(dsn.c_str(), &error), &PQconninfoFree);
  if (!options) {
    std::string why = error != nullptr ? without_secrets(dsn, error) : "out of memory";
    PQfreemem(error);
    throw std::invalid_argument("the database connection string cannot be parsed: " + why);
  }
  const std::map<std::string, std::string> overrides = {{"sslmode", tls.sslmode},
                                                        {"sslrootcert", tls.ca_file},
                                                        {"sslcert", tls.cert_file},
                                                        {"sslkey", tls.key_file}};
  std::string out;
  auto add = [&out](const std::string& key, const std::string& value) {
    std::string quoted;
    for (char c : value) {
      if (c == '\\' || c == '\'') {
        quoted.push_back('\\');
      }
      quoted.push_back(c);
    }
    out += (out.empty() ? "" : " ") + key + "='" + quoted + "'";
  };
  for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    const auto over = overrides.find(o->keyword);
    if (over != overrides.end() && !over->second.empty()) {
      continue;
    }
    if (o->val != nullptr) {
      add(o->keyword, o->val);
    }
  }
  for (const auto& [key, value] : overrides) {
    if (!value.empty()) {
      add(key, value);
    }
  }
  return out;
}

bool is_tls_refusal(const std::string& message) {
  // Not any "SSL": a TLS session the server dropped ("SSL SYSCALL error: EOF detected", a
  // restart or failover) is an outage, not a refusal.
  for (const char* sign : {"certificate", "does not support SSL"}) {
    if (message.find(sign) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string sslmode_of(const std::string& dsn) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(
      PQconninfoParse(dsn.c_str(), &error), &PQconninfoFree);
  PQfreemem(error);
  for (const PQconninfoOption* o = options.get(); o != nullptr && o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "sslmode" && o->val != nullptr && *o->val != '\0') {
      return o->val;
    }
  }
  return "prefer";
}

std::string tls_verification(const std::string& sslmode, bool ssl_in_use) {
  if (!ssl_in_use) {
    return "off";
  }
  if (sslmode == "verify-full" || sslmode == "verify-ca") {
    return sslmode;
  }
  return "unverified";
}

std::string connection_failure(const std::string& dsn, const std::string& pqxx_message) {
  // libpqxx's words for "the session is gone" when it has no reason to give.
  const bool says_nothing = pqxx_message.find("Could not obtain client encoding") == 0 ||
                            pqxx_message.find("Connection to database failed") == 0;
  if (!says_nothing) {
    return without_secrets(dsn, pqxx_message);
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
         without_secrets(dsn, probe ? PQerrorMessage(probe.get()) : "out of memory");
}

}  // namespace outbox
