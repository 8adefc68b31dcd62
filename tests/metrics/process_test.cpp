// The process_* figures and outbox_build_info (metrics/process): read from /proc as the
// kernel writes it, again on every render, and never failing a scrape.
#include "metrics/process.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/version.hpp"

namespace outbox::metrics {
namespace {

namespace fs = std::filesystem;

// A /proc/<pid> directory of our own: its stat line and `fds` open descriptors, and the
// system's stat file with the boot time.
class FakeProc {
 public:
  FakeProc() {
    dir_ = fs::temp_directory_path() /
           ("outbox-proc-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_ / "self" / "fd");
    std::ofstream(dir_ / "stat") << "cpu  1 2 3 4\nbtime 1700000000\nprocesses 42\n";
  }
  ~FakeProc() { fs::remove_all(dir_); }

  // utime, stime and starttime in clock ticks, rss in pages; the command name has spaces and
  // parentheses, as a process may name itself.
  void stat(long utime, long stime, long starttime, long rss) const {
    std::ofstream(dir_ / "self" / "stat")
        << "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 " << utime << " " << stime
        << " 0 0 20 0 1 0 " << starttime << " 1000000 " << rss << " 18446744073709551615 1 1\n";
  }
  void fds(int n) const {
    for (int i = 0; i < n; ++i) {
      std::ofstream(dir_ / "self" / "fd" / std::to_string(i));
    }
  }
  std::string self() const { return (dir_ / "self").string(); }
  std::string system_stat() const { return (dir_ / "stat").string(); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

const double kTicks = static_cast<double>(sysconf(_SC_CLK_TCK));
const double kPage = static_cast<double>(sysconf(_SC_PAGESIZE));

TEST(ProcessStats, ReadStatFdAndBootTimeAsTheKernelWritesThem) {
  FakeProc proc;
  proc.stat(250, 150, 500, 300);
  proc.fds(5);
  const ProcessStats s = read_process_stats(proc.self(), proc.system_stat());
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 400 / kTicks);
  EXPECT_DOUBLE_EQ(s.start_time_seconds, 1700000000 + 500 / kTicks);
  EXPECT_DOUBLE_EQ(s.resident_memory_bytes, 300 * kPage);
  EXPECT_EQ(s.open_fds, 5);
}

TEST(ProcessStats, OfThisProcess) {
  const ProcessStats before = read_process_stats();
  EXPECT_GT(before.resident_memory_bytes, 1 << 20);
  EXPECT_GE(before.cpu_seconds, 0);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(before.start_time_seconds, now + 1);
  EXPECT_GT(before.start_time_seconds, now - 3600) << "this test started within the hour";
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(read_process_stats().open_fds, before.open_fds + 1);
  std::fclose(f);
}

TEST(ProcessStats, AFileThatIsNotThereOrNotAStatLineIsNamed) {
  FakeProc proc;
  try {
    (void)read_process_stats(proc.self(), proc.system_stat());
    ADD_FAILURE() << "no stat file, and no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(proc.self() + "/stat"), std::string::npos) << e.what();
  }
  std::ofstream(proc.self() + "/stat") << "1234 (short) S 1 2\n";
  EXPECT_THROW((void)read_process_stats(proc.self(), proc.system_stat()), std::runtime_error);
}

// Registered once, read on every render: the figures follow the process, the CPU counter never
// goes back, and a stat file gone between scrapes leaves the last figures rather than failing.
TEST(ProcessMetrics, EachRenderReadsTheFiguresAgain) {
  FakeProc proc;
  proc.stat(100, 0, 0, 10);
  proc.fds(3);
  Registry r;
  register_process_metrics(r, proc.self(), proc.system_stat());
  const std::string first = r.render();
  EXPECT_NE(first.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos) << first;
  EXPECT_NE(first.find("process_resident_memory_bytes " +
                       std::to_string(10 * static_cast<long>(kPage)) + "\n"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("process_open_fds 3\n"), std::string::npos) << first;
  EXPECT_NE(first.find("process_start_time_seconds 1700000000\n"), std::string::npos) << first;

  proc.stat(100 + static_cast<long>(kTicks), 0, 0, 20);
  proc.fds(4);
  const std::string second = r.render();
  EXPECT_NE(second.find("process_open_fds 4\n"), std::string::npos) << second;
  EXPECT_NE(second.find("process_resident_memory_bytes " +
                        std::to_string(20 * static_cast<long>(kPage)) + "\n"),
            std::string::npos)
      << second;
  const auto cpu = [](const std::string& body) {
    const std::string key = "\nprocess_cpu_seconds_total ";
    return std::stod(body.substr(body.find(key) + key.size()));
  };
  EXPECT_DOUBLE_EQ(cpu(second) - cpu(first), 1.0);

  proc.stat(0, 0, 0, 20);  // a smaller figure than before: the counter stays
  EXPECT_DOUBLE_EQ(cpu(r.render()), cpu(second));
  fs::remove(proc.self() + "/stat");
  EXPECT_DOUBLE_EQ(cpu(r.render()), cpu(second));
}

TEST(ProcessMetrics, NothingIsRegisteredWhereThereIsNoProc) {
  Registry r;
  register_process_metrics(r, "/nonexistent/proc/self", "/nonexistent/proc/stat");
  EXPECT_EQ(r.render(), "");
}

TEST(BuildInfo, OneSeriesOfValueOneLabelledWithTheVersion) {
  Registry r;
  register_build_info(r);
  register_build_info(r, {{"table", "public.outbox_event"}});
  const std::string body = r.render();
  EXPECT_NE(body.find("# TYPE outbox_build_info gauge\n"), std::string::npos) << body;
  EXPECT_NE(body.find("outbox_build_info{version=\"" + std::string(kVersion) + "\"} 1\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("outbox_build_info{table=\"public.outbox_event\",version=\"" +
                      std::string(kVersion) + "\"} 1\n"),
            std::string::npos)
      << body;
}

}  // namespace
}  // namespace outbox::metrics
