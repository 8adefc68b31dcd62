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

// A requested delay ends at a moment no watch event marks: the pass then must not wait behind
// a backlog of keys queued by events, resyncs or retries.
TEST(WorkQueueTest, AKeyWhoseDelayRanOutComesOutBeforeKeysAddedWithout) {
  WorkQueue queue;
  queue.add_after("due", 30ms);
  queue.add("a");
  queue.add("b");
  std::this_thread::sleep_for(60ms);
  queue.add("c");
  EXPECT_EQ(queue.get_for(0ms), "due");
  EXPECT_EQ(queue.get_for(0ms), "a");
  EXPECT_EQ(queue.get_for(0ms), "b");
  EXPECT_EQ(queue.get_for(0ms), "c");
}

TEST(WorkQueueTest, DueKeysComeOutInTheOrderTheyFellDue) {
  WorkQueue queue;
  queue.add("event");
  queue.add_after("second", 60ms);
  queue.add_after("first", 20ms);
  std::this_thread::sleep_for(90ms);
  EXPECT_EQ(queue.get_for(0ms), "first");
  EXPECT_EQ(queue.get_for(0ms), "second");
  EXPECT_EQ(queue.get_for(0ms), "event");
}

TEST(WorkQueueTest, AKeyQueuedByAnEventMovesAheadOnceItsDelayRunsOut) {
  WorkQueue queue;
  queue.add("a");
  queue.add("k");  // queued behind "a" by an event, and also asked to look again soon
  queue.add_after("k", 20ms);
  queue.add("b");
  std::this_thread::sleep_for(40ms);
  EXPECT_EQ(queue.get_for(0ms), "k");
  EXPECT_EQ(queue.size(), 2u) << "k moved, it was not queued twice";
  EXPECT_EQ(queue.get_for(0ms), "a");
  EXPECT_EQ(queue.get_for(0ms), "b");
  queue.done("k");
  EXPECT_EQ(queue.get_for(0ms), std::nullopt) << "k ran once";
}

TEST(WorkQueueTest, AKeyThatFallsDueWhileProcessedGoesAheadWhenDone) {
  WorkQueue queue;
  queue.add("k");
  ASSERT_EQ(queue.get_for(0ms), "k");
  queue.add_after("k", 10ms);
  queue.add("a");
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(queue.get_for(0ms), "a") << "k fell due, but a worker holds it";
  queue.add("b");
  queue.done("k");
  EXPECT_EQ(queue.get_for(0ms), "k") << "queued again on done(), ahead of b";
  EXPECT_EQ(queue.get_for(0ms), "b");
}

// A retry's backoff is no promise of a moment: behind the keys already queued. But a key asked
// to look again keeps that even when a retry's shorter backoff replaces the deadline.
TEST(WorkQueueTest, RetriesQueueBehindOthersUnlessTheKeyWasAlsoAskedToLookAgain) {
  WorkQueue queue(10ms, 1000ms);
  queue.add_rate_limited("retry");
  queue.add_after("both", 500ms);
  queue.add_rate_limited("both");
  queue.add("a");
  std::this_thread::sleep_for(40ms);
  EXPECT_EQ(queue.get_for(0ms), "both");
  EXPECT_EQ(queue.get_for(0ms), "a");
  EXPECT_EQ(queue.get_for(0ms), "retry");
  queue.done("both");
  EXPECT_EQ(queue.get_for(600ms), std::nullopt) << "the later deadline was replaced";
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
