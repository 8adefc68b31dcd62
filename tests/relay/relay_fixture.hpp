#pragma once

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "metrics/registry.hpp"
#include "outbox/schema.hpp"
#include "outbox/table.hpp"
#include "relay/relay.hpp"
#include "support/child_process.hpp"

namespace outbox::testing {

// One message as read back from the real broker.
struct Consumed {
  std::string topic;
  std::string key;
  std::string payload;
  int partition = -1;
  long long offset = -1;
  long long timestamp_ms = -1;  // the producer's create time
  std::map<std::string, std::string> headers;
};

// Reads every message of `topics` from the beginning until `expected` arrived
// or `timeout` passed, then keeps reading for `settle` to catch extras. An empty
// `bootstrap` means the test bed's broker.
std::vector<Consumed> consume_all(
    const std::vector<std::string>& topics, std::size_t expected, std::chrono::milliseconds timeout,
    std::chrono::milliseconds settle = std::chrono::milliseconds(1500),
    const std::string& bootstrap = "");

// The table mode the tests run in: OUTBOX_TEST_TABLE_MODE (status, the default, or
// log). CMake registers the relay's integration tests once per mode.
TableMode table_mode();
// migrate(), 16 shards, in table_mode().
void migrate_for_test(pqxx::connection& conn, const TableName& table);

// A fresh outbox table (migrated in table_mode()) and a topic prefix, unique to one test.
struct OutboxTestTable {
  OutboxTestTable();
  std::string dsn;
  TableName table;
  std::string topic;  // every event of the test goes here (route-free template)

  // Inserts n events in one committed transaction; keys cycle through `keys`.
  // Payload carries {"seq": i, "key": k} so order can be checked per key.
  void insert(int n, int keys, int start_seq = 0);
  // Every event with the status-mode columns (status, retry_count, last_error): the
  // table itself, or in log mode its "_status" view.
  std::string events() const;
  // Events of events() matching `where`.
  long long count(const std::string& where);
  // Entries in <table>_waiting: relays registered for the insert trigger's NOTIFY.
  long long waiting_entries();
  // A relay for this table on the test bed's broker, or on `bootstrap` when given.
  relay::RelayConfig relay_config(const std::string& bootstrap = "") const;
};

// A Relay running on a thread of this process (a replica that can stop cleanly).
class ThreadRelay {
 public:
  explicit ThreadRelay(relay::RelayConfig config);
  ~ThreadRelay();
  void stop();
  metrics::Registry& registry() { return registry_; }
  // What the relay reports to /healthz, /readyz and status.
  const relay::RelayHealth& health() const { return health_; }

 private:
  metrics::Registry registry_;
  relay::RelayHealth health_;
  std::stop_source stop_;
  std::unique_ptr<relay::Relay> relay_;
  std::thread thread_;
};

// A counter of the relay's metrics for its table (0 when not exported yet).
double metric(ThreadRelay& relay, const std::string& name, const std::string& table);

// The relay as a separate process of the real binary (to kill -9 or SIGTERM).
class ProcessRelay {
 public:
  explicit ProcessRelay(const relay::RelayConfig& config, const std::string& log_path);
  void kill9() { process_->kill9(); }
  // Sends SIGTERM and returns the exit status (or -1 on timeout).
  int terminate(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    return process_->terminate(timeout);
  }
  int pid() const { return process_->pid(); }

 private:
  std::unique_ptr<testbed::ChildProcess> process_;
};

// Polls `condition` every 50 ms until true or `timeout`; returns the final value.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// How many different events (payload "seq") arrived, duplicates counted once.
std::size_t distinct_seqs(const std::vector<Consumed>& messages);

// The payload "seq" values in [0, count) that did not arrive, the first `limit` of them, as
// "3, 17, ..." (empty when none is missing): what a failed delivery check names.
std::string missing_seqs(const std::vector<Consumed>& messages, int count, int limit = 10);

// Per partition of `topic`: the offsets the broker holds and the ones `messages` read, as
// "p0 holds [0,1000) read 1000 in [0,999]; ...": what tells a message Kafka does not have
// from one the test's consumer did not read, when a delivery check fails.
std::string partition_report(const std::string& topic, const std::vector<Consumed>& messages);

// Checks that, per key, the payload "seq" values of the first delivery of each
// event appear in ascending order. Returns "" or a description of the violation.
std::string per_key_order_problem(const std::vector<Consumed>& messages);

}  // namespace outbox::testing
