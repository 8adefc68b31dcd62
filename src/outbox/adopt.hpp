#pragma once

#include <pqxx/pqxx>

#include "outbox/column_map.hpp"
#include "outbox/schema.hpp"
#include "outbox/table.hpp"

namespace outbox {

// Adopting a table the relay did not create (a Debezium Outbox Event Router
// table, say) changes neither the table nor the services that write it. The
// relay keeps its own table beside it, "<table>_relay", made by migrate in the
// mode asked for, and one AFTER INSERT trigger on the adopted table copies each
// new row into it in the inserting transaction: the copy commits or rolls back
// with the event, and a service that deletes its row at once (as Debezium
// allows) loses nothing. Rows inserted before adoption are not copied.
//
// The copy function is SECURITY DEFINER with a fixed search_path, so the
// services' roles need no rights on the relay's table. It never fails the
// service's insert for a value the relay cannot use: a NULL type or key becomes
// '', a NULL payload the JSON null (or empty text or bytes), a NULL time now().
// The relay's copy keeps the payload's kind of type: jsonb, text or bytea.
//
// Locks: the relay's table and function are new objects; creating the trigger
// takes SHARE ROW EXCLUSIVE on the adopted table (writes wait, reads do not),
// once, under a lock_timeout so that a long transaction makes adopt fail rather
// than queue every writer behind it. A repeated adopt replaces only the function.

// The relay's table for an adopted table: "<table>_relay".
TableName relay_table_for(const TableName& adopted);

struct AdoptOptions {
  ColumnMap columns;
  MigrateOptions relay_table;  // shards, mode, partition size of "<table>_relay"
  int lock_timeout_ms = 10'000;
};

// Checks the adopted table's columns against `columns` (SchemaError naming the
// role and column that is missing or of a type the copy cannot take), migrates
// "<table>_relay", (re)creates the copy function, creates the trigger if
// absent and records the adoption in outbox_meta. Idempotent.
MigrationResult adopt(pqxx::connection& conn, const TableName& table, const AdoptOptions& options);

// The adopted table still has the columns `columns` names, of usable types, and
// the copy trigger; throws SchemaError naming what is wrong and what to run.
void check_adopted(pqxx::transaction_base& tx, const TableName& table, const ColumnMap& columns);

}  // namespace outbox
