// The SQL-level inbox (migrate_inbox: <inbox>_record and <inbox>_apply) and the C++
// Inbox that wraps it, against the test bed's PostgreSQL: redelivery, staleness,
// concurrent consumers racing on one event, malformed input and retention.
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "inbox/inbox.hpp"
#include "support/at_once.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using inbox::Inbox;

std::string uuid_for(std::int64_t n) {
  const std::string digits = std::to_string(n);
  return "00000000-0000-4000-8000-" + std::string(12 - digits.size(), '0') + digits;
}

// Consumers of several services deploy at once and each migrates its inbox into one schema:
// they share the schema's inbox_meta, which none finds there yet. Every migration must succeed.
TEST(InboxMigrate, InboxesOfOneSchemaMigratedAtOnceAllSucceed) {
  const std::string dsn = testbed::postgres_dsn();
  const std::string schema = testbed::unique_name("inbox_meta");
  pqxx::connection admin(dsn);
  pqxx::nontransaction(admin).exec("CREATE SCHEMA \"" + schema + "\"");
  constexpr int kInboxes = 8;
  const std::vector<std::string> errors =
      testbed::at_once_on_sessions(dsn, kInboxes, [&](pqxx::connection& session, int i) {
        inbox::migrate_inbox(session, TableName::parse(schema + ".inbox" + std::to_string(i)));
      });
  for (int i = 0; i < kInboxes; ++i) {
    EXPECT_EQ(errors[i], "") << "migration of inbox" << i;
  }
  pqxx::nontransaction(admin).exec("DROP SCHEMA \"" + schema + "\" CASCADE");
}

// A fresh inbox and an effects table: one row per application of an event, so a double
// application shows as a count of 2.
struct InboxFixture : ::testing::Test {
  pqxx::connection conn{testbed::postgres_dsn()};
  TableName table = TableName::parse(testbed::unique_name("inbox"));
  std::string effects = "\"public\".\"" + table.table() + "_effects\"";

  void SetUp() override {
    inbox::migrate_inbox(conn, table);
    pqxx::work tx(conn);
    tx.exec("CREATE TABLE " + effects + " (consumer text, event_id uuid, applied integer)");
    tx.commit();
  }

  // What a consumer does with one delivery: _apply, and the effect only when new.
  static Inbox::Outcome deliver(pqxx::connection& c, const Inbox& in, const std::string& effects,
                                const std::string& consumer, const std::string& event_id,
                                const std::string& key, std::int64_t seq) {
    pqxx::work tx(c);
    const Inbox::Outcome o = in.apply(tx, event_id, key, seq);
    if (o == Inbox::Outcome::kNew) {
      tx.exec_params("INSERT INTO " + effects + " VALUES ($1, $2::uuid, 1)", consumer, event_id);
    }
    tx.commit();
    return o;
  }

  std::int64_t applied(const std::string& consumer, const std::string& event_id) {
    pqxx::nontransaction tx(conn);
    return tx
        .exec_params("SELECT count(*) FROM " + effects + " WHERE consumer = $1 AND event_id = $2",
                     consumer, event_id)[0][0]
        .as<std::int64_t>();
  }
};

TEST_F(InboxFixture, MigrateIsVersionedARerunIsANoOpAndAnOldInboxIsTakenOver) {
  const MigrationResult again = inbox::migrate_inbox(conn, table);
  EXPECT_EQ(again.from_version, inbox::kInboxSchemaVersion);
  EXPECT_TRUE(again.applied.empty());

  // The inbox table dropped by hand, its meta row left behind: migrate makes it again.
  {
    pqxx::work tx(conn);
    tx.exec("DROP TABLE " + table.quoted());
    tx.commit();
  }
  const MigrationResult repaired = inbox::migrate_inbox(conn, table);
  EXPECT_EQ(repaired.applied.size(), 1U);
  {
    pqxx::work tx(conn);
    EXPECT_TRUE(tx.exec_params("SELECT " + table.quoted_with_suffix("_record") + "('svc', $1)",
                               uuid_for(9))[0][0]
                    .as<bool>());
  }

  // A table made by the Inbox of before (the same columns, no meta row, no functions).
  const TableName old = TableName::parse(testbed::unique_name("old_inbox"));
  {
    pqxx::work tx(conn);
    tx.exec("CREATE TABLE " + old.quoted() +
            " (consumer text NOT NULL, event_id uuid NOT NULL, processed_at timestamptz NOT NULL "
            "DEFAULT now(), PRIMARY KEY (consumer, event_id))");
    tx.exec("INSERT INTO " + old.quoted() + " (consumer, event_id) VALUES ('svc', '" + uuid_for(7) +
            "')");
    tx.commit();
  }
  const MigrationResult first = inbox::migrate_inbox(conn, old);
  EXPECT_EQ(first.from_version, 0);
  EXPECT_EQ(first.applied.size(), 1U);
  pqxx::work tx(conn);
  EXPECT_FALSE(tx.exec_params("SELECT " + old.quoted_with_suffix("_record") + "('svc', $1)",
                              uuid_for(7))[0][0]
                   .as<bool>());
  EXPECT_TRUE(tx.exec_params("SELECT " + old.quoted_with_suffix("_record") + "('svc', $1)",
                             uuid_for(8))[0][0]
                  .as<bool>());
}

