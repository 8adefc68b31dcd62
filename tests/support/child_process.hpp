#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace outbox::testbed {

// A child process (usually the real outbox-operator binary) with its output
// appended to a log file and extra environment (secrets go here, never in argv).
// Killed with SIGKILL on destruction if still running.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> args, const std::map<std::string, std::string>& env,
               const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void kill9();
  // SIGTERM, then waits; returns the exit status (128 + signal if killed), -1 on timeout.
  int terminate(std::chrono::seconds timeout = std::chrono::seconds(30));
  // Waits for the process to exit on its own; the exit status as terminate(), -1 on timeout.
  int wait(std::chrono::seconds timeout);
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
};

}  // namespace outbox::testbed
