#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "kube/client.hpp"

// The relay's side of the OutboxRelay status: every interval it applies status.backlog
// {pending, failed, oldestPendingSeconds, measuredAt} to its OutboxRelay's status subresource
// under its own field manager ("outbox-relay"), so the operator's applies (field manager
// "outbox-operator") never remove it and it never removes theirs.
//
// Guarantees: reports only measurements (a sampler returning nullopt, e.g. while the database
// is unreachable, skips the round instead of reporting zeros); failures are logged and the next
// round tries again; stopping joins the thread.
namespace outbox::controller {

struct Backlog {
  long long pending = 0;
  long long failed = 0;
  double oldest_pending_seconds = 0;
};

struct StatusReporterOptions {
  std::string ns;
  std::string name;
  std::chrono::milliseconds interval{15'000};
};

class StatusReporter {
 public:
  using Sampler = std::function<std::optional<Backlog>()>;

  StatusReporter(kube::Client& client, StatusReporterOptions options, Sampler sampler);
  ~StatusReporter();

  // One report now; false if there was nothing to report or the apply failed.
  bool report_once();

  // Parses "namespace/name"; throws std::invalid_argument naming the flag.
  static std::pair<std::string, std::string> parse_target(const std::string& text);

 private:
  kube::Client& client_;
  StatusReporterOptions options_;
  Sampler sampler_;
  std::jthread thread_;
};

}  // namespace outbox::controller
