// A log-mode outbox table moved to another PostgreSQL cluster by pg_dump and pg_restore
// (issue 30). Positions are transaction ids, and a freshly initdb'ed cluster hands out lower
// ones than the cluster the progress was recorded on: without a guard, every event inserted
// after the move would sort below the restored progress and count as sent, unpublished. What
// these tests hold the relay to: before `migrate --rebase` nothing is lost (an insert fails,
// the relay and the on-call commands refuse, saying why and naming the fix); after it, new
// events are published once and nothing sent from the first cluster is sent again.
//
// The second cluster is the test bed's pg2 (scripts/testbed/up.sh pg2). Each test works in
// a schema of its own: outbox_meta, where a table's cluster is recorded, is per schema, and
// `pg_dump -n` moves exactly that schema.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobs/cli_runner.hpp"
#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "relay_fixture.hpp"
#include "support/child_process.hpp"
#include "support/tcp_forwarder.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::consume_all;
using testing::Consumed;
using testing::distinct_seqs;
using testing::eventually;
using testing::missing_seqs;
using testing::per_key_order_problem;
using testing::run_cli;
using testing::ThreadRelay;

// How far the first cluster's transaction ids lead the second's when a test begins: far
// more than the second hands out during a test (the restore, the relays, the rebase), so
// that its ids stay behind the restored progress until the rebase, as after a real move.
constexpr std::int64_t kXidLead = 20'000;

// The parts of a test-bed DSN, postgresql://user:password@host:port/db: the client tools
// get the password in their environment, never on their command line.
struct Dsn {
  std::string user, password, host, port, db;

