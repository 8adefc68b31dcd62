// cdc_compare: the relay binary and Debezium (Kafka Connect standalone with the
// PostgreSQL connector and the Outbox Event Router) side by side, one after the
// other, on one PostgreSQL and one Kafka broker, with the same table shape
// (outbox::migrate, 64 shards) and the same events (bench_support's payloads).
// For each system: drain rate of N pre-inserted events, the relayer process's
// CPU-seconds and peak RSS, PostgreSQL's CPU-seconds and WAL bytes during the
// drain, and the outbox table's dead tuples afterwards. bench/compare.sh runs it;
// see bench/README.md. Progress goes to stderr, the results table to stdout.

#include <dirent.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafkacpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>
#include <tuple>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "outbox/store.hpp"
#include "support/child_process.hpp"
#include "support/loopback_http.hpp"

namespace outbox::bench {
namespace {

using testbed::free_port;
using testbed::http_get;

struct Options {
  std::string dsn;
  std::string brokers;
  std::string binary = OUTBOX_BINARY;
  std::string java = "/usr/bin/java";
  std::string debezium_lib;  // bench/debezium/fetch.sh's output
  std::string log4j_config;  // scripts/testbed/kafka/log4j2.xml
  std::string systems = "relay,relay-log,debezium";
  std::string log_dir = "/tmp";
  int postmaster_pid = 0;
  long long events = 500000;
  int keys = 1000;
  int rounds = 1;
  double timeout_seconds = 900;
  double rate = 2000;          // latency: offered events/s, one event per transaction
  double latency_seconds = 0;  // 0: no latency measurement
  double latency_warmup_seconds = 10;
  int writers = 8;
  std::vector<std::string> connector_properties;  // extra key=value lines for the connector
  std::vector<std::string> relay_flags;           // extra flags for both relay systems
  // Set up by main: every relayer connects as kRelayerRole, so pg_stat_statements (when the
  // server preloads it) counts the relayer's statements apart from the writers'.
  std::string relayer_dsn;
  bool count_statements = false;
};

constexpr const char* kRelayerRole = "cdc_compare_relayer";

std::string fmt(double v, int decimals = 0) {
  if (std::isnan(v)) {
    return "n/a";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (decimals == 0 && std::fabs(v) >= 10000) {
    std::string out;
    int n = 0;
    for (auto it = s.rbegin(); it != s.rend(); ++it, ++n) {
      if (n > 0 && n % 3 == 0 && *it != '-') {
        out.push_back(',');
      }
      out.push_back(*it);
    }
    return {out.rbegin(), out.rend()};
  }
  return s;
}

// ---------------------------------------------------------------------------
// CPU time from /proc.

double ticks_to_seconds(unsigned long long ticks) {
  return static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Fields of /proc/<pid>/stat after the command name: index 0 is field 3 (state).
std::optional<std::vector<std::string>> stat_fields(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) {
    return std::nullopt;
  }
  auto close = line.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> f;
  std::string x;
  while (rest >> x) {
    f.push_back(x);
  }
  return f;
}

// utime + stime of one process (all its threads), seconds; NaN if gone.
double process_cpu(int pid) {
  auto f = stat_fields(pid);
  if (!f || f->size() < 13) {
    return NAN;
  }
  // utime and stime are fields 14 and 15.
  return ticks_to_seconds(std::stoull((*f)[11]) + std::stoull((*f)[12]));
}

// False once the process has exited (a zombie included).
bool alive(int pid) {
  auto f = stat_fields(pid);
  return f && !f->empty() && (*f)[0] != "Z";
}

// CPU-seconds the PostgreSQL server has used so far: the postmaster's own, its
// reaped children's (cutime + cstime) and every live child's utime + stime.
// Differences of two readings count a backend that lived through the window,
// one that exited within it, and one born within it alike.
double postgres_cpu(int postmaster) {
  auto f = stat_fields(postmaster);
  if (!f || f->size() < 15) {
    throw std::runtime_error("cannot read /proc/" + std::to_string(postmaster) + "/stat");
  }
  unsigned long long ticks =
      std::stoull((*f)[11]) + std::stoull((*f)[12]) + std::stoull((*f)[13]) + std::stoull((*f)[14]);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc"), ::closedir);
  while (dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) {
      continue;
    }
    auto c = stat_fields(std::stoi(name));
    // ppid is field 4.
    if (c && c->size() >= 13 && std::stoi((*c)[1]) == postmaster) {
      ticks += std::stoull((*c)[11]) + std::stoull((*c)[12]);
    }
  }
  return ticks_to_seconds(ticks);
}

// ---------------------------------------------------------------------------

std::string sql1(pqxx::connection& conn, const std::string& query) {
  pqxx::nontransaction tx(conn);
  auto r = tx.exec(query);
  return r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

long long wal_diff(pqxx::connection& conn, const std::string& to, const std::string& from) {
  return std::stoll(sql1(conn, "SELECT pg_wal_lsn_diff('" + to + "', '" + from + "')::bigint"));
}

std::string current_lsn(pqxx::connection& conn) {
  return sql1(conn, "SELECT pg_current_wal_lsn()");
}

std::map<std::string, std::string> parse_dsn(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err != nullptr ? err : "?";
    PQfreemem(err);
    throw std::runtime_error("cannot parse the DSN: " + msg);
  }
  std::map<std::string, std::string> out;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) {
      out[o->keyword] = o->val;
    }
  }
  PQconninfoFree(opts);
  return out;
}

// A key=value conninfo of `fields`, each value quoted as libpq reads it.
std::string conninfo(const std::map<std::string, std::string>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    out += (out.empty() ? "" : " ") + k + "='";
    for (char ch : v) {
      if (ch == '\'' || ch == '\\') {
        out.push_back('\\');
      }
      out.push_back(ch);
    }
    out.push_back('\'');
  }
  return out;
}

