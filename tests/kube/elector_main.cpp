// kube_elector_probe: runs one LeaseElector and prints its transitions, one per line:
//   <steady-clock microseconds> <event> [detail]
// events: started, stopped, new_leader <identity>, exit <0 clean | 1 lost>, and guard_open /
// guard_closed when holds_lease() changes (sampled every 50 ms, as a worker would check it).
// The steady clock is CLOCK_MONOTONIC, shared by all processes on the machine, so the lines of
// two probes (and the test driving them) can be merged into one timeline.
// SIGTERM or SIGINT: clean shutdown (stop leading, release the Lease, exit 0).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "kube/client.hpp"
#include "kube/config.hpp"
#include "kube/lease_elector.hpp"

namespace {

void emit(const std::string& event) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now().time_since_epoch())
                .count();
  std::printf("%lld %s\n", static_cast<long long>(us), event.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) {
    args[argv[i]] = argv[i + 1];
  }
  for (const char* required : {"--kubeconfig", "--namespace", "--lease", "--identity"}) {
    if (args.count(required) == 0) {
      std::fprintf(stderr,
                   "usage: %s --kubeconfig F --namespace NS --lease NAME --identity ID "
                   "[--lease-ms 15000 --renew-ms 10000 --retry-ms 2000]\n",
                   argv[0]);
      return 2;
    }
  }
  auto ms = [&](const char* key, long fallback) {
    return std::chrono::milliseconds(args.count(key) ? std::atol(args[key].c_str()) : fallback);
  };

  // Block the signals before any thread starts, so that only sigtimedwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  outbox::kube::LeaseElectorConfig config;
  config.lease_namespace = args["--namespace"];
  config.lease_name = args["--lease"];
  config.identity = args["--identity"];
  config.lease_duration = ms("--lease-ms", 15000);
  config.renew_deadline = ms("--renew-ms", 10000);
  config.retry_period = ms("--retry-ms", 2000);
  config.on_started_leading = [] { emit("started"); };
  config.on_stopped_leading = [] { emit("stopped"); };
  config.on_new_leader = [](const std::string& id) { emit("new_leader " + id); };

  outbox::kube::ClientOptions options;
  // As client-go: a lease call must not outlive half the renew deadline.
  options.timeout = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(1000),
                                                        config.renew_deadline / 2);
  outbox::kube::Client client(outbox::kube::load_kubeconfig(args["--kubeconfig"]), options);
  outbox::kube::LeaseElector elector(client, config);

  std::atomic<int> result{-1};
  std::jthread worker([&](std::stop_token stop) { result = elector.run(stop) ? 0 : 1; });
  emit("ready");
  timespec tick{0, 50'000'000};
  bool guard = false;
  for (;;) {
    // Sampled before the exit check, so that a guard that closed just as run() returned is
    // still reported.
    if (elector.holds_lease() != guard) {
      guard = !guard;
      emit(guard ? "guard_open" : "guard_closed");
    }
    if (result.load() >= 0) {
      break;
    }
    if (sigtimedwait(&signals, nullptr, &tick) > 0) {
      worker.request_stop();
      break;
    }
  }
  worker.join();
  emit("exit " + std::to_string(result.load()));
  return result.load();
}
