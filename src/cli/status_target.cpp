#include "cli/status_target.hpp"

#include <stdexcept>

#include <CLI/CLI.hpp>

#include "relay/status_reporter.hpp"

namespace outbox::cli {

void StatusTarget::add_to(CLI::App& cmd, const std::string& field) {
  cmd.add_option(
         "--report-status", target,
         "namespace/name of an OutboxRelay whose status." + field + " this run writes when it ends")
      ->check([](const std::string& text) {
        try {
          relay::StatusReporter::parse_target(text);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  cmd.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig for --report-status (default: $KUBECONFIG, then in-cluster)");
}

void StatusTarget::report(const controller::JobRun& run) const {
  if (target.empty()) {
    return;
  }
  auto [ns, name] = relay::StatusReporter::parse_target(target);
  controller::report_job_run(kubeconfig, ns, name, run);
}

}  // namespace outbox::cli
