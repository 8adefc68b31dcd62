#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "common/identity.hpp"
#include "kube/client.hpp"
#include "outbox/store.hpp"
#include "relay/relay_health.hpp"

// The relay's side of the OutboxRelay status: every interval it applies status.backlog
// {pending, failed, oldestPendingSeconds, measuredAt} to its OutboxRelay's status subresource
// under its own field manager ("outbox-relay"), so the operator's applies (field manager
// "outbox-operator") never remove it and it never removes theirs. While the relay is not ready
// for a reason it can name (table not migrated, Kafka property refused, database unreachable),
// it also applies status.relayProblem {pod, message, reportedAt} under "outbox-relay-problem",
// which the operator quotes in the Ready condition; the pod that wrote it clears it once ready.
//
// Guarantees: reports only measurements (a round with no backlog measured, e.g. while the
// database is unreachable, leaves status.backlog as it was instead of reporting zeros);
// failures are logged and the next round tries again; stopping joins the thread.
// Caveats: with several replicas, the last problem reported wins; a pod that dies while
// reporting one leaves it behind, and the operator removes it once every relay pod is ready or
// it is older than a minute.
namespace outbox::relay {

// What one round reports.
struct RelayReport {
  std::optional<Backlog> backlog;  // nullopt: not measured this round (Relay::backlog())
  std::string problem;             // why the relay is not ready; empty when ready or starting
  std::string reason;              // the problem's CamelCase reason, when it has one
  DatabaseReport database;         // RelayHealth::database(); reported with the backlog
};

struct StatusReporterOptions {
  std::string ns;
  std::string name;
  std::chrono::milliseconds interval{15'000};
  std::string pod = host_name();  // who reports: the pod's name
};

class StatusReporter {
 public:
  using Sampler = std::function<RelayReport()>;

  StatusReporter(kube::Client& client, StatusReporterOptions options, Sampler sampler);

  // One report now; false if there was nothing to report or an apply failed.
  bool report_once();

  // Parses "namespace/name"; throws std::invalid_argument naming the flag.
  static std::pair<std::string, std::string> parse_target(const std::string& text);

 private:
  kube::Client& client_;
  StatusReporterOptions options_;
  Sampler sampler_;
  bool problem_reported_ = false;  // by this reporter, and not cleared since
  std::jthread thread_;
};

}  // namespace outbox::relay
