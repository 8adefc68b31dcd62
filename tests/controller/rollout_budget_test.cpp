// The rollout budget's decisions, each with the time passed in: what counts against the limit,
// what joins a rollout under way, how long an unseen schema Job counts, and when a hold stands.
#include "controller/rollout_budget.hpp"

#include <gtest/gtest.h>

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;

const BudgetClock::time_point t0 = BudgetClock::time_point() + 1h;

TEST(RolloutBudget, AChangeGoesWhileTheLimitIsNotReachedAndCountsUntilTheCacheShowsItRolledOut) {
  RolloutBudget budget(2);
  EXPECT_TRUE(budget.may_roll("ns/a-relay", 4, t0));
  EXPECT_TRUE(budget.may_roll("ns/b-relay", 7, t0));
  EXPECT_EQ(budget.in_use(t0), 2);
  EXPECT_FALSE(budget.may_roll("ns/c-relay", 1, t0)) << "two rolling: the third waits";

  // The cache shows a's old generation still: counted, once.
  budget.observe_deployment("ns/a-relay", {4, false});
  EXPECT_EQ(budget.in_use(t0), 2);
  // Its new generation, rolling: still one.
  budget.observe_deployment("ns/a-relay", {5, true});
  EXPECT_EQ(budget.in_use(t0), 2);
  // Rolled out: a slot frees, and c goes.
  budget.observe_deployment("ns/a-relay", {5, false});
  EXPECT_EQ(budget.in_use(t0), 1);
  EXPECT_TRUE(budget.may_roll("ns/c-relay", 1, t0));
  // A Deployment deleted mid-rollout frees its slot.
  budget.forget_deployment("ns/b-relay");
  EXPECT_EQ(budget.in_use(t0), 1);
}

TEST(RolloutBudget, ASecondChangeToADeploymentAlreadyRollingJoinsItsRollout) {
  RolloutBudget budget(1);
  EXPECT_TRUE(budget.may_roll("ns/a-relay", 1, t0));
  EXPECT_FALSE(budget.may_roll("ns/b-relay", 1, t0));
  EXPECT_TRUE(budget.may_roll("ns/a-relay", 1, t0)) << "the same Deployment: no new rollout";
  // One rolling that this process did not start (an earlier leader's) joins too.
  budget.observe_deployment("ns/c-relay", {3, true});
  EXPECT_TRUE(budget.may_roll("ns/c-relay", 3, t0));
  EXPECT_EQ(budget.in_use(t0), 2);
}

TEST(RolloutBudget, RolloutsAndSchemaJobsShareTheLimit) {
  RolloutBudget budget(2);
  budget.observe_schema_job("ns/a-schema-1",
                            RolloutBudget::JobSeen::kRunning);  // unfinished, from the cache
  EXPECT_TRUE(budget.may_migrate("ns/b-schema-1", t0));
  EXPECT_FALSE(budget.may_roll("ns/c-relay", 1, t0));
  EXPECT_FALSE(budget.may_migrate("ns/d-schema-1", t0));
  EXPECT_TRUE(budget.may_migrate("ns/b-schema-1", t0)) << "created already: counted once";
  budget.observe_schema_job("ns/a-schema-1",
                            RolloutBudget::JobSeen::kFinished);  // Complete or Failed
  EXPECT_EQ(budget.in_use(t0), 1);
  EXPECT_TRUE(budget.may_roll("ns/c-relay", 1, t0));
}

TEST(RolloutBudget, ASchemaJobTheCacheNeverShowsCountsForAMinuteOnly) {
  RolloutBudget budget(1);
  EXPECT_TRUE(budget.may_migrate("ns/a-schema-1", t0));
  EXPECT_EQ(budget.in_use(t0 + RolloutBudget::kUnseenJobGrace), 1);
  EXPECT_EQ(budget.in_use(t0 + RolloutBudget::kUnseenJobGrace + 1s), 0) << "deleted at once";
  // Seen, then deleted: no longer counted.
  EXPECT_TRUE(budget.may_migrate("ns/b-schema-1", t0));
  budget.observe_schema_job("ns/b-schema-1", RolloutBudget::JobSeen::kRunning);
  budget.forget_schema_job("ns/b-schema-1");
  EXPECT_EQ(budget.in_use(t0), 0);
}

TEST(RolloutBudget, NoLimitLetsEverythingGoAndHoldsNothing) {
  RolloutBudget budget(0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(budget.may_roll("ns/r" + std::to_string(i), 1, t0));
    EXPECT_TRUE(budget.may_migrate("ns/s" + std::to_string(i), t0));
  }
  EXPECT_FALSE(budget.spent(t0));
}

// What spares a held resource its render: the hold stands while the versions it was decided
// on stand, before its time, while the budget is spent.
TEST(RolloutBudget, AHoldStandsWhileNothingItReadChangedAndTheBudgetIsSpent) {
  RolloutBudget budget(1);
  ASSERT_TRUE(budget.may_roll("ns/a-relay", 1, t0));
  budget.judging("ns/b", "rv-10");
  budget.held("ns/b", t0 + 30s);
  EXPECT_TRUE(budget.still_held("ns/b", "rv-10", t0 + 5s));
  EXPECT_TRUE(budget.still_held("ns/b", "rv-10", t0 + 10s));
  EXPECT_FALSE(budget.still_held("ns/b", "rv-11", t0 + 10s)) << "the resource changed";
  EXPECT_FALSE(budget.still_held("ns/b", "rv-10", t0 + 10s)) << "and the hold was forgotten";

  budget.judging("ns/b", "rv-11");
  budget.held("ns/b", t0 + 30s);
  EXPECT_FALSE(budget.still_held("ns/b", "rv-11", t0 + 30s)) << "its status is due";

  budget.judging("ns/b", "rv-11");
  budget.held("ns/b", t0 + 30s);
  budget.observe_deployment("ns/a-relay", {2, false});  // a's rollout ends: a slot is free
  EXPECT_FALSE(budget.still_held("ns/b", "rv-11", t0 + 10s));
  EXPECT_EQ(budget.holds(), 0U);
}

TEST(RolloutBudget, AChangeToAnOwnedObjectWhileAPassJudgesVoidsItsHold) {
  RolloutBudget budget(1);
  ASSERT_TRUE(budget.may_roll("ns/a-relay", 1, t0));
  budget.judging("ns/b", "rv-10");
  budget.release("ns/b");  // an owned object of b changed while the pass read the caches
  budget.held("ns/b", t0 + 30s);
  EXPECT_FALSE(budget.still_held("ns/b", "rv-10", t0 + 5s));
  // A pass that fails half way leaves a judging entry that holds nothing.
  budget.judging("ns/c", "rv-3");
  EXPECT_FALSE(budget.still_held("ns/c", "rv-3", t0 + 5s));
}

}  // namespace
}  // namespace outbox::controller
