#pragma once

#include <pqxx/pqxx>

#include <cstdint>
#include <optional>
#include <string>

#include "inbox/inbox.hpp"

namespace example {

// The points service: an ORDER_PAID event adds points to the buyer (one
// point per 10 units paid). Each event is applied inside one transaction that also
// records its event_id in the inbox, so a redelivered event changes nothing.
class PointsService {
 public:
  explicit PointsService(std::string dsn);

  void migrate();

  enum class Outcome { kApplied, kDuplicate, kStale, kIgnored };
  // Applies one consumed message. Throws std::invalid_argument for a malformed
  // payload (the caller parks it; it must not be retried forever). With the message's
  // key and its outbox.seq header, an event older than one of its key already applied
  // is refused (kStale): a replay or a redelivery after a rebalance changes nothing.
  Outcome handle(const std::string& event_id, const std::string& biz_type,
                 const std::string& payload, const std::string& key = "",
                 std::optional<std::int64_t> seq = std::nullopt);

  std::int64_t points(const std::string& user);

 private:
  pqxx::connection conn_;
  outbox::inbox::Inbox inbox_;
};

}  // namespace example