// The end-to-end checklist's item 4: one event delivered 100 times is applied once (99 duplicates),
// and a second consumer group applies it once too.
TEST_F(InboxFixture, OneEventDelivered100TimesIsAppliedOncePerConsumerGroup) {
  const std::string id = uuid_for(4);
  for (const std::string consumer : {"points", "audit"}) {
    const Inbox in(table, consumer);
    int fresh = 0, duplicates = 0;
    for (int i = 0; i < 100; ++i) {
      switch (deliver(conn, in, effects, consumer, id, "user-1", 42)) {
        case Inbox::Outcome::kNew:
          ++fresh;
          break;
        case Inbox::Outcome::kDuplicate:
          ++duplicates;
          break;
        case Inbox::Outcome::kStale:
          ADD_FAILURE() << "a redelivery of the applied event is a duplicate, not stale";
          break;
      }
    }
    EXPECT_EQ(fresh, 1) << consumer;
    EXPECT_EQ(duplicates, 99) << consumer;
    EXPECT_EQ(applied(consumer, id), 1) << consumer;
  }
  // _record alone dedupes the same way.
  const Inbox in(table, "mailer");
  pqxx::work tx(conn);
  EXPECT_TRUE(in.record(tx, id));
  EXPECT_FALSE(in.record(tx, id));
}

// An older event of a key delivered after a newer one (a rebalance, a replay) is stale
// and never applied; other keys and consumers are not affected; a later one is new.
TEST_F(InboxFixture, AnOlderEventOfAKeyAfterANewerOneIsStaleAndNeverApplied) {
  const Inbox in(table, "points");
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(2), "user-1", 20), Inbox::Outcome::kNew);
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(1), "user-1", 10),
            Inbox::Outcome::kStale);
  EXPECT_EQ(applied("points", uuid_for(1)), 0);
  // Refused once, remembered: its redelivery is a duplicate, still not applied.
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(1), "user-1", 10),
            Inbox::Outcome::kDuplicate);
  EXPECT_EQ(applied("points", uuid_for(1)), 0);
  // The same seq on another key, or for another consumer, is new.
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(3), "user-2", 10), Inbox::Outcome::kNew);
  const Inbox other(table, "audit");
  EXPECT_EQ(deliver(conn, other, effects, "audit", uuid_for(1), "user-1", 10),
            Inbox::Outcome::kNew);
  // Log mode: events of one transaction share a position; they are not stale.
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(5), "user-1", 20), Inbox::Outcome::kNew);
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(6), "user-1", 30), Inbox::Outcome::kNew);
  EXPECT_EQ(deliver(conn, in, effects, "points", uuid_for(9), "user-1", 29),
            Inbox::Outcome::kStale);
  pqxx::nontransaction tx(conn);
  EXPECT_EQ(tx.exec_params("SELECT seq FROM " + table.quoted_with_suffix("_keys") +
                           " WHERE consumer = 'points' AND key = 'user-1'")[0][0]
                .as<std::int64_t>(),
            30);
}

