#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <string>

#include "outbox/schema.hpp"
#include "outbox/table.hpp"

namespace outbox::inbox {

// The inbox schema version this binary writes (recorded in "<schema>"."inbox_meta").
inline constexpr int kInboxSchemaVersion = 1;

// Creates or upgrades an inbox: the table of recorded (consumer, event_id), the
// per-(consumer, key) high-water table "<inbox>_keys", and the functions any language
// calls inside its own transaction (docs/consuming.md):
//   <inbox>_record(consumer text, event_id uuid) returns boolean
//   <inbox>_apply(consumer text, event_id uuid, key text, seq bigint) returns text
// Idempotent and versioned; concurrent calls are serialised with an advisory lock. A
// table made by an older Inbox::migrate (same columns, no meta row) is taken over.
MigrationResult migrate_inbox(pqxx::connection& conn, const TableName& inbox);

struct InboxCleanup {
  bool ran = false;          // false: another cleanup of this inbox held the lock
  std::int64_t records = 0;  // (consumer, event_id) rows deleted
  std::int64_t keys = 0;     // high-water rows deleted
  int batches = 0;
};

// Deletes records processed more than `keep` ago, and high-water marks not moved for
// that long, `batch_size` rows per short transaction. A redelivery older than `keep`
// would then be applied again: keep must exceed how late a message can come back.
InboxCleanup cleanup_inbox(pqxx::connection& conn, const TableName& inbox,
                           std::chrono::seconds keep, int batch_size = 1000);

// Consumer-side dedupe and the staleness guard: a consumer records each
// event_id it applies in the inbox, under a unique key, inside the same transaction as
// the business effect. A redelivered event finds its id already there and is skipped,
// so at-least-once delivery yields the effect exactly once; an event whose per-key
// sequence (the relay's "outbox.seq" header) is below one already applied for its key
// is reported stale and must not be applied either.
//
//   pqxx::work tx(conn);
//   if (inbox.apply(tx, event_id, key, seq) == Inbox::Outcome::kNew) { apply_effect(tx); }
//   tx.commit();   // then commit the Kafka offset
//
// A thin wrapper of the SQL functions migrate_inbox creates.
class Inbox {
 public:
  // `consumer` names the consuming service: two services may each apply one event.
  // Throws std::invalid_argument for an empty one.
  Inbox(TableName table, std::string consumer);

  // migrate_inbox on this inbox's table.
  void migrate(pqxx::connection& conn) const;

  // True when event_id is new for this consumer (and is now recorded in `tx`);
  // false for a duplicate. Throws std::invalid_argument for a malformed id.
  bool record(pqxx::transaction_base& tx, const std::string& event_id) const;

  enum class Outcome { kNew, kDuplicate, kStale };
  // Records event_id and raises the key's high-water mark to `seq` in `tx`. kNew:
  // apply the effect; kDuplicate: already recorded; kStale: a later event of this key
  // was applied (the event is recorded all the same, so a redelivery is a duplicate).
  // Throws std::invalid_argument for a malformed id.
  Outcome apply(pqxx::transaction_base& tx, const std::string& event_id, const std::string& key,
                std::int64_t seq) const;

  const TableName& table() const { return table_; }

 private:
  TableName table_;
  std::string consumer_;
};

std::string outcome_name(Inbox::Outcome outcome);  // "new", "duplicate" or "stale"

}  // namespace outbox::inbox
