#include <charconv>
#include <iostream>

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "cli/publish_options.hpp"
#include "cli/signals.hpp"
#include "common/duration.hpp"
#include "controller/status_reporter.hpp"
#include "http/health_server.hpp"
#include "kube/config.hpp"
#include "outbox/table.hpp"
#include "relay/relay.hpp"

namespace outbox::cli {
namespace {

struct RelayOptions {
  DatabaseOptions db;
  PublishOptions publish;
  int batch_size = 500;
  std::string poll_interval = "2s";
  std::string stuck_after = "10m";
  std::string listen = "0.0.0.0:8080";
  std::string report_status;  // namespace/name of the OutboxRelay, empty: no report
  std::string kubeconfig;
  std::string report_interval = "15s";
};

}  // namespace

Action add_relay_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("relay", "publish committed outbox events to Kafka (long-running)");
  auto o = std::make_shared<RelayOptions>();
  o->db.add_to(*cmd);
  o->publish.add_to(*cmd);
  cmd->add_option("--batch-size", o->batch_size, "events per claim")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--poll-interval", o->poll_interval, "fallback poll when no NOTIFY arrives")
      ->capture_default_str();
  cmd->add_option("--stuck-after", o->stuck_after, "pending age counted as stuck")
      ->capture_default_str();
  cmd->add_option("--listen", o->listen, "address:port for /healthz, /readyz, /metrics")
      ->envname("OUTBOX_LISTEN")
      ->capture_default_str();
  cmd->add_option("--report-status", o->report_status,
                  "namespace/name of an OutboxRelay whose status.backlog this relay reports")
      ->envname("OUTBOX_RELAY_RESOURCE");
  cmd->add_option("--kubeconfig", o->kubeconfig,
                  "kubeconfig for --report-status (default: $KUBECONFIG, then in-cluster)");
  cmd->add_option("--report-interval", o->report_interval, "how often to report the backlog")
      ->capture_default_str();

  return [o]() {
    relay::RelayConfig c;
    c.dsn = o->db.resolve_dsn();
    c.table = o->db.table;
    c.kafka = o->publish.producer_config();
    c.publish = o->publish.policy();
    c.batch_size = o->batch_size;
    c.poll_interval = parse_duration(o->poll_interval);
    c.stuck_after =
        std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o->stuck_after));

    auto colon = o->listen.rfind(':');
    if (colon == std::string::npos) {
      throw std::invalid_argument("--listen must be address:port");
    }
    std::string address = o->listen.substr(0, colon);
    if (address.size() > 2 && address.front() == '[') {
      address = address.substr(1, address.size() - 2);
    }
    const std::string port_text = o->listen.substr(colon + 1);
    int port_number = -1;
    const char* end = port_text.data() + port_text.size();
    if (auto [ptr, ec] = std::from_chars(port_text.data(), end, port_number);
        ec != std::errc() || ptr != end) {
      port_number = -1;
    }
    if (port_number < 0 || port_number > 65535) {
      throw std::invalid_argument("--listen port \"" + port_text +
                                  "\" is not a number from 0 to 65535");
    }
    const auto port = static_cast<unsigned short>(port_number);

    const auto& stop = install_stop_signals();
    metrics::Registry registry;
    relay::Relay relay(c, registry);
    http::HealthServer server(
        address, port,
        {{"/healthz",
          [&relay] {
            bool alive = relay.since_last_beat() < std::chrono::seconds(60);
            return http::Response{alive ? 200 : 503, "text/plain",
                                  alive ? "ok\n" : "relay loop stalled\n"};
          }},
         {"/readyz",
          [&relay] {
            std::string problem = relay.problem();
            return http::Response{relay.ready() ? 200 : 503, "text/plain",
                                  relay.ready()     ? "ready\n"
                                  : problem.empty() ? "starting\n"
                                                    : problem + "\n"};
          }},
         {"/metrics", [&registry] {
            return http::Response{200, "text/plain; version=0.0.4", registry.render()};
          }}});
    spdlog::info("relay serving /healthz, /readyz, /metrics on {}:{}", address, server.port());

    // Opt-in: report the backlog the relay measures into its OutboxRelay's status.
    std::unique_ptr<kube::Client> kube_client;
    std::unique_ptr<controller::StatusReporter> reporter;
    if (!o->report_status.empty()) {
      auto [ns, name] = controller::StatusReporter::parse_target(o->report_status);
      kube_client = std::make_unique<kube::Client>(o->kubeconfig.empty()
                                                       ? kube::load_default_config()
                                                       : kube::load_kubeconfig(o->kubeconfig));
      const metrics::Labels labels = {{"table", TableName::parse(c.table).plain()}};
      auto& up = registry.gauge("outbox_database_up", "", labels);
      auto& pending = registry.gauge("outbox_pending_events", "", labels);
      auto& failed = registry.gauge("outbox_failed_events", "", labels);
      auto& oldest = registry.gauge("outbox_oldest_pending_seconds", "", labels);
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      reporter = std::make_unique<controller::StatusReporter>(
          *kube_client,
          controller::StatusReporterOptions{ns, name, parse_duration(o->report_interval), host},
          [&]() {
            controller::RelayReport report;
            if (!relay.ready()) {
              report.problem = relay.problem();
            }
            // The gauges are only measurements while the database session is up.
            if (up.value() >= 1) {
              report.backlog =
                  controller::Backlog{static_cast<long long>(pending.value()),
                                      static_cast<long long>(failed.value()), oldest.value()};
            }
            return report;
          });
      spdlog::info("reporting the backlog to outboxrelay {}/{} every {}", ns, name,
                   o->report_interval);
    }
    relay.run(stop);
    return 0;
  };
}

}  // namespace outbox::cli
