// The engine's own contract, with a fake Reconciler and no watches (keys come from enqueue()):
// a queued key is reconciled; a requested delay is honoured; an error backs off per key, a
// terminal one is not retried; stopping cancels a pass in flight; nothing runs, and nothing is
// written, while this process does not lead. What the OutboxRelay reconciler does with it is
// shown against the real kube-apiserver (tests/controller/*_e2e_test.cpp).
#include "kube/controller_engine.hpp"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "kube/errors.hpp"

namespace outbox::kube {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs `script` for each pass and records when each pass started.
class FakeReconciler : public Reconciler {
 public:
  std::function<ReconcileResult(int pass, std::stop_token stop)> script = [](int, auto) {
    return ReconcileResult{};
  };

  ReconcileResult reconcile(const std::string& key, std::stop_token stop) override {
    int pass = 0;
    {
      std::lock_guard lock(mu_);
      passes_.push_back({key, Clock::now()});
      pass = static_cast<int>(passes_.size());
    }
    cv_.notify_all();
    return script(pass, stop);
  }
  std::vector<std::string> owners_of(const Json&) const override { return {}; }

  // Waits until `n` passes have started; their start times.
  std::vector<Clock::time_point> wait_for(size_t n, Clock::duration timeout = 5s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return passes_.size() >= n; });
    std::vector<Clock::time_point> times;
    for (const auto& [key, at] : passes_) {
      times.push_back(at);
    }
    return times;
  }
  size_t passes() {
    std::lock_guard lock(mu_);
    return passes_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, Clock::time_point>> passes_;
};

Client unreachable_client() {
  Config config;
  config.server = "https://127.0.0.1:1";
  config.address = ServerAddress::parse(config.server);
  config.token = "t";
  ClientOptions options;
  options.max_retries = 0;
  return Client(config, options);
}

struct EngineTest : ::testing::Test {
  metrics::Registry registry;
  Client client = unreachable_client();
  EngineMetrics metrics{registry.counter("ok", ""),
                        registry.counter("requeue", ""),
                        registry.counter("error", ""),
                        registry.histogram("duration", "", {1}),
                        registry.gauge("queue_depth", ""),
                        registry.gauge("leader", ""),
                        registry.gauge("primaries", ""),
                        [this](const std::string& kind) -> metrics::Gauge& {
                          return registry.gauge("cached_bytes", "", {{"kind", kind}});
                        }};
  FakeReconciler reconciler;

  EngineOptions options(int workers = 2) {
    EngineOptions o;
    o.workers = workers;
    o.identity = "engine-test";
    return o;
  }
};

TEST_F(EngineTest, AQueuedKeyIsReconciledOnceAndCountedAsASuccess) {
  ControllerEngine engine(client, options(), metrics);
  engine.enqueue("ns/a");
  std::jthread running([&](std::stop_token stop) { engine.run(reconciler, stop); });
  ASSERT_EQ(reconciler.wait_for(1).size(), 1u);
  EXPECT_TRUE(engine.synced()) << "no watches: nothing to sync";
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(reconciler.passes(), 1u);
  EXPECT_EQ(metrics.reconcile_ok.value(), 1);
  EXPECT_TRUE(engine.leading());
  EXPECT_EQ(metrics.leader.value(), 1);
}

TEST_F(EngineTest, ARequestedDelayQueuesTheKeyAgainAfterIt) {
  reconciler.script = [](int pass, auto) {
    return pass == 1 ? ReconcileResult{Outcome::kRequeueAfter, 300ms} : ReconcileResult{};
  };
  ControllerEngine engine(client, options(), metrics);
  std::jthread running([&](std::stop_token stop) { engine.run(reconciler, stop); });
  engine.enqueue("ns/a");
  const auto times = reconciler.wait_for(2);
  ASSERT_EQ(times.size(), 2u);
  EXPECT_GE(times[1] - times[0], 295ms);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(reconciler.passes(), 2u) << "the second pass asked for nothing more";
  EXPECT_EQ(metrics.reconcile_requeue.value(), 1);
  EXPECT_EQ(metrics.reconcile_ok.value(), 1);
}