  static Dsn parse(const std::string& dsn) {
    static const std::regex shape(R"(^postgresql://([^:@/]+):([^@/]+)@([^:/]+):(\d+)/([^?]+)$)");
    std::smatch m;
    if (!std::regex_match(dsn, m, shape)) {
      throw std::invalid_argument("not a test-bed DSN (postgresql://user:password@host:port/db)");
    }
    return {m[1], m[2], m[3], m[4], m[5]};
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a client tool of the servers' version (pg_dump, pg_restore) against `dsn`, with
// `args` after the connection options; throws with the tool's output if it fails.
void run_pg_tool(const std::string& tool, const std::vector<std::string>& args,
                 const std::string& dsn) {
  const Dsn d = Dsn::parse(dsn);
  std::vector<std::string> argv = {
      testbed::postgres_bin() + "/" + tool, "-h", d.host, "-p", d.port, "-U", d.user, "-d", d.db};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = "/tmp/" + testbed::unique_name(tool) + ".log";
  testbed::ChildProcess process(argv, {{"PGPASSWORD", d.password}}, log);
  const int rc = process.wait(120s);
  if (rc != 0) {
    throw std::runtime_error(tool + " exited with " + std::to_string(rc) + ":\n" + read_file(log));
  }
  std::remove(log.c_str());
}

// The database moved as an operator moves it: pg_dump of the schema in the custom format on
// `from`, pg_restore of it on `to` (owners kept: the test bed has the same roles on both).
void move_schema(const std::string& schema, const std::string& from, const std::string& to) {
  const std::string file = "/tmp/" + testbed::unique_name("cluster-move") + ".dump";
  run_pg_tool("pg_dump", {"--format=custom", "--schema=" + schema, "--file=" + file}, from);
  run_pg_tool("pg_restore", {"--exit-on-error", file}, to);
  std::remove(file.c_str());
}

// The cluster's next transaction id (reading it assigns none).
std::int64_t next_xid(const std::string& dsn) {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  return tx.exec("SELECT pg_snapshot_xmax(pg_current_snapshot())::text")[0][0].as<std::int64_t>();
}

// Makes the transaction ids of `ahead` lead those of `behind` by at least `lead`, as on a
// cluster that has served for a while beside a fresh one. One short transaction per id,
// committed inside one DO block and without waiting for the WAL flush (not one round trip
// and fsync each): 20,000 take about 0.2 s.
void lead_by(const std::string& ahead, const std::string& behind, std::int64_t lead) {
  const std::int64_t burn = next_xid(behind) + lead - next_xid(ahead);
  if (burn <= 0) {
    return;
  }
  pqxx::connection conn(ahead);
  pqxx::nontransaction tx(conn);
  tx.exec("SET synchronous_commit = off");
  tx.exec("DO $$ BEGIN FOR i IN 1.." + std::to_string(burn) +
          " LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$");
}

// What the relay's problem(), inspect and the insert guard must say of a moved table: why...
bool names_the_move(const std::string& text) {
  return text.find("another PostgreSQL cluster") != std::string::npos ||
         text.find("behind") != std::string::npos;
}
// ...and the fix.
bool names_the_rebase(const std::string& text, const TableName& table) {
  return text.find("outbox-operator migrate --table " + table.plain() + " --rebase") !=
         std::string::npos;
}

// The payload "seq" values in [from, to) that arrived more than once, as "3 (2 times), ..."
// ("" when none did).
std::string duplicated_seqs(const std::vector<Consumed>& messages, int from, int to) {
  std::map<int, int> arrivals;
  for (const auto& m : messages) {
    ++arrivals[nlohmann::json::parse(m.payload).at("seq").get<int>()];
  }
  std::string out;
  for (const auto& [seq, n] : arrivals) {
    if (seq >= from && seq < to && n > 1) {
      out += (out.empty() ? "" : ", ") + std::to_string(seq) + " (" + std::to_string(n) + " times)";
    }
  }
  return out;
}

// The test's log-mode table, <schema>.outbox_event, made on the first cluster in a schema of
// its own; the schema is dropped from both clusters at the end.
struct MovedTable {
  explicit MovedTable(ClusterMovePolicy policy = ClusterMovePolicy::kRebase)
      : first(testbed::postgres_dsn()),
        second(testbed::postgres2_dsn()),
        schema(testbed::unique_name("move")),
        table(TableName::parse(schema + ".outbox_event")),
        topic(testbed::unique_name("topic")) {
    pqxx::connection conn(first);
    pqxx::nontransaction(conn).exec("CREATE SCHEMA " + schema);
    MigrateOptions options;
    options.shard_count = 16;
    options.mode = TableMode::kLog;
    options.on_cluster_move = policy;
    migrate(conn, table, options);
  }
  ~MovedTable() {
    for (const std::string* dsn : {&first, &second}) {
      try {
        pqxx::connection conn(*dsn);
        pqxx::nontransaction(conn).exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
      } catch (const std::exception& e) {
        std::cerr << "dropping schema " << schema << ": " << e.what() << "\n";
      }
    }
  }
  MovedTable(const MovedTable&) = delete;
  MovedTable& operator=(const MovedTable&) = delete;

  // n events in one committed transaction on `dsn`, with payloads {"seq", "key"} as the relay
  // fixture writes them (keys k0..k6).
  void insert(const std::string& dsn, int n, int start_seq) const {
    pqxx::connection conn(dsn);
    pqxx::work tx(conn);
    for (int i = start_seq; i < start_seq + n; ++i) {
      std::string key = "k";  // appended, not operator+: see OutboxTestTable::insert
      key += std::to_string(i % 7);
      enqueue(tx, table, "order", key, nlohmann::json{{"seq", i}, {"key", key}}.dump());
    }
    tx.commit();
  }
  // Events on `dsn` matching `where`, with their status as the "_status" view shows it.
  long long count(const std::string& dsn, const std::string& where) const {
    pqxx::connection conn(dsn);
    pqxx::nontransaction tx(conn);
    return tx
        .exec("SELECT count(*) FROM " + table.quoted_with_suffix("_status") + " WHERE " +
              where)[0][0]
        .as<long long>();
  }
  // The relay fixture's settings (short intervals and backoffs), on `dsn`.
  relay::RelayConfig relay_config(const std::string& dsn) const {
    relay::RelayConfig c;
    c.dsn = dsn;
    c.table = table.plain();
    c.kafka.bootstrap_servers = testbed::kafka_bootstrap();
    c.kafka.message_timeout = 5s;
    c.publish.router = relay::TopicRouter(topic, {});
    c.batch_size = 100;
    c.poll_interval = 500ms;
    c.publish.backoff.initial = 200ms;
    c.publish.backoff.max = 1000ms;
    c.rebalance_interval = 200ms;
    c.backlog_interval = 200ms;
    return c;
  }
  // `migrate --table <t> --rebase` through the real binary against `dsn`, as an operator runs it.
  testing::CliResult rebase(const std::string& dsn) const {
    return run_cli(dsn,
                   std::string(OUTBOX_BINARY) + " migrate --table " + table.plain() + " --rebase");
  }

  std::string first;   // where the table is made: the test bed's pg
  std::string second;  // where it is moved to: pg2
  std::string schema;
  TableName table;
  std::string topic;
};

// A login role of one name and password on both clusters, as a move brings the roles along
// (pg_dumpall --roles-only): a relay's DSN stays valid when the address in it leads to the
// other cluster. The test bed's `outbox` role has another password on each. A superuser, as
// `outbox` is, so that it may do all a relay does to the tables `outbox` owns.
struct SharedRole {
  SharedRole() : name(testbed::unique_name("mover")), password(testbed::unique_name("pw")) {
    for (const auto& dsn : {testbed::postgres_dsn(), testbed::postgres2_dsn()}) {
      pqxx::connection conn(dsn);
      pqxx::nontransaction(conn).exec("CREATE ROLE " + name + " LOGIN SUPERUSER PASSWORD '" +
                                      password + "'");
    }
  }
  ~SharedRole() {
    for (const auto& dsn : {testbed::postgres_dsn(), testbed::postgres2_dsn()}) {
      try {
        pqxx::connection conn(dsn);
        pqxx::nontransaction(conn).exec("DROP OWNED BY " + name + "; DROP ROLE " + name);
      } catch (const std::exception& e) {
        std::cerr << "dropping role " << name << ": " << e.what() << "\n";
      }
    }
  }
  SharedRole(const SharedRole&) = delete;
  SharedRole& operator=(const SharedRole&) = delete;

  // This role's DSN for the database `outbox` at 127.0.0.1:port.
  std::string dsn(int port) const {
    return "postgresql://" + name + ":" + password + "@127.0.0.1:" + std::to_string(port) + "/" +
           Dsn::parse(testbed::postgres_dsn()).db;
  }

  std::string name;
  std::string password;
};

int port_of(const std::string& dsn) {
  return std::stoi(Dsn::parse(dsn).port);
}

TEST(ClusterMove,
     UnderRefuseADumpRestoredIntoANewClusterLosesNothingAndResendsNothingAfterTheRebase) {
  MovedTable t(ClusterMovePolicy::kRefuse);
  lead_by(t.first, t.second, kXidLead);

  // On the first cluster: 300 events, published and marked before the dump, so that the
  // progress moves with them.
  t.insert(t.first, 300, 0);
  {
    ThreadRelay relay(t.relay_config(t.first));
    ASSERT_TRUE(eventually([&] { return t.count(t.first, "status = 1") == 300; }, 60s))
        << t.count(t.first, "status = 1")
        << " of 300 marked; problem(): " << relay.health().problem();
  }
  ASSERT_EQ(consume_all({t.topic}, 300, 30s, 2s).size(), 300u);

  move_schema(t.schema, t.first, t.second);
  ASSERT_GT(t.count(t.second, "status = 1"), 0) << "the progress came along";

  // Before the rebase, an insert fails instead of being counted as sent...
  std::string refused;
  try {
    pqxx::connection conn(t.second);
    pqxx::work tx(conn);
    enqueue(tx, t.table, "order", "k0", R"({"seq": 100000, "key": "k0"})");
    tx.commit();
  } catch (const pqxx::sql_error& e) {
    refused = e.what();
  }
  EXPECT_TRUE(names_the_move(refused))
      << "an insert whose position is behind the restored progress must fail, saying why; "
      << (refused.empty() ? "it committed (the event counts as sent, unpublished)" : refused);
  EXPECT_NE(refused.find("--rebase"), std::string::npos) << refused;
  std::cout << "[ cluster move ] the insert before the rebase: "
            << (refused.empty() ? "committed" : "refused: " + refused) << "\n";

  // ...inspect refuses the table, with the reason and the fix...
  const auto inspect =
      run_cli(t.second, std::string(OUTBOX_BINARY) + " inspect --table " + t.table.plain());
  EXPECT_NE(inspect.exit_code, 0) << inspect.output;
  EXPECT_TRUE(names_the_move(inspect.output)) << inspect.output;
  EXPECT_TRUE(names_the_rebase(inspect.output, t.table)) << inspect.output;
  std::cout << "[ cluster move ] inspect said: " << inspect.output << "\n";

  // ...and a relay stays up, not ready, saying why, and publishes nothing.
  {
    ThreadRelay relay(t.relay_config(t.second));
    EXPECT_TRUE(eventually(
        [&] {
          const std::string p = relay.health().problem();
          return names_the_move(p) && names_the_rebase(p, t.table);
        },
        15s))
        << "problem(): " << relay.health().problem();
    EXPECT_FALSE(relay.health().ready());
    EXPECT_EQ(consume_all({t.topic}, 301, 3s, 0ms).size(), 300u)
        << "nothing is published before the rebase";
  }

  const auto rebase = t.rebase(t.second);
  ASSERT_EQ(rebase.exit_code, 0) << rebase.output;

  // After it: inserts work, and a relay on the second cluster publishes them, each once, and
  // none of the 300 sent from the first cluster again.
  t.insert(t.second, 200, 300);
  ThreadRelay relay(t.relay_config(t.second));
  EXPECT_TRUE(eventually([&] { return t.count(t.second, "status <> 1") == 0; }, 60s))
      << t.count(t.second, "status <> 1")
      << " events not sent; problem(): " << relay.health().problem();
  EXPECT_EQ(t.count(t.second, "true"), 500);
  EXPECT_TRUE(relay.health().ready()) << relay.health().problem();
  const auto got = consume_all({t.topic}, 500, 60s, 3s);
  EXPECT_EQ(got.size(), 500u) << "each event once";
  EXPECT_EQ(distinct_seqs(got), 500u);
  EXPECT_EQ(missing_seqs(got, 500), "");
  EXPECT_EQ(duplicated_seqs(got, 0, 300), "") << "sent from the first cluster, sent again";
  EXPECT_EQ(duplicated_seqs(got, 300, 500), "");
  EXPECT_EQ(per_key_order_problem(got), "");
}

TEST(ClusterMove,
     UnderRefuseAMoveUnderARunningRelayStopsItWithTheReasonAndItResumesAfterTheRebase) {
  SharedRole role;
  MovedTable t(ClusterMovePolicy::kRefuse);
  lead_by(t.first, t.second, kXidLead);
  // The relay's DSN names the forwarder, the address the database is known by; it leads to
  // the first cluster until the move.
  testbed::TcpForwarder database(port_of(t.first));
  ThreadRelay relay(t.relay_config(role.dsn(database.port())));

  // Events flow: 100 events in 10 transactions while the relay runs.
  for (int i = 0; i < 10; ++i) {
    t.insert(t.first, 10, i * 10);
    std::this_thread::sleep_for(100ms);
  }
  // The writers have stopped; the move waits until all they wrote is published and marked,
  // as a planned move does (what is marked after the dump would be sent again).
  ASSERT_TRUE(eventually([&] { return t.count(t.first, "status = 1") == 100; }, 60s))
      << t.count(t.first, "status = 1")
      << " of 100 marked; problem(): " << relay.health().problem();

  move_schema(t.schema, t.first, t.second);
  // The address now leads to the second cluster; the relay's sessions are cut, and it
  // reconnects there.
  const auto moved = Clock::now();
  database.retarget(port_of(t.second));
  EXPECT_TRUE(eventually(
      [&] {
        const std::string p = relay.health().problem();
        return names_the_move(p) && names_the_rebase(p, t.table);
      },
      10s))
      << "problem(): " << relay.health().problem();
  std::cout << "[ cluster move ] "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - moved).count()
            << " ms after the cut, the relay's problem(): " << relay.health().problem() << "\n";
  EXPECT_FALSE(relay.health().ready());
  EXPECT_EQ(consume_all({t.topic}, 101, 3s, 0ms).size(), 100u)
      << "nothing is published before the rebase";

  const auto rebase = t.rebase(t.second);
  ASSERT_EQ(rebase.exit_code, 0) << rebase.output;

  // The same relay, still running, resumes on the second cluster: the new events once, none
  // of the first cluster's again.
  t.insert(t.second, 100, 100);
  EXPECT_TRUE(eventually([&] { return t.count(t.second, "status <> 1") == 0; }, 90s))
      << t.count(t.second, "status <> 1")
      << " events not sent; problem(): " << relay.health().problem();
  EXPECT_TRUE(eventually([&] { return relay.health().ready(); }, 10s)) << relay.health().problem();
  EXPECT_EQ(relay.health().problem(), "");
  const auto got = consume_all({t.topic}, 200, 60s, 3s);
  EXPECT_EQ(got.size(), 200u) << "each event once";
  EXPECT_EQ(distinct_seqs(got), 200u);
  EXPECT_EQ(missing_seqs(got, 200), "");
  EXPECT_EQ(duplicated_seqs(got, 0, 100), "") << "sent from the first cluster, sent again";
  EXPECT_EQ(duplicated_seqs(got, 100, 200), "");
  EXPECT_EQ(per_key_order_problem(got), "");
  relay.stop();
}

// Writers as a service runs them: `threads` connections, each transaction taking its key's
// lock (one of `keys` hot keys), drawing the next seq under it (so a key's seqs are in its
// commit order) and inserting one event. switch_to() moves them to another DSN the way a
// connection pool is drained: the transactions under way finish where they began, the next
// ones go to the new address.
class Writers {
 public:
  Writers(const MovedTable& t, std::string dsn, int threads, int keys)
      : table_(t.table), dsn_(std::move(dsn)), keys_(keys) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i] { write(i); });
    }
  }
  ~Writers() { stop(); }
  Writers(const Writers&) = delete;
  Writers& operator=(const Writers&) = delete;

  // `while_paused` runs once no transaction is under way and before any goes to `dsn`.
  void switch_to(std::string dsn, const std::function<void()>& while_paused = {}) {
    std::unique_lock lock(switch_mu_);
    if (while_paused) {
      while_paused();
    }
    dsn_ = std::move(dsn);
    ++generation_;
  }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) {
        t.join();
      }
    }
  }
  // The seqs committed, each with the generation (0: the first DSN) it committed on.
  std::map<int, int> committed() const {
    std::lock_guard lock(mu_);
    return committed_;
  }
  std::vector<std::string> refused() const {
    std::lock_guard lock(mu_);
    return refused_;
  }
  int committed_on(int generation) const {
    int n = 0;
    for (const auto& [seq, g] : committed()) {
      n += g == generation ? 1 : 0;
    }
    return n;
  }

 private:
  void write(int thread) {
    std::unique_ptr<pqxx::connection> conn;
    int connected_to = -1;
    unsigned rng = static_cast<unsigned>(thread) * 7919U + 17U;
    while (!stop_) {
      std::shared_lock lock(switch_mu_);
      try {
        if (!conn || connected_to != generation_) {
          conn = std::make_unique<pqxx::connection>(dsn_);
          connected_to = generation_;
        }
        rng = rng * 1103515245U + 12345U;
        std::string key = "k";
        key += std::to_string((rng >> 8) % static_cast<unsigned>(keys_));
        pqxx::work tx(*conn);
        tx.exec_params("SELECT pg_advisory_xact_lock(hashtext($1))", key);
        const int seq = next_seq_++;
        enqueue(tx, table_, "order", key, nlohmann::json{{"seq", seq}, {"key", key}}.dump());
        tx.commit();
        std::lock_guard g(mu_);
        committed_[seq] = connected_to;
      } catch (const std::exception& e) {
        std::lock_guard g(mu_);
        refused_.push_back(e.what());
        conn.reset();
      }
      lock.unlock();
      std::this_thread::sleep_for(3ms);
    }
  }

  TableName table_;
  std::shared_mutex switch_mu_;  // held shared by a transaction under way, exclusive by a switch
  std::string dsn_;
  int generation_ = 0;
  int keys_;
  std::atomic<int> next_seq_{0};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;  // guards the rest
  std::map<int, int> committed_;
  std::vector<std::string> refused_;
  std::vector<std::thread> threads_;
};

