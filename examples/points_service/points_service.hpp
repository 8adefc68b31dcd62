#pragma once

#include <pqxx/pqxx>

#include <cstdint>
#include <string>

#include "inbox/inbox.hpp"

namespace example {

// The seed's points service: an ORDER_PAID event adds points to the buyer (one
// point per 10 units paid). Each event is applied inside one transaction that also
// records its event_id in the inbox, so a redelivered event changes nothing.
class PointsService {
 public:
  explicit PointsService(std::string dsn);

  void migrate();

  enum class Outcome { kApplied, kDuplicate, kIgnored };
  // Applies one consumed message. Throws std::invalid_argument for a malformed
  // payload (the caller parks it; it must not be retried forever).
  Outcome handle(const std::string& event_id, const std::string& biz_type,
                 const std::string& payload);

  std::int64_t points(const std::string& user);

 private:
  pqxx::connection conn_;
  outbox::inbox::Inbox inbox_;
};

}  // namespace example
