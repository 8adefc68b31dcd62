#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outbox/store.hpp"
#include "outbox/table.hpp"

namespace outbox {

// On-call views and repairs behind `inspect`, `requeue` and `replay`.

struct Inspection {
  std::int64_t pending = 0, sent = 0, failed = 0;
  double oldest_pending_seconds = 0;
  struct TypeCount {
    std::string biz_type;
    std::int64_t pending = 0, failed = 0;
  };
  std::vector<TypeCount> worst_biz_types;  // most pending + failed first
  struct Failure {
    std::string event_id, biz_type, biz_id, last_error, updated_at;
    int retry_count = 0;
  };
  std::vector<Failure> last_errors;  // newest first, retrying or FAILED
  struct BlockedKey {
    std::string biz_id, next_retry_time;
    std::int64_t waiting = 0;  // events of the key held behind its retrying head
  };
  std::vector<BlockedKey> blocked_keys;
  TableHealth health;

  std::string text() const;
  std::string json() const;
};

// Reads only: its figures come from one READ ONLY transaction (a write in it is refused by
// PostgreSQL) and the statistics views. `statement_timeout`, when set, bounds each of its
// statements (the relay's /inspect endpoint sets one; the CLI waits as long as it takes).
Inspection inspect(pqxx::connection& conn, const TableName& table, int top = 5,
                   std::optional<std::chrono::milliseconds> statement_timeout = std::nullopt);

// Which rows a requeue or replay touches. At least one selector must be set,
// or `all` alone; all that are set must hold. Times are RFC 3339 or anything
// PostgreSQL's timestamptz input accepts; ids are checked before any SQL runs.
struct Selection {
  std::vector<std::string> event_ids;  // UUIDs
  std::optional<std::string> biz_type;
  std::optional<std::string> created_from, created_to;  // [from, to)
  std::optional<std::int64_t> id_from, id_to;           // [from, to]
  // Every row in the state the change starts from (requeue --all: every FAILED event), said
  // on purpose rather than implied by a missing selector.
  bool all = false;

  // Whether no selector is set (`all` aside).
  bool empty() const;
  // Throws std::invalid_argument saying what is wrong.
  void validate() const;
};

struct ChangeReport {
  bool dry_run = false;
  std::vector<std::string> event_ids;  // exactly the rows changed (or that would be)
  // "requeued 3 event(s): ..." or "dry run: would requeue 3 event(s): ...".
  std::string text(const std::string& verb, const std::string& verb_past) const;
};

// FAILED -> pending with a fresh attempt budget.
ChangeReport requeue_failed(pqxx::connection& conn, const TableName& table, const Selection& s,
                            bool dry_run);
// Sent -> pending, so the relay publishes them again (consumers dedupe on event_id).
ChangeReport replay_sent(pqxx::connection& conn, const TableName& table, const Selection& s,
                         bool dry_run);

}  // namespace outbox