// The seqs the `_status` view on `dsn` shows as sent.
std::set<int> sent_seqs(const MovedTable& t, const std::string& dsn) {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  std::set<int> out;
  for (const auto& r : tx.exec("SELECT (payload->>'seq')::int FROM " +
                               t.table.quoted_with_suffix("_status") + " WHERE status = 1")) {
    out.insert(r[0].as<int>());
  }
  return out;
}

// The end of a move with services running, the same for every way of moving: the relay's
// address leads to the second cluster, whose first event must be published within 10 s; the
// writers stop; then no insert was refused, every committed event was published in its key's
// commit order, and none of `sent_before` (published before `when`) was sent again. Returns
// how many were published twice.
int expect_the_move_lost_nothing(const MovedTable& t, testbed::TcpForwarder& database,
                                 Writers& writers, ThreadRelay& relay,
                                 const std::set<int>& sent_before, const std::string& when) {
  database.retarget(port_of(t.second));
  const auto switched = Clock::now();
  const int first_on_second = [&] {
    for (const auto& [seq, generation] : writers.committed()) {
      if (generation == 1) {
        return seq;
      }
    }
    return -1;
  }();
  EXPECT_TRUE(eventually([&] { return sent_seqs(t, t.second).count(first_on_second) > 0; }, 10s))
      << "the second cluster's first event (seq " << first_on_second
      << ") not published within 10 s of the switch; problem(): " << relay.health().problem();
  std::cout
      << "[ cluster move ] the second cluster's first event published "
      << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - switched).count()
      << " ms after the relay's switch\n";
  std::this_thread::sleep_for(2s);
  writers.stop();

  EXPECT_TRUE(eventually([&] { return t.count(t.second, "status <> 1") == 0; }, 60s))
      << t.count(t.second, "status <> 1")
      << " events unsent on the second cluster; problem(): " << relay.health().problem();
  const auto committed = writers.committed();
  const auto refused = writers.refused();
  EXPECT_TRUE(refused.empty()) << refused.size() << " inserts refused, the first: "
                               << (refused.empty() ? "" : refused.front());
  const auto got = consume_all({t.topic}, committed.size(), 60s, 3s);
  std::map<int, int> arrivals;
  for (const auto& m : got) {
    ++arrivals[nlohmann::json::parse(m.payload).at("seq").get<int>()];
  }
  std::string lost, resent;
  int duplicates = 0;
  for (const auto& [seq, generation] : committed) {
    if (arrivals.count(seq) == 0) {
      lost += (lost.empty() ? "" : ", ") + std::to_string(seq);
    }
  }
  for (const auto& [seq, n] : arrivals) {
    EXPECT_EQ(committed.count(seq), 1u) << "seq " << seq << " published, never committed";
    duplicates += n - 1;
    if (n > 1 && sent_before.count(seq) > 0) {
      resent += (resent.empty() ? "" : ", ") + std::to_string(seq);
    }
  }
  EXPECT_EQ(lost, "") << "committed, never published";
  EXPECT_EQ(resent, "") << "published before the " << when
                        << ", sent again from the second cluster";
  EXPECT_EQ(per_key_order_problem(got), "");
  return duplicates;
}

