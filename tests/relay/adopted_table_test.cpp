// A table the relay did not create, in Debezium's Outbox Event Router shape,
// written by a "service" that never heard of this project (plain INSERTs, a
// role with no rights on the relay's table, rows deleted at once), relayed
// through migrate --adopt against a real PostgreSQL and Kafka, in both modes.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "outbox/adopt.hpp"
#include "outbox/schema.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testing::consume_all;
using testing::eventually;
using testing::per_key_order_problem;
using testing::ThreadRelay;

// Debezium's documented outbox table, as a service would have made it.
struct DebeziumTable {
  DebeziumTable()
      : dsn(testbed::postgres_dsn()),
        table(TableName::parse(testbed::unique_name("dbz"))),
        topic(testbed::unique_name("topic")) {
    pqxx::connection conn(dsn);
    pqxx::nontransaction(conn).exec(
        "CREATE TABLE " + table.quoted() +
        " (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) "
        "NOT NULL, type varchar(255) NOT NULL, payload jsonb, timestamp timestamp NOT NULL "
        "DEFAULT now(), tracingspancontext varchar(256))");
  }
  ColumnMap columns() const {
    return ColumnMap::parse({"createdAt=timestamp", "headers=tracingspancontext"});
  }
  MigrationResult adopt_it(const ColumnMap& map) const {
    pqxx::connection conn(dsn);
    AdoptOptions options{map, {16, testing::table_mode(), kDefaultPartitionXids, std::nullopt}};
    return adopt(conn, table, options);
  }
  relay::RelayConfig relay_config() const {
    relay::RelayConfig c;
    c.dsn = dsn;
    c.table = table.plain();
    c.columns = columns();
    c.kafka.bootstrap_servers = testbed::kafka_bootstrap();
    c.kafka.message_timeout = 5s;
    c.publish.router = relay::TopicRouter(topic, {});
    c.batch_size = 50;
    c.poll_interval = 500ms;
    c.rebalance_interval = 200ms;
    c.backlog_interval = 200ms;
    return c;
  }
  std::string dsn;
  TableName table;
  std::string topic;
};

// What the service does: one INSERT in its own transaction, as the given role.
void service_insert(pqxx::connection& conn, const DebeziumTable& t, const std::string& role,
                    const std::string& id, const std::string& key, int seq, bool delete_at_once,
                    bool commit = true) {
  pqxx::work tx(conn);
  if (!role.empty()) {
    tx.exec("SET LOCAL ROLE " + role);
  }
  tx.exec_params("INSERT INTO " + t.table.quoted() +
                     " (id, aggregatetype, aggregateid, type, payload, tracingspancontext) VALUES "
                     "($1::uuid, 'order', $2, 'OrderCreated', $3::jsonb, $4)",
                 id, key, nlohmann::json{{"seq", seq}, {"key", key}}.dump(),
                 "#Thu Dec 03 10:00:00 UTC 2026\ntraceparent=00-" + std::string(32, 'a') + "-" +
                     std::string(16, 'b') + "-01\n");
  if (delete_at_once) {  // Debezium's advice: the table stays empty, the log keeps the event
    tx.exec_params("DELETE FROM " + t.table.quoted() + " WHERE id = $1::uuid", id);
  }
  if (commit) {
    tx.commit();
  } else {
    tx.abort();
  }
}

std::string uuid_for(int i) {
  char buf[37];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012d", i);
  return buf;
}

TEST(AdoptedTable, ADebeziumTableIsRelayedInOrderWithItsTraceContextAndNothingInvented) {
  DebeziumTable t;
  t.adopt_it(t.columns());
  pqxx::connection conn(t.dsn);
  // The service's role may insert into its outbox and nothing else.
  const std::string role = testbed::unique_name("svc");
  pqxx::nontransaction(conn).exec("CREATE ROLE " + role + " NOLOGIN; GRANT USAGE ON SCHEMA " +
                                  t.table.schema() + " TO " + role + "; GRANT INSERT, DELETE, " +
                                  "SELECT ON " + t.table.quoted() + " TO " + role);
  ThreadRelay relay(t.relay_config());
  const int events = 200;
  for (int i = 0; i < events; ++i) {
    const std::string key = "order-" + std::to_string(i % 7);
    service_insert(conn, t, i % 2 == 0 ? role : "", uuid_for(i), key, i, i % 3 == 0);
  }
  service_insert(conn, t, role, uuid_for(9999), "order-0", -1, false, /*commit=*/false);
  auto got = consume_all({t.topic}, events, 60s, 2s);
  pqxx::nontransaction(conn).exec("DROP OWNED BY " + role + "; DROP ROLE " + role);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(events)) << "each committed event once";
  EXPECT_EQ(per_key_order_problem(got), "");
  std::map<std::string, int> seq_of_id;
  for (const auto& m : got) {
    const auto payload = nlohmann::json::parse(m.payload);
    EXPECT_NE(payload.at("seq"), -1) << "a rolled-back insert is never relayed";
    seq_of_id[m.headers.at("event_id")] = payload.at("seq");
    EXPECT_EQ(m.key, payload.at("key"));
    EXPECT_EQ(m.headers.at("biz_type"), "order");
    EXPECT_EQ(m.headers.at("traceparent"),
              "00-" + std::string(32, 'a') + "-" + std::string(16, 'b') + "-01");
  }
  ASSERT_EQ(seq_of_id.size(), static_cast<std::size_t>(events));
  EXPECT_EQ(seq_of_id.at(uuid_for(42)), 42) << "the service's own id is the event id";
  // The service's table is as it was: no column added.
  auto cols = pqxx::nontransaction(conn).exec_params(
      "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2",
      t.table.schema(), t.table.table());
  EXPECT_EQ(cols[0][0].as<int>(), 7);
}

