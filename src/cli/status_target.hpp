#pragma once

#include <string>

#include "controller/job_status.hpp"

namespace CLI {
class App;
}

namespace outbox::cli {

// --report-status and --kubeconfig, shared by the commands the operator runs as Jobs
// (compensate, cleanup, requeue): where the run's outcome goes.
struct StatusTarget {
  std::string target;  // namespace/name of the OutboxRelay, empty: no report
  std::string kubeconfig;

  // Adds both options to `cmd`; `field` names the status field the help text promises.
  void add_to(CLI::App& cmd, const std::string& field);
  // Writes `run` to the target's status (nothing without a target). Never throws: see
  // controller::report_job_run.
  void report(const controller::JobRun& run) const;
};

}  // namespace outbox::cli
