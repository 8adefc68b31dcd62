#pragma once

#include <string>

#include "metrics/registry.hpp"

// The figures every long-running process of the project exports beside its own: what the
// kernel says about the process (the process_* names Prometheus' client libraries use, so
// dashboards made for any exporter work) and which build it is.
namespace outbox::metrics {

struct ProcessStats {
  double resident_memory_bytes = 0;
  double cpu_seconds = 0;  // user and system
  double open_fds = 0;
  double start_time_seconds = 0;  // Unix time
};

// Reads `proc`/stat and `proc`/fd, and the boot time from `system_stat` (the system's
// /proc/stat: the kernel counts a process's start in clock ticks since boot). Throws
// std::runtime_error naming the file it could not read or parse.
ProcessStats read_process_stats(const std::string& proc = "/proc/self",
                                const std::string& system_stat = "/proc/stat");

// Registers process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds and
// process_start_time_seconds, read again on every render(). Where they cannot be read (no
// /proc), nothing is registered.
void register_process_metrics(Registry& registry, const std::string& proc = "/proc/self",
                              const std::string& system_stat = "/proc/stat");

// outbox_build_info{version="..."} 1, with `labels` beside the version.
Gauge& register_build_info(Registry& registry, Labels labels = {});

}  // namespace outbox::metrics
