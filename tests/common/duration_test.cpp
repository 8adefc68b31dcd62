#include "common/duration.hpp"

#include <stdexcept>

#include <gtest/gtest.h>

namespace outbox {
namespace {

using std::chrono::milliseconds;

TEST(Duration, ParsesGoStyleDurations) {
  EXPECT_EQ(parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(parse_duration("2s"), milliseconds(2000));
  EXPECT_EQ(parse_duration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500));
  for (const char* bad : {"", "5", "s", "5x", "-1s", "1s2"}) {
    EXPECT_THROW(parse_duration(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(format_duration(milliseconds(5'400'000)), "1h30m");
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
}

}  // namespace
}  // namespace outbox
