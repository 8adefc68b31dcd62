#include <iostream>
#include <memory>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "api/defaults.hpp"
#include "cli/app.hpp"
#include "cli/database_options.hpp"
#include "cli/inspect_endpoint.hpp"
#include "cli/listen_address.hpp"
#include "cli/publish_options.hpp"
#include "cli/signals.hpp"
#include "common/duration.hpp"
#include "common/log.hpp"
#include "http/health_server.hpp"
#include "kube/config.hpp"
#include "metrics/process.hpp"
#include "outbox/table.hpp"
#include "relay/relay.hpp"
#include "relay/status_reporter.hpp"

namespace outbox::cli {
namespace {

// The relay's exit code after its Kafka credential files changed (sysexits' EX_TEMPFAIL: try
// again): not 0, so that a supervisor restarting only failed processes restarts it too.
constexpr int kExitCredentialsChanged = 75;

struct RelayOptions {
  DatabaseOptions db;
  PublishOptions publish;
  int batch_size = api::defaults::kBatchSize;
  std::string poll_interval = format_duration(api::defaults::kPollInterval);
  std::string coalesce_window = api::defaults::kCoalesceWindow;
  std::string stuck_after = format_duration(api::defaults::kStuckAfter);
  std::string listen = kDefaultListen;
  std::string report_status;  // namespace/name of the OutboxRelay, empty: no report
  std::string kubeconfig;
  std::string report_interval = "15s";
  int shards = 0;  // 0: the table's count
};

void add_relay_flags(CLI::App& cmd, RelayOptions& o) {
  o.db.add_to(cmd);
  o.publish.add_to(cmd);
  cmd.add_option("--batch-size", o.batch_size, "events per claim")
      ->check(CLI::Range(1, api::defaults::kMaxBatchSize))
      ->capture_default_str();
  cmd.add_option("--poll-interval", o.poll_interval, "fallback poll when no NOTIFY arrives")
      ->capture_default_str();
  cmd.add_option("--coalesce-window", o.coalesce_window,
                 "after a claim that found events, wait this long before the next one, so that "
                 "trickling commits share a claim and a write-back: auto (as long as two more "
                 "events take at the rate seen, at most 30ms), a duration, or 0s (claim on "
                 "every wake-up)")
      ->capture_default_str();
  cmd.add_option("--stuck-after", o.stuck_after, "pending age counted as stuck")
      ->capture_default_str();
  cmd.add_option("--shards", o.shards,
                 "the table's shard count (fixed by migrate --shards); another count is refused "
                 "(default: whatever the table has)")
      ->check(CLI::Range(1, 1024));
  add_listen_option(cmd, o.listen);
  cmd.add_option("--report-status", o.report_status,
                 "namespace/name of an OutboxRelay whose status.backlog this relay reports")
      ->envname("OUTBOX_RELAY_RESOURCE");
  cmd.add_option("--kubeconfig", o.kubeconfig,
                 "kubeconfig for --report-status (default: $KUBECONFIG, then in-cluster)");
  cmd.add_option("--report-interval", o.report_interval, "how often to report the backlog")
      ->capture_default_str();
}

relay::RelayConfig relay_config(const RelayOptions& o) {
  relay::RelayConfig c;
  // Fingerprinted before they are read: a rotation meanwhile is seen as a change.
  c.credentials.database = FileWatch(o.db.credential_files());
  c.credentials.kafka = FileWatch(o.publish.credential_files());
  c.dsn = o.db.resolve_dsn();
  if (o.db.dsn.empty()) {
    c.credentials.dsn = [db = o.db] { return db.resolve_dsn(); };
  }
  c.table = o.db.table;
  c.columns = o.db.column_map();
  c.shards = o.shards;
  c.kafka = o.publish.producer_config();
  c.publish = o.publish.policy();
  c.batch_size = o.batch_size;
  c.poll_interval = parse_duration(o.poll_interval);
  c.coalesce_window = relay::parse_coalesce_window(o.coalesce_window);
  c.stuck_after = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(o.stuck_after));
  // The resource the operator started this pod for also labels the metrics; the pod's name
  // (the log's `replica`) does not: Prometheus adds it as `pod`.
  for (const auto& [field, value] : log_fields_from_environment()) {
    if (field == "namespace" || field == "outboxrelay") {
      c.metric_labels[field] = value;
    }
  }
  return c;
}

std::unique_ptr<http::HealthServer> serve_health(const ListenAddress& at,
                                                 const relay::RelayHealth& health,
                                                 metrics::Registry& registry,
                                                 InspectEndpoint& inspect) {
  auto server = std::make_unique<http::HealthServer>(
      at.address, at.port,
      std::map<std::string, http::HealthServer::Handler>{
          {"/healthz",
           [&health] {
             bool alive = health.since_last_beat() < std::chrono::seconds(60);
             return http::Response{alive ? 200 : 503, "text/plain",
                                   alive ? "ok\n" : "relay loop stalled\n"};
           }},
          {"/readyz",
           [&health] {
             std::string problem = health.problem();
             return http::Response{health.ready() ? 200 : 503, "text/plain",
                                   health.ready()    ? "ready\n"
                                   : problem.empty() ? "starting\n"
                                                     : problem + "\n"};
           }},
          {"/metrics",
           [&registry] {
             return http::Response{200, "text/plain; version=0.0.4", registry.render()};
           }}},
      std::map<std::string, http::SlowRoute>{
          {"/inspect", {[&inspect](const http::Request& r) { return inspect.handle(r); }}}});
  spdlog::info("relay serving /healthz, /readyz, /metrics, /inspect on {}:{}", at.address,
               server->port());
  return server;
}

// Opt-in: reports the backlog the relay measures, and why it is not ready, into its
// OutboxRelay's status. The reporter holds `client`, so it is declared after it.
struct StatusReport {
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<relay::StatusReporter> reporter;
};

StatusReport report_status(const RelayOptions& o, const relay::RelayHealth& health) {
  StatusReport out;
  if (o.report_status.empty()) {
    return out;
  }
  auto [ns, name] = relay::StatusReporter::parse_target(o.report_status);
  out.client = std::make_unique<kube::Client>(
      o.kubeconfig.empty() ? kube::load_default_config() : kube::load_kubeconfig(o.kubeconfig));
  out.reporter = std::make_unique<relay::StatusReporter>(
      *out.client, relay::StatusReporterOptions{ns, name, parse_duration(o.report_interval)},
      [&health] {
        relay::RelayReport report;
        if (!health.ready()) {
          report.problem = health.problem();
          report.reason = health.problem_reason();
        }
        report.backlog = health.backlog();
        report.database = health.database();
        return report;
      });
  spdlog::info("reporting the backlog to outboxrelay {}/{} every {}", ns, name, o.report_interval);
  return out;
}

}  // namespace