void write_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) {
      throw std::runtime_error("cannot write " + path);
    }
  }
  ::chmod(path.c_str(), mode);
}

// ---------------------------------------------------------------------------

struct Result {
  std::string system;
  long long events = 0;
  long long delivered = 0;     // messages in the topic, marker excluded
  double drain_seconds = NAN;  // process start until the topic holds N (relay: and marks done)
  double topic_seconds = NAN;  // process start until the topic holds N
  double first_seconds = NAN;  // process start until the first event is in the topic
  double relayer_cpu = NAN;
  long relayer_hwm_kb = -1;
  double pg_cpu = NAN;
  long long insert_wal = 0;
  long long drain_wal = 0;
  long long dead_tuples = -1;
  long long updates = -1, hot_updates = -1, deletes = -1, autovacuums = -1;
  std::string slot_after;  // replication slots left with our prefix (must be empty)
};

// The Kafka Connect worker and connector settings of the Debezium peer.
void write_connect_config(const Options& o, const std::string& dir, const TableName& table,
                          const std::string& topic_prefix, const std::string& slot,
                          const std::string& publication) {
  const auto db = parse_dsn(o.relayer_dsn);
  auto get = [&](const char* k, const std::string& dflt) {
    auto it = db.find(k);
    return it == db.end() || it->second.empty() ? dflt : it->second;
  };
  std::ostringstream w;
  w << "bootstrap.servers=" << o.brokers << "\n"
    << "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
    << "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
    << "offset.storage.file.filename=" << dir << "/connect.offsets\n"
    << "listeners=http://127.0.0.1:" << free_port()
    << "\n"
    // The relay's delivery guarantees: all in-sync replicas, no duplicates on retry.
    << "producer.acks=all\n"
    << "producer.enable.idempotence=true\n";
  write_file(dir + "/worker.properties", w.str());
  std::ostringstream c;
  c << "name=outbox-debezium\n"
    << "connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
    << "tasks.max=1\n"
    << "database.hostname=" << get("host", "127.0.0.1") << "\n"
    << "database.port=" << get("port", "5432") << "\n"
    << "database.user=" << get("user", "postgres") << "\n"
    << "database.password=" << get("password", "") << "\n"
    << "database.dbname=" << get("dbname", "postgres") << "\n"
    << "topic.prefix=" << topic_prefix << "\n"
    << "plugin.name=pgoutput\n"
    << "slot.name=" << slot << "\n"
    << "publication.name=" << publication << "\n"
    << "publication.autocreate.mode=disabled\n"
    << "table.include.list=" << table.schema() << "." << table.table()
    << "\n"
    // Stream what the slot holds; take no snapshot of the rows.
    << "snapshot.mode=no_data\n"
    << "tombstones.on.delete=false\n"
    << "transforms=outbox\n"
    << "transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n"
    << "transforms.outbox.table.field.event.id=event_id\n"
    << "transforms.outbox.table.field.event.key=biz_id\n"
    << "transforms.outbox.table.field.event.payload=payload\n"
    << "transforms.outbox.route.by.field=biz_type\n"
    << "transforms.outbox.route.topic.replacement=" << topic_prefix << ".${routedByValue}\n";
  for (const auto& kv : o.connector_properties) {
    c << kv << "\n";
  }
  write_file(dir + "/connector.properties", c.str(), 0600);  // holds the password
}

std::unique_ptr<testbed::ChildProcess> start_debezium(const Options& o, const std::string& dir) {
  // The JVM flags of Kafka's connect-standalone.sh / kafka-run-class.sh defaults.
  std::vector<std::string> args = {o.java,
                                   "-Xms256M",
                                   "-Xmx2G",
                                   "-server",
                                   "-XX:+UseG1GC",
                                   "-XX:MaxGCPauseMillis=20",
                                   "-XX:InitiatingHeapOccupancyPercent=35",
                                   "-XX:+ExplicitGCInvokesConcurrent",
                                   "-Djava.awt.headless=true",
                                   "-Dlog4j2.configurationFile=" + o.log4j_config,
                                   "-Dtestbed.log.level=INFO",
                                   "-cp",
                                   o.debezium_lib + "/*",
                                   "org.apache.kafka.connect.cli.ConnectStandalone",
                                   dir + "/worker.properties",
                                   dir + "/connector.properties"};
  return std::make_unique<testbed::ChildProcess>(args, std::map<std::string, std::string>{},
                                                 dir + "/connect.log");
}

std::unique_ptr<testbed::ChildProcess> start_relay(const Options& o, const TableName& table,
                                                   const std::string& topic_prefix,
                                                   const std::string& log,
                                                   unsigned short port = 0) {
  // Default settings but for where to read and publish (and --relay-flag); the DSN in the
  // environment.
  std::vector<std::string> args = {o.binary,
                                   "relay",
                                   "--table=" + table.plain(),
                                   "--brokers=" + o.brokers,
                                   "--topic=" + topic_prefix + ".{biz_type}",
                                   "--listen=127.0.0.1:" + std::to_string(port)};
  args.insert(args.end(), o.relay_flags.begin(), o.relay_flags.end());
  return std::make_unique<testbed::ChildProcess>(
      args, std::map<std::string, std::string>{{"OUTBOX_DSN", o.relayer_dsn}}, log);
}

