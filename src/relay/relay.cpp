#include "relay/relay.hpp"

#include <unistd.h>

#include <future>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/log.hpp"
#include "outbox/connection.hpp"
#include "outbox/schema.hpp"
#include "outbox/shards.hpp"

namespace outbox::relay {
namespace {

using Clock = std::chrono::steady_clock;

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Wakes the relay when the insert trigger signals new rows. It listens for the
// whole session, so a NOTIFY sent while a batch is in flight is not lost.
class Relay::WakeUp : public pqxx::notification_receiver {
 public:
  WakeUp(pqxx::connection_base& c, const std::string& channel)
      : pqxx::notification_receiver(c, channel) {}
  void operator()(const std::string&, int) override { woken = true; }
  bool woken = false;
};

RelayMetrics::RelayMetrics(metrics::Registry& r, const std::string& table)
    : published(r.counter("outbox_events_published_total",
                          "Events acknowledged by Kafka and marked sent", {{"table", table}})),
      failed(r.counter("outbox_events_failed_total",
                       "Events moved to FAILED (poison or attempts used up)", {{"table", table}})),
      retried(r.counter("outbox_events_retried_total", "Delivery failures that scheduled a retry",
                        {{"table", table}})),
      deferred(r.counter("outbox_events_deferred_total",
                         "Events left pending, no attempt counted, because Kafka was unreachable",
                         {{"table", table}})),
      order_anomalies(r.counter("outbox_order_anomalies_total",
                                "Events delivered after an earlier event of the same key failed",
                                {{"table", table}})),
      batch_size(r.histogram("outbox_batch_size", "Events per claimed batch",
                             {1, 5, 10, 50, 100, 250, 500, 1000, 5000}, {{"table", table}})),
      publish_latency(r.histogram("outbox_publish_latency_seconds",
                                  "From claim to the last delivery report of a batch",
                                  metrics::latency_buckets(), {{"table", table}})),
      pending(
          r.gauge("outbox_pending_events", "Pending events (database clock)", {{"table", table}})),
      failed_events(r.gauge("outbox_failed_events", "Events in FAILED", {{"table", table}})),
      stuck(r.gauge("outbox_stuck_events", "Pending events older than the stuck threshold",
                    {{"table", table}})),
      oldest_pending_seconds(r.gauge("outbox_oldest_pending_seconds",
                                     "Age of the oldest pending event, on the database clock",
                                     {{"table", table}})),
      shards_owned(
          r.gauge("outbox_shards_owned", "Shards this replica publishes", {{"table", table}})),
      members(
          r.gauge("outbox_relay_members", "Live relay replicas on this table", {{"table", table}})),
      database_up(
          r.gauge("outbox_database_up", "1 when the database session is up", {{"table", table}})),
      dead_tuples(r.gauge("outbox_table_dead_tuples",
                          "Dead tuples in the outbox table (claims step over them until vacuum)",
                          {{"table", table}})),
      live_tuples(r.gauge("outbox_table_live_tuples", "Live tuples in the outbox table",
                          {{"table", table}})),
      oldest_transaction_seconds(
          r.gauge("outbox_database_oldest_transaction_seconds",
                  "Age of the oldest open transaction holding back vacuum (xmin horizon)",
                  {{"table", table}})),
      seconds_since_vacuum(r.gauge("outbox_table_seconds_since_vacuum",
                                   "Since the outbox table was last vacuumed (-1: never)",
                                   {{"table", table}})),
      kafka_up(r.gauge("outbox_kafka_up", "1 when the last batch or probe reached Kafka",
                       {{"table", table}})) {}

Relay::Relay(RelayConfig config, metrics::Registry& registry)
    : config_(std::move(config)),
      table_(TableName::parse(config_.table)),
      metrics_(registry, table_.plain()) {
  if (config_.batch_size < 1) {
    throw std::invalid_argument("batch size must be at least 1");
  }
  if (config_.publish.max_attempts < 1) {
    throw std::invalid_argument("max attempts must be at least 1");
  }
  if (config_.identity.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    config_.identity = std::string(host) + "/" + std::to_string(::getpid());
  }
  try {
    producer_.emplace(config_.kafka);
    publisher_.emplace(*producer_, config_.publish);
  } catch (const std::invalid_argument& e) {
    config_problem_ = e.what();
  }
  last_beat_ms_ = now_ms();
}

Relay::~Relay() = default;

std::string Relay::problem() const {
  std::lock_guard lock(problem_mu_);
  return problem_;
}

// Logs a problem once when it appears or changes, and once when it clears.
void Relay::set_problem(const std::string& problem) {
  std::lock_guard lock(problem_mu_);
  if (problem == problem_) {
    return;
  }
  if (problem.empty()) {
    spdlog::info("relay {} recovered from: {}", config_.identity, problem_);
  } else {
    spdlog::error("{}; retrying with backoff", problem);
  }
  problem_ = problem;
}

std::chrono::milliseconds Relay::since_last_beat() const {
  return std::chrono::milliseconds(now_ms() - last_beat_ms_.load());
}

void Relay::connect() {
  conn_ = std::make_unique<pqxx::connection>(config_.dsn);
  TableInfo info = inspect_table(*conn_, table_);
  shards_ = std::make_unique<ShardOwnership>(*conn_, table_, info.shard_count);
  store_ = std::make_unique<OutboxStore>(*conn_, table_);
  claim_conn_ = std::make_unique<pqxx::connection>(config_.dsn);
  claim_store_ = std::make_unique<OutboxStore>(*claim_conn_, table_);
  wake_ = std::make_unique<WakeUp>(*conn_, table_.notify_channel());
  // A killed relay leaves its entry in <table>_waiting, and every insert would
  // notify until someone clears it.
  store_->forget_dead_waiters();
  shards_->join();
  next_rebalance_ = Clock::now();
  next_backlog_ = Clock::now();
  metrics_.database_up.set(1);
  ready_ = true;
  spdlog::info("relay {} connected to {} ({}), member slot {}, {} shards", config_.identity,
               redact_dsn(config_.dsn), table_.plain(), shards_->member_slot(), info.shard_count);
}

void Relay::disconnect() {
  ready_ = false;
  metrics_.database_up.set(0);
  metrics_.shards_owned.set(0);
  // A batch in flight can no longer be written back on this session; its events
  // stay pending and are published again (at least once).
  publisher_->abandon();
  settled_.reset();
  claim_store_.reset();
  claim_conn_.reset();
  store_.reset();
  shards_.reset();
  wake_.reset();
  conn_.reset();  // closing the session releases every advisory lock it held
}

void Relay::run(const std::atomic<bool>& stop) {
  if (!config_problem_.empty()) {
    // Nothing can be published with these properties, and they are read only at
    // start. Staying up and not ready keeps the reason on /readyz (and so in the
    // resource's status) until the Secret is fixed and the pod restarted.
    spdlog::error("{} (then restart the relay); not ready until then", config_problem_);
    {
      std::lock_guard lock(problem_mu_);
      problem_ = config_problem_;
    }
    while (!stop) {
      last_beat_ms_ = now_ms();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return;
  }
  std::chrono::milliseconds backoff{500};
  while (!stop) {
    try {
      if (!conn_) {
        connect();
        backoff = std::chrono::milliseconds{500};
        set_problem({});
      }
      step(stop);
    } catch (const pqxx::broken_connection& e) {
      set_problem("database unreachable (" + redact_dsn(config_.dsn) +
                  "): " + connection_failure(config_.dsn, e.what()));
    } catch (const SchemaError& e) {
      // Bad runtime configuration (no table, missing columns): stay up, not
      // ready, and say what to fix; someone may run migrate in the meantime.
      set_problem(e.what());
    } catch (const pqxx::sql_error& e) {
      set_problem(std::string("database error: ") + e.what());
    }
    if (!problem().empty()) {
      disconnect();
      for (auto until = Clock::now() + backoff; Clock::now() < until && !stop;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      backoff = std::min(backoff * 2, std::chrono::milliseconds{10'000});
    }
    last_beat_ms_ = now_ms();
  }
  // Graceful shutdown: write back the batch in flight (claiming nothing more),
  // flush, then hand the shards back at once.
  try {
    while (conn_ && (publisher_->in_flight() || settled_)) {
      advance_pipeline(stop);
    }
  } catch (const std::exception& e) {
    spdlog::warn("writing back the last batches: {}", e.what());
  }
  producer_->flush(std::chrono::seconds(10));
  if (shards_) {
    try {
      shards_->release_all();
    } catch (const std::exception& e) {
      spdlog::warn("releasing shards: {}", e.what());
    }
  }
  disconnect();
  spdlog::info("relay {} stopped", config_.identity);
}

// One turn of the loop. With a batch in flight, advance the pipeline; otherwise
// keep the shard share fresh, then claim and send.
void Relay::step(const std::atomic<bool>& stop) {
  if (publisher_->in_flight() || settled_) {
    advance_pipeline(stop);
    return;
  }
  const auto now = Clock::now();
  if (now >= next_rebalance_) {
    if (shards_->rebalance()) {
      spdlog::info("relay {} owns {} of {} shards ({} live replicas)", config_.identity,
                   shards_->owned().size(), shards_->shard_count(), shards_->live_members());
    }
    metrics_.shards_owned.set(static_cast<double>(shards_->owned().size()));
    metrics_.members.set(shards_->live_members());
    next_rebalance_ = now + config_.rebalance_interval;
  }
  maybe_measure_backlog();

  if (now < kafka_paused_until_) {
    wake_->woken = false;  // new rows don't end a pause; only the pause's end does
    wait_for_work(stop,
                  std::chrono::duration_cast<std::chrono::milliseconds>(kafka_paused_until_ - now));
    if (!stop && Clock::now() >= kafka_paused_until_ && producer_->probe(std::chrono::seconds(2))) {
      spdlog::info("kafka reachable again; resuming");
      kafka_paused_until_ = {};
      kafka_pause_ = {};
      metrics_.kafka_up.set(1);
    } else if (!stop && Clock::now() >= kafka_paused_until_) {
      kafka_pause_ = std::min(kafka_pause_ * 2, std::chrono::milliseconds{30'000});
      kafka_paused_until_ = Clock::now() + kafka_pause_;
    }
    return;
  }

  wake_->woken = false;  // a NOTIFY from now on means rows this claim may not see
  std::vector<OutboxEvent> batch = store_->claim_batch(shards_->owned(), config_.batch_size);
  if (batch.empty()) {
    idle(stop);
    return;
  }
  send_batch(std::move(batch), now);
}

// Nothing to claim: sleep until a NOTIFY, the poll interval, or `stop`. The insert
// trigger notifies only while some relay waits, so the relay first says it waits.
// A writer whose trigger ran just before that was visible sent no NOTIFY, but its
// commit follows within moments: so look once more after a short wait, then sleep.
void Relay::idle(const std::atomic<bool>& stop) {
  constexpr std::chrono::milliseconds kCommitRace{50};
  store_->set_waiting(true);
  wait_for_work(stop, std::min(config_.poll_interval, kCommitRace));
  if (!stop && !wake_->woken) {
    const auto now = Clock::now();
    std::vector<OutboxEvent> batch = store_->claim_batch(shards_->owned(), config_.batch_size);
    if (!batch.empty()) {
      store_->set_waiting(false);
      send_batch(std::move(batch), now);
      return;
    }
    wait_for_work(stop, config_.poll_interval);
  }
  store_->set_waiting(false);
}

void Relay::send_batch(std::vector<OutboxEvent> batch, Clock::time_point claimed_at) {
  metrics_.batch_size.observe(static_cast<double>(batch.size()));
  in_flight_since_ = claimed_at;
  if (std::size_t left_out = publisher_->send(std::move(batch)); left_out > 0) {
    // Not lost: they stay pending, untouched, and a later claim returns them.
    spdlog::debug(
        "{} events wait for a later batch: an earlier event of their key in this "
        "batch goes to another topic",
        left_out);
  }
}

// With batch k in flight and batch k-1 settled: writes k-1 back on the lock
// session while claiming k+1 on the claim session, then waits for k's reports,
// sends k+1 and keeps k's settlement for the next turn. So the claim overlaps
// the write-back, and both overlap the Kafka round trip.
//
// Per-key order: k+1 is produced only after k's reports are in, and without the
// events of any key that k or k-1 did not fully deliver: the claim of k+1 may
// not see their failures yet (they stay pending; a claim after the write-back
// holds the key back behind its retry). Inside one batch, send() keeps each key
// on one topic, and the claim never puts a retry beside later events of its key.
void Relay::advance_pipeline(const std::atomic<bool>& stop) {
  // Rebalancing may release shards, so it waits until nothing is in flight: a
  // shard is never handed over with its events still on the way.
  const bool claim_more = !stop && publisher_->in_flight() && Clock::now() < next_rebalance_;
  const auto claimed_at = Clock::now();
  std::vector<OutboxEvent> next;
  std::set<std::string> held;
  if (settled_) {
    std::future<std::vector<OutboxEvent>> claim;
    if (claim_more) {
      std::vector<std::int64_t> exclude = publisher_->ids_in_flight();
      exclude.insert(exclude.end(), settled_->ids.begin(), settled_->ids.end());
      wake_->woken = false;
      claim = std::async(std::launch::async, [this, exclude = std::move(exclude)] {
        return claim_store_->claim_batch(shards_->owned(), config_.batch_size, exclude);
      });
    }
    held = std::move(settled_->held_keys);
    write_back_settled();  // if this throws, the future's destructor waits for the claim
    if (claim.valid()) {
      next = claim.get();
    }
  } else if (claim_more) {
    wake_->woken = false;
    next = store_->claim_batch(shards_->owned(), config_.batch_size, publisher_->ids_in_flight());
  }
  if (!publisher_->in_flight()) {
    return;  // only a write-back was left
  }
  Settlement settled = publisher_->settle();
  metrics_.publish_latency.observe(
      std::chrono::duration<double>(Clock::now() - in_flight_since_).count());
  held.insert(settled.held_keys.begin(), settled.held_keys.end());
  std::erase_if(next, [&](const OutboxEvent& e) { return held.count(e.biz_id) > 0; });
  const bool reachable = !settled.outcome.kafka_unreachable;
  if (reachable && !next.empty()) {
    send_batch(std::move(next), claimed_at);  // unsent claims cost nothing: no row changed
  }
  settled_ = std::move(settled);
  if (!reachable) {
    // Kafka unreachable: stop claiming for a while instead of timing out batch after batch.
    const std::size_t deferred = settled_->outcome.deferred;
    write_back_settled();
    kafka_pause_ = std::chrono::milliseconds{1000};
    kafka_paused_until_ = Clock::now() + kafka_pause_;
    metrics_.kafka_up.set(0);
    spdlog::warn(
        "kafka unreachable: {} events deferred without counting an attempt; pausing claims",
        deferred);
  }
}

void Relay::write_back_settled() {
  Settlement s = std::move(*settled_);
  settled_.reset();
  record(publisher_->write_back(*store_, s));
}

// Records a written-back batch's outcome in the metrics.
void Relay::record(const BatchOutcome& o) {
  metrics_.published.inc(static_cast<double>(o.delivered));
  metrics_.failed.inc(static_cast<double>(o.failed));
  metrics_.retried.inc(static_cast<double>(o.retried));
  metrics_.deferred.inc(static_cast<double>(o.deferred));
  metrics_.order_anomalies.inc(static_cast<double>(o.order_anomalies));
  if (!o.kafka_unreachable) {
    metrics_.kafka_up.set(1);
  }
}

// Sleeps until a NOTIFY arrives, `limit` passes, or `stop` is set.
void Relay::wait_for_work(const std::atomic<bool>& stop, std::chrono::milliseconds limit) {
  conn_->get_notifs();
  const auto until = Clock::now() + limit;
  while (!stop && !wake_->woken && Clock::now() < until) {
    auto slice = std::min<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()),
        std::chrono::milliseconds(200));
    conn_->await_notification(0, static_cast<long>(std::max<long long>(slice.count(), 1) * 1000));
    last_beat_ms_ = now_ms();
  }
}

void Relay::maybe_measure_backlog() {
  const auto now = Clock::now();
  if (now < next_backlog_) {
    return;
  }
  next_backlog_ = now + config_.backlog_interval;
  Backlog b = store_->backlog(config_.stuck_after);
  metrics_.pending.set(static_cast<double>(b.pending));
  metrics_.failed_events.set(static_cast<double>(b.failed));
  metrics_.stuck.set(static_cast<double>(b.stuck));
  metrics_.oldest_pending_seconds.set(b.oldest_pending_seconds);
  TableHealth h = store_->health();
  metrics_.dead_tuples.set(static_cast<double>(h.dead_tuples));
  metrics_.live_tuples.set(static_cast<double>(h.live_tuples));
  metrics_.oldest_transaction_seconds.set(h.oldest_transaction_seconds);
  metrics_.seconds_since_vacuum.set(h.seconds_since_vacuum);
}

}  // namespace outbox::relay