Action add_relay_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("relay", "publish committed outbox events to Kafka (long-running)");
  auto o = std::make_shared<RelayOptions>();
  add_relay_flags(*cmd, *o);
  return [o]() {
    const relay::RelayConfig config = relay_config(*o);
    const ListenAddress listen = parse_listen(o->listen);
    const std::stop_token stop = install_stop_signals();
    metrics::Registry registry;
    metrics::register_process_metrics(registry);
    relay::RelayHealth health;
    // Null when the producer refused the Kafka properties: then the pod stays up and not
    // ready, so that the refusal reaches /readyz and status instead of a crash loop.
    std::unique_ptr<relay::Relay> worker;
    std::string refused;
    try {
      worker = std::make_unique<relay::Relay>(config, registry, health);
    } catch (const relay::KafkaRefused& e) {
      refused = e.what();
    }
    InspectEndpoint inspect(
        {[o] { return o->db.resolve_dsn(); }, TableName::parse(config.table), config.columns});
    auto server = serve_health(listen, health, registry, inspect);
    StatusReport status = report_status(*o, health);
    const relay::RunEnd end =
        worker ? worker->run(stop)
               : relay::stay_not_ready(health, refused, config.credentials.kafka, stop);
    if (end == relay::RunEnd::kKafkaCredentialsChanged) {
      spdlog::warn(
          "exiting with code {} so that the relay starts again with the new Kafka "
          "credentials",
          kExitCredentialsChanged);
      return kExitCredentialsChanged;
    }
    return 0;
  };
}

}  // namespace outbox::cli
