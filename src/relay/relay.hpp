#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "api/defaults.hpp"
#include "common/file_watch.hpp"
#include "common/redact.hpp"
#include "kafka/producer.hpp"
#include "metrics/registry.hpp"
#include "outbox/store.hpp"
#include "outbox/table.hpp"
#include "relay/backoff.hpp"
#include "relay/batch_publisher.hpp"
#include "relay/relay_health.hpp"
#include "relay/relay_metrics.hpp"
#include "relay/session.hpp"
#include "relay/topic_router.hpp"
#include "relay/turn_policy.hpp"
#include "relay/write_behind.hpp"

namespace outbox::relay {

// The files a relay's credentials came from, when a supervisor may rewrite them under it (a
// Secret the kubelet updates in place: a rotation). Looked at with each backlog measurement
// (RelayConfig::backlog_interval). Empty: nothing is watched.
struct CredentialFiles {
  // The DSN file and the database's TLS files. libpq reads them whenever a session opens, so a
  // change ends the session as a graceful stop would (the batch in flight settled and written
  // back, the shards released, the process kept) and the next session opens with `dsn()`.
  FileWatch database;
  // The DSN as the files hold it now, its secrets remembered for redact(); may throw
  // std::invalid_argument (a file gone), which ends run(). Null: RelayConfig::dsn stays.
  std::function<std::string()> dsn;
  // The Kafka properties and certificate files. librdkafka reads them once, when the producer
  // is created, and a producer cannot be replaced under the batch in flight; so a change ends
  // run() after the same graceful drain (RunEnd::kKafkaCredentialsChanged), and the process
  // exits for its supervisor to start it again with the new files.
  FileWatch kafka;
};

struct RelayConfig {
  std::string dsn;  // a secret: never logged unredacted
  std::string table = "public.outbox_event";
  // Set: the table is adopted (migrate --adopt) and must have been adopted with these.
  std::optional<ColumnMap> columns;
  int shards = 0;  // > 0: the table must have this many shards (spec.relay.shards)
  kafka::ProducerConfig kafka;
  PublishPolicy publish;  // routes, attempts, backoff, mark or delete
  int batch_size = api::defaults::kBatchSize;
  std::chrono::milliseconds poll_interval = api::defaults::kPollInterval;
  // After a claim that found events (and did not fill a batch), the next claim waits until
  // this long after it began: the commits of a window share one claim, one send and one
  // write-back, at up to this much latency for all but the first (docs/relay.md,
  // "Coalescing wake-ups"). 0: claim on every wake-up.
  CoalesceWindow coalesce_window = parse_coalesce_window(api::defaults::kCoalesceWindow);
  std::chrono::seconds stuck_after = api::defaults::kStuckAfter;
  std::chrono::milliseconds rebalance_interval{1000};
  std::chrono::milliseconds backlog_interval{5000};
  // How long the relay may go on sending while a write-back runs: past it, the next send
  // waits for that write-back, so a replica whose lock session is lost stops sending
  // within about this long (the fencing bound; docs/relay.md).
  std::chrono::milliseconds write_behind_limit = api::defaults::kWriteBehindLimit;
  // How long a settled batch may wait, while the next is in flight, for more to be
  // written back with it in one statement (fewer statements per event; the fencing
  // bound grows by as much).
  std::chrono::milliseconds write_behind_linger = api::defaults::kWriteBehindLinger;
  std::string identity;  // for logs; defaults to process_identity()
  // Labels every series carries beside `table`: in a pod the operator started, the
  // OutboxRelay's `namespace` and name (`outboxrelay`), so that a scrape without the
  // ServiceMonitor's relabeling still says which resource a series is about.
  metrics::Labels metric_labels;
  CredentialFiles credentials;
};

// Thrown by Relay's constructor for Kafka properties the producer refuses (the message names
// the first): nothing can be published with them (stay_not_ready()).
struct KafkaRefused : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The long-running relay worker: claims committed outbox rows of the shards it
// owns, publishes them, marks what the broker acknowledged. docs/relay.md states
// the semantics and how they are kept. The loop is run(): one Session per
// database session, pump() until stopped or a credential file changed, then drain().
//
// Guarantees:
// - At least once: an event is marked sent only after Kafka acknowledged it
//   (acks=all, idempotent producer); until then it stays pending and is claimed
//   again by this or another replica.
// - Never early: only committed rows are claimed (autocommit reads), so no event
//   is published before the transaction that wrote it commits.
// - Per-key order: a key's events live in one shard, published by one replica at
//   a time, in id order; a batch is sent only after the previous one settled,
//   without the keys that it, or a batch not yet written back, did not fully
//   deliver; a key's later events wait behind its retry; a batch sends a key to
//   one topic only.
// - A write-back runs on the session that holds the shard locks, so a replica that
//   lost its shards can never mark their rows (the fencing check), and a send
//   follows a round trip on that session that ended or began at most
//   RelayConfig::write_behind_limit plus write_behind_linger before it.
// Caveats:
// - kill -9 (or a lost database session) costs duplicates of the batch in flight and
//   of the settled batches not yet written back: nothing of them is marked, and the
//   replica that takes the shards publishes those events again. Nothing is lost.
// - Order is by id, not by commit (docs/relay.md); there is none across keys. A
//   broker that acknowledges a later event after refusing an earlier one of its
//   key cannot be undone: it is counted in outbox_order_anomalies_total.
class Relay {
 public:
  // Throws std::invalid_argument for a batch size or a max attempts below 1, and KafkaRefused
  // for Kafka properties the producer refuses. `health` is what the relay reports to
  // /healthz, /readyz and status; it outlives the relay.
  Relay(RelayConfig config, metrics::Registry& registry, RelayHealth& health);
  ~Relay();

