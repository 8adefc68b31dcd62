// relay_bench: throughput, latency, memory and claim-scaling benchmarks of the
// outbox relay (issue 3, "Benchmark"). See bench/README.md; results go to
// docs/benchmarks.md. Progress goes to stderr, the results table to stdout.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <pqxx/pqxx>
#include <thread>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "flood_bench.hpp"
#include "metrics/registry.hpp"
#include "naive_relay.hpp"
#include "outbox/log_store.hpp"
#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "relay/relay.hpp"
#include "support/child_process.hpp"

namespace outbox::bench {
namespace {

struct Options {
  std::string dsn;
  std::string brokers;
  std::string binary = OUTBOX_BINARY;
  std::string phases = "abpcwdlefj";
  std::string log_dir = "/tmp";
  long long events = 200000;
  int rounds = 1;
  long long naive_events = 5000;
  long long breakdown_events = 100000;
  int batch = 500;
  int keys = 1000;
  double rate = 2000;
  double latency_seconds = 25;
  int writers = 8;
  long long drain_events = 0;  // 0: same as --events
  long long claim_sent_rows = 10'000'000;
  int claim_iterations = 300;
  long long claim_backlog = 100000;
  int claim_backlog_iterations = 10;
  bool pending_id_index = false;
  bool refill_claim_table = false;
  long long json_rows = 100000;
  long long flood_events = 100000;
  int flood_rounds = 1;
  std::string flood_mode = "status";
  double quiet_rate = 500;
};

// One line of the results table.
struct Row {
  std::string measurement;
  std::string result;
  std::string target;
  std::string verdict;
};

std::string fmt(double v, int decimals = 0) {
  if (std::isnan(v)) {
    return "n/a";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (decimals == 0 && std::fabs(v) >= 10000) {
    // Thousands separators for large counts and rates.
    std::string out;
    int n = 0;
    for (auto it = s.rbegin(); it != s.rend(); ++it, ++n) {
      if (n > 0 && n % 3 == 0 && *it != '-') {
        out.insert(out.begin(), ',');
      }
      out.insert(out.begin(), *it);
    }
    return out;
  }
  return s;
}

std::string verdict(bool met) {
  return met ? "met" : "MISSED";
}

std::vector<int> all_shards(const std::string& dsn, const TableName& table) {
  pqxx::connection conn(dsn);
  std::vector<int> shards(static_cast<std::size_t>(inspect_table(conn, table).shard_count));
  std::iota(shards.begin(), shards.end(), 0);
  return shards;
}

// ---------------------------------------------------------------------------
// (a) SQL-only ceiling: the relay's claim_batch + mark_sent, no Kafka.

double run_sql_ceiling(const Options& o, const std::string& id, int round) {
  BenchTable t(o.dsn, "bench_sql_" + id + "_" + std::to_string(round));
  t.fill_pending(o.events, o.keys);
  t.vacuum_analyze();
  const std::vector<int> shards = all_shards(o.dsn, t.name());
  pqxx::connection conn(o.dsn);
  OutboxStore store(conn, t.name());
  long long marked = 0;
  const auto start = Clock::now();
  while (true) {
    std::vector<OutboxEvent> batch = store.claim_batch(shards, o.batch);
    if (batch.empty()) {
      break;
    }
    std::vector<std::int64_t> ids;
    ids.reserve(batch.size());
    for (const auto& e : batch) {
      ids.push_back(e.id);
    }
    marked += store.mark_sent(ids, false);
  }
  const double secs = seconds_since(start);
  if (marked != o.events || t.count("status <> 1") != 0) {
    throw std::runtime_error("(a) marked " + std::to_string(marked) + " of " +
                             std::to_string(o.events));
  }
  const double rate = static_cast<double>(o.events) / secs;
  note("(a) SQL-only: " + fmt(static_cast<double>(o.events)) + " events in " + fmt(secs, 2) +
       " s = " + fmt(rate) + " events/s");
  return rate;
}

// ---------------------------------------------------------------------------
// (b) This relay (relay::Relay on a thread) end to end with the real broker.

struct RelayRate {
  double rate = 0;         // from constructing the relay until every row is marked
  double steady_rate = 0;  // after the first batch was marked (start-up excluded)
  double startup_ms = 0;   // until the first batch was marked
};

RelayRate run_relay_e2e(const Options& o, const std::string& id, int round) {
  BenchTable t(o.dsn, "bench_relay_" + id + "_" + std::to_string(round));
  t.fill_pending(o.events, o.keys);
  t.vacuum_analyze();
  const std::string topic = "bench_" + id + "_relay_" + std::to_string(round);
  ensure_topic(o.brokers, topic);

  relay::RelayConfig c;
  c.dsn = o.dsn;
  c.table = t.name().plain();
  c.kafka.bootstrap_servers = o.brokers;
  c.publish.router = relay::TopicRouter(topic, {});
  c.batch_size = o.batch;
  metrics::Registry registry;
  metrics::Counter& published =
      registry.counter("outbox_events_published_total", "", {{"table", t.name().plain()}});
  std::stop_source stop;
  const auto start = Clock::now();
  relay::RelayHealth health;
  auto relay = std::make_unique<relay::Relay>(c, registry, health);
  std::thread thread([&] { relay->run(stop.get_token()); });
  const auto deadline = start + std::chrono::minutes(10);
  // The counter grows after mark_sent returned: the rows are status = 1 by then.
  double first_batch = NAN;  // start-up: until the first batch is marked
  while (published.value() < static_cast<double>(o.events) && Clock::now() < deadline) {
    if (std::isnan(first_batch) && published.value() > 0) {
      first_batch = seconds_since(start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double secs = seconds_since(start);
  stop.request_stop();
  thread.join();
  relay.reset();
  const long long left = t.count("status <> 1");
  const long long in_topic = topic_message_count(o.brokers, topic) - 1;  // less the marker
  if (left != 0 || in_topic < o.events) {
    throw std::runtime_error("(b) " + std::to_string(left) + " rows not sent, " +
                             std::to_string(in_topic) + " messages in the topic");
  }
  RelayRate r;
  r.rate = static_cast<double>(o.events) / secs;
  r.startup_ms = first_batch * 1000;
  r.steady_rate = static_cast<double>(o.events - o.batch) / (secs - first_batch);
  const double rate = r.rate;
  note("(b) relay: " + fmt(static_cast<double>(o.events)) + " events in " + fmt(secs, 2) +
       " s = " + fmt(rate) + " events/s (" + std::to_string(in_topic) +
       " in the topic; first batch marked after " + fmt(first_batch * 1000, 0) +
       " ms; after that " + fmt(r.steady_rate) + " events/s)");
  return r;
}

// ---------------------------------------------------------------------------
// (p) Where (b)'s time goes: the relay's steps driven by hand, in sequence (the
// relay overlaps them), with the same store and producer, each timed:
// claim_batch, publish (produce + wait for every delivery report), mark_sent.
// Diagnostic only; no target.

struct Breakdown {
  double rate = 0;
  long long batches = 0;
  double claim_ms = 0;    // mean per batch
  double publish_ms = 0;  // mean per batch
  double mark_ms = 0;     // mean per batch
};

Breakdown run_breakdown(const Options& o, const std::string& id, const std::string& label,
                        const std::map<std::string, std::string>& kafka_properties,
                        bool async_commit) {
  static int serial = 0;
  BenchTable t(o.dsn, "bench_breakdown_" + id);
  const long long events = o.breakdown_events;
  t.fill_pending(events, o.keys);
  t.vacuum_analyze();
  const std::string topic = "bench_" + id + "_breakdown_" + std::to_string(++serial);
  ensure_topic(o.brokers, topic);
  const std::vector<int> shards = all_shards(o.dsn, t.name());
  kafka::ProducerConfig pc;
  pc.bootstrap_servers = o.brokers;
  pc.properties = kafka_properties;
  kafka::BatchProducer producer(pc);
  producer.probe(std::chrono::seconds(10));
  pqxx::connection conn(o.dsn);
  if (async_commit) {
    // A lost mark only means a re-publish, which at-least-once allows.
    pqxx::nontransaction(conn).exec("SET synchronous_commit = off");
  }
  OutboxStore store(conn, t.name());
  Breakdown b;
  Clock::duration claim{}, publish{}, mark{};
  auto to_messages = [&](const std::vector<OutboxEvent>& batch) {
    std::vector<kafka::Message> messages;
    messages.reserve(batch.size());
    for (const auto& e : batch) {
      messages.push_back(
          {topic,
           e.biz_id,
           e.payload,
           {{"event_id", e.event_id}, {"biz_type", e.biz_type}, {"created_at", e.created_at}}});
    }
    return messages;
  };
  auto delivered_ids = [](const std::vector<OutboxEvent>& batch,
                          const std::vector<kafka::Delivery>& deliveries) {
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (deliveries[i].error_class == kafka::ErrorClass::kNone) {
        ids.push_back(batch[i].id);
      }
    }
    return ids;
  };
  const auto start = Clock::now();
  while (true) {
    auto t1 = Clock::now();
    std::vector<OutboxEvent> batch = store.claim_batch(shards, o.batch);
    auto t2 = Clock::now();
    claim += t2 - t1;
    if (batch.empty()) {
      break;
    }
    auto deliveries = producer.publish(to_messages(batch));
    auto t3 = Clock::now();
    publish += t3 - t2;
    store.mark_sent(delivered_ids(batch, deliveries), false);
    mark += Clock::now() - t3;
    ++b.batches;
  }
  const double secs = seconds_since(start);
  if (t.count("status <> 1") != 0) {
    throw std::runtime_error("(p) not every event was delivered");
  }
  b.rate = static_cast<double>(events) / secs;
  const auto n = static_cast<double>(std::max<long long>(b.batches, 1));
  b.claim_ms = to_ms(claim) / n;
  b.publish_ms = to_ms(publish) / n;
  b.mark_ms = to_ms(mark) / n;
  note("(p) breakdown" + label + ": " + fmt(b.rate) + " events/s; per batch of " +
       std::to_string(o.batch) + ": claim " + fmt(b.claim_ms, 2) + " ms, publish " +
       fmt(b.publish_ms, 2) + " ms, mark " + fmt(b.mark_ms, 2) + " ms");
  return b;
}

// ---------------------------------------------------------------------------
// (c) The naive relay on the same table shape and payloads.

double run_naive(const Options& o, const std::string& id) {
  BenchTable t(o.dsn, "bench_naive_" + id);
  t.fill_pending(o.naive_events, o.keys);
  t.vacuum_analyze();
  const std::string topic = "bench_" + id + "_naive";
  ensure_topic(o.brokers, topic);
  NaiveRelay naive({o.dsn, o.brokers, topic}, t.name());
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> marked{0};
  const auto start = Clock::now();
  std::thread thread([&] { naive.run(stop, marked); });
  const auto deadline = start + std::chrono::minutes(10);
  while (marked < o.naive_events && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double secs = seconds_since(start);
  stop = true;
  thread.join();
  const long long left = t.count("status <> 1");
  const long long in_topic = topic_message_count(o.brokers, topic) - 1;
  if (left != 0 || in_topic < o.naive_events) {
    throw std::runtime_error("(c) " + std::to_string(left) + " rows not sent, " +
                             std::to_string(in_topic) + " messages in the topic");
  }
  const double rate = static_cast<double>(o.naive_events) / secs;
  note("(c) naive: " + fmt(static_cast<double>(o.naive_events)) + " events in " + fmt(secs, 2) +
       " s = " + fmt(rate) + " events/s");
  return rate;
}

// ---------------------------------------------------------------------------
// (w) How fast can writers commit one event per transaction (no relay)? When
// every commit notifies, PostgreSQL serialises the commits of notifying
// transactions, which caps the services' write rate; schema v2 notifies only
// while a relay waits.

// How the insert trigger behaves while the writers run.
enum class Notify {
  kEveryCommit,  // a relay waits, so every commit notifies (schema v1 always did)
  kNobodyWaits,  // the trigger is on but no relay waits: a busy relay (schema v2)
  kTriggerOff,   // the trigger disabled
};

std::string notify_label(Notify n) {
  switch (n) {
    case Notify::kEveryCommit:
      return "trigger on, a relay waiting: every commit notifies (as schema v1 always did)";
    case Notify::kNobodyWaits:
      return "trigger on, no relay waiting (a busy relay): nobody notifies";
    case Notify::kTriggerOff:
      break;
  }
  return "trigger off";
}

double run_writer_ceiling(const Options& o, const std::string& id, Notify notify, int writers,
                          double seconds) {
  BenchTable t(o.dsn, "bench_writers_" + id);
  pqxx::connection side(o.dsn);
  if (notify == Notify::kTriggerOff) {
    pqxx::nontransaction(side).exec("ALTER TABLE " + t.name().quoted() + " DISABLE TRIGGER USER");
  } else if (notify == Notify::kEveryCommit) {
    WaitingList(side, t.name()).set(true);  // as an idle relay would
  }
  std::atomic<long long> commits{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      pqxx::connection conn(o.dsn);
      for (long long k = w; !stop; k += writers) {
        pqxx::work tx(conn);
        enqueue(tx, t.name(), kBizType, make_key(k, o.keys), make_payload(k));
        tx.commit();
        ++commits;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // connections up
  const long long before = commits;
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const long long done = commits - before;
  const double secs = seconds_since(start);
  stop = true;
  for (auto& th : threads) {
    th.join();
  }
  const double rate = static_cast<double>(done) / secs;
  note("(w) writers, " + notify_label(notify) + ": " + std::to_string(writers) +
       " connections, one event per transaction: " + fmt(rate) + " commits/s");
  return rate;
}

// ---------------------------------------------------------------------------
// The relay as the real binary, in a child process (for (d) and (e)).

class RelayProcess {
 public:
  RelayProcess(const Options& o, const TableName& table, const std::string& topic,
               const std::string& log_path, const std::string& poll_interval = "2s") {
    std::vector<std::string> args = {o.binary,
                                     "relay",
                                     "--table=" + table.plain(),
                                     "--brokers=" + o.brokers,
                                     "--topic=" + topic,
                                     "--batch-size=" + std::to_string(o.batch),
                                     "--poll-interval=" + poll_interval,
                                     "--listen=127.0.0.1:0"};
    // The DSN goes in the environment, as from a Secret, not on the command line.
    process_ = std::make_unique<outbox::testbed::ChildProcess>(
        args, std::map<std::string, std::string>{{"OUTBOX_DSN", o.dsn}}, log_path);
  }

  int pid() const { return process_->pid(); }
  // SIGTERM, then the exit status (or -1 after 30 s).
  int terminate() { return process_->terminate(std::chrono::seconds(30)); }

 private:
  std::unique_ptr<outbox::testbed::ChildProcess> process_;
};

// Samples a process's VmRSS every 50 ms on its own thread.
class RssSampler {
 public:
  explicit RssSampler(int pid)
      : pid_(pid), thread_([this] {
          while (!stop_) {
            long kb = read_status_kb(pid_, "VmRSS");
            if (kb > peak_kb_) {
              peak_kb_ = kb;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }) {}
  ~RssSampler() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  long peak_kb() const { return peak_kb_; }

 private:
  int pid_;
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_kb_{-1};
  std::thread thread_;
};

struct LatencyResult {
  double offered_rate = 0;
  long long events = 0;
  long long missing = 0;
  long long duplicates = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
  double produce_p50 = 0, produce_p99 = 0;  // commit -> producer timestamp (ms resolution)
  double writer_lag_max = 0;                // how late the paced writers ever were (ms)
  long rss_peak_kb = -1;
  long rss_hwm_kb = -1;
  int exit_code = -1;
  double relay_xacts_per_event = NAN;  // the relay's transactions (autocommit statements)
};

struct LatencyScenario {
  std::string label;
  int events_per_tx = 1;
  bool notify = true;                // false: the insert trigger disabled, the relay polls
  std::string poll_interval = "2s";  // the relay binary's --poll-interval
  double seconds = 25;
};

// Transactions committed or rolled back in the database so far. Every autocommit
// statement is one, so the delta over a run counts the statements that run cost.
long long database_xacts(const std::string& dsn) {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  return tx
      .exec(
          "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = "
          "current_database()")[0][0]
      .as<long long>();
}

// The relay's transactions per event since `before`, less the `others` (writers,
// the bench's own queries). Call it once the relay has exited: a backend reports
// its counts at exit, an idle one may keep them up to 10 s.
double relay_xacts_per_event(const std::string& dsn, long long before, long long others,
                             long long events) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the backends' exit
  const long long relay = database_xacts(dsn) - before - others;
  return static_cast<double>(relay) / static_cast<double>(events);
}

// (d) commit-to-consume latency at a fixed offered rate, relay binary; (e) its
// RSS sampled meanwhile. Writers commit `events_per_tx` events per transaction.
LatencyResult run_latency(const Options& o, const std::string& id, const LatencyScenario& sc) {
  static int serial = 0;
  const std::string name = id + "_" + std::to_string(++serial);
  BenchTable t(o.dsn, "bench_latency_" + name);
  if (!sc.notify) {
    pqxx::connection conn(o.dsn);
    pqxx::nontransaction tx(conn);
    tx.exec("ALTER TABLE " + t.name().quoted() + " DISABLE TRIGGER USER");
  }
  const std::string topic = "bench_" + name + "_latency";
  const int partitions = ensure_topic(o.brokers, topic);

  std::unique_ptr<RdKafka::KafkaConsumer> consumer =
      consumer_from_start(o.brokers, "relay_bench_" + id, topic, partitions);

  struct Arrival {
    long long seq;
    Clock::time_point at;
    long long produce_ms;  // the message's CreateTime (system clock, ms)
  };
  std::vector<Arrival> arrivals;
  std::atomic<int> warmups_seen{0};
  std::atomic<bool> stop_consumer{false};
  std::thread consumer_thread([&] {
    while (!stop_consumer) {
      std::unique_ptr<RdKafka::Message> m(consumer->consume(50));
      const auto at = Clock::now();
      const std::optional<long long> seq = message_seq(*m);
      if (!seq) {
        continue;
      }
      if (*seq < 0) {
        ++warmups_seen;
      } else {
        arrivals.push_back({*seq, at, m->timestamp().timestamp});
      }
    }
  });

  RelayProcess relay(o, t.name(), topic, o.log_dir + "/relay_bench_latency_" + name + ".log",
                     sc.poll_interval);
  RssSampler rss(relay.pid());

  // Warm-up: the relay is up and the consumer reads once these arrive.
  constexpr int kWarmups = 20;
  {
    pqxx::connection conn(o.dsn);
    enqueue_warmups(conn, t.name(), kWarmups, o.keys);
  }
  for (auto until = Clock::now() + std::chrono::seconds(60);
       warmups_seen < kWarmups && Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (warmups_seen < kWarmups) {
    throw std::runtime_error("(d) the relay did not publish the warm-up events within 60 s");
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long long xacts_before = database_xacts(o.dsn);

  const int per_tx = std::max(1, sc.events_per_tx);
  const auto total = static_cast<long long>(o.rate * sc.seconds) / per_tx * per_tx;
  std::vector<Clock::time_point> committed(static_cast<std::size_t>(total));
  std::vector<long long> committed_ms(static_cast<std::size_t>(total));
  std::vector<double> lag_ms(static_cast<std::size_t>(o.writers), 0.0);
  note("(d) " + sc.label + ": offering " + fmt(o.rate) + " events/s for " + fmt(sc.seconds) +
       " s (" + std::to_string(o.writers) + " writer connections, " + std::to_string(per_tx) +
       " event(s) per transaction)");
  const auto t0 = Clock::now() + std::chrono::milliseconds(200);
  std::vector<std::thread> writers;
  for (int w = 0; w < o.writers; ++w) {
    writers.emplace_back([&, w] {
      pqxx::connection conn(o.dsn);
      // Transaction j holds events j*per_tx .. j*per_tx + per_tx - 1.
      for (long long j = w; j * per_tx < total; j += o.writers) {
        const long long first = j * per_tx;
        const auto due =
            t0 + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(static_cast<double>(first) / o.rate));
        std::this_thread::sleep_until(due);
        lag_ms[static_cast<std::size_t>(w)] =
            std::max(lag_ms[static_cast<std::size_t>(w)], to_ms(Clock::now() - due));
        pqxx::work tx(conn);
        for (long long k = first; k < first + per_tx; ++k) {
          enqueue(tx, t.name(), kBizType, make_key(k, o.keys), make_payload(k));
        }
        tx.commit();
        const auto at = Clock::now();
        const auto at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
        for (long long k = first; k < first + per_tx; ++k) {
          committed[static_cast<std::size_t>(k)] = at;
          committed_ms[static_cast<std::size_t>(k)] = at_ms;
        }
      }
    });
  }
  for (auto& w : writers) {
    w.join();
  }
  const auto last_commit = *std::max_element(committed.begin(), committed.end());
  const auto first_commit = *std::min_element(committed.begin(), committed.end());
  // Let the tail arrive: until the table is drained and a moment more.
  long long polls = 0;
  {
    pqxx::connection conn(o.dsn);
    for (auto until = Clock::now() + std::chrono::seconds(30); Clock::now() < until; ++polls) {
      pqxx::nontransaction tx(conn);
      if (!tx.exec("SELECT EXISTS (SELECT 1 FROM " + t.name().quoted() + " WHERE status = 0)")[0][0]
               .as<bool>()) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop_consumer = true;
  consumer_thread.join();
  consumer->close();

  LatencyResult r;
  r.rss_hwm_kb = read_status_kb(relay.pid(), "VmHWM");
  rss.stop();
  r.rss_peak_kb = rss.peak_kb();
  r.exit_code = relay.terminate();
  r.relay_xacts_per_event =
      relay_xacts_per_event(o.dsn, xacts_before, total / per_tx + polls + 1, total);

  r.events = total;
  r.offered_rate = static_cast<double>(total - 1) /
                   std::chrono::duration<double>(last_commit - first_commit).count();
  r.writer_lag_max = *std::max_element(lag_ms.begin(), lag_ms.end());
  std::vector<bool> seen(static_cast<std::size_t>(total), false);
  std::vector<double> lat;
  std::vector<double> produce;
  for (const auto& a : arrivals) {
    if (a.seq >= total) {
      continue;
    }
    auto k = static_cast<std::size_t>(a.seq);
    if (seen[k]) {
      ++r.duplicates;
      continue;
    }
    seen[k] = true;
    lat.push_back(to_ms(a.at - committed[k]));
    produce.push_back(static_cast<double>(a.produce_ms - committed_ms[k]));
  }
  r.missing = total - static_cast<long long>(lat.size());
  std::sort(lat.begin(), lat.end());
  std::sort(produce.begin(), produce.end());
  r.p50 = percentile(lat, 50);
  r.p90 = percentile(lat, 90);
  r.p99 = percentile(lat, 99);
  r.p999 = percentile(lat, 99.9);
  r.max = lat.empty() ? NAN : lat.back();
  r.produce_p50 = percentile(produce, 50);
  r.produce_p99 = percentile(produce, 99);
  note("(d) " + sc.label + ": offered " + fmt(r.offered_rate) + " events/s; latency ms p50 " +
       fmt(r.p50, 1) + " p90 " + fmt(r.p90, 1) + " p99 " + fmt(r.p99, 1) + " p99.9 " +
       fmt(r.p999, 1) + " max " + fmt(r.max, 1) + "; commit->produce p50 " + fmt(r.produce_p50) +
       " p99 " + fmt(r.produce_p99) + " ms; missing " + std::to_string(r.missing) +
       ", duplicates " + std::to_string(r.duplicates) + "; writers at most " +
       fmt(r.writer_lag_max, 1) + " ms late; relay transactions per event " +
       fmt(r.relay_xacts_per_event, 2));
  note("(e) relay RSS during (d) " + sc.label + ": peak sampled " +
       fmt(static_cast<double>(r.rss_peak_kb) / 1024, 1) + " MiB, VmHWM " +
       fmt(static_cast<double>(r.rss_hwm_kb) / 1024, 1) + " MiB; exit code " +
       std::to_string(r.exit_code));
  return r;
}

struct DrainResult {
  double rate = 0;
  long rss_peak_kb = -1;
  long rss_hwm_kb = -1;
  int exit_code = -1;
};

// (e) the relay binary draining a backlog: its RSS, and its rate as a cross-check of (b).
DrainResult run_binary_drain(const Options& o, const std::string& id) {
  const long long n = o.drain_events > 0 ? o.drain_events : o.events;
  BenchTable t(o.dsn, "bench_drain_" + id);
  t.fill_pending(n, o.keys);
  t.vacuum_analyze();
  const std::string topic = "bench_" + id + "_drain";
  ensure_topic(o.brokers, topic);
  pqxx::connection conn(o.dsn);
  const std::string exists =
      "SELECT EXISTS (SELECT 1 FROM " + t.name().quoted() + " WHERE status = 0)";
  const auto start = Clock::now();
  RelayProcess relay(o, t.name(), topic, o.log_dir + "/relay_bench_drain_" + id + ".log");
  RssSampler rss(relay.pid());
  for (auto until = start + std::chrono::minutes(10); Clock::now() < until;) {
    pqxx::nontransaction tx(conn);
    if (!tx.exec(exists)[0][0].as<bool>()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double secs = seconds_since(start);
  DrainResult r;
  r.rss_hwm_kb = read_status_kb(relay.pid(), "VmHWM");
  rss.stop();
  r.rss_peak_kb = rss.peak_kb();
  r.exit_code = relay.terminate();
  if (t.count("status <> 1") != 0) {
    throw std::runtime_error("(e) drain did not finish in 10 minutes");
  }
  r.rate = static_cast<double>(n) / secs;
  note("(e) relay binary drained " + fmt(static_cast<double>(n)) + " events in " + fmt(secs, 2) +
       " s = " + fmt(r.rate) + " events/s; RSS peak sampled " +
       fmt(static_cast<double>(r.rss_peak_kb) / 1024, 1) + " MiB, VmHWM " +
       fmt(static_cast<double>(r.rss_hwm_kb) / 1024, 1) + " MiB; exit code " +
       std::to_string(r.exit_code));
  return r;
}

// ---------------------------------------------------------------------------
// (f) claim latency with many sent rows in the table vs none.

struct ClaimTiming {
  double big_median_ms = 0, big_p90_ms = 0;
  double empty_median_ms = 0, empty_p90_ms = 0;
};

struct ClaimResult {
  long long sent_rows = 0;
  bool reused = false;
  double fill_seconds = 0;
  double vacuum_seconds = 0;
  std::string big_size;
  ClaimTiming few;      // o.batch pending rows
  ClaimTiming backlog;  // o.claim_backlog pending rows
  ClaimTiming drained;  // o.batch pending again after the backlog was marked, before VACUUM
};

// Times two claims (each returns its milliseconds) `iterations` times each after a warm-up,
// interleaved, alternating which goes first so that drift and neighbours' load hit both alike.
ClaimTiming time_interleaved(const std::function<double()>& big,
                             const std::function<double()>& empty, int iterations) {
  const int warmups = std::max(2, iterations / 10);
  for (int i = 0; i < warmups; ++i) {  // warm caches and connections; not measured
    big();
    empty();
  }
  std::vector<double> big_ms;
  std::vector<double> empty_ms;
  for (int i = 0; i < iterations; ++i) {
    if (i % 2 == 0) {
      big_ms.push_back(big());
      empty_ms.push_back(empty());
    } else {
      empty_ms.push_back(empty());
      big_ms.push_back(big());
    }
  }
  std::sort(big_ms.begin(), big_ms.end());
  std::sort(empty_ms.begin(), empty_ms.end());
  return {percentile(big_ms, 50), percentile(big_ms, 90), percentile(empty_ms, 50),
          percentile(empty_ms, 90)};
}

// The big table of (f) or (g), named after its size, and the comment that marks it filled.
std::pair<TableName, std::string> big_table(const Options& o, const std::string& prefix,
                                            const std::string& rows) {
  return {TableName::parse(prefix + std::to_string(o.claim_sent_rows)),
          "relay_bench: " + std::to_string(o.claim_sent_rows) + " " + rows};
}

// The result of (f) or (g) before measuring: whether `big` is reused, i.e. exists with
// `marker` as its comment (filled by an earlier run) and --refill-claim-table is not given.
ClaimResult claim_result(const Options& o, pqxx::connection& admin, const TableName& big,
                         const std::string& marker) {
  ClaimResult r;
  r.sent_rows = o.claim_sent_rows;
  pqxx::nontransaction tx(admin);
  auto c = tx.exec("SELECT obj_description(to_regclass('" + big.quoted() + "'), 'pg_class')");
  r.reused = !o.refill_claim_table && !c[0][0].is_null() && c[0][0].as<std::string>() == marker;
  return r;
}

ClaimResult run_claim_scaling(const Options& o, const std::string& id) {
  pqxx::connection admin(o.dsn);
  const auto [big, marker] = big_table(o, "bench_claim_sent_", "sent rows");
  ClaimResult r = claim_result(o, admin, big, marker);
  if (r.reused) {
    note("(f) reusing " + big.plain() + " (" + marker + "); --refill-claim-table to rebuild it");
    pqxx::nontransaction tx(admin);
    // The last run's pending rows are gone, but their entries in the pending index
    // stay until a VACUUM that cleans indexes (a plain VACUUM skips that when few
    // pages changed). Start as clean as a fresh fill.
    tx.exec("DELETE FROM " + big.quoted() + " WHERE status <> 1");
    const auto start = Clock::now();
    tx.exec("VACUUM (INDEX_CLEANUP ON, ANALYZE) " + big.quoted());
    r.vacuum_seconds = seconds_since(start);
  } else {
    drop_outbox_table(admin, big);
    migrate(admin, big);
    note("(f) filling " + big.plain() + " with " + fmt(static_cast<double>(o.claim_sent_rows)) +
         " sent rows (one INSERT ... SELECT generate_series)");
    auto start = Clock::now();
    {
      pqxx::nontransaction tx(admin);
      // One payload of the usual shape for every row: sent rows are never read again.
      tx.exec("INSERT INTO " + big.quoted() +
              " (biz_type, biz_id, payload, status, sent_at) SELECT '" + kBizType +
              "', 'order-' || (g % " + std::to_string(o.keys) + "), p.v, 1, now() FROM (SELECT " +
              payload_sql_expr("0") + " AS v) p, generate_series(1, " +
              std::to_string(o.claim_sent_rows) + ") g");
    }
    r.fill_seconds = seconds_since(start);
    start = Clock::now();
    pqxx::nontransaction tx(admin);
    tx.exec("VACUUM ANALYZE " + big.quoted());
    r.vacuum_seconds = seconds_since(start);
    tx.exec("COMMENT ON TABLE " + big.quoted() + " IS " + tx.quote(marker));
    note("(f) filled in " + fmt(r.fill_seconds, 1) + " s, VACUUM ANALYZE " +
         fmt(r.vacuum_seconds, 1) + " s");
  }
  {
    pqxx::nontransaction tx(admin);
    if (experiment_pending_id_index()) {
      tx.exec("CREATE INDEX IF NOT EXISTS \"" + big.table() + "_bench_pending_id\" ON " +
              big.quoted() + " (id) WHERE status = 0");
    } else {
      tx.exec("DROP INDEX IF EXISTS \"" + big.schema() + "\".\"" + big.table() +
              "_bench_pending_id\"");
    }
    r.big_size =
        tx.exec("SELECT pg_size_pretty(pg_total_relation_size('" + big.quoted() + "'))")[0][0]
            .as<std::string>();
  }
  BenchTable empty(o.dsn, "bench_claim_empty_" + id);

  pqxx::connection big_conn(o.dsn);
  pqxx::connection empty_conn(o.dsn);
  OutboxStore big_store(big_conn, big);
  OutboxStore empty_store(empty_conn, empty.name());
  const std::vector<int> shards = all_shards(o.dsn, big);
  long long next_seq = 1;
  // Adds `n` pending rows (the same ones) to both tables, refreshes statistics, and
  // times claim_batch on each, interleaved, `iterations` times after a warm-up.
  auto measure = [&](long long n, int iterations, const std::string& what) {
    for (const TableName* table : {&big, &empty.name()}) {
      if (n == 0) {
        break;
      }
      pqxx::nontransaction tx(admin);
      tx.exec("INSERT INTO " + table->quoted() + " (biz_type, biz_id, payload) SELECT '" +
              kBizType + "', 'order-' || (g % " + std::to_string(o.keys) + "), " +
              payload_sql_expr("g") + " FROM generate_series(" + std::to_string(next_seq) + ", " +
              std::to_string(next_seq + n - 1) + ") g ORDER BY g");
      tx.exec("ANALYZE " + table->quoted());
    }
    next_seq += n;
    auto time_claim = [&](OutboxStore& store) {
      const auto start = Clock::now();
      auto batch = store.claim_batch(shards, o.batch);
      const double ms = to_ms(Clock::now() - start);
      if (static_cast<int>(batch.size()) != o.batch) {
        throw std::runtime_error("(f) claimed " + std::to_string(batch.size()) +
                                 " rows, expected " + std::to_string(o.batch));
      }
      return ms;
    };
    const ClaimTiming t = time_interleaved([&] { return time_claim(big_store); },
                                           [&] { return time_claim(empty_store); }, iterations);
    note("(f) claim of " + std::to_string(o.batch) + " with " + what + ", " +
         fmt(static_cast<double>(o.claim_sent_rows)) + " sent rows (" + r.big_size + "): median " +
         fmt(t.big_median_ms, 2) + " ms, p90 " + fmt(t.big_p90_ms, 2) + " ms; with none: median " +
         fmt(t.empty_median_ms, 2) + " ms, p90 " + fmt(t.empty_p90_ms, 2) + " ms");
    return t;
  };
  r.few = measure(o.batch, o.claim_iterations, std::to_string(o.batch) + " pending");
  if (o.claim_backlog > o.batch) {
    // A backlog (after a broker outage, say): the claim must still not walk the sent rows.
    r.backlog = measure(o.claim_backlog - o.batch, o.claim_backlog_iterations,
                        fmt(static_cast<double>(o.claim_backlog)) + " pending");
    // The backlog drained (marked sent as the relay would), the newest 500 still
    // pending, no VACUUM yet: the pending index still holds the drained rows' entries.
    for (const TableName* table : {&big, &empty.name()}) {
      pqxx::nontransaction tx(admin);
      tx.exec("UPDATE " + table->quoted() +
              " SET status = 1, sent_at = now(), updated_at = now() WHERE status = 0 AND id < "
              "(SELECT min(id) FROM (SELECT id FROM " +
              table->quoted() + " WHERE status = 0 ORDER BY id DESC LIMIT " +
              std::to_string(o.batch) + ") n)");
      tx.exec("ANALYZE " + table->quoted());
    }
    r.drained = measure(0, o.claim_iterations / 3,
                        std::to_string(o.batch) + " pending after the backlog was drained");
  }
  {
    // Back to sent rows only, ready for reuse by the next run.
    pqxx::nontransaction tx(admin);
    tx.exec("DELETE FROM " + big.quoted() + " WHERE status <> 1");
  }
  return r;
}

// (g) The same for log mode: the rows behind the cursor are the log itself (read and
// published, kept until retention drops their partition), so nothing marks them; their
// shards' progress is moved past them, where the relay's would be. The 500 pending rows are
// claimed again and again (the in-memory cursor put back after each claim).
ClaimResult run_log_claim_scaling(const Options& o, const std::string& id) {
  pqxx::connection admin(o.dsn);
  const auto [big, marker] = big_table(o, "bench_log_read_", "read rows");
  ClaimResult r = claim_result(o, admin, big, marker);
  if (!r.reused) {
    drop_outbox_table(admin, big);
    migrate(
        admin, big,
        MigrateOptions{kDefaultShardCount, TableMode::kLog, kDefaultPartitionXids, std::nullopt});
    note("(g) filling " + big.plain() + " with " + fmt(static_cast<double>(o.claim_sent_rows)) +
         " log rows (10 transactions of INSERT ... SELECT generate_series)");
    const auto start = Clock::now();
    const long long per_tx = std::max(1LL, o.claim_sent_rows / 10);
    for (long long from = 1; from <= o.claim_sent_rows; from += per_tx) {
      pqxx::nontransaction tx(admin);
      tx.exec("INSERT INTO " + big.quoted() + " (biz_type, biz_id, payload) SELECT '" + kBizType +
              "', 'order-' || (g % " + std::to_string(o.keys) + "), p.v FROM (SELECT " +
              payload_sql_expr("0") + " AS v) p, generate_series(" + std::to_string(from) + ", " +
              std::to_string(std::min(o.claim_sent_rows, from + per_tx - 1)) + ") g");
    }
    r.fill_seconds = seconds_since(start);
    pqxx::nontransaction tx(admin);
    tx.exec("COMMENT ON TABLE " + big.quoted() + " IS " + tx.quote(marker));
  }
  BenchTable empty(o.dsn, "bench_log_read_empty_" + id, TableMode::kLog);
  for (const TableName* table : {&big, &empty.name()}) {
    pqxx::nontransaction tx(admin);
    // Every row there now has been read: each shard's progress at its last row (in a reused
    // table this includes the last run's pending rows).
    tx.exec("UPDATE " + table->quoted_with_suffix("_progress") +
            " p SET xid = m.xid, id = m.id FROM (SELECT DISTINCT ON (shard) shard, xid, id FROM " +
            table->quoted() + " ORDER BY shard, xid DESC, id DESC) m WHERE p.shard = m.shard");
    tx.exec("INSERT INTO " + table->quoted() + " (biz_type, biz_id, payload) SELECT '" + kBizType +
            "', 'order-' || (g % " + std::to_string(o.keys) + "), " + payload_sql_expr("g") +
            " FROM generate_series(1, " + std::to_string(o.batch) + ") g ORDER BY g");
    const auto start = Clock::now();
    tx.exec("VACUUM ANALYZE " + table->quoted());
    if (table == &big) {
      r.vacuum_seconds = seconds_since(start);
      r.big_size = tx.exec(
                         "SELECT pg_size_pretty(sum(pg_total_relation_size(relid))) FROM "
                         "pg_partition_tree('" +
                         big.quoted() + "')")[0][0]
                       .as<std::string>();
    }
  }
  const std::vector<int> shards = all_shards(o.dsn, big);
  struct Claimer {
    pqxx::connection conn;
    LogCursor cursor;
    LogClaims claims;
    Claimer(const std::string& dsn, const TableName& t, int shard_count)
        : conn(dsn), claims(conn, t, shard_count, 0, cursor) {}
  };
  Claimer on_big(o.dsn, big, static_cast<int>(shards.size()));
  Claimer on_empty(o.dsn, empty.name(), static_cast<int>(shards.size()));
  auto time_claim = [&](Claimer& c) {
    const auto start = Clock::now();
    auto batch = c.claims.claim_batch(shards, o.batch, {});
    const double ms = to_ms(Clock::now() - start);
    c.cursor.undo_last_claim();
    if (static_cast<int>(batch.size()) != o.batch) {
      throw std::runtime_error("(g) claimed " + std::to_string(batch.size()) + " rows, expected " +
                               std::to_string(o.batch));
    }
    return ms;
  };
  r.few = time_interleaved([&] { return time_claim(on_big); }, [&] { return time_claim(on_empty); },
                           o.claim_iterations);
  note("(g) log-mode claim of " + std::to_string(o.batch) + " pending, " +
       fmt(static_cast<double>(o.claim_sent_rows)) + " read rows (" + r.big_size + "): median " +
       fmt(r.few.big_median_ms, 2) + " ms, p90 " + fmt(r.few.big_p90_ms, 2) +
       " ms; with none: median " + fmt(r.few.empty_median_ms, 2) + " ms, p90 " +
       fmt(r.few.empty_p90_ms, 2) + " ms");
  return r;
}

// ---------------------------------------------------------------------------
// json vs jsonb payload column: insert cost, one event per statement.

struct JsonResult {
  double json_rate = 0;  // single-row INSERTs, rows/s from the median transaction
  double jsonb_rate = 0;
  double json_bulk = 0;  // INSERT ... SELECT of pre-rendered payload text, rows/s (median round)
  double jsonb_bulk = 0;
  std::string json_size, jsonb_size;
};

// json vs jsonb payload column (which payload type costs less). Two migrate-made
// tables, one altered to json. (1) What a service sees: transactions of 100
// single-row INSERTs, alternating between the tables transaction by transaction;
// the median transaction gives the rate. (2) The server-side cost alone: one
// INSERT ... SELECT of pre-rendered payload text per round, alternating, 3 rounds.
JsonResult run_json_vs_jsonb(const Options& o, const std::string& id) {
  BenchTable jb(o.dsn, "bench_jsonb_" + id);
  BenchTable js(o.dsn, "bench_json_" + id);
  pqxx::connection admin(o.dsn);
  pqxx::nontransaction(admin).exec("ALTER TABLE " + js.name().quoted() +
                                   " ALTER COLUMN payload TYPE json");
  pqxx::connection jb_conn(o.dsn);
  pqxx::connection js_conn(o.dsn);
  constexpr int kPerTx = 100;
  std::vector<double> jb_tx;
  std::vector<double> js_tx;
  auto insert_tx = [&](pqxx::connection& conn, const TableName& table, long long from) {
    // Untyped parameters: the payload text is parsed as the column's type.
    const std::string sql =
        "INSERT INTO " + table.quoted() + " (biz_type, biz_id, payload) VALUES ($1, $2, $3)";
    const auto start = Clock::now();
    pqxx::work tx(conn);
    for (long long i = from; i < from + kPerTx; ++i) {
      tx.exec_params(sql, kBizType, make_key(i, o.keys), make_payload(i));
    }
    tx.commit();
    return seconds_since(start);
  };
  for (long long from = 0; from < o.json_rows; from += kPerTx) {
    if ((from / kPerTx) % 2 == 0) {
      js_tx.push_back(insert_tx(js_conn, js.name(), from));
      jb_tx.push_back(insert_tx(jb_conn, jb.name(), from));
    } else {
      jb_tx.push_back(insert_tx(jb_conn, jb.name(), from));
      js_tx.push_back(insert_tx(js_conn, js.name(), from));
    }
  }
  JsonResult r;
  r.json_rate = kPerTx / median(js_tx);
  r.jsonb_rate = kPerTx / median(jb_tx);
  {
    pqxx::nontransaction tx(admin);
    r.json_size =
        tx.exec("SELECT pg_size_pretty(pg_relation_size('" + js.name().quoted() + "'))")[0][0]
            .as<std::string>();
    r.jsonb_size =
        tx.exec("SELECT pg_size_pretty(pg_relation_size('" + jb.name().quoted() + "'))")[0][0]
            .as<std::string>();
  }

  // Server side only: the same rows as text in a scratch table, then cast on insert.
  const std::string src = "\"bench_json_src_" + id + "\"";
  pqxx::nontransaction tx(admin);
  tx.exec("CREATE TABLE " + src + " AS SELECT 'order-' || (g % " + std::to_string(o.keys) +
          ") AS biz_id, (" + payload_sql_expr("g") + ")::text AS payload FROM generate_series(1, " +
          std::to_string(o.json_rows) + ") g");
  std::vector<double> js_bulk;
  std::vector<double> jb_bulk;
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 2; ++k) {
      const bool json = (round + k) % 2 == 0;
      const TableName& t = json ? js.name() : jb.name();
      tx.exec("TRUNCATE " + t.quoted());
      const auto start = Clock::now();
      tx.exec("INSERT INTO " + t.quoted() + " (biz_type, biz_id, payload) SELECT '" + kBizType +
              "', biz_id, payload::" + (json ? "json" : "jsonb") + " FROM " + src);
      (json ? js_bulk : jb_bulk).push_back(seconds_since(start));
    }
  }
  tx.exec("DROP TABLE " + src);
  r.json_bulk = static_cast<double>(o.json_rows) / median(js_bulk);
  r.jsonb_bulk = static_cast<double>(o.json_rows) / median(jb_bulk);
  note("json vs jsonb, " + fmt(static_cast<double>(o.json_rows)) +
       " rows each: single-row INSERTs (median of transactions of " + std::to_string(kPerTx) +
       "): json " + fmt(r.json_rate) + " rows/s (heap " + r.json_size + "), jsonb " +
       fmt(r.jsonb_rate) + " rows/s (heap " + r.jsonb_size + "); INSERT ... SELECT: json " +
       fmt(r.json_bulk) + " rows/s, jsonb " + fmt(r.jsonb_bulk) + " rows/s");
  return r;
}

// ---------------------------------------------------------------------------
// (q) (d)'s harness at a low rate: latency when the relay keeps going idle, and
// what its wake-ups cost the database per event.

void add_quiet_rows(const Options& o, const std::string& id, std::vector<Row>& rows) {
  Options quiet = o;
  quiet.rate = o.quiet_rate;
  LatencyResult l =
      run_latency(quiet, id, {"1 event/tx, NOTIFY on", 1, true, "2s", o.latency_seconds});
  const std::string at = " (q: 1 event/tx at " + fmt(l.offered_rate) + " events/s achieved)";
  const bool at_rate = l.offered_rate >= 0.95 * o.quiet_rate;
  rows.push_back({"(q) commit-to-consume latency p50 / p90" + at,
                  fmt(l.p50, 1) + " / " + fmt(l.p90, 1) + " ms", "", ""});
  rows.push_back({"(q) commit-to-consume latency p99 (max " + fmt(l.max, 1) +
                      " ms; missing / duplicated " + std::to_string(l.missing) + " / " +
                      std::to_string(l.duplicates) + ")",
                  fmt(l.p99, 1) + " ms", "<= 10 ms at " + fmt(o.quiet_rate) + "/s",
                  at_rate ? verdict(l.p99 <= 10 && l.missing == 0) : "rate not reached"});
  rows.push_back({"(q) relay transactions (autocommit statements) per event" + at,
                  fmt(l.relay_xacts_per_event, 2), "", ""});
}

// ---------------------------------------------------------------------------
// (u) An un-analyzed bulk backlog vs the same after ANALYZE (flood_bench.cpp).

void add_flood_rows(const Options& o, const std::string& id, std::vector<Row>& rows) {
  FloodResult f = run_flood({o.dsn, o.brokers, id, o.flood_events, o.keys, o.batch, o.flood_rounds,
                             parse_mode(o.flood_mode)});
  auto rates = [](const std::vector<FloodDrain>& v) {
    std::string out;
    double sum = 0;
    for (const auto& d : v) {
      out += (out.empty() ? "" : " / ") + fmt(d.rate);
      sum += d.rate;
    }
    return std::make_pair(out, sum / static_cast<double>(v.size()));
  };
  auto claims = [](const std::vector<FloodDrain>& v) {
    std::string out;
    for (const auto& d : v) {
      out += (out.empty() ? "" : " / ") + fmt(d.claim_ms, 1);
    }
    return out;
  };
  const auto [u_rates, u_mean] = rates(f.unanalyzed);
  const auto [a_rates, a_mean] = rates(f.analyzed);
  const std::string n = fmt(static_cast<double>(o.flood_events));
  rows.push_back({"(u) relay::Relay drains " + n + " bulk-inserted events, " + o.flood_mode +
                      "-mode table never analyzed (first claim " + claims(f.unanalyzed) + " ms)",
                  u_rates + " events/s", "", ""});
  rows.push_back({"(u) the same after ANALYZE (first claim " + claims(f.analyzed) + " ms)",
                  a_rates + " events/s", "", ""});
  const double ratio = u_mean / a_mean;
  rows.push_back({"(u) never analyzed / analyzed, mean of " + std::to_string(o.flood_rounds) +
                      " interleaved round(s)",
                  fmt(ratio, 2), ">= 0.80", verdict(ratio >= 0.8)});
}

// ---------------------------------------------------------------------------

int run(const Options& o) {
  const std::string id = run_id();
  auto has = [&](char phase) { return o.phases.find(phase) != std::string::npos; };
  std::vector<Row> rows;
  const auto started = Clock::now();

  {
    pqxx::connection conn(o.dsn);
    pqxx::nontransaction tx(conn);
    note("PostgreSQL: " + tx.exec("SHOW server_version")[0][0].as<std::string>() +
         ", shared_buffers " + tx.exec("SHOW shared_buffers")[0][0].as<std::string>() +
         ", synchronous_commit " + tx.exec("SHOW synchronous_commit")[0][0].as<std::string>());
  }
  note("Kafka: " + o.brokers + "; librdkafka " + RdKafka::version_str() + "; run id " + id);

  std::vector<double> a_rates;
  std::vector<double> b_rates;
  std::vector<double> b_steady;
  std::vector<double> b_startup;
  for (int round = 0; round < o.rounds; ++round) {
    if (has('a')) {
      a_rates.push_back(run_sql_ceiling(o, id, round));
    }
    if (has('b')) {
      RelayRate r = run_relay_e2e(o, id, round);
      b_rates.push_back(r.rate);
      b_steady.push_back(r.steady_rate);
      b_startup.push_back(r.startup_ms);
    }
  }
  const std::string ev = fmt(static_cast<double>(o.events));
  auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  double a = NAN;
  double b = NAN;
  if (!a_rates.empty()) {
    a = mean(a_rates);
    rows.push_back({"(a) SQL-only ceiling, claim_batch + mark_sent, batch " +
                        std::to_string(o.batch) + ", " + ev + " events",
                    fmt(a) + " events/s", "", ""});
  }
  if (!b_rates.empty()) {
    b = mean(b_rates);
    rows.push_back({"(b) relay::Relay end to end, real broker, batch " + std::to_string(o.batch) +
                        ", " + ev + " events",
                    fmt(b) + " events/s", "", ""});
  }
  double c = NAN;
  if (has('c')) {
    c = run_naive(o, id);
    rows.push_back({"(c) naive relay (sync send + UPDATE per row), " +
                        fmt(static_cast<double>(o.naive_events)) + " events",
                    fmt(c) + " events/s", "", ""});
  }
  if (!b_rates.empty()) {
    rows.push_back({"(b') the same, after the first batch was marked (start-up of " +
                        fmt(mean(b_startup)) + " ms excluded)",
                    fmt(mean(b_steady)) + " events/s", "", ""});
  }
  if (!std::isnan(a) && !std::isnan(b)) {
    rows.push_back({"(b)/(a)", fmt(b / a, 2), ">= 0.80", verdict(b / a >= 0.8)});
    rows.push_back({"(b')/(a), start-up excluded", fmt(mean(b_steady) / a, 2), "(>= 0.80)",
                    verdict(mean(b_steady) / a >= 0.8)});
  }
  if (has('p')) {
    struct Variant {
      std::string label;
      std::map<std::string, std::string> props;
      bool async_commit;
    };
    for (const auto& v : std::vector<Variant>{{"", {}, false},
                                              {", linger.ms=2", {{"linger.ms", "2"}}, false},
                                              {", synchronous_commit=off", {}, true}}) {
      const auto& label = v.label;
      Breakdown p = run_breakdown(o, id, label, v.props, v.async_commit);
      rows.push_back(
          {"(p) claim / publish / mark per batch of " + std::to_string(o.batch) +
               " (relay steps timed by hand" + label + "; " + fmt(p.rate) + " events/s)",
           fmt(p.claim_ms, 1) + " / " + fmt(p.publish_ms, 1) + " / " + fmt(p.mark_ms, 1) + " ms",
           "", ""});
    }
  }
  if (!std::isnan(b) && !std::isnan(c)) {
    rows.push_back({"(b)/(c)", fmt(b / c, 1) + "x", ">= 50x", verdict(b / c >= 50)});
  }
  if (has('w')) {
    for (Notify notify : {Notify::kEveryCommit, Notify::kNobodyWaits, Notify::kTriggerOff}) {
      const double w = run_writer_ceiling(o, id, notify, o.writers, 5);
      rows.push_back({"(w) writer ceiling: " + std::to_string(o.writers) +
                          " connections committing one event per transaction, " +
                          notify_label(notify),
                      fmt(w) + " commits/s", "", ""});
    }
  }
  std::vector<LatencyScenario> scenarios;
  if (has('d') || has('e')) {
    scenarios.push_back({"1 event/tx, NOTIFY on", 1, true, "2s", o.latency_seconds});
  }
  if (has('d')) {
    scenarios.push_back({"10 events/tx, NOTIFY on", 10, true, "2s", o.latency_seconds / 2});
  }
  if (has('l')) {
    scenarios.push_back({"1 event/tx, NOTIFY trigger off, relay polls every 10 ms", 1, false,
                         "10ms", o.latency_seconds / 2});
  }
  long rss_during_latency_kb = -1;
  for (const auto& sc : scenarios) {
    LatencyResult l = run_latency(o, id, sc);
    const std::string at = " (" + sc.label + "; " + fmt(l.offered_rate) + " events/s achieved)";
    const bool at_target_rate = l.offered_rate >= 0.95 * o.rate;
    rows.push_back({"(d) commit-to-consume latency p50" + at, fmt(l.p50, 1) + " ms", "", ""});
    rows.push_back({"(d) commit-to-consume latency p99" + at, fmt(l.p99, 1) + " ms",
                    "<= 20 ms at " + fmt(o.rate) + "/s",
                    at_target_rate ? verdict(l.p99 <= 20 && l.missing == 0)
                                   : std::string(l.p99 <= 20 ? "met, but " : "MISSED, and ") +
                                         "rate not reached"});
    rows.push_back({"(d) max (p99.9 " + fmt(l.p999, 1) + " ms); commit-to-produce p50 / p99 " +
                        fmt(l.produce_p50) + " / " + fmt(l.produce_p99) +
                        " ms; missing / duplicated " + std::to_string(l.missing) + " / " +
                        std::to_string(l.duplicates),
                    fmt(l.max, 1) + " ms", "", ""});
    rows.push_back({"(d) relay transactions (autocommit statements) per event" + at,
                    fmt(l.relay_xacts_per_event, 2), "", ""});
    rss_during_latency_kb = std::max({rss_during_latency_kb, l.rss_hwm_kb, l.rss_peak_kb});
  }
  if (rss_during_latency_kb > 0) {
    const double rss_mb = static_cast<double>(rss_during_latency_kb) / 1024;
    rows.push_back({"(e) relay binary peak RSS (VmHWM) during (d)", fmt(rss_mb, 1) + " MiB",
                    "<= 30 MB", verdict(rss_mb * 1.048576 <= 30)});
  }
  if (has('e')) {
    DrainResult d = run_binary_drain(o, id);
    const long long n = o.drain_events > 0 ? o.drain_events : o.events;
    const double rss_mb = static_cast<double>(std::max(d.rss_hwm_kb, d.rss_peak_kb)) / 1024;
    rows.push_back(
        {"(e) relay binary peak RSS (VmHWM) draining " + fmt(static_cast<double>(n)) + " events",
         fmt(rss_mb, 1) + " MiB", "<= 30 MB", verdict(rss_mb * 1.048576 <= 30)});
    rows.push_back({"(e) relay binary drain rate (cross-check of (b); exit code " +
                        std::to_string(d.exit_code) + " on SIGTERM)",
                    fmt(d.rate) + " events/s", "", ""});
  }
  if (has('f')) {
    ClaimResult f = run_claim_scaling(o, id);
    const std::string sent = fmt(static_cast<double>(f.sent_rows));
    auto add = [&](const ClaimTiming& t, const std::string& p, int iterations, bool target) {
      rows.push_back({"(f) claim_batch(" + std::to_string(o.batch) + ") median, " + p + ", " +
                          sent + " sent rows in the table (" + f.big_size + "; p90 " +
                          fmt(t.big_p90_ms, 2) + " ms)",
                      fmt(t.big_median_ms, 2) + " ms", "", ""});
      rows.push_back({"(f) claim_batch(" + std::to_string(o.batch) + ") median, " + p +
                          ", no sent rows (p90 " + fmt(t.empty_p90_ms, 2) + " ms)",
                      fmt(t.empty_median_ms, 2) + " ms", "", ""});
      const double ratio = t.big_median_ms / t.empty_median_ms;
      rows.push_back({"(f) ratio, " + p + ": " + sent + " sent rows vs none (" +
                          std::to_string(iterations) + " claims each, interleaved)",
                      fmt(ratio, 2), target ? "<= 1.2" : "(<= 1.2)", verdict(ratio <= 1.2)});
    };
    add(f.few, std::to_string(o.batch) + " pending", o.claim_iterations, true);
    if (o.claim_backlog > o.batch) {
      add(f.backlog, fmt(static_cast<double>(o.claim_backlog)) + " pending",
          o.claim_backlog_iterations, false);
      add(f.drained,
          std::to_string(o.batch) + " pending after draining that backlog, before VACUUM",
          o.claim_iterations / 3, false);
    }
    if (!f.reused) {
      rows.push_back({"(f) fill " + sent + " rows / VACUUM ANALYZE (not a target)",
                      fmt(f.fill_seconds, 0) + " s / " + fmt(f.vacuum_seconds, 0) + " s", "", ""});
    } else {
      rows.push_back({"(f) " + sent +
                          "-row table reused from an earlier run; VACUUM (INDEX_CLEANUP "
                          "ON, ANALYZE) before measuring (not a target)",
                      fmt(f.vacuum_seconds, 0) + " s", "", ""});
    }
  }
  if (has('g')) {
    ClaimResult g = run_log_claim_scaling(o, id);
    const std::string read = fmt(static_cast<double>(g.sent_rows));
    rows.push_back({"(g) log mode: claim_batch(" + std::to_string(o.batch) + ") median, " +
                        std::to_string(o.batch) + " pending, " + read + " read rows in the log (" +
                        g.big_size + "; p90 " + fmt(g.few.big_p90_ms, 2) + " ms) vs none (p90 " +
                        fmt(g.few.empty_p90_ms, 2) + " ms)",
                    fmt(g.few.big_median_ms, 2) + " vs " + fmt(g.few.empty_median_ms, 2) + " ms",
                    "", ""});
    const double ratio = g.few.big_median_ms / g.few.empty_median_ms;
    rows.push_back({"(g) log mode: ratio, " + read + " read rows vs none (" +
                        std::to_string(o.claim_iterations) + " claims each, interleaved)",
                    fmt(ratio, 2), "<= 1.2", verdict(ratio <= 1.2)});
    rows.push_back(
        {"(g) " +
             std::string(g.reused ? "table reused; " : "fill " + fmt(g.fill_seconds, 0) + " s; ") +
             "VACUUM ANALYZE (not a target)",
         fmt(g.vacuum_seconds, 0) + " s", "", ""});
  }
  if (has('j')) {
    JsonResult j = run_json_vs_jsonb(o, id);
    rows.push_back(
        {"payload json vs jsonb: single-row INSERTs, 100 per transaction, median "
         "transaction (heap " +
             j.json_size + " vs " + j.jsonb_size + ")",
         fmt(j.json_rate) + " vs " + fmt(j.jsonb_rate) + " rows/s (jsonb/json " +
             fmt(j.jsonb_rate / j.json_rate, 2) + ")",
         "", ""});
    rows.push_back({"payload json vs jsonb: INSERT ... SELECT of the payload text (server cost)",
                    fmt(j.json_bulk) + " vs " + fmt(j.jsonb_bulk) + " rows/s (jsonb/json " +
                        fmt(j.jsonb_bulk / j.json_bulk, 2) + ")",
                    "", ""});
  }

  if (has('q')) {
    add_quiet_rows(o, id, rows);
  }
  if (has('u')) {
    add_flood_rows(o, id, rows);
  }

  note("total " + fmt(seconds_since(started), 0) + " s");
  std::cout << "\n| Measurement | Result | Target | Verdict |\n|---|---|---|---|\n";
  for (const auto& r : rows) {
    std::cout << "| " << r.measurement << " | " << r.result << " | " << r.target << " | "
              << r.verdict << " |\n";
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  using outbox::bench::Options;
  Options o;
  if (const char* v = std::getenv("OUTBOX_TEST_PG_DSN")) {
    o.dsn = v;
  }
  if (const char* v = std::getenv("OUTBOX_TEST_KAFKA_BOOTSTRAP")) {
    o.brokers = v;
  }
  CLI::App app{"relay_bench: outbox relay benchmarks (see bench/README.md)"};
  app.add_option("--dsn", o.dsn, "PostgreSQL DSN (default $OUTBOX_TEST_PG_DSN)");
  app.add_option("--brokers", o.brokers, "Kafka bootstrap (default $OUTBOX_TEST_KAFKA_BOOTSTRAP)");
  app.add_option("--binary", o.binary, "the outbox-operator binary for (d) and (e)")
      ->capture_default_str();
  app.add_option("--phases", o.phases,
                 "phases to run: a b c (throughput), p (breakdown of b), d (latency), e (RSS), f "
                 "(claim scaling), "
                 "g (claim scaling, log mode), j (json vs jsonb), q (latency at --quiet-rate), u "
                 "(un-analyzed bulk backlog); g, q and u are not in the default")
      ->capture_default_str();
  app.add_option("--events", o.events, "events pre-inserted for (a), (b)")->capture_default_str();
  app.add_option("--rounds", o.rounds, "(a), (b) rounds, interleaved; the mean is reported")
      ->capture_default_str();
  app.add_option("--breakdown-events", o.breakdown_events, "events for each (p) variant")
      ->capture_default_str();
  app.add_option("--naive-events", o.naive_events, "events for the naive relay (c)")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "claim batch size")->capture_default_str();
  app.add_option("--keys", o.keys, "distinct biz_id keys")->capture_default_str();
  app.add_option("--rate", o.rate, "(d) offered events/s")->capture_default_str();
  app.add_option("--latency-seconds", o.latency_seconds, "(d) duration")->capture_default_str();
  app.add_option("--writers", o.writers, "(d) writer connections")->capture_default_str();
  app.add_option("--drain-events", o.drain_events,
                 "(e) backlog drained by the binary (0: --events)")
      ->capture_default_str();
  app.add_option("--claim-sent-rows", o.claim_sent_rows, "(f) sent rows in the big table")
      ->capture_default_str();
  app.add_option("--claim-iterations", o.claim_iterations, "(f) timed claims per table")
      ->capture_default_str();
  app.add_option("--claim-backlog", o.claim_backlog,
                 "(f) pending rows of the backlog case (0: skip it)")
      ->capture_default_str();
  app.add_option("--claim-backlog-iterations", o.claim_backlog_iterations,
                 "(f) timed claims per table in the backlog case")
      ->capture_default_str();
  app.add_flag("--experiment-pending-id-index", o.pending_id_index,
               "add a partial index (id) WHERE status = 0 to every table (a candidate fix)");
  app.add_flag("--refill-claim-table", o.refill_claim_table,
               "(f) rebuild the big table even if a filled one exists");
  app.add_option("--json-rows", o.json_rows, "rows per table for json vs jsonb")
      ->capture_default_str();
  app.add_option("--flood-events", o.flood_events, "(u) events bulk-inserted per drain")
      ->capture_default_str();
  app.add_option("--flood-rounds", o.flood_rounds, "(u) rounds, each un-analyzed then analyzed")
      ->capture_default_str();
  app.add_option("--flood-mode", o.flood_mode, "(u) table mode: status or log")
      ->check(CLI::IsMember({"status", "log"}))
      ->capture_default_str();
  app.add_option("--quiet-rate", o.quiet_rate, "(q) offered events/s")->capture_default_str();
  app.add_option("--log-dir", o.log_dir, "where the relay binary's logs go")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.dsn.empty() || o.brokers.empty()) {
    std::cerr << "relay_bench: set --dsn and --brokers (or source the test bed's env file)\n";
    return 2;
  }
  outbox::bench::set_experiment_pending_id_index(o.pending_id_index);
  spdlog::set_level(spdlog::level::warn);  // the in-process relay's info lines would be noise
  try {
    return outbox::bench::run(o);
  } catch (const std::exception& e) {
    std::cerr << "relay_bench: " << e.what() << "\n";
    return 1;
  }
}
