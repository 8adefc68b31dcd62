// Two kube_elector_probe processes contend for one Lease on the real apiserver.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "e2e_support.hpp"
#include "kube/micro_time.hpp"

extern char** environ;

namespace outbox::kube {
namespace {

using namespace std::chrono_literals;
using Micros = long long;

Micros now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Line {
  Micros at;
  std::string event;
};

// One probe process and the lines it printed.
class Probe {
 public:
  Probe(const std::string& ns, const std::string& lease, const std::string& identity,
        std::vector<std::string> extra = {})
      : identity_(identity) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    std::vector<std::string> args = {KUBE_ELECTOR_PROBE,
                                     "--kubeconfig",
                                     testbed::kubeconfig_path(),
                                     "--namespace",
                                     ns,
                                     "--lease",
                                     lease,
                                     "--identity",
                                     identity};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      FILE* in = fdopen(fd, "r");
      char buf[512];
      while (std::fgets(buf, sizeof buf, in) != nullptr) {
        std::istringstream line(buf);
        Line parsed;
        line >> parsed.at;
        std::getline(line >> std::ws, parsed.event);
        std::lock_guard lock(mutex_);
        lines_.push_back(parsed);
      }
      std::fclose(in);
    });
  }
  ~Probe() {
    if (!exited_) {
      kill(pid_, SIGKILL);
      wait_exit();
    }
    reader_.join();
  }

  std::vector<Line> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  std::optional<Line> find(const std::string& event) const {
    std::lock_guard lock(mutex_);
    for (const auto& l : lines_) {
      if (l.event == event) {
        return l;
      }
    }
    return std::nullopt;
  }
  std::optional<Line> await(const std::string& event, std::chrono::milliseconds timeout) const {
    std::optional<Line> found;
    e2e::eventually([&] { return (found = find(event)).has_value(); }, timeout);
    return found;
  }
  void signal(int sig) { kill(pid_, sig); }
  int wait_exit() {
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  const std::string& identity() const { return identity_; }

 private:
  std::string identity_;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::vector<Line> lines_;
};

class KubeElectorE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_.emplace(load_kubeconfig(testbed::kubeconfig_path()));
    ns_ = e2e::make_namespace(*client_, "elector");
    lease_ = e2e::dns_name("lease");
  }
  Json lease() { return client_->get(resources::leases, ns_, lease_); }

  std::optional<Client> client_;
  std::string ns_, lease_;
};

// Defaults 15 s / 10 s / 2 s, as the operator runs. Measures and prints the takeover time.
TEST_F(KubeElectorE2eTest, KillNineLeaderStandbyTakesOverWithinLeaseDurationPlusRetry) {
  Probe a(ns_, lease_, "probe-a");
  ASSERT_TRUE(a.await("started", 20s)) << "the first candidate takes a free lease at once";
  Probe b(ns_, lease_, "probe-b");
  ASSERT_TRUE(b.await("new_leader probe-a", 10s)) << "the standby sees who leads";
  // Several renew rounds with both running; the random part puts the kill at a random phase
  // of the 2 s renew/poll cycles, which is what the takeover time depends on.
  std::this_thread::sleep_for(4s + std::chrono::milliseconds(std::random_device{}() % 2000));
  EXPECT_FALSE(b.find("started")) << "exactly one leads";
  Json held = lease();
  EXPECT_EQ(held["spec"]["holderIdentity"], "probe-a");
  EXPECT_EQ(held["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(held["spec"]["leaseTransitions"], 0);
  // MicroTime on the wire: six fractional digits, UTC.
  std::string renew = held["spec"]["renewTime"];
  ASSERT_EQ(renew.size(), 27u) << renew;
  EXPECT_EQ(renew.substr(19, 1), ".");
  EXPECT_EQ(renew.back(), 'Z');
  EXPECT_TRUE(parse_micro_time(renew).has_value());
  std::string acquired = held["spec"]["acquireTime"];
  EXPECT_NE(acquired, renew) << "acquireTime is kept on renew";

  Micros killed = now_us();
  a.signal(SIGKILL);
  a.wait_exit();
  auto took_over = b.await("started", 30s);
  ASSERT_TRUE(took_over);
  double takeover_s = static_cast<double>(took_over->at - killed) / 1e6;
  std::printf("takeover after kill -9 (15s/10s/2s): %.2f s\n", takeover_s);
  RecordProperty("takeover_seconds", std::to_string(takeover_s));
  // Never before the dead leader's claim can have expired (it renewed at most ~2 s before
  // dying), never later than lease duration + retry period (+ request latency).
  EXPECT_GE(takeover_s, 15.0 - 2.0 - 0.5);
  EXPECT_LE(takeover_s, 15.0 + 2.0 + 0.5);
  EXPECT_FALSE(a.find("stopped")) << "a killed process prints nothing";

  Json taken = lease();
  EXPECT_EQ(taken["spec"]["holderIdentity"], "probe-b");
  EXPECT_EQ(taken["spec"]["leaseTransitions"], 1);
  EXPECT_NE(taken["spec"]["acquireTime"], acquired) << "a new holder resets acquireTime";
}

// A clean shutdown releases the lease: the standby takes over within one retry period, and
// only after the old leader said it stopped.
TEST_F(KubeElectorE2eTest, CleanShutdownReleasesAtOnceAndLeadershipNeverOverlaps) {
  Probe a(ns_, lease_, "probe-a");
  ASSERT_TRUE(a.await("started", 20s));
  Probe b(ns_, lease_, "probe-b");
  ASSERT_TRUE(b.await("new_leader probe-a", 10s));
  std::this_thread::sleep_for(3s);
  ASSERT_FALSE(b.find("started"));

  Micros terminated = now_us();
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(), 0);
  auto a_stopped = a.find("stopped");
  ASSERT_TRUE(a_stopped);
  auto b_started = b.await("started", 10s);
  ASSERT_TRUE(b_started);
  double takeover_s = static_cast<double>(b_started->at - terminated) / 1e6;
  std::printf("takeover after clean shutdown: %.2f s\n", takeover_s);
  RecordProperty("release_takeover_seconds", std::to_string(takeover_s));
  EXPECT_LE(takeover_s, 2.0 + 0.5) << "within one retry period of the release";
  // The recorded transitions: a's leadership interval [started, stopped] ends before b's begins.
  EXPECT_LT(a_stopped->at, b_started->at);
  EXPECT_LT(a.find("started")->at, a_stopped->at);
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "probe-b");
}