// The default policy, as a move happens with services running: 8 writers on 3 hot keys write
// to the first cluster while it is dumped and restored into the second, are switched to the
// second (their first inserts there find the move and rebase), and write on; the relay drains
// the first cluster, then its address leads to the second. No insert is refused, every
// committed event is published in its key's commit order, nothing the first cluster had
// published by the dump is sent again, and the second cluster's events are published within
// 10 s of the relay's switch.
TEST(ClusterMove, UnderRebaseWritersWriteThroughADumpAndRestoreAndNothingIsLostRefusedOrResent) {
  SharedRole role;
  MovedTable t;
  lead_by(t.first, t.second, kXidLead);
  testbed::TcpForwarder database(port_of(t.first));
  ThreadRelay relay(t.relay_config(role.dsn(database.port())));
  Writers writers(t, role.dsn(port_of(t.first)), 8, 3);
  std::this_thread::sleep_for(2s);

  move_schema(t.schema, t.first, t.second);  // while the writers go on
  const std::set<int> sent_by_the_dump = sent_seqs(t, t.second);
  writers.switch_to(role.dsn(port_of(t.second)));
  std::this_thread::sleep_for(2s);
  ASSERT_GT(writers.committed_on(1), 0) << "no insert committed on the second cluster";

  // The first cluster's relay publishes what was written there after the dump; then the
  // relay's address leads to the second.
  ASSERT_TRUE(eventually([&] { return t.count(t.first, "status <> 1") == 0; }, 60s))
      << t.count(t.first, "status <> 1")
      << " events left unsent on the first cluster; problem(): " << relay.health().problem();
  const int duplicates =
      expect_the_move_lost_nothing(t, database, writers, relay, sent_by_the_dump, "dump");
  const auto committed = writers.committed();
  const auto refused = writers.refused();
  std::cout << "[ cluster move ] " << committed.size() << " events committed ("
            << writers.committed_on(0) << " on the first cluster, " << writers.committed_on(1)
            << " on the second), " << refused.size() << " refused, " << duplicates
            << " published twice (written to the first cluster after the dump's snapshot and "
               "published there, then again from the restored copy)\n";
  relay.stop();
}

