#include "relay/turn_policy.hpp"

#include <stdexcept>

#include "api/defaults.hpp"
#include "common/duration.hpp"

namespace outbox::relay {

std::chrono::milliseconds WakeUpRegistration::registered_at(TurnClock::time_point now,
                                                            std::uint64_t notifications,
                                                            std::chrono::milliseconds limit) {
  registered_ = true;
  since_ = now;
  window_start_ = now;
  window_notifications_ = notifications;
  return std::min(limit, kCommitRace);
}

bool WakeUpRegistration::busy(TurnClock::time_point now, std::uint64_t notifications) {
  if (now - last_idle_ >= kBusyBeforeWithdraw) {
    return true;
  }
  if (now - window_start_ < kBusyBeforeWithdraw) {
    return false;
  }
  const bool too_many = notifications - window_notifications_ > kMaxNotifies;
  window_start_ = now;
  window_notifications_ = notifications;
  return too_many;
}

TurnClock::duration CoalesceWindow::after(TurnClock::duration since_last, std::size_t found) const {
  if (!is_automatic) {
    return limit;
  }
  const auto found_events = static_cast<TurnClock::rep>(std::max<std::size_t>(found, 1));
  return std::min<TurnClock::duration>(
      limit, since_last * static_cast<TurnClock::rep>(kAutoEvents) / found_events);
}

CoalesceWindow parse_coalesce_window(const std::string& text) {
  if (text == "auto") {
    return CoalesceWindow::automatic();
  }
  std::chrono::milliseconds window{};
  try {
    window = parse_duration(text);
  } catch (const std::exception& e) {
    throw std::invalid_argument(
        "--coalesce-window: auto or a duration such as 0s or 200ms, not \"" + text + "\"");
  }
  if (window > api::defaults::kMaxCoalesceWindow) {
    throw std::invalid_argument("--coalesce-window must be at most " +
                                format_duration(api::defaults::kMaxCoalesceWindow));
  }
  return CoalesceWindow::fixed(window);
}

std::string coalesce_window_text(const CoalesceWindow& window) {
  if (window.is_automatic) {
    return "auto";
  }
  return window.limit.count() == 0 ? "0s" : format_duration(window.limit);
}

void ClaimGate::claimed(TurnClock::time_point start, std::uint64_t seen, std::size_t found) {
  const TurnClock::duration since_last = last_claim_ == TurnClock::time_point{}
                                             ? TurnClock::duration(std::chrono::hours(1))
                                             : start - last_claim_;
  seen_ = seen;
  claim_needed_ = false;
  last_claim_ = start;
  last_claim_full_ = found >= static_cast<std::size_t>(batch_size_);
  // Events came, so more are likely to follow: the next claim waits for the window to end
  // (not after a full batch: a backlog drains at full speed).
  const TurnClock::duration window = found > 0 && !last_claim_full_
                                         ? coalesce_window_.after(since_last, found)
                                         : TurnClock::duration::zero();
  const bool opens_window = window > TurnClock::duration::zero();
  hold_until_ = opens_window ? start + window : TurnClock::time_point{};
  windows_in_a_row_ = opens_window ? windows_in_a_row_ + 1 : 0;
}

void ClaimGate::written_through(std::uint64_t settlements) {
  if (frees_once_written_ != 0 && settlements >= frees_once_written_) {
    claim_needed_ = true;  // what it freed is visible to claims now
    frees_once_written_ = 0;
  }
}

bool ClaimGate::provably_empty(TurnClock::time_point now, const WakeUpRegistration& wake,
                               std::uint64_t notifications,
                               bool rows_wait_for_older_transaction) const {
  return !claim_needed_ && !last_claim_full_ && wake.sees_racing_commits(last_claim_) &&
         now - last_claim_ < poll_interval_ && !rows_wait_for_older_transaction &&
         notifications == seen_;
}

HousekeepingSchedule::Due HousekeepingSchedule::take(TurnClock::time_point now) {
  const Due due{now >= next_rebalance_, now >= next_backlog_};
  if (due.rebalance) {
    next_rebalance_ = now + rebalance_interval_;
  }
  if (due.measure) {
    next_backlog_ = now + backlog_interval_;
  }
  return due;
}

void KafkaPause::unreachable(TurnClock::time_point now) {
  pause_ = kFirst;
  until_ = now + pause_;
}

void KafkaPause::probe_failed(TurnClock::time_point now) {
  pause_ = std::min(pause_ * 2, kLast);
  until_ = now + pause_;
}

void KafkaPause::reachable() {
  until_ = {};
  pause_ = {};
}

}  // namespace outbox::relay
