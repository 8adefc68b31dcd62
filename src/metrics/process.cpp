#include "metrics/process.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/version.hpp"

namespace outbox::metrics {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fields of a /proc/<pid>/stat line after the command name, which is in parentheses and
// may itself hold spaces and parentheses: the last ')' ends it. fields[0] is the state, the
// third field of the line.
std::vector<std::string> stat_fields(const std::string& path) {
  const std::string line = read_file(path);
  const auto end = line.rfind(')');
  if (end == std::string::npos) {
    throw std::runtime_error("cannot parse " + path);
  }
  std::istringstream rest(line.substr(end + 1));
  return {std::istream_iterator<std::string>(rest), std::istream_iterator<std::string>()};
}

// The n-th field of the stat line (numbered from 1, as proc(5) does) as a number.
double stat_field(const std::vector<std::string>& fields, std::size_t n, const std::string& path) {
  if (fields.size() < n - 2) {
    throw std::runtime_error("cannot parse " + path + ": too few fields");
  }
  try {
    return std::stod(fields[n - 3]);
  } catch (const std::exception&) {
    throw std::runtime_error("cannot parse " + path + ": field " + std::to_string(n));
  }
}

double boot_time(const std::string& system_stat) {
  std::istringstream in(read_file(system_stat));
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) {
      return value;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  throw std::runtime_error("no btime in " + system_stat);
}

}  // namespace

ProcessStats read_process_stats(const std::string& proc, const std::string& system_stat) {
  const std::string stat_path = proc + "/stat";
  const std::vector<std::string> fields = stat_fields(stat_path);
  const auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const auto page = static_cast<double>(sysconf(_SC_PAGESIZE));
  ProcessStats s;
  s.cpu_seconds = (stat_field(fields, 14, stat_path) + stat_field(fields, 15, stat_path)) / ticks;
  s.start_time_seconds = boot_time(system_stat) + stat_field(fields, 22, stat_path) / ticks;
  s.resident_memory_bytes = stat_field(fields, 24, stat_path) * page;
  std::error_code ec;
  std::filesystem::directory_iterator fds(proc + "/fd", ec);
  if (ec) {
    throw std::runtime_error("cannot list " + proc + "/fd: " + ec.message());
  }
  s.open_fds = static_cast<double>(std::distance(fds, std::filesystem::directory_iterator()));
  return s;
}

void register_process_metrics(Registry& registry, const std::string& proc,
                              const std::string& system_stat) {
  try {
    (void)read_process_stats(proc, system_stat);
  } catch (const std::runtime_error&) {
    return;
  }
  Gauge& resident = registry.gauge("process_resident_memory_bytes",
                                   "Memory the process holds in RAM (its resident set), in bytes");
  Counter& cpu = registry.counter("process_cpu_seconds_total",
                                  "CPU time the process used, user and system, in seconds");
  Gauge& fds = registry.gauge("process_open_fds", "File descriptors the process holds open");
  Gauge& start = registry.gauge("process_start_time_seconds",
                                "When the process started, in seconds since the Unix epoch");
  registry.add_collector([&resident, &cpu, &fds, &start, proc, system_stat] {
    ProcessStats s;
    try {
      s = read_process_stats(proc, system_stat);
    } catch (const std::runtime_error&) {
      return;  // the last figures stay; a scrape must not fail for them
    }
    resident.set(s.resident_memory_bytes);
    if (s.cpu_seconds > cpu.value()) {
      cpu.inc(s.cpu_seconds - cpu.value());
    }
    fds.set(s.open_fds);
    start.set(s.start_time_seconds);
  });
}

Gauge& register_build_info(Registry& registry, Labels labels) {
  labels["version"] = kVersion;
  Gauge& g = registry.gauge("outbox_build_info", "1, labelled with the binary's version", labels);
  g.set(1);
  return g;
}

}  // namespace outbox::metrics
