#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "http/health_server.hpp"
#include "outbox/column_map.hpp"
#include "outbox/operations.hpp"
#include "outbox/table.hpp"

// GET /inspect on the relay's HTTP port: what `outbox-operator inspect` prints, for an on-call
// who may reach the pod through the API server's pod proxy (get pods/proxy) but may neither
// exec into it nor read the DSN's Secret. Read-only by construction: the server answers GET
// and HEAD only, and the figures come from one READ ONLY transaction. Cheap by construction:
// one query set at a time (a slow route of the server), each statement bounded by a
// statement_timeout, `top` capped, and an answer reused for `fresh` (so a client that polls
// costs the database one inspection per `fresh` whatever its rate). No payload or header
// column is read; the DSN is never in an answer (a failure is reported without it).
namespace outbox::cli {

struct InspectEndpointOptions {
  std::function<std::string()> dsn;  // read at each query: a rotated Secret file is picked up
  TableName table = TableName::parse("public.outbox_event");
  std::optional<ColumnMap> columns;
  std::chrono::milliseconds fresh{5'000};
  std::chrono::milliseconds statement_timeout{5'000};
  int max_top = 100;
};

class InspectEndpoint {
 public:
  static constexpr int kDefaultTop = 5;

  explicit InspectEndpoint(InspectEndpointOptions options);

  // ?top=N (1..max_top, default 5) and ?format=json|text (default text).
  http::Response handle(const http::Request& request);
  // The database inspections run so far (each answer not served from the cache).
  int queries() const;

 private:
  // `dsn`: the DSN it connected with (read only when the cache cannot answer), for the
  // redaction of a failure.
  Inspection inspection(int top, std::string& dsn);

  InspectEndpointOptions options_;
  mutable std::mutex mu_;
  std::map<int, std::pair<std::chrono::steady_clock::time_point, Inspection>> cache_;
  int queries_ = 0;
};

}  // namespace outbox::cli
