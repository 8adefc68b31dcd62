// migrate --drop against a real PostgreSQL (spec.deletionPolicy: Drop): what migrate made goes,
// in both modes; an adopted table keeps everything of its own and stops being copied; a second
// drop is a no-op; a dependent object or a table the caller thinks adopted drops nothing.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "outbox/adopt.hpp"
#include "outbox/drop.hpp"
#include "outbox/schema.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

// A schema of its own per test: what is left in it is exactly what a drop left.
struct Scratch {
  Scratch() : dsn(testbed::postgres_dsn()), schema(testbed::unique_name("drop")), conn(dsn) {
    pqxx::nontransaction(conn).exec("CREATE SCHEMA \"" + schema + "\"");
  }
  ~Scratch() {
    try {
      pqxx::nontransaction(conn).exec("DROP SCHEMA \"" + schema + "\" CASCADE");
    } catch (...) {
    }
  }
  TableName table(const std::string& name) const { return TableName::parse(schema + "." + name); }
  void exec(const std::string& sql) { pqxx::nontransaction(conn).exec(sql); }
  long long count(const std::string& sql) {
    return pqxx::nontransaction(conn).exec1(sql)[0].as<long long>();
  }
  // Relations (tables, views, sequences, indexes) and functions left in the schema.
  std::string objects() {
    std::string out;
    pqxx::nontransaction tx(conn);
    for (const auto& r : tx.exec_params(
             "SELECT relname FROM pg_class WHERE relnamespace = to_regnamespace($1) UNION ALL "
             "SELECT proname || '()' FROM pg_proc WHERE pronamespace = to_regnamespace($1) "
             "ORDER BY 1",
             "\"" + schema + "\"")) {
      // Appended, not `(...) + string`: GCC 12 at -O3 warns falsely (-Wrestrict) on that form.
      if (!out.empty()) {
        out += ' ';
      }
      out += r[0].as<std::string>();
    }
    return out;
  }
  std::string dsn;
  std::string schema;
  pqxx::connection conn;
};

TEST(Drop, EverythingMigrateMadeGoesInBothModesAndASecondDropIsANoOp) {
  for (const TableMode mode : {TableMode::kStatus, TableMode::kLog}) {
    Scratch s;
    const TableName t = s.table("events");
    MigrateOptions options;
    options.mode = mode;
    migrate(s.conn, t, options);
    s.exec("SELECT " + t.quoted_with_suffix("_enqueue") + "('order', 'k1', '{}'::jsonb)");
    ASSERT_NE(s.objects(), "");

    const DropResult r = drop(s.conn, t);
    EXPECT_FALSE(r.dropped.empty());
    EXPECT_EQ(s.objects(), "") << mode_name(mode) << ": left behind";
    EXPECT_TRUE(drop(s.conn, t).dropped.empty());
  }
}

TEST(Drop, AnAdoptedTableKeepsItsRowsAndOwnTriggerAndIsNoLongerCopied) {
  Scratch s;
  const TableName t = s.table("dbz_outbox");
  s.exec("CREATE TABLE " + t.quoted() +
         " (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type "
         "text NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now())");
  // The service's own trigger, which must survive.
  s.exec("CREATE TABLE " + s.table("audit").quoted() + " (n int)");
  s.exec("CREATE FUNCTION \"" + s.schema + "\".audit_it() RETURNS trigger LANGUAGE plpgsql AS " +
         "$f$ BEGIN INSERT INTO \"" + s.schema + "\".audit VALUES (1); RETURN NULL; END $f$");
  s.exec("CREATE TRIGGER audit_it AFTER INSERT ON " + t.quoted() +
         " FOR EACH ROW EXECUTE FUNCTION \"" + s.schema + "\".audit_it()");
  const std::string before = s.objects();
  adopt(s.conn, t, AdoptOptions{ColumnMap::parse({"createdAt=timestamp"}), {}});
  auto insert = [&](int i) {
    s.exec("INSERT INTO " + t.quoted() +
           " (id, aggregatetype, aggregateid, type, payload) VALUES " +
           "(gen_random_uuid(), 'order', 'k" + std::to_string(i) + "', 'Created', '{}')");
  };
  insert(1);
  ASSERT_EQ(s.count("SELECT count(*) FROM " + s.table("dbz_outbox_relay").quoted()), 1);

  const DropResult r = drop(s.conn, t, DropOptions{true});
  EXPECT_FALSE(r.dropped.empty());
  EXPECT_EQ(s.objects(), before) << "only the service's own objects are left";
  EXPECT_EQ(s.count("SELECT count(*) FROM " + t.quoted()), 1);
  EXPECT_EQ(s.count("SELECT count(*) FROM pg_trigger WHERE tgrelid = '" + t.quoted() +
                    "'::regclass AND NOT tgisinternal"),
            1)
      << "the service's trigger stays, the copy trigger is gone";
  insert(2);  // no copy: the relay's table is gone, and nothing fails the service's insert
  EXPECT_EQ(s.count("SELECT count(*) FROM " + t.quoted()), 2);
  EXPECT_EQ(s.count("SELECT count(*) FROM " + s.table("audit").quoted()), 2);
  EXPECT_TRUE(drop(s.conn, t, DropOptions{true}).dropped.empty());
}

TEST(Drop, ADependentObjectOrATableTheCallerThinksAdoptedDropsNothing) {
  Scratch s;
  const TableName t = s.table("events");
  migrate(s.conn, t);
  s.exec("CREATE VIEW \"" + s.schema + "\".report AS SELECT count(*) FROM " + t.quoted());
  const std::string before = s.objects();
  try {
    drop(s.conn, t);
    FAIL() << "a view over the table was dropped with it";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing dropped"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.objects(), before);
  s.exec("DROP VIEW \"" + s.schema + "\".report");
  EXPECT_THROW(drop(s.conn, t, DropOptions{true}), SchemaError);
  EXPECT_NE(s.objects(), "");
}

}  // namespace
}  // namespace outbox
