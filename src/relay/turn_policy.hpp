#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

// The decisions of a relay turn (Relay::turn), each a small value type with no I/O: the
// caller passes the time and what it read from the session in, and does what the answer
// says. docs/relay.md ("Waking up, cheaply", "Coalescing wake-ups") states the policy.
namespace outbox::relay {

using TurnClock = std::chrono::steady_clock;

// A wait that doubles from `first` up to `last` while what it waits for has not come, and
// starts again from `first` once it has.
class DoublingWait {
 public:
  constexpr DoublingWait(std::chrono::milliseconds first, std::chrono::milliseconds last)
      : first_(first), last_(last), current_(first) {}
  std::chrono::milliseconds current() const { return current_; }
  void grow() { current_ = std::min(current_ * 2, last_); }
  void reset() { current_ = first_; }

 private:
  std::chrono::milliseconds first_;
  std::chrono::milliseconds last_;
  std::chrono::milliseconds current_;
};

// The wake-up path: whether this relay is registered in <table>_waiting (so that inserts
// notify) and when it may withdraw. It stays registered across wake-ups while it waits for
// work now and then, and withdraws once it has not waited for kBusyBeforeWithdraw, or more
// than kMaxNotifies NOTIFYs came in such a window (over 1,000 a second: notifying commits are
// serialised, which costs the writers more than polling costs the relay).
class WakeUpRegistration {
 public:
  // A writer whose insert trigger ran just before the registration was visible sent no
  // NOTIFY, but its commit follows within moments: a claim that begins this long after the
  // registration sees it.
  static constexpr std::chrono::milliseconds kCommitRace{50};
  static constexpr std::chrono::milliseconds kBusyBeforeWithdraw{100};
  static constexpr std::uint64_t kMaxNotifies = 100;

  bool registered() const { return registered_; }
  // Registered at `now`, when `notifications` NOTIFYs had been received. Returns how long the
  // first wait may be: at most kCommitRace, then a claim sees the racing writers' commits.
  std::chrono::milliseconds registered_at(TurnClock::time_point now, std::uint64_t notifications,
                                          std::chrono::milliseconds limit);
  void withdrawn() { registered_ = false; }
  // The relay waited for work until `now`.
  void idled(TurnClock::time_point now) { last_idle_ = now; }
  // Once per turn while registered, with the NOTIFYs received so far: true when the relay is
  // busy enough to withdraw (the caller then withdraws, and calls withdrawn()).
  bool busy(TurnClock::time_point now, std::uint64_t notifications);
  // Whether a claim that began at `claim` began long enough after the registration to see
  // the commits of writers that raced it (false while not registered).
  bool sees_racing_commits(TurnClock::time_point claim) const {
    return registered_ && claim >= since_ + kCommitRace;
  }

 private:
  bool registered_ = false;
  TurnClock::time_point since_;
  TurnClock::time_point last_idle_;
  // The 100 ms window NOTIFYs are counted in: when it began, how many had come by then.
  TurnClock::time_point window_start_;
  std::uint64_t window_notifications_ = 0;
};

// How long claims wait after one that found events and did not fill a batch, so that commits
// trickling in share one claim, one send and one write-back. Fixed (0: never), or automatic:
// as long as kAutoEvents more events take at the rate the last claim saw, at most kAutoLimit.
// So at 50 events/s about 30 ms, at 500/s 4 ms, and a busy relay (claims back to back, each
// finding many) is barely held; the first event after a quiet spell opens the longest window
// (a claim seconds after the one before found one event), and goes out at once itself.
struct CoalesceWindow {
  static constexpr std::size_t kAutoEvents = 2;
  static constexpr std::chrono::milliseconds kAutoLimit{30};

  static constexpr CoalesceWindow fixed(std::chrono::milliseconds window) {
    return {false, window};
  }
  static constexpr CoalesceWindow automatic() { return {true, kAutoLimit}; }

  bool is_automatic = false;
  std::chrono::milliseconds limit{0};  // fixed: the window; automatic: its bound

