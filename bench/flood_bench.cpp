#include "flood_bench.hpp"

#include <cmath>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "bench_support.hpp"
#include "metrics/registry.hpp"
#include "outbox/log_store.hpp"
#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "relay/relay.hpp"

namespace outbox::bench {
namespace {

std::string fmt_rate(double v) {
  return std::to_string(static_cast<long long>(std::llround(v)));
}

// Times a few claims of the first batch (read only: nothing changes) on a fresh
// session, as the relay's first claim would see the table.
double median_claim_ms(const FloodParams& p, const TableName& table) {
  pqxx::connection conn(p.dsn);
  std::vector<int> shards(static_cast<std::size_t>(inspect_table(conn, table).shard_count));
  std::iota(shards.begin(), shards.end(), 0);
  const TableInfo info = inspect_table(conn, table);
  LogCursor cursor;  // log mode: a fresh reader's, at the start of the log
  std::unique_ptr<EventClaims> claims = open_claims(conn, table, info, cursor);
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    cursor.forget();
    if (claims->claim_batch(shards, p.batch, {}).empty()) {
      throw std::runtime_error("(u) the claim found nothing in " + table.plain());
    }
    ms.push_back(to_ms(Clock::now() - start));
  }
  return median(ms);
}

// relay::Relay on a thread until its published counter (incremented after the
// write-back) reaches `events`; returns the seconds from constructing it.
double drain_with_relay(const FloodParams& p, const TableName& table, const std::string& topic) {
  relay::RelayConfig c;
  c.dsn = p.dsn;
  c.table = table.plain();
  c.kafka.bootstrap_servers = p.brokers;
  c.publish.router = relay::TopicRouter(topic, {});
  c.batch_size = p.batch;
  metrics::Registry registry;
  metrics::Counter& published =
      registry.counter("outbox_events_published_total", "", {{"table", table.plain()}});
  std::stop_source stop;
  const auto start = Clock::now();
  relay::RelayHealth health;
  auto relay = std::make_unique<relay::Relay>(c, registry, health);
  std::thread thread([&] { relay->run(stop.get_token()); });
  const auto deadline = start + std::chrono::minutes(10);
  while (published.value() < static_cast<double>(p.events) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double secs = seconds_since(start);
  stop.request_stop();
  thread.join();
  return secs;
}

// The tables holding the rows: the table itself, or in log mode its partitions.
const char* const kRowTables =
    "SELECT c.oid FROM pg_class c WHERE c.relkind = 'r' AND (c.oid = $1::regclass OR c.oid IN "
    "(SELECT relid FROM pg_partition_tree($1)))";

std::vector<std::string> tables_holding_rows(pqxx::transaction_base& tx, const TableName& table) {
  std::vector<std::string> out;
  for (const auto& r : tx.exec_params(
           std::string("SELECT oid::regclass::text FROM (") + kRowTables + ") t", table.quoted())) {
    out.push_back(r[0].as<std::string>());
  }
  return out;
}

// How often any table holding the rows was analyzed (by hand or by autovacuum), at most.
long long analyze_count(const std::string& dsn, const TableName& table) {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params(
      std::string("SELECT COALESCE(max(s.analyze_count + s.autoanalyze_count), 0) FROM (") +
          kRowTables + ") t JOIN pg_stat_user_tables s ON s.relid = t.oid",
      table.quoted());
  return r[0][0].as<long long>();
}

FloodDrain drain_one(const FloodParams& p, int round, bool analyze) {
  std::string suffix = analyze ? "a" : "u";
  suffix += std::to_string(round);
  BenchTable t(p.dsn, "bench_flood_" + p.id + "_" + suffix, p.mode);
  {
    // Nothing may analyze the un-analyzed table behind the benchmark's back.
    pqxx::connection conn(p.dsn);
    pqxx::nontransaction tx(conn);
    for (const auto& leaf : tables_holding_rows(tx, t.name())) {
      tx.exec("ALTER TABLE " + leaf + " SET (autovacuum_enabled = false)");
    }
  }
  t.fill_pending(p.events, p.keys);
  if (analyze) {
    pqxx::connection conn(p.dsn);
    pqxx::nontransaction(conn).exec("ANALYZE " + t.name().quoted());
  }
  const std::string topic = "bench_" + p.id + "_flood_" + suffix;
  ensure_topic(p.brokers, topic);
  FloodDrain d;
  d.analyzed = analyze;
  d.claim_ms = median_claim_ms(p, t.name());
  const double secs = drain_with_relay(p, t.name(), topic);
  const long long left = t.count("status <> 1");
  const long long analyzes = analyze_count(p.dsn, t.name());
  if (left != 0) {
    throw std::runtime_error("(u) " + std::to_string(left) + " rows not sent after 10 minutes");
  }
  if (analyzes != (analyze ? 1 : 0)) {
    throw std::runtime_error("(u) " + t.name().plain() + " was analyzed " +
                             std::to_string(analyzes) + " times; expected " +
                             (analyze ? "1" : "0"));
  }
  d.rate = static_cast<double>(p.events) / secs;
  note("(u) " + std::string(analyze ? "after ANALYZE" : "never analyzed") + ", round " +
       std::to_string(round + 1) + ": first claim_batch(" + std::to_string(p.batch) + ") median " +
       std::to_string(d.claim_ms) + " ms; drained " + std::to_string(p.events) + " events in " +
       std::to_string(secs) + " s = " + fmt_rate(d.rate) + " events/s");
  return d;
}

}  // namespace

FloodResult run_flood(const FloodParams& p) {
  FloodResult r;
  for (int round = 0; round < p.rounds; ++round) {
    r.unanalyzed.push_back(drain_one(p, round, false));
    r.analyzed.push_back(drain_one(p, round, true));
  }
  return r;
}

}  // namespace outbox::bench
