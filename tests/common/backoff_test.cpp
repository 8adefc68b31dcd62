// The exponential backoff behind every retry delay: the maths, both jitter kinds, and the
// stateful form the informer uses.
#include "common/backoff.hpp"

#include <limits>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace outbox {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

TEST(ExponentialDelayTest, DoublesFromTheInitialDelayUpToTheCap) {
  std::vector<milliseconds> delays;
  for (int retry = 0; retry < 6; ++retry) {
    delays.push_back(exponential_delay(100ms, 1000ms, retry));
  }
  EXPECT_EQ(delays, (std::vector<milliseconds>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms}));
  EXPECT_EQ(exponential_delay(100ms, 1000ms, -1), 100ms) << "a negative retry is the first";
  EXPECT_EQ(exponential_delay(100ms, 10'000ms, 2, 3.0), 900ms) << "another factor";
}

TEST(ExponentialDelayTest, HugeRetryCountsStayAtTheCapAndTheCapBindsTheFirstDelay) {
  EXPECT_EQ(exponential_delay(5ms, milliseconds(1000s), 1'000'000), 1000s);
  EXPECT_EQ(exponential_delay(1ns, std::chrono::nanoseconds(std::chrono::hours(24 * 365)),
                              std::numeric_limits<int>::max()),
            std::chrono::nanoseconds(std::chrono::hours(24 * 365)));
  EXPECT_EQ(exponential_delay(0ms, 1000ms, std::numeric_limits<int>::max()), 0ms);
  EXPECT_EQ(exponential_delay(2000ms, 1000ms, 0), 1000ms);
}

TEST(JitterTest, EqualJitterDrawsFromTheUpperHalf) {
  EXPECT_EQ(equal_jitter(1000ms, 0.0), 500ms);
  EXPECT_EQ(equal_jitter(1000ms, 0.5), 750ms);
  EXPECT_NEAR(static_cast<double>(equal_jitter(1000ms, 0.999999).count()), 1000.0, 1.0);
}

TEST(JitterTest, ProportionalJitterStaysWithinItsFractionAroundTheDelay) {
  EXPECT_EQ(proportional_jitter(1000ms, 0.2, 0.0), 800ms);
  EXPECT_EQ(proportional_jitter(1000ms, 0.2, 0.5), 1000ms);
  EXPECT_NEAR(static_cast<double>(proportional_jitter(1000ms, 0.2, 0.999999).count()), 1200.0, 1.0);
  EXPECT_EQ(proportional_jitter(1000ms, 0.0, 0.9), 1000ms) << "no jitter";
}

TEST(BackoffTest, GrowsExponentiallyWithJitterUpToTheCapAndResets) {
  Backoff backoff(800ms, 30s);
  std::vector<std::chrono::milliseconds> centres = {800ms,   1600ms,  3200ms, 6400ms,
                                                    12800ms, 25600ms, 30s,    30s};
  for (auto centre : centres) {
    EXPECT_EQ(backoff.peek(), centre);
    auto delay = backoff.next();
    EXPECT_GE(delay, centre / 2);
    EXPECT_LE(delay, centre);
  }
  backoff.reset();
  EXPECT_EQ(backoff.peek(), 800ms);
}

TEST(BackoffTest, RefusesAFactorThatDoesNotGrow) {
  EXPECT_THROW(Backoff(1s, 10s, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace outbox