  // The window after a claim that found `found` (> 0) events, `since_last` after the claim
  // before it began.
  TurnClock::duration after(TurnClock::duration since_last, std::size_t found) const;
};

// "auto", or a duration of at most api::defaults::kMaxCoalesceWindow (0s: none). Throws
// std::invalid_argument naming what it accepts.
CoalesceWindow parse_coalesce_window(const std::string& text);
// "auto", or the fixed window as a duration ("0s" for none).
std::string coalesce_window_text(const CoalesceWindow& window);

// Whether the turn claims. It holds claims for the coalesce window after a claim that found
// events and did not fill a batch (RelayConfig::coalesce_window), and skips a claim that would
// be provably empty: registered (every commit since notifies), no NOTIFY since the last claim
// began, which began long enough after the registration to see the writers that raced it and
// did not fill a batch, nothing since that may have made rows claimable without a NOTIFY (a
// written-back settlement that freed rows, a rebalance that brought shards), no committed row
// waiting for an older transaction (log mode: its end notifies nobody), and the last claim
// younger than the poll interval (a retry coming due notifies nobody either).
class ClaimGate {
 public:
  ClaimGate(CoalesceWindow coalesce_window, std::chrono::milliseconds poll_interval, int batch_size)
      : coalesce_window_(coalesce_window), poll_interval_(poll_interval), batch_size_(batch_size) {}

  // A claim began at `start`, after `seen` NOTIFYs, and found `found` events.
  void claimed(TurnClock::time_point start, std::uint64_t seen, std::size_t found);
  // Rows may be claimable that no NOTIFY announces: the next claim is not skipped.
  void rows_may_wait() { claim_needed_ = true; }
  // Settlement number `settlement` (WriteBehind::added()) frees rows once written back.
  void frees_rows_once_written(std::uint64_t settlement) { frees_once_written_ = settlement; }
  // The first `settlements` are written back (WriteBehind::written_through()).
  void written_through(std::uint64_t settlements);

  // Claims are held for the coalesce window until then (the epoch: not held).
  TurnClock::time_point held_until() const { return hold_until_; }
  bool held(TurnClock::time_point now) const { return now < hold_until_; }
  // NOTIFYs received before the last claim began: one more means rows it may not have seen.
  std::uint64_t seen() const { return seen_; }
  // Claims in a row that opened a window: from the second on, commits keep coming.
  bool commits_keep_coming() const { return windows_in_a_row_ >= 2; }
  // Whether a claim at `now` would be provably empty, given the registration, the NOTIFYs
  // received so far and whether committed rows wait for an older transaction.
  bool provably_empty(TurnClock::time_point now, const WakeUpRegistration& wake,
                      std::uint64_t notifications, bool rows_wait_for_older_transaction) const;

 private:
  CoalesceWindow coalesce_window_;
  std::chrono::milliseconds poll_interval_;
  int batch_size_;
  std::uint64_t seen_ = 0;
  TurnClock::time_point last_claim_;
  bool last_claim_full_ = true;
  TurnClock::time_point hold_until_;
  int windows_in_a_row_ = 0;
  bool claim_needed_ = true;
  std::uint64_t frees_once_written_ = 0;  // 0: none waits to be written
};

// When the relay next rebalances its shards and measures its backlog (with table maintenance).
// Both are due at the start; each is due again its interval after it was taken.
class HousekeepingSchedule {
 public:
  HousekeepingSchedule(TurnClock::time_point start, std::chrono::milliseconds rebalance_interval,
                       std::chrono::milliseconds backlog_interval)
      : rebalance_interval_(rebalance_interval),
        backlog_interval_(backlog_interval),
        next_rebalance_(start),
        next_backlog_(start) {}

  struct Due {
    bool rebalance = false;
    bool measure = false;
    bool any() const { return rebalance || measure; }
  };
  // What is due at `now`, each scheduled again from `now`.
  Due take(TurnClock::time_point now);
  bool rebalance_due(TurnClock::time_point now) const { return now >= next_rebalance_; }

 private:
  std::chrono::milliseconds rebalance_interval_;
  std::chrono::milliseconds backlog_interval_;
  TurnClock::time_point next_rebalance_;
  TurnClock::time_point next_backlog_;
};

// Kafka unreachable: no claims until the pause ends (and a probe answers). The first pause is
// a second; each failed probe doubles it, up to 30 s.
class KafkaPause {
 public:
  static constexpr std::chrono::milliseconds kFirst{1000};
  static constexpr std::chrono::milliseconds kLast{30'000};

  bool paused(TurnClock::time_point now) const { return now < until_; }
  // How long the pause lasts from `now` (zero or less: over), rounded up: a wait of the
  // truncated remainder would end just short of the pause, and the next turn would claim
  // without the probe.
  std::chrono::milliseconds left(TurnClock::time_point now) const {
    return std::chrono::ceil<std::chrono::milliseconds>(until_ - now);
  }
  // A batch found Kafka unreachable at `now`.
  void unreachable(TurnClock::time_point now);
  // The probe at the pause's end found no broker at `now`.
  void probe_failed(TurnClock::time_point now);
  // The probe answered.
  void reachable();

 private:
  TurnClock::time_point until_{};
  std::chrono::milliseconds pause_{0};
};

}  // namespace outbox::relay
