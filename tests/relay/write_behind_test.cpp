// WriteBehind on its own: what it keeps out of claims while settlements are behind,
// how it merges them, when a send waits, and that a failed write-back reaches the
// relay. The write is a function here; the relay's (a real write-back on a real
// database) is exercised by the relay's integration tests.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "relay/write_behind.hpp"

namespace outbox::relay {
namespace {

using namespace std::chrono_literals;

Settlement settled(std::vector<std::int64_t> delivered, std::vector<std::int64_t> failed,
                   const std::string& held_key = "") {
  Settlement s;
  s.delivered = delivered;
  s.ids = delivered;
  for (std::int64_t id : failed) {
    s.decisions.push_back({id, false, 1s, "refused"});
    s.ids.push_back(id);
  }
  if (!held_key.empty()) {
    s.held_keys.insert(held_key);
  }
  s.outcome.delivered = delivered.size();
  s.outcome.retried = failed.size();
  s.outcome.delivered_by_topic["t"] = delivered.size();
  return s;
}

// A write that waits until released, recording what it was given.
struct GatedWrite {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  std::vector<std::vector<std::int64_t>> written_ids;  // per write, in order
  std::atomic<int> started = 0;

  WriteBehind::Write fn() {
    return [this](const Settlement& s) {
      ++started;
      opened.wait();
      written_ids.push_back(s.ids);
      return s.outcome;
    };
  }
};

TEST(WriteBehind, WhatIsBehindStaysOutOfClaimsAndHeldUntilWrittenThenInOneMergedWrite) {
  GatedWrite write;
  std::vector<BatchOutcome> outcomes;
  WriteBehind behind(write.fn(), [&](const BatchOutcome& o) { outcomes.push_back(o); });
  EXPECT_TRUE(behind.empty());
  behind.add(settled({1, 2}, {3}, "k3"));  // starts at once
  behind.add(settled({4}, {5}, "k5"));     // queued behind it
  behind.add(settled({6, 7}, {}));         // merged with the queued one
  EXPECT_FALSE(behind.empty());
  EXPECT_EQ(behind.ids(), (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(behind.held_keys(), (std::set<std::string>{"k3", "k5"}));
  behind.poll();  // the first write has not ended: nothing changes
  EXPECT_EQ(behind.ids().size(), 7u);
  EXPECT_TRUE(outcomes.empty());

  write.open.set_value();
  behind.finish();
  EXPECT_TRUE(behind.empty());
  EXPECT_TRUE(behind.ids().empty());
  EXPECT_TRUE(behind.held_keys().empty());
  ASSERT_EQ(write.written_ids.size(), 2u) << "the two queued settlements in one write";
  EXPECT_EQ(write.written_ids[0], (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(write.written_ids[1], (std::vector<std::int64_t>{4, 5, 6, 7}));
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].delivered, 3u);
  EXPECT_EQ(outcomes[1].retried, 1u);
  EXPECT_EQ(outcomes[1].delivered_by_topic.at("t"), 3u) << "counts by topic add up";
}

TEST(WriteBehind, ASendWaitsForAWriteBackOnlyOnceItIsOlderThanTheLimit) {
  GatedWrite write;
  WriteBehind behind(write.fn(), [](const BatchOutcome&) {});
  behind.add(settled({1}, {}));
  behind.wait_unless_younger_than(1h);
  EXPECT_FALSE(behind.empty()) << "a young write-back is not waited for";
  EXPECT_FALSE(behind.wait_for(10ms)) << "nor one the relay waits for only briefly";

  std::atomic<bool> released = false;
  std::thread opener([&] {
    std::this_thread::sleep_for(300ms);
    released = true;
    write.open.set_value();
  });
  std::this_thread::sleep_for(20ms);
  behind.wait_unless_younger_than(10ms);
  EXPECT_TRUE(released) << "returned before the old write-back ended";
  EXPECT_TRUE(behind.empty());
  opener.join();
  behind.add(settled({2}, {}));
  EXPECT_TRUE(behind.wait_for(10s)) << "an open write ends within the wait";
}

TEST(WriteBehind, AFailedWriteBackReachesTheCallerAndLeavesNothingBehind) {
  WriteBehind behind([](const Settlement&) -> BatchOutcome { throw std::runtime_error("gone"); },
                     [](const BatchOutcome&) { ADD_FAILURE() << "no outcome for a failed write"; });
  behind.add(settled({1, 2}, {}));
  EXPECT_THROW(behind.finish(), std::runtime_error);
  EXPECT_TRUE(behind.ids().empty()) << "its events are claimed again, not excluded forever";
}

// With a linger, a settlement added while no write-back runs waits for others to join
// it, up to the linger, unless the caller waits for it (then it starts at once).
TEST(WriteBehind, WithALingerSettlementsAddedCloseTogetherAreWrittenInOneWrite) {
  GatedWrite write;
  write.open.set_value();
  WriteBehind behind(
      write.fn(), [](const BatchOutcome&) {}, 200ms);
  behind.add(settled({1}, {}));
  behind.add(settled({2}, {}));
  behind.poll();
  EXPECT_EQ(write.started, 0) << "started within the linger";
  EXPECT_EQ(behind.ids(), (std::vector<std::int64_t>{1, 2})) << "out of claims meanwhile";
  std::this_thread::sleep_for(250ms);
  behind.poll();  // the queue is older than the linger: it starts
  EXPECT_TRUE(behind.wait_for(5s));
  ASSERT_EQ(write.written_ids.size(), 1u);
  EXPECT_EQ(write.written_ids[0], (std::vector<std::int64_t>{1, 2}));

  WriteBehind waited(
      write.fn(), [](const BatchOutcome&) {}, 60s);
  waited.add(settled({3}, {}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(waited.wait_for(5s)) << "a caller that waits does not wait out the linger";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(write.written_ids.size(), 2u);
}

}  // namespace
}  // namespace outbox::relay
