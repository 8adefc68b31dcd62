#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kafka/producer.hpp"
#include "metrics/registry.hpp"
#include "outbox/store.hpp"
#include "outbox/table.hpp"
#include "relay/backoff.hpp"
#include "relay/batch_publisher.hpp"
#include "relay/topic_router.hpp"

namespace outbox {
class ShardOwnership;
}

namespace outbox::relay {

struct RelayConfig {
  std::string dsn;  // a secret: never logged unredacted
  std::string table = "public.outbox_event";
  kafka::ProducerConfig kafka;
  PublishPolicy publish;  // routes, attempts, backoff, mark or delete
  int batch_size = 500;
  std::chrono::milliseconds poll_interval{2000};
  std::chrono::seconds stuck_after{600};
  std::chrono::milliseconds rebalance_interval{1000};
  std::chrono::milliseconds backlog_interval{5000};
  std::string identity;  // for logs; defaults to host name and pid
};

// Counters and gauges a relay exports, all labelled with the table.
struct RelayMetrics {
  RelayMetrics(metrics::Registry& registry, const std::string& table);
  metrics::Counter& published;
  metrics::Counter& failed;
  metrics::Counter& retried;
  metrics::Counter& deferred;
  metrics::Counter& order_anomalies;
  metrics::Histogram& batch_size;
  metrics::Histogram& publish_latency;
  metrics::Gauge& pending;
  metrics::Gauge& failed_events;
  metrics::Gauge& stuck;
  metrics::Gauge& oldest_pending_seconds;
  metrics::Gauge& shards_owned;
  metrics::Gauge& members;
  metrics::Gauge& database_up;
  metrics::Gauge& dead_tuples;
  metrics::Gauge& live_tuples;
  metrics::Gauge& oldest_transaction_seconds;
  metrics::Gauge& seconds_since_vacuum;
  metrics::Gauge& kafka_up;
};

// The long-running relay worker: claims committed outbox rows of the shards it
// owns, publishes them, marks what the broker acknowledged. See DESIGN §5 for the
// semantics it keeps; docs/relay.md explains how.
class Relay {
 public:
  Relay(RelayConfig config, metrics::Registry& registry);
  ~Relay();

  // Runs until `stop` becomes true; then finishes the batch in flight, marks what
  // was delivered, releases its shards and returns. Nothing is thrown for what the
  // environment gets wrong: database and broker outages are retried with backoff;
  // refused Kafka properties, a missing or unmigrated table keep the relay not ready,
  // with the reason as its problem() (and so on /readyz and in status.relayProblem).
  // Only the constructor throws (std::invalid_argument), for a batch size or a
  // max attempts below 1.
  void run(const std::atomic<bool>& stop);

  bool ready() const { return ready_.load(); }
  // Why the relay is not working, in words for /readyz and status; empty when fine.
  std::string problem() const;
  // Milliseconds since the loop last made progress (for /healthz).
  std::chrono::milliseconds since_last_beat() const;

 private:
  void connect();
  void disconnect();
  void set_problem(const std::string& problem);
  void step(const std::atomic<bool>& stop);
  void send_batch(std::vector<OutboxEvent> batch, std::chrono::steady_clock::time_point claimed_at);
  void advance_pipeline(const std::atomic<bool>& stop);
  void write_back_settled();
  void record(const BatchOutcome& outcome);
  void idle(const std::atomic<bool>& stop);
  void wait_for_work(const std::atomic<bool>& stop, std::chrono::milliseconds limit);
  void maybe_measure_backlog();

  RelayConfig config_;
  TableName table_;
  RelayMetrics metrics_;
  // Empty when the Kafka properties were refused (config_problem_ says why): the
  // relay then stays up and not ready, so the refusal reaches /readyz and status
  // instead of a crash loop.
  std::optional<kafka::BatchProducer> producer_;
  std::optional<BatchPublisher> publisher_;
  std::string config_problem_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<ShardOwnership> shards_;
  std::unique_ptr<OutboxStore> store_;
  // A second session for claims, so that a claim overlaps the write-back on the
  // lock session. Claims only read; every write stays on the lock session.
  std::unique_ptr<pqxx::connection> claim_conn_;
  std::unique_ptr<OutboxStore> claim_store_;
  // The batch that settled last, written back during the next claim.
  std::optional<Settlement> settled_;
  class WakeUp;
  std::unique_ptr<WakeUp> wake_;
  std::atomic<bool> ready_{false};
  mutable std::mutex problem_mu_;
  std::string problem_;
  std::atomic<long long> last_beat_ms_{0};
  std::chrono::steady_clock::time_point next_rebalance_{};
  std::chrono::steady_clock::time_point next_backlog_{};
  std::chrono::steady_clock::time_point kafka_paused_until_{};
  std::chrono::milliseconds kafka_pause_{0};
  std::chrono::steady_clock::time_point in_flight_since_{};  // claim time of the batch in flight
};

}  // namespace outbox::relay
