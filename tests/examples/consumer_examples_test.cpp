// The points service in C++, Python and Java against the test bed's Kafka and PostgreSQL:
// crafted messages go to a topic, the example consumes them, and the points table says
// what was applied. The checklist's item 4 (one event 100 times, then a second consumer
// group; malformed messages refused) and a stale delivery (an older event of a key
// after a newer one). One process start per test, not per message.
#include <cstdio>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "inbox/inbox.hpp"
#include "jobs/cli_runner.hpp"
#include "kafka/producer.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

std::string random_uuid() {
  static std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  const auto a = rng(), b = rng();
  std::snprintf(
      buf, sizeof buf, "%08llx-%04llx-4%03llx-8%03llx-%012llx",
      static_cast<unsigned long long>(a >> 32), static_cast<unsigned long long>((a >> 16) & 0xffff),
      static_cast<unsigned long long>(a & 0xfff), static_cast<unsigned long long>(b >> 52),
      static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// scripts/examples-deps.sh, once per process: the venv's python and the Java classpath.
const std::map<std::string, std::string>& deps() {
  static const std::map<std::string, std::string> found = [] {
    auto r = testing::run_cli("", std::string(OUTBOX_SOURCE_DIR) + "/scripts/examples-deps.sh");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::map<std::string, std::string> out;
    std::smatch m;
    const std::regex line("(python|java_classpath)=([^\n]*)");
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
         it != std::sregex_iterator(); ++it) {
      out[(*it)[1]] = (*it)[2];
    }
    return out;
  }();
  return found;
}

// postgresql://user:password@host:port/db as JDBC wants it.
std::string jdbc_url(const std::string& dsn) {
  std::smatch m;
  const std::regex url("postgresql://([^:]+):([^@]+)@([^/]+)/(.+)");
  EXPECT_TRUE(std::regex_match(dsn, m, url)) << dsn;
  return "jdbc:postgresql://" + m[3].str() + "/" + m[4].str() + "?user=" + m[1].str() +
         "&password=" + m[2].str();
}

struct Delivery {
  std::string event_id;
  std::string key;
  std::string payload;
  std::int64_t seq;
};

struct ConsumerExample : ::testing::Test {
  std::string topic = testbed::unique_name("points");
  std::string user = testbed::unique_name("user");
  TableName inbox = TableName::parse(testbed::unique_name("points_inbox"));

  void SetUp() override {
    pqxx::connection conn(testbed::postgres_dsn());
    inbox::migrate_inbox(conn, inbox);
  }

  std::string paid(int amount) const {
    return nlohmann::json{{"user", user}, {"amount", amount}}.dump();
  }

  void produce(const std::vector<Delivery>& deliveries) {
    kafka::ProducerConfig pc;
    pc.bootstrap_servers = testbed::kafka_bootstrap();
    kafka::BatchProducer producer(pc);
    std::vector<kafka::Message> messages;
    for (const auto& d : deliveries) {
      messages.push_back({topic,
                          d.key,
                          d.payload,
                          {{"event_id", d.event_id},
                           {"biz_type", "ORDER_PAID"},
                           {"outbox.seq", std::to_string(d.seq)}}});
    }
    for (const auto& d : producer.publish(messages)) {
      ASSERT_EQ(d.error_class, kafka::ErrorClass::kNone) << d.error;
    }
  }

  // The command that runs the example in `language` on the topic against `dsn`, until `count`
  // messages were consumed (0: no count) or it was idle `idle_exit` seconds.
  std::string command(const std::string& language, const std::string& dsn, const std::string& group,
                      int count, int idle_exit) const {
    const std::string args = " --brokers " + testbed::kafka_bootstrap() + " --topic " + topic +
                             " --group " + group + " --idle-exit " + std::to_string(idle_exit);
    if (language == "python") {
      return deps().at("python") + " " + OUTBOX_SOURCE_DIR +
             "/examples/points_service_python/points_service.py --dsn '" + dsn + "' --inbox " +
             inbox.plain() + " --max-messages " + std::to_string(count) + args;
    }
    if (language == "java") {
      return "java -cp '" + deps().at("java_classpath") + "' PointsService --dsn '" +
             jdbc_url(dsn) + "' --inbox " + inbox.plain() + " --max-messages " +
             std::to_string(count) + args;
    }
    // C++: its own inbox, public.points_inbox, and no count.
    return std::string(POINTS_SERVICE_BINARY) + " --dsn '" + dsn + "' --brokers " +
           testbed::kafka_bootstrap() + " --topic " + topic + " --group " + group +
           " --idle-exit " + std::to_string(idle_exit);
  }

  // Runs the example in `language` on the topic until `count` messages were consumed. The
  // C++ one stops after 10 s without a message, the group join included.
  std::string consume(const std::string& language, const std::string& group, int count) {
    auto r = testing::run_cli(
        testbed::postgres_dsn(),
        command(language, testbed::postgres_dsn(), group, count, language == "cpp" ? 10 : 30));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }

  std::int64_t points() {
    pqxx::connection conn(testbed::postgres_dsn());
    auto r = pqxx::nontransaction(conn).exec_params(
        "SELECT points FROM user_points WHERE user_id = $1", user);
    return r.empty() ? 0 : r[0][0].as<std::int64_t>();
  }

  // Check 4: one event 100 times, a payload that is no JSON, an event_id that is no UUID.
  void check4(const std::string& language) {
    const std::string id = random_uuid();
    std::vector<Delivery> d(100, Delivery{id, "order-1", paid(250), 7});
    d.push_back({random_uuid(), "order-2", "{oops", 8});
    d.push_back({"not-a-uuid", "order-3", paid(10), 9});
    produce(d);
    const std::string want = "applied 1, duplicates skipped 99, stale skipped 0, rejected 2";
    std::string out = consume(language, topic + "-a", 102);
    EXPECT_NE(out.find(want), std::string::npos) << out;
    EXPECT_EQ(points(), 25) << "250 paid = 25 points, added once";
    // A second consumer group is another consumer of the inbox: it applies the event once.
    out = consume(language, topic + "-b", 102);
    EXPECT_NE(out.find(want), std::string::npos) << out;
    EXPECT_EQ(points(), 50) << "once per group";
  }

  // A newer event of a key, then an older one (a replay), then the newer one again.
  void stale(const std::string& language) {
    const std::string newer = random_uuid();
    produce({{newer, "order-9", paid(100), 20},
             {random_uuid(), "order-9", paid(500), 10},
             {newer, "order-9", paid(100), 20}});
    const std::string out = consume(language, topic, 3);
    EXPECT_NE(out.find("applied 1, duplicates skipped 1, stale skipped 1, rejected 0"),
              std::string::npos)
        << out;
    EXPECT_EQ(points(), 10) << "the older event's 50 points were never added";
  }
};

// Replicas of the service starting at once on a database that has none of its tables yet (a
// new environment, or the test bed's first run, where two tests did this): each creates what
// it needs under a lock, so none fails on another's CREATE TABLE IF NOT EXISTS.
TEST_F(ConsumerExample, ServicesStartingAtOnceOnAFreshDatabaseAllRun) {
  // A database of its own, dropped whatever happens (the test bed outlives the test).
  struct FreshDatabase {
    std::string name = testbed::unique_name("points_db");
    FreshDatabase() {
      pqxx::connection conn(testbed::postgres_dsn());
      pqxx::nontransaction(conn).exec("CREATE DATABASE " + conn.quote_name(name));
    }
    ~FreshDatabase() {
      try {
        pqxx::connection conn(testbed::postgres_dsn());
        pqxx::nontransaction(conn).exec("DROP DATABASE " + conn.quote_name(name) + " WITH (FORCE)");
      } catch (const std::exception&) {
        // The test bed's down.sh removes the server with it.
      }
    }
  } database;
  // The test bed's DSN is a URI: postgresql://user:password@host:port/database.
  const std::string base = testbed::postgres_dsn();
  const std::string dsn = base.substr(0, base.rfind('/') + 1) + database.name;
  {
    pqxx::connection conn(dsn);
    inbox::migrate_inbox(conn, inbox);
  }
  const std::vector<std::string> languages = {"python", "python", "python", "java",
                                              "java",   "cpp",    "cpp"};
  std::vector<std::string> commands;  // made here: deps() may fail, and not inside a thread
  for (const auto& language : languages) {
    commands.push_back(command(language, dsn, topic + "-start", 0, 1));
  }
  std::vector<testing::CliResult> results(languages.size());
  std::vector<std::thread> starts;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    starts.emplace_back([&, i] { results[i] = testing::run_cli(dsn, commands[i]); });
  }
  for (auto& t : starts) {
    t.join();
  }
  for (std::size_t i = 0; i < languages.size(); ++i) {
    EXPECT_EQ(results[i].exit_code, 0) << languages[i] << ": " << results[i].output;
  }
}

TEST_F(ConsumerExample, Python_Check4_OneEvent100TimesAppliedOncePerGroupMalformedRefused) {
  check4("python");
}
TEST_F(ConsumerExample, Python_AnOlderEventAfterANewerOneIsRefused) {
  stale("python");
}
TEST_F(ConsumerExample, Java_Check4_OneEvent100TimesAppliedOncePerGroupMalformedRefused) {
  check4("java");
}
TEST_F(ConsumerExample, Java_AnOlderEventAfterANewerOneIsRefused) {
  stale("java");
}
TEST_F(ConsumerExample, Cpp_AnOlderEventAfterANewerOneIsRefused) {
  stale("cpp");
}

}  // namespace
}  // namespace outbox
