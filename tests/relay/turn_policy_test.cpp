// Unit tests of the decisions of a relay turn (relay/turn_policy.hpp): no database, no
// broker, no clock (every time is passed in).
#include <gtest/gtest.h>

#include "relay/turn_policy.hpp"

namespace outbox::relay {
namespace {

using std::chrono::milliseconds;
using T = TurnClock::time_point;

// A time point well after the clock's epoch (the epoch means "not held", "not paused").
const T kStart = T{} + std::chrono::hours(1);

TEST(DoublingWait, DoublesUpToTheLastAndStartsAgainOnReset) {
  DoublingWait w(milliseconds(10), milliseconds(100));
  EXPECT_EQ(w.current(), milliseconds(10));
  w.grow();
  EXPECT_EQ(w.current(), milliseconds(20));
  w.grow();
  w.grow();
  EXPECT_EQ(w.current(), milliseconds(80));
  w.grow();
  EXPECT_EQ(w.current(), milliseconds(100));
  w.grow();
  EXPECT_EQ(w.current(), milliseconds(100));
  w.reset();
  EXPECT_EQ(w.current(), milliseconds(10));
}

TEST(WakeUpRegistration, TheFirstWaitAfterRegisteringIsShortAndClaimsSeeRacingCommitsAfterIt) {
  WakeUpRegistration wake;
  EXPECT_FALSE(wake.registered());
  EXPECT_FALSE(wake.sees_racing_commits(kStart)) << "not registered: nothing to see";
  EXPECT_EQ(wake.registered_at(kStart, 7, milliseconds(2000)), WakeUpRegistration::kCommitRace);
  EXPECT_EQ(wake.registered_at(kStart, 7, milliseconds(20)), milliseconds(20));
  EXPECT_TRUE(wake.registered());
  EXPECT_FALSE(wake.sees_racing_commits(kStart + milliseconds(49)));
  EXPECT_TRUE(wake.sees_racing_commits(kStart + milliseconds(50)));
  wake.withdrawn();
  EXPECT_FALSE(wake.registered());
  EXPECT_FALSE(wake.sees_racing_commits(kStart + milliseconds(500)));
}

TEST(WakeUpRegistration, ARelayThatHasNotWaitedForWorkFor100msIsBusy) {
  WakeUpRegistration wake;
  wake.registered_at(kStart, 0, milliseconds(2000));
  wake.idled(kStart + milliseconds(10));
  EXPECT_FALSE(wake.busy(kStart + milliseconds(109), 0));
  EXPECT_TRUE(wake.busy(kStart + milliseconds(110), 0));
}

TEST(WakeUpRegistration, MoreThan100NotifiesIn100msMakeItBusyCountedAtEachWindowsEnd) {
  WakeUpRegistration wake;
  wake.registered_at(kStart, 1000, milliseconds(2000));
  wake.idled(kStart + milliseconds(95));
  EXPECT_FALSE(wake.busy(kStart + milliseconds(60), 5000)) << "the window has not ended";
  EXPECT_FALSE(wake.busy(kStart + milliseconds(100), 1100)) << "100 NOTIFYs: not more than 100";
  // The next window counts from 1100 at +100 ms.
  wake.idled(kStart + milliseconds(190));
  EXPECT_FALSE(wake.busy(kStart + milliseconds(150), 1300)) << "the window has not ended";
  EXPECT_TRUE(wake.busy(kStart + milliseconds(200), 1201));
}

// A gate after one claim at `start` that found `found` of a batch of 100, registered long before.
struct Gated {
  explicit Gated(std::size_t found, milliseconds window = milliseconds(0))
      : Gated(found, CoalesceWindow::fixed(window)) {}
  Gated(std::size_t found, CoalesceWindow window) : gate(window, poll, 100) {
    wake.registered_at(kStart - milliseconds(1000), 0, milliseconds(2000));
    gate.claimed(kStart, 3, found);
  }
  bool empty_at(T now, std::uint64_t notifications = 3, bool rows_wait = false) const {
    return gate.provably_empty(now, wake, notifications, rows_wait);
  }
  const milliseconds poll{2000};
  WakeUpRegistration wake;
  ClaimGate gate;
};

TEST(ClaimGate, TheFirstClaimIsNeverSkipped) {
  ClaimGate gate(CoalesceWindow::fixed(milliseconds(0)), milliseconds(2000), 100);
  WakeUpRegistration wake;
  wake.registered_at(kStart, 0, milliseconds(2000));
  EXPECT_FALSE(gate.provably_empty(kStart + milliseconds(100), wake, 0, false));
  EXPECT_FALSE(gate.held(kStart));
}

TEST(ClaimGate, AClaimIsProvablyEmptyWhileNothingSinceTheLastCouldHaveAddedRows) {
  Gated g(5);
  EXPECT_EQ(g.gate.seen(), 3u);
  EXPECT_TRUE(g.empty_at(kStart + milliseconds(10)));
  EXPECT_FALSE(g.empty_at(kStart + milliseconds(10), 4)) << "a NOTIFY since the claim began";
  EXPECT_FALSE(g.empty_at(kStart + milliseconds(10), 3, true)) << "rows wait for an older xact";
  EXPECT_TRUE(g.empty_at(kStart + milliseconds(1999)));
  EXPECT_FALSE(g.empty_at(kStart + milliseconds(2000))) << "a retry may have come due";
  g.wake.withdrawn();
  EXPECT_FALSE(g.empty_at(kStart + milliseconds(10))) << "not registered: commits notify nobody";
}

TEST(ClaimGate, AFullBatchOrAClaimThatRacedTheRegistrationIsNotProofOfEmptiness) {
  Gated full(100);
  EXPECT_FALSE(full.empty_at(kStart + milliseconds(10)));
  ClaimGate gate(CoalesceWindow::fixed(milliseconds(0)), milliseconds(2000), 100);
  WakeUpRegistration wake;
  wake.registered_at(kStart - milliseconds(49), 0, milliseconds(2000));
  gate.claimed(kStart, 0, 0);
  EXPECT_FALSE(gate.provably_empty(kStart + milliseconds(10), wake, 0, false));
  wake.registered_at(kStart - milliseconds(50), 0, milliseconds(2000));
  EXPECT_TRUE(gate.provably_empty(kStart + milliseconds(10), wake, 0, false));
}

TEST(ClaimGate, ARebalanceThatBroughtShardsMakesTheNextClaimRun) {
  Gated g(0);
  g.gate.rows_may_wait();
  EXPECT_FALSE(g.empty_at(kStart + milliseconds(10)));
  g.gate.claimed(kStart + milliseconds(20), 3, 0);
  EXPECT_TRUE(g.empty_at(kStart + milliseconds(30))) << "that claim saw them";
}

TEST(ClaimGate, ASettlementThatFreesRowsMakesTheClaimRunOnceWrittenBack) {
  Gated g(5);
  g.gate.frees_rows_once_written(3);
  g.gate.written_through(2);
  EXPECT_TRUE(g.empty_at(kStart + milliseconds(10))) << "not written yet: a claim cannot see it";
  g.gate.written_through(3);
  EXPECT_FALSE(g.empty_at(kStart + milliseconds(10)));
  g.gate.claimed(kStart + milliseconds(20), 3, 5);
  g.gate.written_through(4);
  EXPECT_TRUE(g.empty_at(kStart + milliseconds(30))) << "frees nothing more once used";
}

TEST(ClaimGate, AClaimThatFoundEventsAndNoFullBatchHoldsTheNextForTheCoalesceWindow) {
  Gated g(5, milliseconds(200));
  EXPECT_TRUE(g.gate.held(kStart + milliseconds(199)));
  EXPECT_FALSE(g.gate.held(kStart + milliseconds(200)));
  EXPECT_EQ(g.gate.held_until(), kStart + milliseconds(200));
  EXPECT_FALSE(g.gate.commits_keep_coming()) << "one window: sparse events, stay registered";
  g.gate.claimed(kStart + milliseconds(200), 3, 7);
  EXPECT_TRUE(g.gate.commits_keep_coming());
  g.gate.claimed(kStart + milliseconds(400), 3, 0);
  EXPECT_FALSE(g.gate.held(kStart + milliseconds(401))) << "an empty claim opens no window";
  EXPECT_FALSE(g.gate.commits_keep_coming());
  g.gate.claimed(kStart + milliseconds(500), 3, 100);
  EXPECT_FALSE(g.gate.held(kStart + milliseconds(501))) << "a backlog drains at full speed";
}

// The automatic window lasts as long as two more events take at the rate the last claim saw:
// the longest (30 ms) after a quiet spell, 40 ms worth at 50 events/s capped to 30, 4 ms at
// 500/s, and next to nothing for a busy relay whose claims come back to back.
TEST(ClaimGate, TheAutomaticWindowLastsAsLongAsTwoMoreEventsTakeAtTheRateSeenAtMost30ms) {
  using std::chrono::microseconds;
  Gated g(1, CoalesceWindow::automatic());
  EXPECT_EQ(g.gate.held_until(), kStart + milliseconds(30)) << "the first claim: no rate yet";
  g.gate.claimed(kStart + milliseconds(30), 3, 1);  // 1 event in 30 ms: 33/s
  EXPECT_EQ(g.gate.held_until(), kStart + milliseconds(60)) << "60 ms worth, capped";
  g.gate.claimed(kStart + milliseconds(60), 3, 15);  // 15 in 30 ms: 500/s
  EXPECT_EQ(g.gate.held_until(), kStart + milliseconds(64));
  g.gate.claimed(kStart + milliseconds(65), 3, 40);  // 40 in 5 ms: 8,000/s
  EXPECT_EQ(g.gate.held_until(), kStart + milliseconds(65) + microseconds(250));
  g.gate.claimed(kStart + milliseconds(66), 3, 100);
  EXPECT_FALSE(g.gate.held(kStart + milliseconds(66))) << "a full batch opens none";
  g.gate.claimed(kStart + milliseconds(2000), 3, 0);
  EXPECT_FALSE(g.gate.held(kStart + milliseconds(2000))) << "an empty claim opens none";
  g.gate.claimed(kStart + milliseconds(5000), 3, 1);
  EXPECT_EQ(g.gate.held_until(), kStart + milliseconds(5030)) << "after a quiet spell, 30 ms";
}

TEST(ClaimGate, TheWindowIsAutoOrADurationOfAtMost10s) {
  EXPECT_TRUE(parse_coalesce_window("auto").is_automatic);
  EXPECT_EQ(parse_coalesce_window("auto").limit, milliseconds(30));
  EXPECT_EQ(parse_coalesce_window("200ms").limit, milliseconds(200));
  EXPECT_FALSE(parse_coalesce_window("0s").is_automatic);
  EXPECT_EQ(coalesce_window_text(parse_coalesce_window("auto")), "auto");
  EXPECT_EQ(coalesce_window_text(parse_coalesce_window("0s")), "0s");
  EXPECT_EQ(coalesce_window_text(parse_coalesce_window("1500ms")), "1500ms");
  EXPECT_THROW(parse_coalesce_window("11s"), std::invalid_argument);
  try {
    parse_coalesce_window("sometimes");
    FAIL() << "not a window";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("auto or a duration"), std::string::npos) << e.what();
  }
}

TEST(ClaimGate, WithoutACoalesceWindowClaimsAreNeverHeld) {
  Gated g(5);
  EXPECT_FALSE(g.gate.held(kStart));
  EXPECT_EQ(g.gate.held_until(), T{});
  EXPECT_FALSE(g.gate.commits_keep_coming());
}

TEST(HousekeepingSchedule, BothAreDueAtTheStartThenEachItsIntervalAfterItWasTaken) {
  HousekeepingSchedule h(kStart, milliseconds(1000), milliseconds(5000));
  EXPECT_TRUE(h.rebalance_due(kStart));
  HousekeepingSchedule::Due due = h.take(kStart + milliseconds(5));
  EXPECT_TRUE(due.rebalance && due.measure);
  EXPECT_FALSE(h.take(kStart + milliseconds(6)).any());
  EXPECT_FALSE(h.rebalance_due(kStart + milliseconds(1004)));
  EXPECT_TRUE(h.rebalance_due(kStart + milliseconds(1005)));
  due = h.take(kStart + milliseconds(1500));
  EXPECT_TRUE(due.rebalance);
  EXPECT_FALSE(due.measure);
  EXPECT_FALSE(h.rebalance_due(kStart + milliseconds(2499)));
  due = h.take(kStart + milliseconds(5005));
  EXPECT_TRUE(due.rebalance && due.measure);
}

TEST(KafkaPause, PausesASecondThenDoublesPerFailedProbeUpTo30s) {
  KafkaPause pause;
  EXPECT_FALSE(pause.paused(kStart));
  pause.unreachable(kStart);
  EXPECT_TRUE(pause.paused(kStart + milliseconds(999)));
  EXPECT_FALSE(pause.paused(kStart + milliseconds(1000)));
  EXPECT_EQ(pause.left(kStart + milliseconds(400)), milliseconds(600));
  T now = kStart + milliseconds(1000);
  for (int ms : {2000, 4000, 8000, 16000, 30000, 30000}) {
    const milliseconds expected(ms);
    pause.probe_failed(now);
    EXPECT_EQ(pause.left(now), expected);
    now += expected;
  }
  pause.reachable();
  EXPECT_FALSE(pause.paused(now));
  pause.unreachable(now);
  EXPECT_EQ(pause.left(now), milliseconds(1000)) << "a new outage starts from a second again";
}

// A wait of what is left must reach the pause's end: a remainder of 0.5 ms is a wait of 1 ms,
// never of 0 ms (which would end the wait while still paused).
TEST(KafkaPause, WhatIsLeftIsRoundedUpSoAWaitOfItEndsThePause) {
  KafkaPause pause;
  pause.unreachable(kStart);
  const T almost = kStart + std::chrono::microseconds(999'500);
  EXPECT_TRUE(pause.paused(almost));
  EXPECT_EQ(pause.left(almost), milliseconds(1));
  EXPECT_FALSE(pause.paused(almost + pause.left(almost)));
}

}  // namespace
}  // namespace outbox::relay
