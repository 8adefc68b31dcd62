#include "outbox/adopt.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "outbox/store.hpp"

namespace outbox {
namespace {

// The types each role accepts (an empty set: any type, read as text). The copy
// casts to the relay's column type; these are the types whose casts never fail.
const std::set<std::string>& accepted_types(const std::string& role) {
  static const std::map<std::string, std::set<std::string>> types = {
      {"eventId", {"uuid"}},
      {"bizType", {}},
      {"bizId", {}},
      {"payload", {"json", "jsonb", "text", "varchar", "bpchar", "bytea"}},
      {"createdAt", {"timestamp", "timestamptz"}},
      {"headers", {"json", "jsonb", "text", "varchar", "bpchar"}},
  };
  return types.at(role);
}

std::string quoted_identifier(const std::string& name) {
  return "\"" + name + "\"";  // validated by ColumnMap::parse: [a-z0-9_] only
}

enum class Trigger { kMissing, kDisabled, kEnabled };

std::string copy_trigger_name(const TableName& table);

// The copy trigger on the adopted table, as pg_trigger has it.
Trigger copy_trigger(pqxx::transaction_base& tx, const TableName& table) {
  auto r = tx.exec_params(
      "SELECT tgenabled <> 'D' FROM pg_trigger WHERE tgrelid = to_regclass(quote_ident($1) || "
      "'.' || quote_ident($2)) AND tgname = $3",
      table.schema(), table.table(), copy_trigger_name(table));
  return r.empty()            ? Trigger::kMissing
         : r[0][0].as<bool>() ? Trigger::kEnabled
                              : Trigger::kDisabled;
}

std::string copy_trigger_name(const TableName& table) {
  return table.table() + "_relay_copy";
}

// The value the copy inserts for a role, from the new row (NEW).
std::string copied_value(const std::string& role, const std::string& column,
                         const std::string& type) {
  const std::string v = "NEW." + quoted_identifier(column);
  if (role == "eventId") {
    return "COALESCE(" + v + ", gen_random_uuid())";
  }
  if (role == "payload") {  // the relay's column has the same kind of type (adopt)
    switch (payload_type_of(type).value_or(PayloadType::kJson)) {
      case PayloadType::kText:
        return "COALESCE(" + v + "::text, '')";
      case PayloadType::kBytes:
        return "COALESCE(" + v + ", ''::bytea)";
      case PayloadType::kJson:
        break;
    }
    return "COALESCE(" + v + "::jsonb, 'null'::jsonb)";
  }
  if (role == "createdAt") {
    return "COALESCE(" + v + "::timestamptz, now())";
  }
  if (role == "headers") {
    if (type == "json" || type == "jsonb") {
      return v + "::jsonb";
    }
    // Text in java.util.Properties form (Debezium's tracingspancontext):
    // key=value lines; comment lines start with # or !.
    return "(SELECT jsonb_object_agg(split_part(l, '=', 1), substr(l, strpos(l, '=') + 1)) FROM "
           "regexp_split_to_table(" +
           v + "::text, E'\\r?\\n') AS l WHERE strpos(l, '=') > 1 AND l !~ '^[#!]')";
  }
  return "COALESCE(" + v + "::text, '')";  // bizType, bizId
}

// The relay's column each role fills.
std::string relay_column(const std::string& role) {
  static const std::map<std::string, std::string> columns = {
      {"eventId", "event_id"}, {"bizType", "biz_type"},     {"bizId", "biz_id"},
      {"payload", "payload"},  {"createdAt", "created_at"}, {"headers", "headers"},
  };
  return columns.at(role);
}

// Column name -> type name (pg_type.typname) of the table; empty if it does not exist.
std::map<std::string, std::string> column_types(pqxx::transaction_base& tx,
                                                const TableName& table) {
  auto rows = tx.exec_params(
      "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
      "WHERE a.attrelid = to_regclass(quote_ident($1) || '.' || quote_ident($2)) AND a.attnum > 0 "
      "AND NOT a.attisdropped",
      table.schema(), table.table());
  std::map<std::string, std::string> types;
  for (const auto& r : rows) {
    types[r[0].as<std::string>()] = r[1].as<std::string>();
  }
  return types;
}

// Throws SchemaError for the first role whose column is missing or of a type
// the copy cannot take; returns the column types.
std::map<std::string, std::string> require_mapped_columns(pqxx::transaction_base& tx,
                                                          const TableName& table,
                                                          const ColumnMap& columns) {
  auto types = column_types(tx, table);
  if (types.empty()) {
    throw SchemaError("table " + table.plain() + " does not exist");
  }
  for (const auto& [role, column] : columns.entries()) {
    auto it = types.find(column);
    if (it == types.end()) {
      throw SchemaError("columns." + role + ": table " + table.plain() + " has no column " +
                        column);
    }
    const auto& ok = accepted_types(role);
    if (!ok.empty() && ok.count(it->second) == 0) {
      std::string names;
      for (const auto& t : ok) {
        names += (names.empty() ? "" : ", ") + t;
      }
      throw SchemaError("columns." + role + ": column " + table.plain() + "." + column + " is " +
                        it->second + ", the relay needs one of: " + names);
    }
  }
  return types;
}

std::string adopt_command(const TableName& table, const ColumnMap& columns) {
  std::string cmd = "outbox-operator migrate --table " + table.plain() + " --adopt";
  for (const auto& [role, column] : columns.entries()) {
    cmd += " --column " + role + "=" + column;
  }
  return cmd;
}

}  // namespace

TableName relay_table_for(const TableName& adopted) {
  const std::string name = adopted.table() + "_relay";
  if (name.size() > kMaxTableNameLength) {
    throw std::invalid_argument("table " + adopted.plain() + " has too long a name to adopt (its " +
                                "relay table " + name + " must have at most " +
                                std::to_string(kMaxTableNameLength) + " characters)");
  }
  return TableName::parse(adopted.schema() + "." + name);
}

void check_adopted(pqxx::transaction_base& tx, const TableName& table, const ColumnMap& columns) {
  try {
    require_mapped_columns(tx, table, columns);
  } catch (const SchemaError& e) {
    throw SchemaError(std::string(e.what()) + " (adopted as: " + columns.describe() +
                      "; fix the table or adopt it again: " + adopt_command(table, columns) + ")");
  }
  if (copy_trigger(tx, table) != Trigger::kEnabled) {
    throw SchemaError(
        "table " + table.plain() + " has lost (or disabled) its trigger " +
        copy_trigger_name(table) +
        ": new events are not copied for the relay; run: " + adopt_command(table, columns));
  }
}

namespace {

// Checks, reading only, that `table` can be adopted: its mapped columns are there and of
// types the copy takes, and migrate did not create it. Returns the payload type of the
// relay's copy, which keeps the payload's kind: jsonb, text or bytea.
std::optional<PayloadType> check_adoptable(pqxx::connection& conn, const TableName& table,
                                           const ColumnMap& columns) {
  pqxx::read_transaction tx(conn);
  const auto types = require_mapped_columns(tx, table, columns);
  const std::optional<PayloadType> payload = payload_type_of(types.at(columns.payload));
  const bool has_meta =
      !tx.exec_params1("SELECT to_regclass($1) IS NULL", outbox_meta(table)).front().as<bool>();
  auto meta = has_meta ? tx.exec_params("SELECT to_jsonb(t)->>'adopted_into' FROM " +
                                            outbox_meta(table) + " t WHERE table_name = $1",
                                        table.table())
                       : pqxx::result{};
  if (!meta.empty() && meta[0][0].is_null()) {
    throw SchemaError("table " + table.plain() +
                      " was created by migrate: the relay reads it as it is, nothing to adopt");
  }
  return payload;
}

// (Re)creates the function the copy trigger calls: it inserts each new row of the adopted
// table into `relay`, a role's column into the relay's. Returns the function's quoted name.
std::string create_copy_function(pqxx::work& tx, const TableName& table, const TableName& relay,
                                 const ColumnMap& columns,
                                 const std::map<std::string, std::string>& types) {
  std::string targets;
  std::string values;
  for (const auto& [role, column] : columns.entries()) {
    targets += (targets.empty() ? "" : ", ") + relay_column(role);
    values += (values.empty() ? "" : ", ") + copied_value(role, column, types.at(column));
  }
  const std::string function = table.quoted_with_suffix("_relay_copy");
  tx.exec("CREATE OR REPLACE FUNCTION " + function +
          "() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, "
          "pg_temp AS $f$ BEGIN INSERT INTO " +
          relay.quoted() + " (" + targets + ") VALUES (" + values + "); RETURN NULL; END $f$");
  // Only the owner (the role that runs migrate) and the trigger call it.
  tx.exec("REVOKE ALL ON FUNCTION " + function + "() FROM PUBLIC");
  return function;
}

// A disabled copy trigger (check_adopted names it) is enabled again, a missing one created;
// returns what was done, "" if the trigger was in place. Taking the table's lock waits at most
// `lock_timeout_ms` (SchemaError).
std::string ensure_copy_trigger(pqxx::work& tx, const TableName& table, const TableName& relay,
                                const std::string& function, int lock_timeout_ms) {
  const Trigger trigger = copy_trigger(tx, table);
  if (trigger == Trigger::kEnabled) {
    return {};
  }
  try {
    tx.exec(trigger == Trigger::kDisabled
                ? "ALTER TABLE " + table.quoted() + " ENABLE TRIGGER " +
                      quoted_identifier(copy_trigger_name(table))
                : "CREATE TRIGGER " + quoted_identifier(copy_trigger_name(table)) +
                      " AFTER INSERT ON " + table.quoted() + " FOR EACH ROW EXECUTE FUNCTION " +
                      function + "()");
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == "55P03") {  // lock_not_available
      throw SchemaError("could not lock " + table.plain() + " for its trigger within " +
                        std::to_string(lock_timeout_ms) + " ms (a long transaction holds it); " +
                        relay.plain() + " is made but nothing is copied yet: run adopt again");
    }
    throw;
  }
  return std::string(trigger == Trigger::kDisabled ? "enabled" : "created") + " trigger " +
         copy_trigger_name(table) + " on " + table.plain() + " (copies each new row into " +
         relay.plain() + ")";
}

// The adopted table's row in outbox_meta: the relay table's shape, where it is relayed
// through, and its columns by role.
void record_adoption(pqxx::work& tx, const TableName& table, const TableName& relay,
                     const TableInfo& info, const ColumnMap& columns) {
  std::vector<std::string> roles;
  std::vector<std::string> names;
  for (const auto& [role, column] : columns.entries()) {
    roles.push_back(role);
    names.push_back(column);
  }
  tx.exec_params("INSERT INTO " + outbox_meta(table) +
                     " (table_name, version, shard_count, mode, partition_xids, adopted_into, "
                     "columns) VALUES ($1, $2, $3, $4, $5, $6, jsonb_object($7::text[], "
                     "$8::text[])) ON CONFLICT (table_name) DO UPDATE SET version = "
                     "EXCLUDED.version, adopted_into = EXCLUDED.adopted_into, columns = "
                     "EXCLUDED.columns, updated_at = now()",
                 table.table(), kSchemaVersion, info.shard_count, mode_name(info.mode),
                 info.partition_xids, relay.table(), pg_text_array(roles), pg_text_array(names));
}

}  // namespace