// The rows of `t`'s progress on `dsn`, "shard:xid:id" in shard order.
std::string progress_rows(const MovedTable& t, const std::string& dsn) {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  std::string out;
  for (const auto& r : tx.exec("SELECT shard || ':' || xid || ':' || id FROM " +
                               t.table.quoted_with_suffix("_progress") + " ORDER BY shard")) {
    out += r[0].as<std::string>() + " ";
  }
  return out;
}

// Logical replication of the test's schema from the first cluster to the second, as a
// zero-downtime major upgrade or a move to a managed service sets it up: the schema copied
// first (pg_dump --schema-only), a publication of the outbox's tables on the first cluster
// (the log table through its root: a partition the first cluster adds later lands in the
// second's default one), a subscription on the second that copies what exists and streams the rest.
// Dropped with both (the subscription takes its replication slot on the first with it).
struct Replication {
  Replication(const MovedTable& t, const std::string& role_dsn_first)
      : t_(t), name_(testbed::unique_name("cutover")) {
    const std::string file = "/tmp/" + name_ + ".dump";
    run_pg_tool("pg_dump",
                {"--format=custom", "--schema-only", "--schema=" + t.schema, "--file=" + file},
                t.first);
    run_pg_tool("pg_restore", {"--exit-on-error", file}, t.second);
    std::remove(file.c_str());
    pqxx::connection first(t.first);
    pqxx::nontransaction(first).exec(
        "CREATE PUBLICATION " + name_ + " FOR TABLE " + t.table.quoted() + ", " +
        t.table.quoted_with_suffix("_progress") + ", " + t.table.quoted_with_suffix("_retry") +
        ", " + outbox_meta(t.table) + " WITH (publish_via_partition_root = true)");
    try {
      pqxx::connection second(t.second);
      pqxx::nontransaction(second).exec("CREATE SUBSCRIPTION " + name_ + " CONNECTION " +
                                        second.quote(role_dsn_first) + " PUBLICATION " + name_);
    } catch (...) {
      drop_publication();
      throw;
    }
  }
  ~Replication() {
    try {
      stop();  // the subscription first: it takes its replication slot on the first cluster
    } catch (const std::exception& e) {
      std::cerr << "dropping subscription " << name_ << ": " << e.what() << "\n";
    }
    drop_publication();
  }
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  // True once the second cluster holds every event and the same progress as the first.
  bool caught_up() const {
    return t_.count(t_.first, "true") == t_.count(t_.second, "true") &&
           progress_rows(t_, t_.first) == progress_rows(t_, t_.second);
  }
  void drop_publication() noexcept {
    try {
      pqxx::connection first(t_.first);
      pqxx::nontransaction(first).exec("DROP PUBLICATION IF EXISTS " + name_);
    } catch (const std::exception& e) {
      std::cerr << "dropping publication " << name_ << ": " << e.what() << "\n";
    }
  }
  // The cutover's end: nothing more comes from the first cluster.
  void stop() {
    if (stopped_) {
      return;
    }
    pqxx::connection second(t_.second);
    pqxx::nontransaction(second).exec("DROP SUBSCRIPTION IF EXISTS " + name_);
    stopped_ = true;
  }