// A Debezium table whose payload is bytea (Avro in Confluent's wire format, as
// Debezium's BinaryDataConverter expects): the relay's copy is bytea too, and the
// bytes reach Kafka unchanged.
TEST(AdoptedTable, ABinaryPayloadIsRelayedByteForByte) {
  DebeziumTable t;
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("ALTER TABLE " + t.table.quoted() +
                                  " ALTER COLUMN payload TYPE bytea USING NULL");
  t.adopt_it(ColumnMap::parse({}));
  EXPECT_EQ(inspect_table(conn, t.table).payload, PayloadType::kBytes);
  const std::string wire("\x00\x00\x00\x00\x07\x00\xff\x10", 8);
  {
    pqxx::work tx(conn);
    tx.exec_params("INSERT INTO " + t.table.quoted() +
                       " (id, aggregatetype, aggregateid, type, payload) VALUES "
                       "(gen_random_uuid(), 'order', 'o-1', 'OrderCreated', $1)",
                   pqxx::binarystring(wire));
    tx.commit();
  }
  auto c = t.relay_config();
  c.columns = ColumnMap::parse({});
  ThreadRelay relay(c);
  auto got = consume_all({t.topic}, 1, 30s, 1s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, wire);
}

TEST(AdoptedTable, AMissingOrMistypedColumnIsNamedAndNothingIsCreated) {
  DebeziumTable t;
  try {
    t.adopt_it(ColumnMap::parse({"bizId=order_id"}));
    FAIL() << "adopted a table without the column";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("columns.bizId"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no column order_id"), std::string::npos) << e.what();
  }
  try {
    t.adopt_it(ColumnMap::parse({"payload=timestamp"}));
    FAIL() << "adopted a timestamp payload";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("columns.payload"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is timestamp"), std::string::npos) << e.what();
  }
  pqxx::connection conn(t.dsn);
  EXPECT_TRUE(pqxx::nontransaction(conn)
                  .exec_params1("SELECT to_regclass($1) IS NULL", relay_table_for(t.table).quoted())
                  .front()
                  .as<bool>())
      << "a refused adoption leaves nothing behind";
}

TEST(AdoptedTable, AdoptIsIdempotentAndEveryCommandChecksTheColumnsItWasAdoptedWith) {
  DebeziumTable t;
  MigrationResult first = t.adopt_it(t.columns());
  MigrationResult again = t.adopt_it(t.columns());
  auto created_trigger = [](const MigrationResult& r) {
    for (const auto& line : r.applied) {
      if (line.find("created trigger") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(created_trigger(first));
  EXPECT_FALSE(created_trigger(again)) << "the trigger is made once, the function replaced";
  pqxx::connection conn(t.dsn);
  TableInfo info = inspect_table(conn, t.table, {t.columns()});
  EXPECT_EQ(info.relay_table(t.table).plain(), relay_table_for(t.table).plain());
  EXPECT_EQ(info.mode, testing::table_mode());
  EXPECT_TRUE(info.headers);
  try {
    inspect_table(conn, t.table, {ColumnMap::parse({})});
    FAIL() << "accepted other columns than adopted";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("was adopted as"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--adopt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(migrate(conn, t.table), SchemaError) << "plain migrate of an adopted table";
  testing::OutboxTestTable own;
  EXPECT_THROW(inspect_table(conn, own.table, {t.columns()}), SchemaError)
      << "columns for a table made by migrate";
  EXPECT_THROW(adopt(conn, own.table, AdoptOptions{ColumnMap::parse({"eventId=event_id"}), {}}),
               SchemaError)
      << "adopting the relay's own table";
}

TEST(AdoptedTable, ALostTriggerIsNamedWithTheCommandThatRestoresIt) {
  DebeziumTable t;
  t.adopt_it(t.columns());
  pqxx::connection conn(t.dsn);
  pqxx::nontransaction(conn).exec("DROP TRIGGER \"" + t.table.table() + "_relay_copy\" ON " +
                                  t.table.quoted());
  try {
    inspect_table(conn, t.table);
    FAIL() << "a table without its copy trigger passed";
  } catch (const SchemaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("trigger"), std::string::npos) << what;
    EXPECT_NE(what.find("--adopt --column eventId=id"), std::string::npos) << what;
  }
  t.adopt_it(t.columns());
  EXPECT_NO_THROW(inspect_table(conn, t.table));
  // A disabled trigger copies nothing either: named the same way, and adopt enables it.
  pqxx::nontransaction(conn).exec("ALTER TABLE " + t.table.quoted() + " DISABLE TRIGGER \"" +
                                  t.table.table() + "_relay_copy\"");
  EXPECT_THROW(inspect_table(conn, t.table), SchemaError);
  t.adopt_it(t.columns());
  EXPECT_NO_THROW(inspect_table(conn, t.table));
}

}  // namespace
}  // namespace outbox
