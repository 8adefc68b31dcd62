#include "cli/inspect_endpoint.hpp"

#include <stdexcept>

#include <pqxx/pqxx>

#include "common/redact.hpp"
#include "outbox/connection.hpp"
#include "outbox/schema.hpp"

namespace outbox::cli {
namespace {

http::Response bad_request(const std::string& why) {
  return {400, "text/plain; charset=utf-8", why + "\n"};
}

}  // namespace

InspectEndpoint::InspectEndpoint(InspectEndpointOptions options) : options_(std::move(options)) {}

int InspectEndpoint::queries() const {
  std::lock_guard lock(mu_);
  return queries_;
}

http::Response InspectEndpoint::handle(const http::Request& request) {
  int top = kDefaultTop;
  bool json = false;
  for (const auto& [name, value] : request.query) {
    if (name == "top") {
      std::size_t used = 0;
      try {
        top = std::stoi(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size() || top < 1 || top > options_.max_top) {
        return bad_request("top must be a whole number from 1 to " +
                           std::to_string(options_.max_top));
      }
    } else if (name == "format") {
      if (value != "json" && value != "text") {
        return bad_request("format must be json or text");
      }
      json = value == "json";
    } else {
      return bad_request("unknown parameter \"" + name.substr(0, 40) + "\" (top, format)");
    }
  }
  Inspection in;
  std::string dsn;
  try {
    in = inspection(top, dsn);
  } catch (const pqxx::broken_connection& e) {
    // Never the DSN: connection_failure() says why without its secrets.
    return {503, "text/plain; charset=utf-8",
            "database unavailable: " + connection_failure(dsn, e.what()) + "\n"};
  } catch (const std::exception& e) {
    Secrets secrets;
    secrets.add_dsn(dsn);
    return {503, "text/plain; charset=utf-8",
            "inspect failed: " + redact(one_line(e.what()), secrets) + "\n"};
  }
  if (json) {
    return {200, "application/json", in.json() + "\n"};
  }
  return {200, "text/plain; charset=utf-8", in.text()};
}

Inspection InspectEndpoint::inspection(int top, std::string& dsn) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(top); it != cache_.end() && now - it->second.first < options_.fresh) {
      return it->second.second;
    }
  }
  // A connection of its own for the moment of the query: the relay's sessions hold its shard
  // locks and are never lent out, and an idle endpoint holds no database connection.
  dsn = options_.dsn();
  pqxx::connection conn(dsn);
  // A missing table says "run migrate first", as the relay does; an adopted one: its copy.
  const TableName table =
      inspect_table(conn, options_.table, {options_.columns}).relay_table(options_.table);
  Inspection in = inspect(conn, table, top, options_.statement_timeout);
  std::lock_guard lock(mu_);
  ++queries_;
  // Only the latest `top` asked for is kept: a client walking through many values keeps one.
  cache_.clear();
  cache_[top] = {std::chrono::steady_clock::now(), in};
  return in;
}

}  // namespace outbox::cli
