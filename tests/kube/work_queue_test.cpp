#include "kube/work_queue.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace outbox::kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueueTest, DuplicateAddsCollapseIntoOneItem) {
  WorkQueue queue;
  queue.add("ns/a");
  queue.add("ns/b");
  queue.add("ns/a");
  queue.add("ns/a");
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.get_for(0ms), "ns/a");
  EXPECT_EQ(queue.get_for(0ms), "ns/b");
  EXPECT_EQ(queue.get_for(0ms), std::nullopt);
}

TEST(WorkQueueTest, KeyBeingProcessedIsNotHandedOutAgainButRunsOnceMoreAfterDone) {
  WorkQueue queue;
  queue.add("k");
  ASSERT_EQ(queue.get_for(0ms), "k");
  queue.add("k");  // changed while a worker holds it
  queue.add("k");
  EXPECT_EQ(queue.get_for(20ms), std::nullopt) << "must not be processed concurrently";
  queue.done("k");
  EXPECT_EQ(queue.get_for(0ms), "k");
  queue.done("k");
  EXPECT_EQ(queue.get_for(0ms), std::nullopt) << "the re-adds collapse into one more run";
}

TEST(WorkQueueTest, ConcurrentWorkersNeverProcessOneKeyTwiceAtOnce) {
  WorkQueue queue;
  std::atomic<int> in_flight[4] = {0, 0, 0, 0};
  std::atomic<bool> overlap{false};
  std::atomic<int> processed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.get()) {
        int index = (*key)[0] - 'a';
        if (in_flight[index].fetch_add(1) != 0) {
          overlap = true;
        }
        std::this_thread::sleep_for(200us);
        in_flight[index].fetch_sub(1);
        processed++;
        queue.done(*key);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    queue.add(std::string(1, static_cast<char>('a' + i % 4)));
    if (i % 50 == 0) {
      std::this_thread::sleep_for(1ms);
    }
  }
  std::this_thread::sleep_for(50ms);
  queue.shutdown();
  for (auto& t : workers) {
    t.join();
  }
  EXPECT_FALSE(overlap.load());
  EXPECT_GT(processed.load(), 4);
}

TEST(WorkQueueTest, RateLimitedBackoffDoublesFrom5msUpToTheCapAndForgetResets) {
  WorkQueue queue(5ms, 1000ms);
  std::vector<long> delays;
  for (int i = 0; i < 10; ++i) {
    delays.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(queue.next_backoff("k")).count());
    queue.add_rate_limited("k");
  }
  EXPECT_EQ(delays, (std::vector<long>{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
  EXPECT_EQ(queue.num_requeues("k"), 10);
  EXPECT_EQ(queue.next_backoff("other"), std::chrono::milliseconds(5)) << "per key";
  queue.forget("k");
  EXPECT_EQ(queue.num_requeues("k"), 0);
  EXPECT_EQ(queue.next_backoff("k"), std::chrono::milliseconds(5));
}

TEST(WorkQueueTest, HugeFailureCountsDoNotOverflowTheCap) {
  WorkQueue queue(5ms, std::chrono::seconds(1000));
  for (int i = 0; i < 200; ++i) {
    queue.add_rate_limited("k");
  }
  EXPECT_EQ(queue.next_backoff("k"), std::chrono::seconds(1000));
}

TEST(WorkQueueTest, RateLimitedAddBecomesReadyAfterItsBackoff) {
  WorkQueue queue(30ms, 1000ms);
  auto start = WorkQueue::Clock::now();
  queue.add_rate_limited("k");
  EXPECT_EQ(queue.get_for(10ms), std::nullopt);
  auto key = queue.get_for(1s);
  ASSERT_EQ(key, "k");
  EXPECT_GE(WorkQueue::Clock::now() - start, 30ms);
}

TEST(WorkQueueTest, AddAfterDelaysAndTheEarliestPendingDelayWins) {
  WorkQueue queue;
  auto start = WorkQueue::Clock::now();
  queue.add_after("late", 80ms);
  queue.add_after("k", 300ms);
  queue.add_after("k", 40ms);   // earlier: replaces
  queue.add_after("k", 500ms);  // later: ignored
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.get(), "k");
  auto first = WorkQueue::Clock::now() - start;
  EXPECT_GE(first, 40ms);
  EXPECT_LT(first, 250ms);
  EXPECT_EQ(queue.get(), "late");
  EXPECT_GE(WorkQueue::Clock::now() - start, 80ms);
  queue.done("k");
  queue.done("late");
  EXPECT_EQ(queue.get_for(600ms), std::nullopt) << "the superseded delays must not fire";
}

TEST(WorkQueueTest, AddAfterWakesAWorkerAlreadyWaiting) {
  WorkQueue queue;
  std::optional<std::string> got;
  std::thread worker([&] { got = queue.get(); });
  std::this_thread::sleep_for(20ms);
  queue.add_after("k", 30ms);
  worker.join();
  EXPECT_EQ(got, "k");
}

TEST(WorkQueueTest, ShutdownReleasesBlockedWorkersAndRefusesNewKeys) {
  WorkQueue queue;
  std::optional<std::string> got = "sentinel";
  std::thread worker([&] { got = queue.get(); });
  std::this_thread::sleep_for(20ms);
  queue.shutdown();
  worker.join();
  EXPECT_EQ(got, std::nullopt);
  queue.add("k");
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_TRUE(queue.shutting_down());
}

}  // namespace
}  // namespace outbox::kube