void drop_slot(pqxx::connection& conn, const std::string& slot) {
  // The walsender of a stopped connector may take a moment to exit.
  for (int i = 0; i < 100; ++i) {
    pqxx::nontransaction tx(conn);
    auto r = tx.exec_params("SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot);
    if (r.empty()) {
      return;
    }
    if (!r[0][0].as<bool>()) {
      tx.exec_params("SELECT pg_drop_replication_slot($1)", slot);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  pqxx::nontransaction tx(conn);
  tx.exec_params(
      "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1",
      slot);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  tx.exec_params("SELECT pg_drop_replication_slot($1)", slot);
}

// Drops a Debezium run's replication slot and publication: at release() or,
// after a failure, when it goes out of scope (after the relayer was killed).
struct SlotGuard {
  pqxx::connection& conn;
  std::string slot, publication;
  bool on;
  SlotGuard(pqxx::connection& c, std::string s, std::string p, bool active)
      : conn(c), slot(std::move(s)), publication(std::move(p)), on(active) {}
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;
  ~SlotGuard() {
    try {
      release();
    } catch (const std::exception& e) {
      note("dropping slot " + slot + " and publication " + publication + ": " + e.what());
    }
  }
  void release() {
    if (!on) {
      return;
    }
    on = false;
    drop_slot(conn, slot);
    pqxx::nontransaction tx(conn);
    tx.exec("DROP PUBLICATION IF EXISTS " + tx.quote_name(publication));
  }
};

// "relay" runs on a status-mode table, "relay-log" on a log-mode one (migrate --mode log).
TableMode table_mode(const std::string& system) {
  return system == "relay-log" ? TableMode::kLog : TableMode::kStatus;
}

std::string short_name(const std::string& system) {
  return system == "debezium" ? "dbz" : system == "relay-log" ? "rlog" : "relay";
}

Result run_system(const Options& o, const std::string& id, const std::string& system) {
  const bool dbz = system == "debezium";
  Result r;
  r.system = system;
  r.events = o.events;
  const std::string name = "cmp_" + id + "_" + short_name(system);
  const std::string topic_prefix = "outbox_" + name;
  const std::string topic = topic_prefix + "." + kBizType;
  const std::string dir = o.log_dir + "/" + name;
  ::mkdir(dir.c_str(), 0755);

  pqxx::connection conn(o.dsn);
  BenchTable t(o.dsn, name, table_mode(system));
  ensure_topic(o.brokers, topic);
  const long long marker = topic_message_count(o.brokers, topic);
  const std::string slot = name;
  const std::string publication = name + "_pub";
  if (dbz) {
    // Before the inserts, so that the slot streams them (no snapshot taken).
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE PUBLICATION " + tx.quote_name(publication) + " FOR TABLE " + t.name().quoted());
    tx.exec_params("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot);
  }
  SlotGuard guard{conn, slot, publication, dbz};

  const std::string lsn0 = current_lsn(conn);
  t.fill_pending(o.events, o.keys);
  const std::string lsn1 = current_lsn(conn);
  r.insert_wal = wal_diff(conn, lsn1, lsn0);
  // As relay_bench does before a drain; then a checkpoint, so that both systems
  // start from the same state of full-page writes.
  t.vacuum_analyze();
  pqxx::nontransaction(conn).exec("CHECKPOINT");
  std::this_thread::sleep_for(std::chrono::seconds(2));

  if (dbz) {
    write_connect_config(o, dir, t.name(), topic_prefix, slot, publication);
  }
  const std::string lsn2 = current_lsn(conn);
  const double pg0 = postgres_cpu(o.postmaster_pid);
  const auto start = Clock::now();
  auto proc =
      dbz ? start_debezium(o, dir) : start_relay(o, t.name(), topic_prefix, dir + "/relay.log");
  const int pid = proc->pid();
  const long long want = marker + o.events;
  long long have = 0;
  while ((have = topic_message_count(o.brokers, topic)) < want) {
    if (have > marker && std::isnan(r.first_seconds)) {
      r.first_seconds = seconds_since(start);
    }
    if (seconds_since(start) > o.timeout_seconds) {
      throw std::runtime_error(system + ": only " + std::to_string(have - marker) + " of " +
                               std::to_string(o.events) + " events in " + topic + " after " +
                               fmt(o.timeout_seconds) + " s; log in " + dir);
    }
    if (!alive(pid)) {
      throw std::runtime_error(system + " exited early; log in " + dir);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.topic_seconds = seconds_since(start);
  if (!dbz) {
    // The relay's work ends when every row is marked sent.
    while (t.count("status = 0") > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  r.drain_seconds = seconds_since(start);
  const double pg1 = postgres_cpu(o.postmaster_pid);
  const std::string lsn3 = current_lsn(conn);
  r.relayer_cpu = process_cpu(pid);
  r.relayer_hwm_kb = read_status_kb(pid, "VmHWM");
  r.pg_cpu = pg1 - pg0;
  r.drain_wal = wal_diff(conn, lsn3, lsn2);
  note(system + ": first event after " + fmt(r.first_seconds, 2) + " s, topic complete after " +
       fmt(r.topic_seconds, 2) + " s, done after " + fmt(r.drain_seconds, 2) + " s; stopping it");
  const int rc = proc->terminate(std::chrono::seconds(30));
  if (rc == -1) {
    note(system + " did not stop within 30 s of SIGTERM; killing it");
    proc->kill9();
  }
  proc.reset();
  // Let the topic settle (a late duplicate would show here).
  std::this_thread::sleep_for(std::chrono::seconds(1));
  r.delivered = topic_message_count(o.brokers, topic) - marker;
  guard.release();
  r.slot_after = sql1(conn,
                      "SELECT string_agg(slot_name, ',') FROM pg_replication_slots "
                      "WHERE slot_name LIKE 'cmp\\_%'");
  if (!r.slot_after.empty()) {
    note("WARNING: replication slots left behind: " + r.slot_after);
  }
  // The exited backends have flushed their statistics; this session's too now.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  {
    pqxx::nontransaction tx(conn);
    tx.exec("SELECT pg_stat_force_next_flush()");
    // The table, or a log-mode table's partitions and its progress and retry tables.
    auto s = tx.exec(
        "SELECT sum(n_dead_tup)::bigint, sum(n_tup_upd)::bigint, sum(n_tup_hot_upd)::bigint, "
        "sum(n_tup_del)::bigint, sum(autovacuum_count)::bigint FROM pg_stat_user_tables WHERE "
        "relid = '" +
        t.name().quoted() + "'::regclass OR relid IN (SELECT inhrelid FROM pg_inherits WHERE " +
        "inhparent = '" + t.name().quoted() + "'::regclass) OR relid IN (to_regclass('" +
        t.name().quoted_with_suffix("_progress") + "'), to_regclass('" +
        t.name().quoted_with_suffix("_retry") + "'))");
    r.dead_tuples = s[0][0].as<long long>();
    r.updates = s[0][1].as<long long>();
    r.hot_updates = s[0][2].as<long long>();
    r.deletes = s[0][3].as<long long>();
    r.autovacuums = s[0][4].as<long long>();
  }
  note(system + ": " + fmt(static_cast<double>(r.events) / r.drain_seconds) +
       " events/s; process CPU " + fmt(r.relayer_cpu, 2) + " s, VmHWM " +
       fmt(static_cast<double>(r.relayer_hwm_kb) / 1024, 1) + " MiB; PostgreSQL CPU " +
       fmt(r.pg_cpu, 2) + " s; WAL inserts " + fmt(static_cast<double>(r.insert_wal) / 1e6, 1) +
       " MB, drain " + fmt(static_cast<double>(r.drain_wal) / 1e6, 1) + " MB; dead tuples " +
       std::to_string(r.dead_tuples) + " (updates " + std::to_string(r.updates) + ", HOT " +
       std::to_string(r.hot_updates) + ", autovacuums " + std::to_string(r.autovacuums) +
       "); delivered " + std::to_string(r.delivered) + "; exit status " + std::to_string(rc));
  return r;
}

// a/b for the table; blank without both, "> 1000" where b is next to nothing.
std::string ratio_text(double a, double b) {
  if (std::isnan(a) || std::isnan(b) || b == 0) {
    return "";
  }
  return a / b > 1000 ? "> 1000" : fmt(a / b, 2);
}

// One line of a results table: a value per system, or a text where the value is
// not one number (then no ratio).
template <typename R>
struct Line {
  std::string what;
  std::function<double(const R&)> value;
  int decimals;
  std::function<std::string(const R&)> text = nullptr;
};

// One column per system in run order, then each relay's ratio to Debezium.
template <typename R>
void print_lines(const std::vector<R>& rs, const std::vector<Line<R>>& lines) {
  const R* dbz = nullptr;
  for (const auto& r : rs) {
    dbz = r.system == "debezium" ? &r : dbz;
  }
  std::string header = "| " + std::string(56, ' ');
  std::string rule = "|" + std::string(58, '-');
  for (const auto& r : rs) {
    char cell[32];
    std::snprintf(cell, sizeof cell, " | %14s", r.system.c_str());
    header += cell;
    rule += "|" + std::string(16, '-');
  }
  for (const auto& r : rs) {
    if (dbz != nullptr && &r != dbz) {
      char cell[48];
      std::snprintf(cell, sizeof cell, " | %18s", (r.system + "/Debezium").c_str());
      header += cell;
      rule += "|" + std::string(20, '-');
    }
  }
  std::printf("%s |\n%s|\n", header.c_str(), rule.c_str());
  for (const auto& l : lines) {
    std::printf("| %-56s", l.what.c_str());
    for (const auto& r : rs) {
      std::printf(" | %14s", (l.text ? l.text(r) : fmt(l.value(r), l.decimals)).c_str());
    }
    for (const auto& r : rs) {
      if (dbz != nullptr && &r != dbz) {
        std::printf(" | %18s", l.text ? "" : ratio_text(l.value(r), l.value(*dbz)).c_str());
      }
    }
    std::printf(" |\n");
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Commit-to-consume latency at a steady offered rate, one event per transaction.

struct Latency {
  std::string system;
  double offered = NAN;  // achieved commit rate
  long long events = 0, missing = 0, duplicates = 0;
  double p50 = NAN, p99 = NAN, max = NAN;
  double window = NAN;       // seconds of paced writing
  double pg_cpu = NAN;       // PostgreSQL CPU in the window, all processes
  double writers_cpu = NAN;  // of which the writers' own backends
  double relayer_cpu = NAN;
  double statements = NAN;      // the relayer's, in the window (pg_stat_statements)
  double relayer_pg_cpu = NAN;  // the relayer's own backends (Debezium: its walsender too)
  long long wal = 0;            // WAL in the window
  long relayer_hwm_kb = -1;
  // Where the time goes. The writers' own transactions, begin to commit returned (created_at
  // is their start, so the relay's lag below includes them). The relay's histograms over the
  // window, as the upper bound of the bucket holding the quantile (their buckets are coarse):
  // created_at to the delivery report (outbox_delivery_lag_seconds), and a batch's claim to
  // its last delivery report (outbox_publish_latency_seconds). Not measured for Debezium.
  double commit_p50 = NAN, commit_p99 = NAN;
  double ack_p50 = NAN, ack_p99 = NAN;
  double batch_p99 = NAN, batch_max = NAN;
  // The steps that hold up the next claim, each per occurrence: p99 and the largest (the upper
  // bound of the highest bucket reached): outbox_claim_seconds, outbox_write_back_seconds,
  // outbox_housekeeping_seconds.
  double claim_p99 = NAN, claim_max = NAN;
  double write_back_p99 = NAN, write_back_max = NAN;
  double housekeeping_p99 = NAN, housekeeping_max = NAN;
};

// A histogram's buckets in one scrape: (upper bound, cumulative count), in the exposition's
// order (the same in every scrape of one registry).
using Buckets = std::vector<std::pair<double, double>>;

Buckets histogram_buckets(const std::string& exposition, const std::string& name) {
  Buckets out;
  std::istringstream lines(exposition);
  const std::string prefix = name + "_bucket{";
  for (std::string line; std::getline(lines, line);) {
    const auto le = line.rfind("le=\"");  // the last label; "table=\"" ends with le="
    if (line.rfind(prefix, 0) != 0 || le == std::string::npos) {
      continue;
    }
    const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
    out.emplace_back(bound == "+Inf" ? INFINITY : std::stod(bound),
                     std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return out;
}

// In ms, the upper bound of the bucket holding quantile q of what `end` counted beyond
// `start`; NaN when nothing was counted.
double bucket_quantile_ms(const Buckets& start, const Buckets& end, double q) {
  const auto before = [&](std::size_t i) { return i < start.size() ? start[i].second : 0.0; };
  const double total = end.empty() ? 0 : end.back().second - before(end.size() - 1);
  for (std::size_t i = 0; total > 0 && i < end.size(); ++i) {
    if (end[i].second - before(i) >= q * total) {
      return end[i].first * 1000;
    }
  }
  return NAN;
}

// utime + stime of a set of processes.
double processes_cpu(const std::vector<int>& pids) {
  double sum = 0;
  for (int p : pids) {
    const double c = process_cpu(p);
    if (!std::isnan(c)) {
      sum += c;
    }
  }
  return sum;
}

Latency run_latency(const Options& o, const std::string& id, const std::string& system) {
  const bool dbz = system == "debezium";
  Latency r;
  r.system = system;
  const std::string name = "cmpl_" + id + "_" + short_name(system);
  const std::string topic_prefix = "outbox_" + name;
  const std::string topic = topic_prefix + "." + kBizType;
  const std::string dir = o.log_dir + "/" + name;
  ::mkdir(dir.c_str(), 0755);

  pqxx::connection conn(o.dsn);
  BenchTable t(o.dsn, name, table_mode(system));
  const int partitions = ensure_topic(o.brokers, topic);
  const std::string slot = name;
  const std::string publication = name + "_pub";
  if (dbz) {
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE PUBLICATION " + tx.quote_name(publication) + " FOR TABLE " + t.name().quoted());
    tx.exec_params("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot);
  }
  SlotGuard guard{conn, slot, publication, dbz};
  if (dbz) {
    write_connect_config(o, dir, t.name(), topic_prefix, slot, publication);
  }

  std::unique_ptr<RdKafka::KafkaConsumer> consumer =
      consumer_from_start(o.brokers, "cdc_compare_" + name, topic, partitions);

  const auto total = static_cast<long long>(o.rate * o.latency_seconds);
  std::vector<Clock::time_point> committed(static_cast<std::size_t>(total));
  std::vector<Clock::time_point> arrived(static_cast<std::size_t>(total));
  std::vector<int> seen(static_cast<std::size_t>(total), 0);
  std::vector<double> commit_ms(static_cast<std::size_t>(total), 0);
  std::atomic<long long> arrivals{0};
  std::atomic<int> warmups{0};
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
        ++warmups;
      } else if (*seq < total) {
        auto k = static_cast<std::size_t>(*seq);
        if (seen[k]++ == 0) {
          arrived[k] = at;
        }
        ++arrivals;
      }
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& th;
    ~Joiner() {
      stop = true;
      if (th.joinable()) {
        th.join();
      }
    }
  } joiner{stop_consumer, consumer_thread};

  const unsigned short port = dbz ? 0 : free_port();
  auto proc = dbz ? start_debezium(o, dir)
                  : start_relay(o, t.name(), topic_prefix, dir + "/relay.log", port);
  const int pid = proc->pid();
  // Warm-up: the relayer is up and the consumer reads once these arrive.
  constexpr int kWarmups = 20;
  enqueue_warmups(conn, t.name(), kWarmups, o.keys);
  for (auto until = Clock::now() + std::chrono::seconds(180);
       warmups < kWarmups && Clock::now() < until;) {
    if (!alive(pid)) {
      throw std::runtime_error(system + " exited early; log in " + dir);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (warmups < kWarmups) {
    throw std::runtime_error(system + " did not publish the warm-up events within 180 s; log in " +
                             dir);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));

  std::vector<std::unique_ptr<pqxx::connection>> wconns;
  std::vector<int> wpids;
  for (int w = 0; w < o.writers; ++w) {
    wconns.push_back(std::make_unique<pqxx::connection>(o.dsn));
    wpids.push_back(wconns.back()->backendpid());
  }
  note("latency, " + system + ": offering " + fmt(o.rate) + " events/s for " +
       fmt(o.latency_seconds) + " s (" + std::to_string(o.writers) +
       " writer connections, one event per transaction)");
  // Paced writers: `count` events, one per transaction, at o.rate from `t0`;
  // measured ones (seq >= 0) record their commit time.
  auto pace = [&](Clock::time_point t0, long long count, bool measured) {
    std::vector<std::thread> writers;
    for (int w = 0; w < o.writers; ++w) {
      writers.emplace_back([&, w, t0, count, measured] {
        pqxx::connection& c = *wconns[static_cast<std::size_t>(w)];
        for (long long k = w; k < count; k += o.writers) {
          std::this_thread::sleep_until(
              t0 + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(static_cast<double>(k) / o.rate)));
          const long long seq = measured ? k : -(kWarmups + 1 + k);
          const auto begun = Clock::now();
          pqxx::work tx(c);
          enqueue(tx, t.name(), kBizType, make_key(k, o.keys), make_payload(seq));
          tx.commit();
          if (measured) {
            committed[static_cast<std::size_t>(k)] = Clock::now();
            commit_ms[static_cast<std::size_t>(k)] = to_ms(Clock::now() - begun);
          }
        }
      });
    }
    for (auto& w : writers) {
      w.join();
    }
  };
  // Warm-up at the same rate (the JVM's JIT, the relay's connections), not measured.
  if (o.latency_warmup_seconds > 0) {
    pace(Clock::now(), static_cast<long long>(o.rate * o.latency_warmup_seconds), false);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const std::string relayer_statements =
      std::string("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE userid = '") +
      kRelayerRole + "'::regrole";
  const double statements0 = o.count_statements ? std::stod(sql1(conn, relayer_statements)) : NAN;
  const std::string lsn0 = current_lsn(conn);
  const double pg0 = postgres_cpu(o.postmaster_pid);
  const double w0 = processes_cpu(wpids);
  const double rel0 = process_cpu(pid);
  // The relayer's sessions, connected by now (as kRelayerRole): the relay's lock and claim
  // sessions, Debezium's walsender and its JDBC session.
  std::vector<int> relayer_pids;
  for (const auto& row : pqxx::nontransaction(conn).exec_params(
           "SELECT pid FROM pg_stat_activity WHERE usename = $1", kRelayerRole)) {
    relayer_pids.push_back(row[0].as<int>());
  }
  const double relayer_pg0 = processes_cpu(relayer_pids);
  const std::string metrics0 = dbz ? "" : http_get(port, "/metrics");
  const auto t0 = Clock::now() + std::chrono::milliseconds(100);
  pace(t0, total, true);
  const auto end = Clock::now();
  r.window = std::chrono::duration<double>(end - t0).count();
  r.pg_cpu = postgres_cpu(o.postmaster_pid) - pg0;
  r.writers_cpu = processes_cpu(wpids) - w0;
  r.relayer_cpu = process_cpu(pid) - rel0;
  r.relayer_pg_cpu = processes_cpu(relayer_pids) - relayer_pg0;
  r.wal = wal_diff(conn, current_lsn(conn), lsn0);
  if (o.count_statements) {
    r.statements = std::stod(sql1(conn, relayer_statements)) - statements0;
  }
  for (auto until = Clock::now() + std::chrono::seconds(30);
       arrivals < total && Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop_consumer = true;
  consumer_thread.join();
  consumer->close();
  r.relayer_hwm_kb = read_status_kb(pid, "VmHWM");
  if (!dbz) {
    const std::string metrics1 = http_get(port, "/metrics");
    // Two quantiles of each histogram over the window: p50 and p99 of the delivery lag, p99
    // and the largest (quantile 1) of a batch's publish and of the loop's steps: a rare long
    // stall holds up many events without moving a step's p99.
    for (auto [name, q1, v1, q2, v2] :
         {std::tuple{"outbox_delivery_lag_seconds", 0.5, &r.ack_p50, 0.99, &r.ack_p99},
          std::tuple{"outbox_publish_latency_seconds", 0.99, &r.batch_p99, 1.0, &r.batch_max},
          std::tuple{"outbox_claim_seconds", 0.99, &r.claim_p99, 1.0, &r.claim_max},
          std::tuple{"outbox_write_back_seconds", 0.99, &r.write_back_p99, 1.0, &r.write_back_max},
          std::tuple{"outbox_housekeeping_seconds", 0.99, &r.housekeeping_p99, 1.0,
                     &r.housekeeping_max}}) {
      const Buckets from = histogram_buckets(metrics0, name);
      const Buckets to = histogram_buckets(metrics1, name);
      *v1 = bucket_quantile_ms(from, to, q1);
      *v2 = bucket_quantile_ms(from, to, q2);
    }
  }
  std::sort(commit_ms.begin(), commit_ms.end());
  r.commit_p50 = percentile(commit_ms, 50);
  r.commit_p99 = percentile(commit_ms, 99);
  if (proc->terminate(std::chrono::seconds(30)) == -1) {
    proc->kill9();
  }
  proc.reset();
  guard.release();

  const auto first = *std::min_element(committed.begin(), committed.end());
  const auto last = *std::max_element(committed.begin(), committed.end());
  r.events = total;
  r.offered = static_cast<double>(total - 1) / std::chrono::duration<double>(last - first).count();
  std::vector<double> lat;
  for (std::size_t k = 0; k < committed.size(); ++k) {
    if (seen[k] == 0) {
      ++r.missing;
      continue;
    }
    r.duplicates += seen[k] - 1;
    lat.push_back(to_ms(arrived[k] - committed[k]));
  }
  std::sort(lat.begin(), lat.end());
  r.p50 = percentile(lat, 50);
  r.p99 = percentile(lat, 99);
  r.max = lat.empty() ? NAN : lat.back();
  note("latency, " + system + ": p50 " + fmt(r.p50, 1) + " ms, p99 " + fmt(r.p99, 1) + " ms, max " +
       fmt(r.max, 1) + " ms at " + fmt(r.offered) + " events/s; missing " +
       std::to_string(r.missing) + ", duplicates " + std::to_string(r.duplicates) +
       "; PostgreSQL CPU " + fmt(r.pg_cpu, 2) + " s in " + fmt(r.window, 1) +
       " s (writers' backends " + fmt(r.writers_cpu, 2) + " s); relayer CPU " +
       fmt(r.relayer_cpu, 2) + " s; WAL " + fmt(static_cast<double>(r.wal) / 1e6, 1) + " MB");
  return r;
}

void print_latency(const std::vector<Latency>& ls) {
  const std::vector<Line<Latency>> lines = {
      {"achieved commit rate (events/s, 1 event/tx)", [](const Latency& l) { return l.offered; },
       0},
      {"commit-to-consume p50 (ms)", [](const Latency& l) { return l.p50; }, 1},
      {"commit-to-consume p99 (ms)", [](const Latency& l) { return l.p99; }, 1},
      {"commit-to-consume max (ms)", [](const Latency& l) { return l.max; }, 1},
      {"writer's transaction, begin to commit returned, p50 / p99 (ms)", nullptr, 0,
       [](const Latency& l) { return fmt(l.commit_p50, 1) + " / " + fmt(l.commit_p99, 1); }},
      {"relay: created_at to delivery report, p50 / p99 (ms, <= bucket)", nullptr, 0,
       [](const Latency& l) { return fmt(l.ack_p50) + " / " + fmt(l.ack_p99); }},
      {"relay: batch claim to last report, p99 / max (ms, <= bucket)", nullptr, 0,
       [](const Latency& l) { return fmt(l.batch_p99) + " / " + fmt(l.batch_max); }},
      {"relay: claim query p99 / max (ms, <= bucket)", nullptr, 0,
       [](const Latency& l) { return fmt(l.claim_p99) + " / " + fmt(l.claim_max); }},
      {"relay: write-back p99 / max (ms, <= bucket)", nullptr, 0,
       [](const Latency& l) { return fmt(l.write_back_p99) + " / " + fmt(l.write_back_max); }},
      {"relay: housekeeping between batches p99 / max (ms, <= bucket)", nullptr, 0,
       [](const Latency& l) { return fmt(l.housekeeping_p99) + " / " + fmt(l.housekeeping_max); }},
      {"missing / duplicate events",
       [](const Latency& l) { return static_cast<double>(l.missing + l.duplicates); }, 0},
      {"PostgreSQL CPU, all processes (s per minute)",
       [](const Latency& l) { return l.pg_cpu * 60 / l.window; }, 1},
      {"PostgreSQL CPU without the writers' backends (s/min)",
       [](const Latency& l) { return (l.pg_cpu - l.writers_cpu) * 60 / l.window; }, 1},
      {"PostgreSQL CPU of the relayer's own backends (s/min)",
       [](const Latency& l) { return l.relayer_pg_cpu * 60 / l.window; }, 2},
      {"relayer process CPU (s per minute)",
       [](const Latency& l) { return l.relayer_cpu * 60 / l.window; }, 1},
      {"relayer's statements per event (pg_stat_statements)",
       [](const Latency& l) { return l.statements / static_cast<double>(l.events); }, 2},
      {"WAL per event, inserts included (bytes)",
       [](const Latency& l) { return static_cast<double>(l.wal) / static_cast<double>(l.events); },
       0},
      {"relayer peak RSS (MiB, VmHWM)",
       [](const Latency& l) { return static_cast<double>(l.relayer_hwm_kb) / 1024; }, 1},
  };
  print_lines(ls, lines);
}

void print_table(const std::vector<Result>& rs) {
  const std::vector<Line<Result>> lines = {
      {"drain rate (events/s, process start to all delivered)",
       [](const Result& r) { return static_cast<double>(r.events) / r.drain_seconds; }, 0},
      {"drain time (s)", [](const Result& r) { return r.drain_seconds; }, 2},
      {"time to the first event in the topic (s, start-up)",
       [](const Result& r) { return r.first_seconds; }, 2},
      {"drain rate after the first event (events/s)",
       [](const Result& r) {
         return static_cast<double>(r.events) / (r.drain_seconds - r.first_seconds);
       },
       0},
      {"relayer process CPU (s, utime+stime)", [](const Result& r) { return r.relayer_cpu; }, 2},
      {"relayer peak RSS (MiB, VmHWM)",
       [](const Result& r) { return static_cast<double>(r.relayer_hwm_kb) / 1024; }, 1},
      {"PostgreSQL CPU during the drain (s)", [](const Result& r) { return r.pg_cpu; }, 2},
      {"PostgreSQL CPU per event (us)",
       [](const Result& r) { return r.pg_cpu * 1e6 / static_cast<double>(r.events); }, 1},
      {"WAL written by the inserts (MB)",
       [](const Result& r) { return static_cast<double>(r.insert_wal) / 1e6; }, 1},
      {"WAL during the drain (MB)",
       [](const Result& r) { return static_cast<double>(r.drain_wal) / 1e6; }, 1},
      {"WAL during the drain per event (bytes)",
       [](const Result& r) {
         return static_cast<double>(r.drain_wal) / static_cast<double>(r.events);
       },
       0},
      {"dead tuples in the outbox table after the run",
       [](const Result& r) { return static_cast<double>(r.dead_tuples); }, 0},
      {"row updates / autovacuums of the table",
       [](const Result& r) { return static_cast<double>(r.updates); }, 0,
       [](const Result& r) {
         return fmt(static_cast<double>(r.updates)) + " / " + std::to_string(r.autovacuums);
       }},
      {"events delivered (topic, marker excluded)",
       [](const Result& r) { return static_cast<double>(r.delivered); }, 0},
  };
  print_lines(rs, lines);
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

int run(Options o) {
  std::vector<std::string> systems;
  std::stringstream ss(o.systems);
  for (std::string s; std::getline(ss, s, ',');) {
    if (s != "relay" && s != "relay-log" && s != "debezium") {
      throw std::invalid_argument("unknown system '" + s + "' (relay, relay-log, debezium)");
    }
    systems.push_back(s);
  }
  if (std::find(systems.begin(), systems.end(), "debezium") != systems.end() &&
      o.debezium_lib.empty()) {
    throw std::invalid_argument("--debezium-lib is required (bench/debezium/fetch.sh prints it)");
  }
  if (::kill(o.postmaster_pid, 0) != 0) {
    throw std::invalid_argument("--postmaster-pid " + std::to_string(o.postmaster_pid) +
                                " is not a running process");
  }
  {
    pqxx::connection conn(o.dsn);
    note("PostgreSQL " + sql1(conn, "SHOW server_version") + ", wal_level " +
         sql1(conn, "SHOW wal_level") + ", shared_buffers " + sql1(conn, "SHOW shared_buffers") +
         "; postmaster pid " + std::to_string(o.postmaster_pid));
    if (sql1(conn, "SHOW wal_level") != "logical") {
      throw std::runtime_error("Debezium needs wal_level = logical");
    }
    // The relayers' own role (superuser, as the test bed's), with a fresh password.
    const std::string password = sql1(conn, "SELECT md5(random()::text)");
    const bool exists = sql1(conn, std::string("SELECT count(*) FROM pg_roles WHERE rolname = '") +
                                       kRelayerRole + "'") != "0";
    {
      pqxx::nontransaction tx(conn);
      const std::string role = tx.quote_name(kRelayerRole);
      tx.exec((exists ? "ALTER ROLE " : "CREATE ROLE ") + role + " LOGIN SUPERUSER PASSWORD " +
              tx.quote(password));
    }
    auto fields = parse_dsn(o.dsn);
    fields["user"] = kRelayerRole;
    fields["password"] = password;
    o.relayer_dsn = conninfo(fields);
    try {
      pqxx::nontransaction(conn).exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      pqxx::nontransaction(conn).exec("SELECT count(*) FROM pg_stat_statements");
      o.count_statements = true;
    } catch (const std::exception&) {
      note(
          "pg_stat_statements is not preloaded on this server: no statements per event "
          "(bench/lib.sh starts its test bed with it)");
    }
    // Slots of an earlier run that was killed before it could drop them hold WAL
    // back for ever: drop them (inactive ones only; one run per test bed at a time).
    pqxx::nontransaction tx(conn);
    for (const auto& row :
         tx.exec("SELECT slot_name, pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                 "WHERE NOT active AND (slot_name LIKE 'cmp\\_%' OR slot_name LIKE 'cmpl\\_%')")) {
      note("dropped the replication slot " + row[0].as<std::string>() + " of an earlier run");
    }
  }
  for (int round = 0; round < o.rounds; ++round) {
    const std::string id = run_id() + "_" + std::to_string(round);
    std::vector<Result> results;
    for (const auto& s : systems) {
      note("== round " + std::to_string(round + 1) + ": " + s + ", " +
           fmt(static_cast<double>(o.events)) + " events");
      results.push_back(run_system(o, id, s));
    }
    std::printf("\nround %d of %d, %s events, load average %s\n", round + 1, o.rounds,
                fmt(static_cast<double>(o.events)).c_str(), loadavg().c_str());
    print_table(results);
    if (o.latency_seconds > 0) {
      std::vector<Latency> ls;
      for (const auto& s : systems) {
        note("== round " + std::to_string(round + 1) + ": " + s + ", latency at " + fmt(o.rate) +
             " events/s");
        ls.push_back(run_latency(o, id, s));
      }
      std::printf("\nround %d of %d, commit-to-consume at %s events/s for %s s, load average %s\n",
                  round + 1, o.rounds, fmt(o.rate).c_str(), fmt(o.latency_seconds).c_str(),
                  loadavg().c_str());
      print_latency(ls);
    }
  }
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
  CLI::App app{"cdc_compare: the relay binary vs Debezium, side by side (see bench/README.md)"};
  app.add_option("--dsn", o.dsn, "PostgreSQL DSN (default $OUTBOX_TEST_PG_DSN)");
  app.add_option("--brokers", o.brokers, "Kafka bootstrap (default $OUTBOX_TEST_KAFKA_BOOTSTRAP)");
  app.add_option("--binary", o.binary, "the outbox-operator binary")->capture_default_str();
  app.add_option("--java", o.java, "the java binary for Kafka Connect")->capture_default_str();
  app.add_option("--debezium-lib", o.debezium_lib,
                 "Kafka Connect + Debezium classpath dir (bench/debezium/fetch.sh)");
  app.add_option("--log4j-config", o.log4j_config, "log4j2 configuration for Kafka Connect")
      ->required();
  app.add_option("--postmaster-pid", o.postmaster_pid, "pid of the PostgreSQL server (postmaster)")
      ->required();
  app.add_option("--systems", o.systems, "which systems, in this order")->capture_default_str();
  app.add_option("--events", o.events, "events pre-inserted and drained")->capture_default_str();
  app.add_option("--keys", o.keys, "distinct biz_id keys")->capture_default_str();
  app.add_option("--rounds", o.rounds, "rounds (each runs every system)")->capture_default_str();
  app.add_option("--latency-seconds", o.latency_seconds,
                 "then commit-to-consume latency for this long per system (0: skip)")
      ->capture_default_str();
  app.add_option("--latency-warmup", o.latency_warmup_seconds,
                 "latency: seconds of paced writing before the measured window")
      ->capture_default_str();
  app.add_option("--rate", o.rate, "latency: offered events/s, one per transaction")
      ->capture_default_str();
  app.add_option("--writers", o.writers, "latency: writer connections")->capture_default_str();
  app.add_option("--connector-property", o.connector_properties,
                 "key=value added to Debezium's connector settings (repeatable), e.g. "
                 "poll.interval.ms=10");
  app.add_option("--relay-flag", o.relay_flags,
                 "a flag added to both relays' command lines (repeatable), e.g. "
                 "--relay-flag=--coalesce-window=200ms");
  app.add_option("--timeout", o.timeout_seconds, "seconds a drain may take")->capture_default_str();
  app.add_option("--log-dir", o.log_dir, "where the relayers' logs and configs go")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.dsn.empty() || o.brokers.empty()) {
    std::cerr << "cdc_compare: set --dsn and --brokers (or source the test bed's env file)\n";
    return 2;
  }
  try {
    return outbox::bench::run(o);
  } catch (const std::exception& e) {
    std::cerr << "cdc_compare: " << e.what() << "\n";
    return 1;
  }
}