  // Runs until `stop` is requested or the Kafka credential files change; then finishes
  // the batch in flight, marks what was delivered, releases its shards and returns why.
  // A change of the database's credential files does the same to the session only, and
  // the next one opens with them. Nothing is thrown for what the environment gets wrong:
  // database and broker outages are retried with backoff; a missing or unmigrated table
  // keeps the relay not ready, with the reason as its health's problem() (and so on
  // /readyz and in status.relayProblem). A DSN file that cannot be read again throws.
  RunEnd run(std::stop_token stop);

 private:
  // What one session's loop carries from turn to turn: the write-behind and the policy
  // of a turn (relay/turn_policy.hpp).
  struct Pipeline {
    Pipeline(const RelayConfig& config, WriteBehind::Write write, WriteBehind::Written written);
    // The settled batches, written back on the lock session behind the sends.
    WriteBehind behind;
    TurnClock::time_point in_flight_since;  // claim time of the batch in flight
    WakeUpRegistration wake;                // in <table>_waiting, so that inserts notify
    ClaimGate gate;                         // whether a turn claims
    HousekeepingSchedule housekeeping;      // rebalancing, maintenance, the backlog
    // Nothing in flight, a write-back running: the next wait for it before claiming again.
    DoublingWait behind_poll{std::chrono::milliseconds{10}, std::chrono::milliseconds{100}};
    // Log mode: the next wait while committed events wait above the watermark.
    DoublingWait watermark_poll{std::chrono::milliseconds{2}, std::chrono::milliseconds{100}};
    // Requested by run()'s stop token or by a rotated credential file: pump() ends, drain()
    // claims nothing more.
    std::stop_source end;
  };

  void went_online(Session& s);
  void went_offline();
  void pump(Session& s, Pipeline& p, std::stop_token stop);
  void drain(Session& s, Pipeline& p, std::stop_token stop);
  void turn(Session& s, Pipeline& p, std::stop_token stop);
  void catch_up_behind(Pipeline& p);
  void keep_up(Session& s, Pipeline& p);
  void read_dsn();
  // Whether a credential file changed (CredentialFiles), logging it once.
  bool database_credentials_changed();
  bool kafka_credentials_changed();
  void rebalance(Session& s, Pipeline& p);
  void wait_out_kafka_pause(Session& s, std::stop_token stop);
  bool claims_now(Session& s, Pipeline& p, bool busy, std::stop_token stop);
  std::vector<OutboxEvent> claim_next(Session& s, Pipeline& p);
  void withdraw_when_busy(Session& s, Pipeline& p);
  // outbox_delivery_lag_seconds for every event the settlement delivered.
  void observe_delivery_lag(const Settlement& settled);
  void settle_and_send_next(Session& s, Pipeline& p, std::vector<OutboxEvent> next,
                            std::set<std::string> held, TurnClock::time_point claimed_at);
  // Owed progress (LogStore): stored alone this long after events stop; carried by a claim
  // (a write on the lock session) at most once this long while they keep coming.
  static constexpr std::chrono::milliseconds kOwedProgressAge{100};
  static constexpr std::chrono::milliseconds kOwedProgressRide{1000};
  std::chrono::milliseconds store_owed_progress(Session& s);
  void send_or_wait(Session& s, Pipeline& p, std::vector<OutboxEvent> next,
                    TurnClock::time_point claimed_at, std::stop_token stop);
  void send_beside_write_back(Session& s, Pipeline& p, std::vector<OutboxEvent> next,
                              const std::set<std::string>& held, TurnClock::time_point claimed_at,
                              std::stop_token stop);
  void wait_for_work(Session& s, Pipeline& p, std::chrono::milliseconds limit,
                     std::stop_token stop);
  void hold_claims(Session& s, Pipeline& p, std::chrono::milliseconds limit, std::stop_token stop);
  void wait_behind(Pipeline& p);
  void send_batch(Pipeline& p, std::vector<OutboxEvent> batch, TurnClock::time_point claimed_at,
                  const std::set<std::string>& held = {});
  void record(const BatchOutcome& outcome);
  void measure_backlog(Session& s);
  void set_problem(const std::string& problem, const std::string& reason = {});
  void beat() { health_.beat(); }

  RelayConfig config_;
  Secrets secrets_;  // the DSN's and the Kafka properties': no problem says them
  TableName table_;
  RelayMetrics metrics_;
  RelayHealth& health_;
  kafka::BatchProducer producer_;
  std::unique_ptr<kafka::BatchProducer> dead_letter_producer_;  // with a dead-letter topic
  BatchPublisher publisher_;
  KafkaPause kafka_pause_;  // kept across database sessions
  bool kafka_credentials_changed_ = false;
};

}  // namespace outbox::relay