// 1,000 races: three consumers of one group, each on its own connection and thread,
// receive the same event at the same moment. Exactly one of them applies it each time.
// Half the races go through _record, half through _apply; in the _apply half the
// consumers also race to move the same key's mark.
TEST_F(InboxFixture, ThreeConsumersRacingOnOneEventApplyItExactlyOnceIn1000Races) {
  constexpr int kRaces = 1000;
  constexpr int kThreads = 3;
  std::vector<std::array<std::atomic<int>, 2>> wins(kRaces);
  std::barrier start(kThreads);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        pqxx::connection c(testbed::postgres_dsn());
        const Inbox in(table, "points");
        for (int race = 0; race < kRaces; ++race) {
          const std::string id = uuid_for(100000 + race);
          pqxx::work tx(c);
          start.arrive_and_wait();
          const bool fresh = race % 2 == 0
                                 ? in.record(tx, id)
                                 : in.apply(tx, id, "hot-key", race) == Inbox::Outcome::kNew;
          if (fresh) {
            tx.exec_params("INSERT INTO " + effects + " VALUES ('points', $1::uuid, $2)", id, t);
          }
          tx.commit();
          wins[race][fresh ? 0 : 1]++;
        }
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << "consumer " << t << ": " << e.what();
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  ASSERT_EQ(errors.load(), 0);
  int races_with_one_winner = 0;
  for (int race = 0; race < kRaces; ++race) {
    races_with_one_winner += wins[race][0] == 1 && wins[race][1] == kThreads - 1 ? 1 : 0;
  }
  EXPECT_EQ(races_with_one_winner, kRaces);
  pqxx::nontransaction tx(conn);
  const auto r = tx.exec("SELECT count(*), count(DISTINCT event_id) FROM " + effects);
  EXPECT_EQ(r[0][0].as<int>(), kRaces) << "applications";
  EXPECT_EQ(r[0][1].as<int>(), kRaces) << "distinct events applied: 0 double applications";
}

// Malformed input is refused with a reason, by the SQL functions for every language and
// by the C++ wrapper before it reaches the database.
TEST_F(InboxFixture, MalformedInputIsRefusedWithAReason) {
  const std::string record = "SELECT " + table.quoted_with_suffix("_record");
  const std::string apply = "SELECT " + table.quoted_with_suffix("_apply");
  auto refusal = [&](const std::string& sql) -> std::string {
    try {
      pqxx::work tx(conn);
      tx.exec(sql);
    } catch (const pqxx::sql_error& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string id = "'" + uuid_for(11) + "'";
  EXPECT_NE(refusal(record + "(NULL, " + id + ")").find("consumer must be a non-empty name"),
            std::string::npos);
  EXPECT_NE(refusal(record + "('', " + id + ")").find("consumer must be a non-empty name"),
            std::string::npos);
  EXPECT_NE(refusal(record + "('points', NULL)").find("event_id must not be NULL"),
            std::string::npos);
  EXPECT_NE(refusal(record + "('points', 'not-a-uuid')").find("invalid input syntax for type uuid"),
            std::string::npos);
  EXPECT_NE(refusal(apply + "('', " + id + ", 'k', 1)").find("consumer must be a non-empty name"),
            std::string::npos);
  EXPECT_NE(refusal(apply + "('points', " + id + ", NULL, 1)").find("key must not be NULL"),
            std::string::npos);
  EXPECT_NE(refusal(apply + "('points', " + id + ", 'k', NULL)").find("seq must not be NULL"),
            std::string::npos);
  EXPECT_NE(refusal(apply + "('points', 'x', 'k', 1)").find("invalid input syntax for type uuid"),
            std::string::npos);
  // Nothing refused was recorded.
  EXPECT_EQ(
      pqxx::nontransaction(conn).exec("SELECT count(*) FROM " + table.quoted())[0][0].as<int>(), 0);

  EXPECT_THROW(Inbox(table, ""), std::invalid_argument);
  const Inbox in(table, "points");
  pqxx::work w(conn);
  EXPECT_THROW(in.apply(w, "not-a-uuid", "k", 1), std::invalid_argument);
  EXPECT_THROW(in.record(w, ""), std::invalid_argument);
}

// Retention deletes records and marks older than the age kept, in batches, and leaves
// the rest.
TEST_F(InboxFixture, CleanupDeletesOldRecordsAndMarksInSmallBatches) {
  const Inbox in(table, "points");
  for (int i = 0; i < 7; ++i) {
    deliver(conn, in, effects, "points", uuid_for(i), "user-" + std::to_string(i), 1);
  }
  {
    pqxx::work tx(conn);
    tx.exec("UPDATE " + table.quoted() +
            " SET processed_at = now() - interval '10 days' WHERE event_id <> '" + uuid_for(6) +
            "'");
    tx.exec("UPDATE " + table.quoted_with_suffix("_keys") +
            " SET updated_at = now() - interval '10 days' WHERE key <> 'user-6'");
    tx.commit();
  }
  const inbox::InboxCleanup r =
      inbox::cleanup_inbox(conn, table, std::chrono::hours(24 * 7), /*batch_size=*/2);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.records, 6);
  EXPECT_EQ(r.keys, 6);
  EXPECT_EQ(r.batches, 4 + 4);  // 2+2+2+0 for each table
  pqxx::nontransaction tx(conn);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM " + table.quoted())[0][0].as<int>(), 1);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM " + table.quoted_with_suffix("_keys"))[0][0].as<int>(),
            1);
}

}  // namespace
}  // namespace outbox
