#include "outbox/drop.hpp"

#include <optional>

#include "outbox/schema.hpp"

namespace outbox {
namespace {

bool exists(pqxx::transaction_base& tx, const std::string& quoted_name) {
  return tx.exec_params1("SELECT to_regclass($1) IS NOT NULL", quoted_name)[0].as<bool>();
}

// The row outbox_meta holds for `table`: nullopt when it holds none; else its adopted_into
// ("" for a table made by migrate). Through to_jsonb: an older meta table lacks the column.
std::optional<std::string> recorded(pqxx::transaction_base& tx, const TableName& table) {
  if (!exists(tx, outbox_meta(table))) {
    return std::nullopt;
  }
  const auto r = tx.exec_params("SELECT COALESCE(to_jsonb(t)->>'adopted_into', '') FROM " +
                                    outbox_meta(table) + " t WHERE table_name = $1",
                                table.table());
  if (r.empty()) {
    return std::nullopt;
  }
  return r[0][0].as<std::string>();
}

// Every overload of the functions named `<table><suffix>` in the table's schema, as
// regprocedure prints them (quoted, with their argument types): the enqueue function has two,
// and its payload type is the table's.
void drop_functions(pqxx::transaction_base& tx, const TableName& table,
                    const std::vector<std::string>& suffixes, DropResult& result) {
  for (const std::string& suffix : suffixes) {
    const auto rows = tx.exec_params(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = "
        "p.pronamespace WHERE n.nspname = $1 AND p.proname = $2 ORDER BY 1",
        table.schema(), table.table() + suffix);
    for (const auto& row : rows) {
      const std::string signature = row[0].as<std::string>();
      tx.exec("DROP FUNCTION IF EXISTS " + signature);
      result.dropped.push_back("function " + signature);
    }
  }
}

// `kind`: "view" or "table", as DROP names it.
void drop_relation(pqxx::transaction_base& tx, const std::string& kind, const std::string& quoted,
                   const std::string& plain, DropResult& result) {
  if (exists(tx, quoted)) {
    tx.exec("DROP " + kind + " " + quoted);
    result.dropped.push_back(kind + " " + plain);
  }
}

// A table migrate made, with everything migrate made for it. The table goes before its
// functions: its trigger and the log-mode column default use them.
void drop_made_table(pqxx::transaction_base& tx, const TableName& t, DropResult& result) {
  const std::string name = t.plain();
  drop_relation(tx, "view", t.quoted_with_suffix("_status"), name + "_status", result);
  drop_relation(tx, "table", t.quoted(), name, result);
  for (const char* suffix : {"_progress", "_retry", "_waiting"}) {
    drop_relation(tx, "table", t.quoted_with_suffix(suffix), name + suffix, result);
  }
  drop_functions(tx, t, {"_notify", "_enqueue", "_position", "_rebase", "_next_id"}, result);
  tx.exec_params("DELETE FROM " + outbox_meta(t) + " WHERE table_name = $1", t.table());
}

// Only what adopt added to the service's table: its trigger, by name.
void drop_adoption(pqxx::transaction_base& tx, const TableName& table, const TableName& relay,
                   DropResult& result) {
  const std::string trigger = table.table() + "_relay_copy";
  if (exists(tx, table.quoted()) &&
      !tx.exec_params("SELECT 1 FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = $2",
                      table.quoted(), trigger)
           .empty()) {
    tx.exec("DROP TRIGGER \"" + trigger + "\" ON " + table.quoted());
    result.dropped.push_back("trigger " + trigger + " on " + table.plain());
  }
  drop_functions(tx, table, {"_relay_copy"}, result);
  if (recorded(tx, relay)) {
    drop_made_table(tx, relay, result);
  }
  tx.exec_params("DELETE FROM " + outbox_meta(table) + " WHERE table_name = $1", table.table());
}

// The meta table is the operator's too, but shared by every outbox table of the schema:
// dropped only once it records none (locked first, so a migrate of another table either
// finished its row or waits and creates the meta table again).
void drop_meta_if_empty(pqxx::transaction_base& tx, const TableName& table, DropResult& result) {
  if (!exists(tx, outbox_meta(table))) {
    return;
  }
  tx.exec("LOCK TABLE " + outbox_meta(table) + " IN ACCESS EXCLUSIVE MODE");
  if (tx.exec("SELECT 1 FROM " + outbox_meta(table) + " LIMIT 1").empty()) {
    tx.exec("DROP TABLE " + outbox_meta(table));
    result.dropped.push_back("table " + table.schema() + ".outbox_meta (no table recorded)");
  }
}

}  // namespace

DropResult drop(pqxx::connection& conn, const TableName& table, const DropOptions& options) {
  DropResult result;
  pqxx::work tx(conn);
  // The lock migrate takes: a schema Job still running finishes before anything is dropped.
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-migrate:' || $1))", table.plain());
  lock_meta(tx, table);  // outbox_meta may be dropped below: no migration may be creating it
  tx.exec("SET LOCAL lock_timeout = " + std::to_string(options.lock_timeout_ms));
  try {
    const std::optional<std::string> adopted_into = recorded(tx, table);
    if (!adopted_into) {
      return result;  // nothing recorded: dropped before, or never migrated
    }
    if (adopted_into->empty() && options.adopted) {
      throw SchemaError("table " + table.plain() +
                        " was created by migrate, not adopted, though the spec maps its columns "
                        "as someone else's table's: nothing dropped");
    }
    if (adopted_into->empty()) {
      drop_made_table(tx, table, result);
    } else {
      drop_adoption(tx, table, TableName::parse(table.schema() + "." + *adopted_into), result);
    }
    drop_meta_if_empty(tx, table, result);
    tx.commit();
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == "55P03") {  // lock_not_available
      throw SchemaError("could not lock a table of " + table.plain() + " within " +
                        std::to_string(options.lock_timeout_ms) +
                        " ms (a long transaction holds it); nothing dropped, run it again");
    }
    if (e.sqlstate() == "2BP01") {  // dependent_objects_still_exist
      throw SchemaError("another object depends on what migrate created for " + table.plain() +
                        ": " + e.what() + "; drop or change it first; nothing dropped");
    }
    throw;
  }
  return result;
}

}  // namespace outbox
