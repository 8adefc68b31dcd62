#include <malloc.h>

#include <cstdlib>
#include <sstream>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/app.hpp"
#include "cli/listen_address.hpp"
#include "cli/signals.hpp"
#include "common/duration.hpp"
#include "common/identity.hpp"
#include "common/log.hpp"
#include "controller/controller.hpp"
#include "http/health_server.hpp"
#include "kube/config.hpp"
#include "metrics/process.hpp"

namespace outbox::cli {
namespace {

struct ControllerFlags {
  bool leader_elect = false;
  std::string kubeconfig;
  std::string namespaces;
  std::string relay_image;
  std::string network_policy_api_server;
  std::string listen = kDefaultListen;
  std::string lease_name = "outbox-operator-leader";
  std::string lease_namespace;
  std::string identity;
  std::string lease_duration = "15s";
  std::string renew_deadline = "10s";
  std::string retry_period = "2s";
  int workers = 2;
  double qps = 50;
  int burst = 100;
  std::string not_ready_recheck = "30s";
  std::string resync_period = "10m";
  int max_rolling_relays = 10;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto b = item.find_first_not_of(" \t");
    auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) {
      out.push_back(item.substr(b, e - b + 1));
    }
  }
  return out;
}

// The leader election Lease: its name and namespace, the holder's identity, the timings.
void add_lease_flags(CLI::App* cmd, ControllerFlags* f) {
  cmd->add_option("--lease-name", f->lease_name, "leader election Lease")
      ->envname("OUTBOX_LEASE_NAME")
      ->capture_default_str();
  cmd->add_option("--lease-namespace", f->lease_namespace,
                  "namespace of the Lease (the operator's own)")
      ->envname("POD_NAMESPACE");
  cmd->add_option("--identity", f->identity, "Lease holder identity (default: host name and pid)")
      ->envname("POD_NAME");
  cmd->add_option("--lease-duration", f->lease_duration, "how long a claim is valid")
      ->envname("OUTBOX_LEASE_DURATION")
      ->capture_default_str();
  cmd->add_option("--renew-deadline", f->renew_deadline, "a leader steps down after this")
      ->envname("OUTBOX_RENEW_DEADLINE")
      ->capture_default_str();
  cmd->add_option("--retry-period", f->retry_period, "time between election attempts")
      ->envname("OUTBOX_RETRY_PERIOD")
      ->capture_default_str();
}

// How much the controller does at once and how often it looks again.
void add_pacing_flags(CLI::App* cmd, ControllerFlags* f) {
  cmd->add_option("--workers", f->workers, "concurrent reconciles")
      ->envname("OUTBOX_WORKERS")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--qps", f->qps, "apiserver requests per second (token bucket)")
      ->envname("OUTBOX_QPS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--burst", f->burst, "apiserver request burst")
      ->envname("OUTBOX_BURST")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--not-ready-recheck", f->not_ready_recheck,
                  "how often a resource whose relay pods are not ready looks again for why")
      ->capture_default_str();

  cmd->add_option("--max-rolling-relays", f->max_rolling_relays,
                  "relay Deployments rolling out, and schema Jobs re-migrating a table, at once "
                  "across the cluster; more wait (0: no limit)")
      ->envname("OUTBOX_MAX_ROLLING_RELAYS")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--resync-period", f->resync_period,
                  "how often every OutboxRelay is reconciled even without a change (0s: never)")
      ->envname("OUTBOX_RESYNC_PERIOD")
      ->capture_default_str();
}

void add_controller_flags(CLI::App* cmd, ControllerFlags* f) {
  cmd->add_flag("--leader-elect", f->leader_elect,
                "elect one leader on a Lease; standbys keep caches warm and never write");
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, then in-cluster, then ~/.kube/config)");
  cmd->add_option("--namespaces", f->namespaces, "comma-separated namespaces to watch; empty: all")
      ->envname("OUTBOX_WATCH_NAMESPACES");
  cmd->add_option("--relay-image", f->relay_image,
                  "image of the relay and the jobs unless spec.relay.image is set")
      ->envname("OUTBOX_RELAY_IMAGE");
  cmd->add_option("--network-policy-api-server", f->network_policy_api_server,
                  "comma-separated CIDRs of the API server, the only addresses a relay's "
                  "NetworkPolicy (spec.networkPolicy) lets it reach on ports 443 and 6443; "
                  "empty: any address on those ports")
      ->envname("OUTBOX_NETWORK_POLICY_API_SERVER");
  add_listen_option(*cmd, f->listen);
  add_lease_flags(cmd, f);
  add_pacing_flags(cmd, f);
}