// A leader that cannot reach the apiserver steps down by itself within the renew deadline of
// its last renewal, before its lease (as others see it) can expire. Shorter durations to keep it
// quick.
TEST_F(KubeElectorE2eTest, LeaderThatCannotRenewStepsDownBeforeTheLeaseExpires) {
  Probe a(ns_, lease_, "probe-a",
          {"--lease-ms", "8000", "--renew-ms", "4000", "--retry-ms", "1000"});
  ASSERT_TRUE(a.await("started", 20s));
  std::this_thread::sleep_for(2s);
  Micros cut = now_us();
  testbed::control("kube", "kill9");
  auto stopped = a.await("stopped", 20s);
  testbed::control("kube", "start");
  ASSERT_TRUE(stopped);
  double stepped_down_s = static_cast<double>(stopped->at - cut) / 1e6;
  std::printf("leader stepped down %.2f s after losing the apiserver\n", stepped_down_s);
  EXPECT_LE(stepped_down_s, 4.0 + 0.5) << "renew deadline after the last renewal (before the cut)";
  EXPECT_LT(stepped_down_s, 8.0) << "strictly before the lease duration";
  EXPECT_EQ(a.wait_exit(), 1) << "run() reports the loss";
}

// A leader frozen (SIGSTOP) longer than its lease: the standby takes over. Once thawed, the old
// leader's guard is closed from its first look (the monotonic clock ran through the pause), it
// never opens again, and the old leader steps down as soon as it reads the Lease, not a renew
// deadline later.
TEST_F(KubeElectorE2eTest, LeaderPausedPastItsLeaseClosesItsGuardAtOnceWhenResumed) {
  Probe a(ns_, lease_, "probe-a",
          {"--lease-ms", "4000", "--renew-ms", "3000", "--retry-ms", "500"});
  ASSERT_TRUE(a.await("guard_open", 20s));
  Probe b(ns_, lease_, "probe-b",
          {"--lease-ms", "4000", "--renew-ms", "3000", "--retry-ms", "500"});
  ASSERT_TRUE(b.await("new_leader probe-a", 10s));
  a.signal(SIGSTOP);
  ASSERT_TRUE(b.await("started", 20s)) << "the standby takes the expired lease";
  std::this_thread::sleep_for(1s);
  const Micros resumed = now_us();
  a.signal(SIGCONT);
  auto closed = a.await("guard_closed", 5s);
  auto stopped = a.await("stopped", 5s);
  std::string seen;
  for (const Line& line : a.lines()) {
    seen += std::to_string(line.at - resumed) + " us: " + line.event + "\n";
  }
  ASSERT_TRUE(closed) << seen;
  ASSERT_TRUE(stopped) << seen;
  const double closed_s = static_cast<double>(closed->at - resumed) / 1e6;
  const double stopped_s = static_cast<double>(stopped->at - resumed) / 1e6;
  std::printf("after SIGCONT: guard closed %.3f s, stepped down %.3f s\n", closed_s, stopped_s);
  EXPECT_LT(closed_s, 0.2) << "closed at the first look";
  EXPECT_LT(stopped_s, 1.0) << "stepped down on seeing the other holder, not 3 s later";
  EXPECT_EQ(a.wait_exit(), 1) << "run() reports the loss";
  int opens = 0;
  for (const Line& line : a.lines()) {
    opens += line.event == "guard_open" ? 1 : 0;
  }
  EXPECT_EQ(opens, 1) << "the guard never reopened after the pause";
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "probe-b");
}

}  // namespace
}  // namespace outbox::kube