 private:
  const MovedTable& t_;
  std::string name_;
  bool stopped_ = false;
};

// The default policy through a logical-replication cutover with services running: 8 writers
// on 3 hot keys and the relay work on the first cluster while it replicates to the second;
// then, as docs/relay.md says a cutover goes, the writers pause, the subscriber catches up,
// the subscription ends, and the writers and the relay's address move to the second cluster
// (the writers' first inserts there find the move and rebase). No insert is refused, every
// committed event is published in its key's commit order, nothing the first cluster had
// published when the subscription ended is sent again, and the second cluster's events are
// published within 10 s of the relay's switch.
TEST(ClusterMove,
     UnderRebaseALogicalReplicationCutoverLosesNothingRefusesNoWriteAndResendsNothing) {
  SharedRole role;
  MovedTable t;
  lead_by(t.first, t.second, kXidLead);
  Replication replication(t, testbed::postgres_dsn());
  testbed::TcpForwarder database(port_of(t.first));
  ThreadRelay relay(t.relay_config(role.dsn(database.port())));
  Writers writers(t, role.dsn(port_of(t.first)), 8, 3);
  std::this_thread::sleep_for(3s);

  std::set<int> sent_at_the_cutover;
  bool caught_up = false;
  std::string lag;
  const auto paused = Clock::now();
  writers.switch_to(role.dsn(port_of(t.second)), [&] {
    caught_up = eventually([&] { return replication.caught_up(); }, 30s);
    lag = std::to_string(t.count(t.first, "true")) + " events on the first cluster, " +
          std::to_string(t.count(t.second, "true")) + " on the second";
    // What the first cluster's relay publishes after this is not replicated: it is sent
    // again from the second (at least once), never lost.
    replication.stop();
    sent_at_the_cutover = sent_seqs(t, t.second);
  });
  ASSERT_TRUE(caught_up) << "the subscriber did not catch up in 30 s: " << lag;
  std::cout << "[ cluster move ] writers paused "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - paused).count()
            << " ms for the subscriber to catch up; " << sent_at_the_cutover.size()
            << " events published by then\n";
  ASSERT_FALSE(sent_at_the_cutover.empty()) << "the first cluster's relay published nothing";
  std::this_thread::sleep_for(2s);
  ASSERT_GT(writers.committed_on(1), 0) << "no insert committed on the second cluster";

  const int duplicates =
      expect_the_move_lost_nothing(t, database, writers, relay, sent_at_the_cutover, "cutover");
  const auto committed = writers.committed();
  const auto refused = writers.refused();
  const RecordedMove move = [&] {
    pqxx::connection conn(t.second);
    pqxx::work tx(conn);
    return recorded_move(tx, t.table);
  }();
  EXPECT_FALSE(move.to.empty()) << "the second cluster's first insert rebased the table";
  std::cout << "[ cluster move ] " << committed.size() << " events committed ("
            << writers.committed_on(0) << " on the first cluster, " << writers.committed_on(1)
            << " on the second), " << refused.size() << " refused, " << duplicates
            << " published twice (published by the first cluster's relay after the "
               "subscription ended, then again from the second)\n";
  relay.stop();
}

}  // namespace
}  // namespace outbox