kube::Client make_client(const ControllerFlags& flags) {
  kube::Config config = flags.kubeconfig.empty() ? kube::load_default_config()
                                                 : kube::load_kubeconfig(flags.kubeconfig);
  kube::ClientOptions client_options;
  client_options.qps = flags.qps;
  client_options.burst = flags.burst;
  return kube::Client(std::move(config), client_options);
}

controller::ControllerOptions controller_options(const ControllerFlags& flags) {
  controller::ControllerOptions options;
  options.namespaces = split_list(flags.namespaces);
  options.render.relay_image = flags.relay_image;
  options.render.api_server_cidrs = split_list(flags.network_policy_api_server);
  options.render.log_level = logging_level();
  options.render.log_format = logging_format();
  options.workers = flags.workers;
  options.not_ready_recheck = parse_duration(flags.not_ready_recheck);
  options.resync_period = parse_duration(flags.resync_period);
  options.max_rolling_relays = flags.max_rolling_relays;
  options.identity = flags.identity.empty() ? process_identity() : flags.identity;
  if (flags.leader_elect) {
    if (flags.lease_namespace.empty()) {
      throw std::invalid_argument("--leader-elect needs --lease-namespace or POD_NAMESPACE");
    }
    kube::LeaseElectorConfig lease;
    lease.lease_namespace = flags.lease_namespace;
    lease.lease_name = flags.lease_name;
    lease.lease_duration = parse_duration(flags.lease_duration);
    lease.renew_deadline = parse_duration(flags.renew_deadline);
    lease.retry_period = parse_duration(flags.retry_period);
    options.leader_election = lease;
  }
  if (options.render.relay_image.empty()) {
    spdlog::warn("no OUTBOX_RELAY_IMAGE: only OutboxRelays that set spec.relay.image work");
  }
  return options;
}

}  // namespace

Action add_controller_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "controller", "run the OutboxRelay controller (the operator's Deployment runs this)");
  auto f = std::make_shared<ControllerFlags>();
  add_controller_flags(cmd, f.get());
  return [f]() {
    // glibc gives each thread that allocates its own arena, and the workers, informers and
    // elector each parse and drop large JSON documents: freed memory stays spread over a dozen
    // arenas. Two keep a fleet upgrade's peak far lower (docs/controller.md, "A fleet").
    // MALLOC_ARENA_MAX, when set, still wins.
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) {
      mallopt(M_ARENA_MAX, 2);
    }
    kube::Client client = make_client(*f);
    const controller::ControllerOptions options = controller_options(*f);
    metrics::Registry registry;
    metrics::register_build_info(registry);
    metrics::register_process_metrics(registry);
    controller::Controller controller(client, options, registry);
    const ListenAddress listen = parse_listen(f->listen);
    http::HealthServer server(
        listen.address, listen.port,
        {{"/healthz",
          [] {
            return http::Response{200, "text/plain", "ok\n"};
          }},
         // A standby is ready too: readiness means "caches synced", not "leading".
         {"/readyz",
          [&controller] {
            const std::string why = controller.not_ready_reason();
            return http::Response{why.empty() ? 200 : 503, "text/plain",
                                  why.empty() ? "ready\n" : why + "\n"};
          }},
         {"/metrics", [&registry] {
            return http::Response{200, "text/plain; version=0.0.4", registry.render()};
          }}});
    spdlog::info("controller {} serving /healthz, /readyz, /metrics on {}:{}; watching {}",
                 options.identity, listen.address, server.port(),
                 options.namespaces.empty() ? "all namespaces" : f->namespaces);

    bool kept = controller.run(install_stop_signals());
    if (!kept) {
      spdlog::error("lost leadership; exiting so that a fresh process can stand for election");
      return 1;
    }
    return 0;
  };
}

}  // namespace outbox::cli
