#pragma once

// Shared helpers of relay_bench: environment, payloads, fresh outbox tables,
// Kafka topics, statistics and process memory. Nothing here is timed itself.

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outbox/schema.hpp"
#include "outbox/table.hpp"

namespace RdKafka {
class KafkaConsumer;
class Message;
}  // namespace RdKafka

namespace outbox::bench {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start);
double to_ms(Clock::duration d);

// Progress lines go to stderr, so that stdout carries only the results table.
void note(const std::string& line);

// The biz_type of every benchmark event; topics are fixed per phase (no routing).
inline constexpr const char* kBizType = "order";

// A ~370-byte order event as JSON text, with "seq" = `seq` (the same fields
// and size as payload_sql_expr(), which the bulk fills use).
std::string make_payload(std::int64_t seq);
// The biz_id (Kafka key) of event `seq`: `keys` distinct order keys.
std::string make_key(std::int64_t seq, int keys);
// SQL expression of a jsonb payload for the integer column/expression `g`.
std::string payload_sql_expr(const std::string& g);

// A fresh outbox table created by outbox::migrate (64 shards, the default),
// dropped by drop() or the destructor unless kept.
class BenchTable {
 public:
  BenchTable(const std::string& dsn, const std::string& name, TableMode mode = TableMode::kStatus);
  ~BenchTable();
  BenchTable(const BenchTable&) = delete;
  BenchTable& operator=(const BenchTable&) = delete;

  const TableName& name() const { return table_; }
  // Inserts `n` pending events (seq first_seq..) in one INSERT ... SELECT.
  void fill_pending(std::int64_t n, int keys, std::int64_t first_seq = 0);
  void vacuum_analyze();
  // Events matching `where` over the status-mode columns (the "_status" view in log mode).
  long long count(const std::string& where);
  void keep() { keep_ = true; }
  void drop();

 private:
  std::string dsn_;
  TableName table_;
  TableMode mode_;
  bool keep_ = false;
  bool dropped_ = false;
};

// Experiment (--experiment-pending-id-index): every table this run creates also
// gets a partial index on (id) WHERE status = 0, a candidate fix for the claim
// plan (see docs/benchmarks.md). Off by default: the schema is migrate's alone.
void set_experiment_pending_id_index(bool on);
bool experiment_pending_id_index();
// Adds that index to `table` if the experiment is on.
void maybe_add_pending_id_index(pqxx::connection& conn, const TableName& table);

// Drops an outbox table created by migrate and its outbox_meta row.
void drop_outbox_table(pqxx::connection& conn, const TableName& table);

// Creates `topic` (broker auto-creation, num.partitions) by producing one
// marker message and waiting for its delivery; returns its partition count.
int ensure_topic(const std::string& brokers, const std::string& topic);
// A consumer of `group` assigned to each of `partitions` partitions of `topic` from the
// beginning (no group join to wait for), fetching with at most 10 ms of broker wait: what the
// latency phases read arrivals with.
std::unique_ptr<RdKafka::KafkaConsumer> consumer_from_start(const std::string& brokers,
                                                            const std::string& group,
                                                            const std::string& topic,
                                                            int partitions);
// The "seq" of a benchmark event's payload; none for another message (the topic marker) or
// an error.
std::optional<long long> message_seq(const RdKafka::Message& m);
// Commits `n` warm-up events (seq -1 .. -n) to `table` in one transaction: once all arrived,
// the relayer is up and the consumer reads.
void enqueue_warmups(pqxx::connection& conn, const TableName& table, int n, int keys);

// Messages currently in `topic` (sum of high - low watermarks).
long long topic_message_count(const std::string& brokers, const std::string& topic);

// Percentile (0..100) of `sorted` values, nearest rank; NaN if empty.
double percentile(const std::vector<double>& sorted, double p);
double median(std::vector<double> values);

// VmRSS / VmHWM of a process in kB (from /proc/<pid>/status); -1 if unreadable.
long read_status_kb(int pid, const std::string& field);

// Short unique suffix for table and topic names of one run.
std::string run_id();

}  // namespace outbox::bench