// WorkQueue's backoff: 5 ms, 10 ms, 20 ms, 40 ms after the 1st..4th failure.
TEST_F(EngineTest, AnErrorIsRetriedWithGrowingBackoffUntilItSucceeds) {
  reconciler.script = [](int pass, auto) {
    if (pass <= 4) {
      throw std::runtime_error("apiserver said no");
    }
    return ReconcileResult{};
  };
  ControllerEngine engine(client, options(), metrics);
  std::jthread running([&](std::stop_token stop) { engine.run(reconciler, stop); });
  engine.enqueue("ns/a");
  const auto times = reconciler.wait_for(5);
  ASSERT_EQ(times.size(), 5u);
  for (size_t i = 1; i < times.size(); ++i) {
    EXPECT_GE(times[i] - times[i - 1], 5ms * (1 << (i - 1))) << "retry " << i;
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(reconciler.passes(), 5u);
  EXPECT_EQ(metrics.reconcile_error.value(), 4);
  EXPECT_EQ(metrics.reconcile_ok.value(), 1);
}

TEST_F(EngineTest, ATerminalErrorIsNotRetriedUntilTheKeyIsQueuedAgain) {
  reconciler.script = [](int, auto) -> ReconcileResult { throw TerminalError("invalid spec"); };
  ControllerEngine engine(client, options(), metrics);
  std::jthread running([&](std::stop_token stop) { engine.run(reconciler, stop); });
  engine.enqueue("ns/a");
  ASSERT_EQ(reconciler.wait_for(1).size(), 1u);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(reconciler.passes(), 1u);
  EXPECT_EQ(metrics.reconcile_error.value(), 1);
  engine.enqueue("ns/a");  // as the edit that fixes it would
  EXPECT_EQ(reconciler.wait_for(2).size(), 2u);
}

TEST_F(EngineTest, StoppingCancelsAPassInFlightThroughItsStopToken) {
  std::atomic<bool> cancelled{false};
  reconciler.script = [&](int, std::stop_token stop) -> ReconcileResult {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(5ms);
    }
    cancelled = true;
    throw_if_stopped(stop);
    return {};
  };
  ControllerEngine engine(client, options(1), metrics);
  std::jthread running([&](std::stop_token stop) { EXPECT_TRUE(engine.run(reconciler, stop)); });
  engine.enqueue("ns/a");
  ASSERT_EQ(reconciler.wait_for(1).size(), 1u);
  running.request_stop();
  running.join();  // run() returns only once the worker has stopped
  EXPECT_TRUE(cancelled.load());
  EXPECT_FALSE(engine.leading());
  EXPECT_EQ(metrics.reconcile_error.value(), 0) << "a cancelled pass is no failure";
}

// The Lease cannot be had (no apiserver answers): no worker starts, and a write through the
// client is refused before it is sent.
TEST_F(EngineTest, NothingIsReconciledNorWrittenWhileNotLeading) {
  EngineOptions o = options();
  LeaseElectorConfig lease;
  lease.lease_namespace = "ns";
  lease.lease_name = "engine-test";
  lease.lease_duration = 3000ms;
  lease.renew_deadline = 2000ms;
  lease.retry_period = 100ms;
  o.leader_election = lease;
  ControllerEngine engine(client, o, metrics);
  std::jthread running([&](std::stop_token stop) { engine.run(reconciler, stop); });
  engine.enqueue("ns/a");
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(reconciler.passes(), 0u);
  EXPECT_FALSE(engine.leading());
  EXPECT_THROW(client.create(resources::config_maps, "ns", Json{{"metadata", {{"name", "x"}}}}),
               WriteRefused);
}

}  // namespace
}  // namespace outbox::kube
