#pragma once

#include <pqxx/pqxx>

#include <string>
#include <vector>

#include "outbox/table.hpp"

namespace outbox {

// The end of an outbox table's life with the operator (spec.deletionPolicy: Drop): removes
// what `migrate` and `migrate --adopt` created for `table`, as outbox_meta records it, and
// nothing else.
//
// - A table made by migrate: the table with its rows (in log mode its partitions, the
//   "_status" view, "_progress" and "_retry"), "_waiting", the "_notify", "_enqueue" and
//   "_position" functions and its row in outbox_meta.
// - An adopted table: its "_relay_copy" trigger and function, then "<table>_relay" as
//   above, then the adoption's row. The adopted table itself, its rows, columns and other
//   triggers are never touched.
// - outbox_meta itself once no table of its schema is recorded in it.
//
// One transaction: all of it goes, or nothing. Idempotent: a table outbox_meta does not
// record (dropped before, or never migrated) drops nothing. Nothing is dropped with
// CASCADE: an object of someone else's that depends on one of these (a view over the
// outbox table) fails the drop, naming it. Locks: DROP TABLE and DROP TRIGGER take ACCESS
// EXCLUSIVE on the tables they name, under `lock_timeout_ms`, so a long transaction makes the
// drop fail rather than queue the services' writes behind it.
struct DropOptions {
  // The caller was told the table is adopted (spec.database.columns): a table outbox_meta
  // records as made by migrate is then refused rather than dropped, as the caller believes
  // it belongs to someone else.
  bool adopted = false;
  int lock_timeout_ms = 10'000;
};

struct DropResult {
  std::vector<std::string> dropped;  // one line per object removed
};

// Throws SchemaError (nothing dropped) for a refusal, a dependent object or a lock timeout.
DropResult drop(pqxx::connection& conn, const TableName& table, const DropOptions& options = {});

}  // namespace outbox
