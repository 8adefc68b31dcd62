#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>

// The rollout budget (ControllerOptions::max_rolling_relays) as a value type with no I/O, in the
// way relay/turn_policy is: the reconciler tells it what the informers show and what this
// process started, passes the time in, and does what the answer says.
namespace outbox::controller {

using BudgetClock = std::chrono::steady_clock;

// At most `limit` relay Deployments rolling out and schema Jobs re-migrating a table at once,
// across everything one operator watches, so that an operator upgrade that changes every relay's
// image rolls the fleet in waves.
//
// What counts against it: a relay Deployment the cache shows rolling out (rolling_out), one this
// process changed whose new generation the cache does not show yet, a schema Job the cache shows
// unfinished, and one this process created that the cache does not show yet (for at most
// kUnseenJobGrace: one never seen by then was deleted at once and runs no more).
//
// What it remembers per resource it holds back: the versions the hold was decided on and until
// when it stands. While those versions stand and the budget is still spent, the reconciler need
// not render the resource again: nothing it would render has changed, and what it would do with
// the result (hold it back again) is known. Bounds: one entry per relay
// Deployment rolling or changed, schema Job unfinished or just created, and resource held or
// being judged.
class RolloutBudget {
 public:
  static constexpr std::chrono::seconds kUnseenJobGrace{60};

  // limit 0: no limit (every change goes, nothing is held).
  explicit RolloutBudget(int limit) : limit_(limit) {}

  // What the Deployment informer shows of a relay Deployment.
  struct DeploymentSeen {
    long long generation = 0;
    bool rolling = false;  // the Deployment controller is rolling it out (rolling_out)
  };
  enum class JobSeen { kRunning, kFinished };  // finished: Complete or Failed

  // Relay Deployment `key` ("ns/name") as the cache shows it; forget_deployment once it is gone.
  void observe_deployment(const std::string& key, DeploymentSeen seen);
  void forget_deployment(const std::string& key);
  // Schema Job `key` as the cache shows it; forget_schema_job once it is gone.
  void observe_schema_job(const std::string& key, JobSeen seen);
  void forget_schema_job(const std::string& key);

  // Deployment `key`, at `live_generation` in the cache, is about to get a new pod template.
  // True: go, and count it as rolling from now until the cache shows that rollout done (one
  // already rolling, or started by this process, joins its own rollout and always goes).
  // False: leave its template as it is for now.
  bool may_roll(const std::string& key, long long live_generation, BudgetClock::time_point now);
  // Schema Job `key` would migrate a table migrated before. True: create it, and count it from
  // now on; false: not yet.
  bool may_migrate(const std::string& key, BudgetClock::time_point now);

  // How many count against the limit at `now`.
  int in_use(BudgetClock::time_point now);
  bool spent(BudgetClock::time_point now) { return limit_ > 0 && in_use(now) >= limit_; }

  // The holds, as a protocol per pass over resource `relay` ("ns/name"): judging() as the pass
  // begins, on `versions` (what its render depends on: the resourceVersions it reads); then
  // held() if it held something back, release() if it did not. A change to an object the
  // resource owns calls release() too, at any time: a pass under way when it came holds nothing
  // on stale reads.
  void judging(const std::string& relay, std::string versions);
  // The pass held `relay` back; the hold stands until `until` at the latest (when its status
  // is due to change with time).
  void held(const std::string& relay, BudgetClock::time_point until);
  void release(const std::string& relay) { holds_.erase(relay); }
  // Whether a hold of `relay` decided on `versions` still stands at `now`: nothing it read has
  // changed, its time has not come, and the budget is still spent. Then a pass need not render
  // the resource again: it would hold the same things back.
  bool still_held(const std::string& relay, const std::string& versions,
                  BudgetClock::time_point now);

  std::size_t holds() const { return holds_.size(); }

 private:
  void expire_unseen_jobs(BudgetClock::time_point now);

  int limit_;
  std::set<std::string> rolling_;             // Deployments the cache shows rolling out
  std::map<std::string, long long> changed_;  // Deployments this process changed -> generation
  std::set<std::string> running_jobs_;        // schema Jobs the cache shows unfinished
  std::map<std::string, BudgetClock::time_point> created_jobs_;  // not in the cache yet
  struct Hold {
    std::string versions;
    BudgetClock::time_point until = BudgetClock::time_point::min();  // min: being judged
  };
  std::map<std::string, Hold> holds_;
};

}  // namespace outbox::controller
