#include "relay/relay.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <thread>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "common/backoff.hpp"
#include "common/identity.hpp"
#include "common/redact.hpp"
#include "common/stop.hpp"
#include "outbox/connection.hpp"
#include "outbox/schema.hpp"
#include "outbox/shards.hpp"

namespace outbox::relay {
namespace {

using Clock = TurnClock;

// A settlement after which rows may be claimable that no NOTIFY announces: an event it
// did not deliver (kept back, retried, parked, deferred) waits to be claimed again, and
// one that resolved a retry or a parked event lets its key's later events through.
bool frees_rows(const Settlement& settled) {
  if (settled.delivered.size() != settled.batch.size()) {
    return true;
  }
  return std::any_of(settled.batch.begin(), settled.batch.end(),
                     [](const OutboxEvent& e) { return e.retry_count > 0 || e.parked || e.held; });
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The labels of every series: RelayConfig::metric_labels and the table's.
metrics::Labels series_labels(metrics::Labels labels, const TableName& table) {
  labels["table"] = table.plain();
  return labels;
}

// created_at as the claim renders it (RFC 3339, UTC, microseconds); nullopt if not.
std::optional<std::chrono::system_clock::time_point> parse_created_at(const std::string& text) {
  std::tm tm{};
  int micros = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &micros) != 7) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&tm)) + std::chrono::microseconds(micros);
}

// `config` with its identity filled in. Throws std::invalid_argument for a batch size or a
// max attempts below 1.
RelayConfig checked(RelayConfig config) {
  if (config.batch_size < 1) {
    throw std::invalid_argument("batch size must be at least 1");
  }
  if (config.publish.max_attempts < 1) {
    throw std::invalid_argument("max attempts must be at least 1");
  }
  if (config.identity.empty()) {
    config.identity = process_identity();
  }
  return config;
}

Secrets secrets_of(const RelayConfig& config) {
  Secrets secrets;
  secrets.add_dsn(config.dsn);
  secrets.add_kafka_properties(config.kafka.properties);
  return secrets;
}

// "a, b": the paths of changed credential files, for a log line (paths, never content).
std::string joined(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& p : paths) {
    out += (out.empty() ? "" : ", ") + p;
  }
  return out;
}

// What `make` makes (a Kafka client), with the properties it refuses thrown as KafkaRefused.
template <typename Make>
auto kafka_client(Make make) -> decltype(make()) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    throw KafkaRefused(e.what());
  }
}

}  // namespace

// The metrics are registered before the producer may refuse its properties, so that /metrics
// shows them (outbox_build_info among them) while the relay stays not ready.
Relay::Relay(RelayConfig config, metrics::Registry& registry, RelayHealth& health)
    : config_(checked(std::move(config))),
      secrets_(secrets_of(config_)),
      table_(TableName::parse(config_.table)),
      metrics_(registry, series_labels(config_.metric_labels, table_)),
      health_(health),
      producer_(kafka_client([this] { return kafka::BatchProducer(config_.kafka); })),
      dead_letter_producer_(
          kafka_client([this] { return dead_letter_producer(config_.kafka, config_.publish); })),
      publisher_(producer_, config_.publish, dead_letter_producer_.get()) {
  beat();
}

Relay::~Relay() = default;

Relay::Pipeline::Pipeline(const RelayConfig& config, WriteBehind::Write write,
                          WriteBehind::Written written)
    : behind(std::move(write), std::move(written), config.write_behind_linger),
      gate(config.coalesce_window, config.poll_interval, config.batch_size),
      housekeeping(TurnClock::now(), config.rebalance_interval, config.backlog_interval) {}

// Logs a problem once when it appears or changes, and once when it clears. Its words go to
// /readyz and the resource's status, and many come from libpq: without the credentials.
void Relay::set_problem(const std::string& problem, const std::string& reason) {
  const std::string said = redact(problem, secrets_);
  const std::optional<std::string> replaced = health_.set_problem(said, reason);
  if (!replaced) {
    return;
  }
  if (problem.empty()) {
    spdlog::info("relay {} recovered from: {}", config_.identity, *replaced);
  } else {
    spdlog::error("{}; retrying with backoff", said);
  }
}

