// A rotated credential reaches a running relay through its mounted files, with no Secret read
// by the operator and no pod restart (issue 42): the real binary, reading --dsn-file and
// --kafka-config-dir from a directory laid out as the kubelet lays out a Secret volume, which
// the test rewrites as the kubelet does (a ..data symlink swap).
//  - a DSN rewritten to point at another PostgreSQL cluster (the test bed's pg2): the relay
//    ends its session cleanly (what it published is marked sent) and publishes the new
//    database's events, in the same process;
//  - a Kafka credential file changed: librdkafka read it when the producer was created, so the
//    relay drains and exits with 75 for its supervisor to start it again; a rewrite with the
//    same content changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/duration.hpp"
#include "relay_fixture.hpp"
#include "support/child_process.hpp"
#include "support/secret_volume.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testbed::SecretVolume;
using testing::consume_all;
using testing::distinct_seqs;
using testing::eventually;
using testing::missing_seqs;
using testing::OutboxTestTable;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The password of a test-bed DSN, postgresql://user:password@host:port/db.
std::string password_of(const std::string& dsn) {
  const std::size_t colon = dsn.find(':', dsn.find("://") + 3);
  return dsn.substr(colon + 1, dsn.rfind('@') - colon - 1);
}

// The relay binary as the operator starts it in a pod: the DSN in a file of a Secret volume,
// never in the environment or on the command line; extra flags in `more`.
std::unique_ptr<testbed::ChildProcess> start_relay(const OutboxTestTable& t,
                                                   const SecretVolume& database,
                                                   const std::string& log,
                                                   std::vector<std::string> more = {}) {
  std::vector<std::string> args = {OUTBOX_BINARY,
                                   "relay",
                                   "--dsn-file=" + database.path("dsn"),
                                   "--table=" + t.table.plain(),
                                   "--brokers=" + testbed::kafka_bootstrap(),
                                   "--topic=" + t.topic,
                                   "--poll-interval=500ms",
                                   "--message-timeout=5s",
                                   "--listen=127.0.0.1:0"};
  args.insert(args.end(), more.begin(), more.end());
  return std::make_unique<testbed::ChildProcess>(args, std::map<std::string, std::string>{}, log);
}

// The same table (name, topic) on the test bed's second cluster, migrated there too.
OutboxTestTable on_second_cluster(const OutboxTestTable& t) {
  OutboxTestTable second = t;
  second.dsn = testbed::postgres2_dsn();
  pqxx::connection conn(second.dsn);
  testing::migrate_for_test(conn, second.table);
  return second;
}

TEST(CredentialRotation, ADsnFileRewrittenToAnotherDatabaseIsFollowedWithoutARestartOrALoss) {
  OutboxTestTable first;
  OutboxTestTable second = on_second_cluster(first);
  SecretVolume database;
  database.publish({{"dsn", first.dsn}});
  const std::string log = "/tmp/" + testbed::unique_name("relay-rotation") + ".log";
  auto relay = start_relay(first, database, log);

  first.insert(100, 5, 0);
  ASSERT_TRUE(eventually([&] { return first.count("status = 1") == 100; }, 60s)) << read_file(log);
  // Waiting on the second cluster, unseen while the relay is connected to the first; more on
  // the first, which the relay may be publishing when it notices the rotation.
  second.insert(100, 5, 100);
  first.insert(100, 5, 200);
  database.publish({{"dsn", second.dsn}});

  ASSERT_TRUE(eventually([&] { return second.count("status = 1") == 100; }, 60s))
      << "the second database's events were not published:\n"
      << read_file(log);
  EXPECT_EQ(relay->wait(1s), -1) << "the relay process ended:\n" << read_file(log);
  const std::vector<testing::Consumed> got = consume_all({first.topic}, 200, 30s);
  EXPECT_EQ(missing_seqs(got, 200), "")
      << "seq 0-199: every event of the first batch and of the second database";
  // The session ended as a graceful stop ends: every event of the first database that went
  // out was marked sent there, none was left claimed and unmarked; those it did not reach wait
  // for a relay of that database.
  const long long from_first = static_cast<long long>(distinct_seqs(got)) - 100;
  EXPECT_EQ(first.count("status = 1"), from_first)
      << "published from the first database but not marked sent";
  EXPECT_EQ(first.count("status = 0"), 200 - from_first);

  const std::string text = read_file(log);
  EXPECT_NE(text.find("database credential file " + database.path("dsn") + " changed"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(password_of(second.dsn)), std::string::npos) << "a password in the log";
  EXPECT_EQ(relay->terminate(), 0) << read_file(log);
}

TEST(CredentialRotation, AChangedKafkaCredentialFileEndsTheRelayCleanlyForARestart) {
  OutboxTestTable t;
  SecretVolume database;
  database.publish({{"dsn", t.dsn}});
  SecretVolume kafka;
  kafka.publish({{"client.id", "rotation-one"}});
  const std::string log = "/tmp/" + testbed::unique_name("relay-kafka-rotation") + ".log";
  auto relay = start_relay(t, database, log, {"--kafka-config-dir=" + kafka.path()});
  t.insert(50, 5);
  ASSERT_TRUE(eventually([&] { return t.count("status = 1") == 50; }, 60s)) << read_file(log);

  // The kubelet's resync writes the same content again: nothing to do (the relay looks with
  // each backlog measurement, every 5 s).
  kafka.publish({{"client.id", "rotation-one"}});
  database.publish({{"dsn", t.dsn}});
  EXPECT_EQ(relay->wait(7s), -1) << "the relay ended for an unchanged file:\n" << read_file(log);
  EXPECT_EQ(read_file(log).find("credential file"), std::string::npos) << read_file(log);

  t.insert(50, 5, 50);
  kafka.publish({{"client.id", "rotation-two"}});
  EXPECT_EQ(relay->wait(30s), 75) << read_file(log);
  const std::string text = read_file(log);
  EXPECT_NE(text.find("Kafka credential file " + kafka.path() + " changed"), std::string::npos)
      << text;
  EXPECT_NE(text.find("exiting with code 75"), std::string::npos) << text;
  // Drained before it exited: what it published is marked sent.
  const long long published =
      static_cast<long long>(distinct_seqs(consume_all({t.topic}, 100, 10s)));
  EXPECT_EQ(t.count("status = 1"), published) << "published but not marked sent";

  // Started again, as the kubelet would, it publishes what is left.
  relay = start_relay(t, database, log, {"--kafka-config-dir=" + kafka.path()});
  EXPECT_TRUE(eventually([&] { return t.count("status = 1") == 100; }, 60s)) << read_file(log);
  EXPECT_EQ(missing_seqs(consume_all({t.topic}, 100, 30s), 100), "");
  EXPECT_EQ(relay->terminate(), 0);
}

}  // namespace
}  // namespace outbox
