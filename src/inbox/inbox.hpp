#pragma once

#include <pqxx/pqxx>

#include <string>

#include "outbox/table.hpp"

namespace outbox::inbox {

// Consumer-side dedupe: a consumer records each event_id it applies in
// an inbox table, under a unique key, inside the same transaction as the business
// effect. A redelivered event finds its id already there and is skipped, so
// at-least-once delivery yields the effect exactly once.
//
//   pqxx::work tx(conn);
//   if (inbox.record(tx, event_id)) { apply_business_effect(tx); }
//   tx.commit();   // then commit the Kafka offset
class Inbox {
 public:
  // `consumer` names the consuming service: two services may each apply one event.
  Inbox(TableName table, std::string consumer);

  // Creates the inbox table if missing (idempotent).
  void migrate(pqxx::connection& conn) const;

  // True when event_id is new for this consumer (and is now recorded in `tx`);
  // false for a duplicate. Throws std::invalid_argument for a malformed id.
  bool record(pqxx::transaction_base& tx, const std::string& event_id) const;

 private:
  TableName table_;
  std::string consumer_;
};

}  // namespace outbox::inbox