// The loop: one Session per database session; pump() until stopped (or a credential
// file changed), then drain(). An outage ends the session (closing it releases every
// shard) and the next one starts after a backoff. Each session opens with the DSN as
// its file holds it then.
RunEnd Relay::run(std::stop_token stop) {
  int outages = 0;  // in a row: the reconnect delay grows 0.5, 1, 2 ... 10 s
  while (!stop.stop_requested() && !kafka_credentials_changed()) {
    read_dsn();
    try {
      Session session(
          config_.dsn, table_, {config_.columns, config_.shards}, config_.publish.per_key_order,
          ProgressDeferral{static_cast<std::size_t>(config_.batch_size), kOwedProgressRide});
      went_online(session);
      if (session.rebased() && session.rebased()->moved()) {
        metrics_.cluster_rebases.inc();
        spdlog::warn("relay {}: table {} moved to another PostgreSQL cluster; {}", config_.identity,
                     table_.plain(), session.rebased()->text());
      }
      metrics_.database_moved.set(0);
      outages = 0;
      set_problem({});
      Pipeline pipeline(
          config_,
          [this, &session](const Settlement& settled) {  // on the write-back's thread
            const auto start = Clock::now();
            BatchOutcome outcome = publisher_.write_back(session.store(), settled);
            metrics_.write_back_duration.observe(seconds_since(start));
            return outcome;
          },
          [this](const BatchOutcome& outcome) { record(outcome); });
      std::stop_callback stopped(stop, [&pipeline] { pipeline.end.request_stop(); });
      pump(session, pipeline, pipeline.end.get_token());
      drain(session, pipeline, pipeline.end.get_token());
    } catch (const pqxx::broken_connection& e) {
      const std::string why = connection_failure(config_.dsn, e.what());
      set_problem("database unreachable (" + redact_dsn(config_.dsn) + "): " + why,
                  is_tls_refusal(why) ? "DatabaseTLSRefused" : "");
    } catch (const PooledConnection& e) {
      // No retry fixes it but a new DSN (read at each attempt): say so and keep looking.
      set_problem(e.what(), "ConnectionPooled");
    } catch (const DatabaseMoved& e) {
      // Reading on would count unread events as sent: publish nothing, say why, and look
      // again after the backoff (someone runs migrate --rebase meanwhile).
      metrics_.database_moved.set(1);
      set_problem(e.what(), "DatabaseMoved");
    } catch (const SchemaError& e) {
      // Bad runtime configuration (no table, missing columns): stay up, not
      // ready, and say what to fix; someone may run migrate in the meantime.
      set_problem(e.what());
    } catch (const pqxx::sql_error& e) {
      set_problem(std::string("database error: ") + e.what());
    }
    went_offline();
    if (!health_.problem().empty()) {
      using std::chrono::milliseconds;
      sleep_unless_stopped(stop,
                           exponential_delay(milliseconds{500}, milliseconds{10'000}, outages++));
    }
    beat();
  }
  // After a drain this finds nothing left; after an outage it gives the abandoned
  // batch's messages their chance to go out.
  producer_.flush(std::chrono::seconds(10));
  spdlog::info("relay {} stopped", config_.identity);
  return kafka_credentials_changed_ ? RunEnd::kKafkaCredentialsChanged : RunEnd::kStopped;
}

// The DSN as its file holds it now (CredentialFiles::dsn), its files' fingerprints taken
// first: a change after the read is seen, one before it is in what was read.
void Relay::read_dsn() {
  if (!config_.credentials.dsn) {
    return;
  }
  config_.credentials.database.reset();
  config_.dsn = config_.credentials.dsn();
  secrets_.add_dsn(config_.dsn);
}

// A rotated database credential: the session ends cleanly and run() opens the next with it.
bool Relay::database_credentials_changed() {
  const std::vector<std::string> files = config_.credentials.database.changed();
  if (!files.empty()) {
    spdlog::info(
        "relay {}: database credential file {} changed; ending this database session cleanly "
        "and connecting again with it",
        config_.identity, joined(files));
  }
  return !files.empty();
}

// A rotated Kafka credential: the producer cannot read it, a new process will (RunEnd).
bool Relay::kafka_credentials_changed() {
  if (kafka_credentials_changed_) {
    return true;
  }
  if (const std::vector<std::string> files = config_.credentials.kafka.changed(); !files.empty()) {
    kafka_credentials_changed_ = true;
    spdlog::warn(
        "relay {}: Kafka credential file {} changed; the producer reads them only when it starts, "
        "so the relay finishes the batches in flight and exits, to be started again with them",
        config_.identity, joined(files));
  }
  return kafka_credentials_changed_;
}

void Relay::went_online(Session& s) {
  health_.set_database({s.tls(), s.last_move()});
  metrics_.database_up.set(1);
  health_.set_ready(true);
  spdlog::info("relay {} connected to {} ({}, TLS {}), member slot {}, {} shards", config_.identity,
               redact_dsn(config_.dsn), table_.plain(), s.tls(), s.shards().member_slot(),
               s.shard_count());
}

// The session is gone: a batch in flight can no longer be written back on it; its
// events stay pending and are published again (at least once).
void Relay::went_offline() {
  health_.set_ready(false);
  metrics_.database_up.set(0);
  metrics_.shards_owned.set(0);
  publisher_.abandon();
  health_.set_backlog(std::nullopt);
}

// Turns until `stop`: each turn claims at most once (claim_next) and
// sends at most one batch.
void Relay::pump(Session& s, Pipeline& p, std::stop_token stop) {
  while (!stop.stop_requested()) {
    turn(s, p, stop);
    beat();
  }
}

// Graceful shutdown: write back the batch in flight (claiming nothing more),
// flush, then hand the shards back at once.
void Relay::drain(Session& s, Pipeline& p, std::stop_token stop) {
  try {
    while (publisher_.in_flight() || !p.behind.empty()) {
      turn(s, p, stop);
    }
    if (p.wake.registered()) {  // or every insert notifies until another relay clears the entry
      s.set_waiting(false);
    }
    s.store().flush();  // the next owner starts where this one stopped
  } catch (const std::exception& e) {
    spdlog::warn("writing back the last batches: {}", redact(e.what(), secrets_));
  }
  producer_.flush(std::chrono::seconds(10));
  try {
    s.shards().release_all();
  } catch (const std::exception& e) {
    spdlog::warn("releasing shards: {}", redact(e.what(), secrets_));
  }
}

// One turn. Between batches: keep the shard share and the backlog fresh, and
// respect a Kafka pause. Then claim the next batch (unless claims_now() says no)
// while earlier settlements are written back behind it; then either settle the batch
// in flight and send the next, or, with nothing in flight, send what was claimed or
// wait for work, or send beside the write-back (or wait until a lingering settlement
// is due).
void Relay::turn(Session& s, Pipeline& p, std::stop_token stop) {
  catch_up_behind(p);
  const bool busy = publisher_.in_flight() || !p.behind.empty();
  if (!busy) {
    keep_up(s, p);
    if (kafka_pause_.paused(Clock::now())) {
      wait_out_kafka_pause(s, stop);
      return;
    }
  }
  withdraw_when_busy(s, p);
  const bool claim = claims_now(s, p, busy, stop);
  const auto claimed_at = Clock::now();
  // The claim cannot see what the settlements behind have not written yet.
  std::set<std::string> held = p.behind.held_keys();
  std::vector<OutboxEvent> next = claim ? claim_next(s, p) : std::vector<OutboxEvent>{};
  if (publisher_.in_flight()) {
    settle_and_send_next(s, p, std::move(next), std::move(held), claimed_at);
  } else if (!busy) {
    send_or_wait(s, p, std::move(next), claimed_at, stop);
  } else {
    send_beside_write_back(s, p, std::move(next), held, claimed_at, stop);
  }
}

// Whether this turn claims. Rebalancing may release shards, so it waits until nothing
// is in flight or behind: a shard is never handed over with its events still on the
// way or unmarked. For the same reason claims stop once a rebalance is due (or the
// relay drains) while anything is in flight or behind. Then the claim gate: no claim
// while held for the coalesce window, or when it would be provably empty (so a quiet
// relay pays one claim per wake-up).
bool Relay::claims_now(Session& s, Pipeline& p, bool busy, std::stop_token stop) {
  if (busy && (stop.stop_requested() || p.housekeeping.rebalance_due(Clock::now()))) {
    return false;
  }
  if (p.gate.held(Clock::now())) {
    return false;
  }
  if (!p.wake.registered()) {
    return true;  // commits notify nobody: only a claim can tell
  }
  const bool rows_wait = s.store().claims().rows_wait_for_older_transaction() ||
                         s.claim_session().rows_wait_for_older_transaction();
  return !p.gate.provably_empty(Clock::now(), p.wake, s.notifications(), rows_wait);
}

// Collects the write-backs that ended (with nothing in flight, waits a little for a
// running one), and re-enables the claim once a settlement that freed rows is written.
void Relay::catch_up_behind(Pipeline& p) {
  p.behind.poll();
  if (!publisher_.in_flight() && p.behind.running()) {
    wait_behind(p);
  }
  p.gate.written_through(p.behind.written_through());
}

// Rebalances and measures the backlog when due (only called with nothing in flight); with
// the measurement, ends the session if a credential file changed.
void Relay::keep_up(Session& s, Pipeline& p) {
  const auto now = Clock::now();
  const HousekeepingSchedule::Due due = p.housekeeping.take(now);
  if (due.rebalance) {
    rebalance(s, p);
  }
  if (due.measure) {
    s.store().maintain(s.shards().owned());
    measure_backlog(s);
    if (kafka_credentials_changed() || database_credentials_changed()) {
      p.end.request_stop();
    }
  }
  if (due.any()) {
    metrics_.housekeeping_duration.observe(seconds_since(now));
  }
}

void Relay::rebalance(Session& s, Pipeline& p) {
  s.store().flush();  // a shard handed over carries its progress (only called when idle)
  ShardOwnership& shards = s.shards();
  if (shards.rebalance()) {
    spdlog::info("relay {} owns {} of {} shards ({} live replicas)", config_.identity,
                 shards.owned().size(), shards.shard_count(), shards.live_members());
    p.gate.rows_may_wait();  // shards came: their rows may have been announced before
  }
  metrics_.shards_owned.set(static_cast<double>(shards.owned().size()));
  metrics_.members.set(shards.live_members());
}

// Kafka unreachable: no claims until the pause ends and a probe answers. New rows
// end the wait (the caller's next turn keeps up the shards) but not the pause.
void Relay::wait_out_kafka_pause(Session& s, std::stop_token stop) {
  s.wait_for_notify(stop, kafka_pause_.left(Clock::now()), s.notifications(), [this] { beat(); });
  if (stop.stop_requested() || kafka_pause_.paused(Clock::now())) {
    return;
  }
  if (producer_.probe(std::chrono::seconds(2))) {
    spdlog::info("kafka reachable again; resuming");
    kafka_pause_.reachable();
    metrics_.kafka_up.set(1);
  } else {
    kafka_pause_.probe_failed(Clock::now());
  }
}

// The one claim of a turn, leaving out the batch in flight and the settled ones not
// written back yet. With no write-back running it runs on the lock session, so that
// the send after it follows a round trip on the session whose locks make the shards
// ours; otherwise on the claim session, beside the write-back, which is then that
// round trip (a send waits for it once it has run config_.write_behind_limit).
std::vector<OutboxEvent> Relay::claim_next(Session& s, Pipeline& p) {
  std::vector<std::int64_t> exclude = publisher_.ids_in_flight();
  const std::vector<std::int64_t> behind = p.behind.ids();
  exclude.insert(exclude.end(), behind.begin(), behind.end());
  EventClaims& on = p.behind.empty() ? s.store().claims() : s.claim_session();
  const std::uint64_t seen = s.notifications();  // one more: rows this claim may not see
  const auto start = Clock::now();
  std::vector<OutboxEvent> batch = on.claim_batch(s.shards().owned(), config_.batch_size, exclude);
  metrics_.claim_duration.observe(seconds_since(start));
  p.gate.claimed(start, seen, batch.size());
  return batch;
}

// The registration stays across wake-ups while the relay waits for work now and then
// (so a quiet relay pays no statements to register and withdraw per event), and is
// withdrawn once the relay is busy (WakeUpRegistration::busy): then it polls, and
// nobody notifies.
void Relay::withdraw_when_busy(Session& s, Pipeline& p) {
  if (p.wake.registered() && p.wake.busy(Clock::now(), s.notifications())) {
    s.set_waiting(false);
    p.wake.withdrawn();
  }
}

void Relay::observe_delivery_lag(const Settlement& settled) {
  const auto now = std::chrono::system_clock::now();
  const std::unordered_set<std::int64_t> delivered(settled.delivered.begin(),
                                                   settled.delivered.end());
  for (const OutboxEvent& e : settled.batch) {
    if (delivered.count(e.id) != 0) {
      if (const auto created = parse_created_at(e.created_at)) {
        metrics_.delivery_lag.observe(std::chrono::duration<double>(now - *created).count());
      }
    }
  }
}

// With batch k in flight: waits for k's reports, sends k+1 (`next`) and hands k's
// settlement to the write-behind. So the claim, the write-backs and the Kafka round
// trip overlap, and no send waits for a commit unless a write-back has run longer
// than config_.write_behind_limit (the fencing bound).
//
// Per-key order: k+1 is produced only after k's reports are in, and without the
// events of any key that k or a settlement not written back when k+1 was claimed
// (`held`) did not fully deliver: the claim of k+1 cannot see their failures yet
// (they stay pending; a claim after the write-back holds the key back behind its
// retry). Inside one batch, send() keeps each key on one topic, and the claim never
// puts a retry beside later events of its key.
void Relay::settle_and_send_next(Session& s, Pipeline& p, std::vector<OutboxEvent> next,
                                 std::set<std::string> held, Clock::time_point claimed_at) {
  Settlement settled = publisher_.settle();
  metrics_.publish_latency.observe(seconds_since(p.in_flight_since));
  observe_delivery_lag(settled);
  held.insert(settled.held_keys.begin(), settled.held_keys.end());
  const bool frees = frees_rows(settled);
  const bool reachable = !settled.outcome.kafka_unreachable;
  if (reachable && !next.empty()) {
    p.behind.wait_unless_younger_than(config_.write_behind_limit);
    send_batch(p, std::move(next), claimed_at, held);
  } else if (!next.empty()) {
    s.store().unclaim(next);  // status mode: no row changed; log mode: read again
  }
  const std::size_t deferred = settled.outcome.deferred;
  p.behind.add(std::move(settled));
  if (frees) {
    p.gate.frees_rows_once_written(p.behind.added());
  }
  if (!reachable) {
    // Kafka unreachable: stop claiming for a while instead of timing out batch after batch.
    p.behind.finish();
    kafka_pause_.unreachable(Clock::now());
    metrics_.kafka_up.set(0);
    spdlog::warn(
        "kafka unreachable: {} events deferred without counting an attempt; pausing claims",
        deferred);
  }
}

// Nothing in flight: sends what was claimed, or waits for work. The insert trigger
// notifies only while some relay is registered in <table>_waiting, so an idle relay
// registers first, and stays registered across wake-ups until it is busy
// (withdraw_when_busy). A writer whose trigger ran just before the registration was
// visible sent no NOTIFY, but its commit follows within moments: so the first wait
// after registering is short and the claim after it is not skipped; later ones sleep
// until a NOTIFY or the poll interval.
//
// Log mode: committed events may wait above the watermark for an older transaction
// (any on the database) to end, and that end sends no NOTIFY. Then each wait is
// shortened to `p.watermark_poll`, which doubles from 2 ms up to 100 ms while they
// wait: a writer's transaction ends within milliseconds, a long one costs at most
// ten claims a second.
void Relay::send_or_wait(Session& s, Pipeline& p, std::vector<OutboxEvent> next,
                         Clock::time_point claimed_at, std::stop_token stop) {
  const bool behind = next.empty() && s.store().claims().rows_wait_for_older_transaction();
  const std::chrono::milliseconds cap = behind ? p.watermark_poll.current() : config_.poll_interval;
  if (behind) {
    p.watermark_poll.grow();
  } else {
    p.watermark_poll.reset();
  }
  if (!next.empty()) {
    send_batch(p, std::move(next), claimed_at);
    return;
  }
  wait_for_work(s, p, std::min({config_.poll_interval, cap, store_owed_progress(s)}), stop);
}

// Log mode's owed progress (LogStore): while events keep coming, a claim carries it once it is
// kOwedProgressRide old; once they stop, it is stored alone kOwedProgressAge after the last of
// it was left (or when it is kOwedProgressRide old, whichever comes first), so that the status
// view, the backlog and a replica taking the shards over lag no more than that. Returns how
// long the wait before that may be.
std::chrono::milliseconds Relay::store_owed_progress(Session& s) {
  const auto owed = s.store().owed_times();
  if (!owed) {
    return config_.poll_interval;
  }
  const auto due = std::min(owed->oldest + kOwedProgressRide, owed->newest + kOwedProgressAge);
  if (const auto now = Clock::now(); now < due) {
    return std::chrono::ceil<std::chrono::milliseconds>(due - now);
  }
  s.store().flush();
  return config_.poll_interval;
}

// Nothing in flight, a write-back running or lingering: sends what was claimed, on the
// claim session (after the write-back, once it has run config_.write_behind_limit), or
// with nothing claimed and a settlement lingering for others to join it, waits for work
// until it is due. With a write-back running the next turn waits for it again.
void Relay::send_beside_write_back(Session& s, Pipeline& p, std::vector<OutboxEvent> next,
                                   const std::set<std::string>& held, Clock::time_point claimed_at,
                                   std::stop_token stop) {
  if (!next.empty()) {
    p.behind.wait_unless_younger_than(config_.write_behind_limit);
    send_batch(p, std::move(next), claimed_at, held);
  } else if (!p.behind.running()) {
    wait_for_work(s, p, p.behind.linger_left(), stop);
  }
}

// Waits for a NOTIFY at most `limit`, registered in <table>_waiting (registering first,
// then the first wait is short: WakeUpRegistration::kCommitRace). While claims are held for the
// coalesce window, waits out the window (or `limit`) instead.
void Relay::wait_for_work(Session& s, Pipeline& p, std::chrono::milliseconds limit,
                          std::stop_token stop) {
  if (const auto now = Clock::now(); p.gate.held(now)) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(p.gate.held_until() - now);
    hold_claims(s, p, std::min(limit, left), stop);
    return;
  }
  if (!p.wake.registered()) {
    s.set_waiting(true);
    const auto now = Clock::now();
    limit = p.wake.registered_at(now, s.notifications(), limit);
  }
  s.wait_for_notify(stop, limit, p.gate.seen(), [this] { beat(); });
  p.wake.idled(Clock::now());
}

// Sleeps `limit` while claims are held, reading the NOTIFYs that come meanwhile (the
// claim after the window sees their rows). It counts as waiting for work. After one
// window that found events the relay stays registered (sparse events: the next one after
// a quiet spell wakes it at once); from the second in a row on, commits keep coming and
// the claim at each window's end finds them anyway, so it withdraws and no commit
// notifies (a NOTIFY costs the writer's commit and this session something; withdrawing
// took the relay's backends from 0.47-0.57 to 0.33-0.40 s/min at 50 events/s with a
// 200 ms window, docs/benchmarks.md). The first empty claim registers it again
// (wait_for_work).
void Relay::hold_claims(Session& s, Pipeline& p, std::chrono::milliseconds limit,
                        std::stop_token stop) {
  if (p.wake.registered() && p.gate.commits_keep_coming()) {
    s.set_waiting(false);
    p.wake.withdrawn();
  }
  const auto until = Clock::now() + limit;
  for (auto now = Clock::now(); now < until && !stop.stop_requested(); now = Clock::now()) {
    s.wait_for_notify(stop, std::chrono::ceil<std::chrono::milliseconds>(until - now),
                      s.notifications(), [this] { beat(); });
  }
  p.wake.idled(Clock::now());
}

// Nothing in flight, a write-back running: waits a little for it, so that the next
// claim runs on the lock session (the round trip before a send) and a quiet relay does
// not claim in a loop meanwhile. If it is still running after that, the turn claims
// on the claim session and sends what it finds, so a stalled commit does not stall
// the relay; the waits double from 10 ms (longer than most commits take, so a quiet
// relay rarely claims here) up to 100 ms.
void Relay::wait_behind(Pipeline& p) {
  if (p.behind.wait_for(p.behind_poll.current())) {
    p.behind_poll.reset();
  } else {
    p.behind_poll.grow();
  }
}

void Relay::send_batch(Pipeline& p, std::vector<OutboxEvent> batch, Clock::time_point claimed_at,
                       const std::set<std::string>& held) {
  metrics_.batch_size.observe(static_cast<double>(batch.size()));
  p.in_flight_since = claimed_at;
  if (std::size_t kept_back = publisher_.send(std::move(batch), held); kept_back > 0) {
    // Not lost: the write-back leaves them due (or parks them, in log mode).
    spdlog::debug(
        "{} events wait for a later batch: an earlier event of their key was not delivered, "
        "waits for a retry, or goes to another topic in this batch",
        kept_back);
  }
}

// Records a written-back batch's outcome in the metrics.
void Relay::record(const BatchOutcome& o) {
  metrics_.published.inc(static_cast<double>(o.delivered));
  metrics_.failed.inc(static_cast<double>(o.failed));
  metrics_.retried.inc(static_cast<double>(o.retried));
  metrics_.deferred.inc(static_cast<double>(o.deferred));
  metrics_.order_anomalies.inc(static_cast<double>(o.order_anomalies));
  metrics_.dead_lettered.inc(static_cast<double>(o.dead_lettered));
  metrics_.dead_letter_refused.inc(static_cast<double>(o.dead_letter_refused));
  for (const auto& [topic, n] : o.delivered_by_topic) {
    metrics_.published_to(topic).inc(static_cast<double>(n));
  }
  for (const auto& [topic, n] : o.failed_by_topic) {
    metrics_.failed_to(topic).inc(static_cast<double>(n));
  }
  if (!o.kafka_unreachable) {
    metrics_.kafka_up.set(1);
  }
}

void Relay::measure_backlog(Session& s) {
  Backlog b = s.store().backlog(config_.stuck_after);
  metrics_.pending.set(static_cast<double>(b.pending));
  metrics_.failed_events.set(static_cast<double>(b.failed));
  metrics_.stuck.set(static_cast<double>(b.stuck));
  metrics_.oldest_pending_seconds.set(b.oldest_pending_seconds);
  health_.set_backlog(b);
  TableHealth h = s.store().health();
  metrics_.dead_tuples.set(static_cast<double>(h.dead_tuples));
  metrics_.live_tuples.set(static_cast<double>(h.live_tuples));
  metrics_.oldest_transaction_seconds.set(h.oldest_transaction_seconds);
  metrics_.last_vacuum_timestamp.set(h.last_vacuum_unix.value_or(0));
}

}  // namespace outbox::relay
