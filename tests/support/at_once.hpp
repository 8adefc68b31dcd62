#pragma once

#include <barrier>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

namespace outbox::testbed {

// Runs `call(session, i)` for i in [0, count), each on its own thread and its own PostgreSQL
// session, all released at the same moment (the sessions are opened first, so connecting
// does not spread the starts). Returns each call's exception message, "" where it returned.
template <typename Call>
std::vector<std::string> at_once_on_sessions(const std::string& dsn, int count, Call call) {
  std::vector<std::unique_ptr<pqxx::connection>> sessions;
  for (int i = 0; i < count; ++i) {
    sessions.push_back(std::make_unique<pqxx::connection>(dsn));
  }
  std::barrier start(count);
  std::vector<std::string> errors(static_cast<std::size_t>(count));
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        call(*sessions[static_cast<std::size_t>(i)], i);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return errors;
}

}  // namespace outbox::testbed
