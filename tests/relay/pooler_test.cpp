// The relay behind PgBouncer (Debian's package, started here in front of the test bed's
// PostgreSQL): in session mode it runs and publishes; in transaction mode, where its session
// advisory locks and LISTEN would not hold, it refuses to start a session and says why.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include "outbox/shards.hpp"
#include "relay/session.hpp"
#include "relay_fixture.hpp"
#include "support/child_process.hpp"
#include "support/loopback_http.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::OutboxTestTable;
using testing::ThreadRelay;

// One PgBouncer process in `mode` on a free loopback port, for the test bed's database.
class PgBouncer {
 public:
  explicit PgBouncer(const std::string& mode) : port_(testbed::free_port()) {
    std::smatch m;
    const std::string dsn = testbed::postgres_dsn();
    if (!std::regex_match(dsn, m,
                          std::regex(R"(postgresql://([^:]+):([^@]+)@([^:]+):(\d+)/(\w+))"))) {
      throw std::runtime_error("unexpected test bed DSN shape");
    }
    user_ = m[1], password_ = m[2], database_ = m[5];
    // PgBouncer refuses to run as root: as root, it runs as postgres from a directory that
    // user can read (the test bed runs PostgreSQL the same way).
    dir_ = std::filesystem::temp_directory_path() /
           ("pgbouncer-" + mode + "-" + std::to_string(::getpid()) + "-" + std::to_string(port_));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "userlist.txt") << '"' << user_ << "\" \"" << password_ << "\"\n";
    std::ofstream(dir_ / "pgbouncer.ini")
        << "[databases]\n"
        << database_ << " = host=" << m[3] << " port=" << m[4] << " dbname=" << database_ << "\n"
        << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_
        << "\nunix_socket_dir =\nauth_type = scram-sha-256\nauth_file = "
        << (dir_ / "userlist.txt").string() << "\npool_mode = " << mode
        << "\ndefault_pool_size = 20\nmax_client_conn = 200\n"
        << "ignore_startup_parameters = extra_float_digits\n";
    std::vector<std::string> args = {"/usr/sbin/pgbouncer", (dir_ / "pgbouncer.ini").string()};
    if (::geteuid() == 0) {
      ::chmod(dir_.c_str(), 0755);
      for (const char* f : {"userlist.txt", "pgbouncer.ini"}) {
        ::chmod((dir_ / f).c_str(), 0644);
      }
      args.insert(args.begin(),
                  {"/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"});
    }
    process_ = std::make_unique<testbed::ChildProcess>(args, std::map<std::string, std::string>{},
                                                       (dir_ / "pgbouncer.log").string());
    // Ready once it accepts a session.
    const bool up = eventually(
        [&] {
          try {
            pqxx::connection c(this->dsn());
            return true;
          } catch (const std::exception&) {
            return false;
          }
        },
        15s);
    if (!up) {
      throw std::runtime_error("pgbouncer did not start; log: " +
                               (dir_ / "pgbouncer.log").string());
    }
  }
  ~PgBouncer() {
    process_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string dsn() const {
    return "postgresql://" + user_ + ":" + password_ + "@127.0.0.1:" + std::to_string(port_) + "/" +
           database_;
  }

 private:
  unsigned short port_;
  std::string user_, password_, database_;
  std::filesystem::path dir_;
  std::unique_ptr<testbed::ChildProcess> process_;
};

TEST(Pooler, SessionModeRunsTheRelay) {
  PgBouncer pooler("session");
  OutboxTestTable t;
  EXPECT_NO_THROW(relay::Session(pooler.dsn(), t.table));
  relay::RelayConfig config = t.relay_config();
  config.dsn = pooler.dsn();
  ThreadRelay relay(config);
  t.insert(50, 5);
  EXPECT_TRUE(eventually([&] { return t.count("status = 1") == 50; }, 30s))
      << relay.health().problem();
}

TEST(Pooler, TransactionModeIsRefusedWithTheReason) {
  PgBouncer pooler("transaction");
  OutboxTestTable t;
  try {
    relay::Session session(pooler.dsn(), t.table);
    ADD_FAILURE() << "a session started behind a pooler in transaction mode";
  } catch (const PooledConnection& e) {
    EXPECT_NE(std::string(e.what()).find("pooler in transaction mode"), std::string::npos)
        << e.what();
  }
  relay::RelayConfig config = t.relay_config();
  config.dsn = pooler.dsn();
  ThreadRelay relay(config);
  t.insert(10, 2);
  EXPECT_TRUE(
      eventually([&] { return relay.health().problem_reason() == "ConnectionPooled"; }, 20s))
      << relay.health().problem();
  EXPECT_NE(relay.health().problem().find("session mode"), std::string::npos)
      << relay.health().problem();
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(t.count("status = 1"), 0) << "nothing published without shard locks that hold";
}

}  // namespace
}  // namespace outbox