MigrationResult adopt(pqxx::connection& conn, const TableName& table, const AdoptOptions& options) {
  const TableName relay = relay_table_for(table);
  MigrateOptions relay_options = options.relay_table;
  // Status mode unless asked: the copy of a Debezium-shaped table is written by a trigger on
  // someone else's table, and marked row by row as Debezium's users expect to see it.
  relay_options.mode = relay_options.mode.value_or(TableMode::kStatus);
  relay_options.payload = check_adoptable(conn, table, options.columns);
  MigrationResult result = migrate(conn, relay, relay_options);
  const TableInfo info = inspect_table(conn, relay);

  pqxx::work tx(conn);
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('outbox-migrate:' || $1))", table.plain());
  tx.exec("SET LOCAL lock_timeout = " + std::to_string(options.lock_timeout_ms));
  const auto types = require_mapped_columns(tx, table, options.columns);
  const std::string function = create_copy_function(tx, table, relay, options.columns, types);
  if (std::string done = ensure_copy_trigger(tx, table, relay, function, options.lock_timeout_ms);
      !done.empty()) {
    result.applied.push_back(std::move(done));
  }
  record_adoption(tx, table, relay, info, options.columns);
  tx.commit();
  result.applied.push_back("adopted " + table.plain() + " as " + options.columns.describe() +
                           " (copy function " + table.table() + "_relay_copy)");
  return result;
}

}  // namespace outbox
