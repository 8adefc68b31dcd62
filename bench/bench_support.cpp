#include "bench_support.hpp"

#include <unistd.h>

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "outbox/schema.hpp"
#include "outbox/store.hpp"

namespace outbox::bench {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double to_ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void note(const std::string& line) {
  std::cerr << "[relay_bench] " << line << std::endl;
}

std::string make_payload(std::int64_t seq) {
  // Same fields as payload_sql_expr(); keys in the order jsonb would store them.
  const std::string s = std::to_string(seq);
  return "{\"seq\": " + s + ", \"note\": \"deliver to the back door, ring twice\", " +
         "\"items\": [{\"qty\": " + std::to_string(1 + seq % 5) + ", \"sku\": \"SKU-" +
         std::to_string(seq % 997) + "\", \"price_cents\": 1999}, {\"qty\": 1, \"sku\": \"SKU-" +
         std::to_string(seq % 991) + "\", \"price_cents\": 4599}], \"status\": \"CREATED\", " +
         "\"currency\": \"EUR\", \"order_id\": \"ord-" + s +
         "\", \"shipping\": {\"zip\": \"NW1 6XE\", \"city\": \"London\", \"street\": \"221B Baker "
         "Street\", \"country\": \"GB\"}, \"customer_id\": \"cust-" +
         std::to_string(seq % 5000) +
         "\", \"amount_cents\": " + std::to_string((seq * 7919) % 100000) + "}";
}

std::string make_key(std::int64_t seq, int keys) {
  return "order-" + std::to_string(seq % keys);
}

std::string payload_sql_expr(const std::string& g) {
  const std::string x = "(" + g + ")::bigint";
  return "jsonb_build_object('seq', " + x + ", 'order_id', 'ord-' || " + x +
         ", 'customer_id', 'cust-' || (" + x +
         " % 5000), 'status', 'CREATED', 'currency', 'EUR', 'amount_cents', (" + x +
         " * 7919) % 100000, 'items', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (" + x +
         " % 997), 'qty', 1 + " + x +
         " % 5, 'price_cents', 1999), jsonb_build_object('sku', 'SKU-' || (" + x +
         " % 991), 'qty', 1, 'price_cents', 4599)), 'shipping', jsonb_build_object('street', "
         "'221B Baker Street', 'city', 'London', 'zip', 'NW1 6XE', 'country', 'GB'), 'note', "
         "'deliver to the back door, ring twice')";
}

namespace {
bool g_pending_id_index = false;
}

void set_experiment_pending_id_index(bool on) {
  g_pending_id_index = on;
}

bool experiment_pending_id_index() {
  return g_pending_id_index;
}

void maybe_add_pending_id_index(pqxx::connection& conn, const TableName& table) {
  if (g_pending_id_index) {
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE INDEX IF NOT EXISTS \"" + table.table() + "_bench_pending_id\" ON " +
            table.quoted() + " (id) WHERE status = 0");
  }
}

void drop_outbox_table(pqxx::connection& conn, const TableName& table) {
  pqxx::nontransaction tx(conn);
  tx.exec("DROP TABLE IF EXISTS " + table.quoted() + " CASCADE");
  tx.exec("DROP TABLE IF EXISTS " + table.quoted_with_suffix("_waiting"));
  // A log-mode table's companions (nothing happens for a status-mode one).
  tx.exec("DROP TABLE IF EXISTS " + table.quoted_with_suffix("_progress") + ", " +
          table.quoted_with_suffix("_retry") + " CASCADE");
  tx.exec("DROP FUNCTION IF EXISTS " + table.quoted_with_suffix("_notify") + "() CASCADE");
  tx.exec("DROP FUNCTION IF EXISTS " + table.quoted_with_suffix("_enqueue") +
          "(text, text, jsonb) CASCADE");
  const std::string meta = "\"" + table.schema() + "\".outbox_meta";
  if (!tx.exec("SELECT to_regclass('" + meta + "')")[0][0].is_null()) {
    tx.exec_params("DELETE FROM " + meta + " WHERE table_name = $1", table.table());
  }
}

BenchTable::BenchTable(const std::string& dsn, const std::string& name, TableMode mode)
    : dsn_(dsn), table_(TableName::parse(name)), mode_(mode) {
  pqxx::connection conn(dsn_);
  drop_outbox_table(conn, table_);  // left over from an interrupted run
  MigrateOptions options;
  options.mode = mode;
  migrate(conn, table_, options);
  maybe_add_pending_id_index(conn, table_);
}

BenchTable::~BenchTable() {
  if (!keep_) {
    try {
      drop();
    } catch (const std::exception& e) {
      note("dropping " + table_.plain() + ": " + e.what());
    }
  }
}

void BenchTable::drop() {
  if (dropped_) {
    return;
  }
  pqxx::connection conn(dsn_);
  drop_outbox_table(conn, table_);
  dropped_ = true;
}

void BenchTable::fill_pending(std::int64_t n, int keys, std::int64_t first_seq) {
  pqxx::connection conn(dsn_);
  pqxx::nontransaction tx(conn);
  tx.exec("INSERT INTO " + table_.quoted() + " (biz_type, biz_id, payload) SELECT '" +
          std::string(kBizType) + "', 'order-' || (g % " + std::to_string(keys) + "), " +
          payload_sql_expr("g") + " FROM generate_series(" + std::to_string(first_seq) + ", " +
          std::to_string(first_seq + n - 1) + ") g ORDER BY g");
}

void BenchTable::vacuum_analyze() {
  pqxx::connection conn(dsn_);
  pqxx::nontransaction tx(conn);
  tx.exec("VACUUM ANALYZE " + table_.quoted());
}

long long BenchTable::count(const std::string& where) {
  pqxx::connection conn(dsn_);
  pqxx::nontransaction tx(conn);
  // A log-mode table's statuses are in its "_status" view.
  const std::string events =
      mode_ == TableMode::kLog ? table_.quoted_with_suffix("_status") : table_.quoted();
  return tx.exec("SELECT count(*) FROM " + events + " WHERE " + where)[0][0].as<long long>();
}

namespace {

std::unique_ptr<RdKafka::Conf> base_conf(const std::string& brokers) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  if (conf->set("bootstrap.servers", brokers, err) != RdKafka::Conf::CONF_OK) {
    throw std::runtime_error("bootstrap.servers: " + err);
  }
  return conf;
}

int partition_count(RdKafka::Handle& handle, const std::string& topic) {
  std::string err;
  std::unique_ptr<RdKafka::Topic> t(RdKafka::Topic::create(&handle, topic, nullptr, err));
  RdKafka::Metadata* raw = nullptr;
  if (handle.metadata(false, t.get(), &raw, 10000) != RdKafka::ERR_NO_ERROR) {
    throw std::runtime_error("metadata of topic " + topic + " unavailable");
  }
  std::unique_ptr<RdKafka::Metadata> md(raw);
  for (const auto* tm : *md->topics()) {
    if (tm->topic() == topic && tm->err() == RdKafka::ERR_NO_ERROR) {
      return static_cast<int>(tm->partitions()->size());
    }
  }
  throw std::runtime_error("topic " + topic + " not in metadata");
}

}  // namespace

std::unique_ptr<RdKafka::KafkaConsumer> consumer_from_start(const std::string& brokers,
                                                            const std::string& group,
                                                            const std::string& topic,
                                                            int partitions) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  for (const auto& [k, v] :
       std::initializer_list<std::pair<std::string, std::string>>{{"bootstrap.servers", brokers},
                                                                  {"group.id", group},
                                                                  {"enable.auto.commit", "false"},
                                                                  {"fetch.wait.max.ms", "10"}}) {
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) {
      throw std::runtime_error("consumer " + k + ": " + err);
    }
  }
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!consumer) {
    throw std::runtime_error("consumer: " + err);
  }
  std::vector<RdKafka::TopicPartition*> parts;
  for (int p = 0; p < partitions; ++p) {
    parts.push_back(RdKafka::TopicPartition::create(topic, p, RdKafka::Topic::OFFSET_BEGINNING));
  }
  consumer->assign(parts);
  RdKafka::TopicPartition::destroy(parts);
  return consumer;
}

std::optional<long long> message_seq(const RdKafka::Message& m) {
  if (m.err() != RdKafka::ERR_NO_ERROR) {
    return std::nullopt;
  }
  const auto* text = static_cast<const char*>(m.payload());
  const auto j = nlohmann::json::parse(text, text + m.len(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("seq")) {
    return std::nullopt;  // the topic marker
  }
  return j["seq"].get<long long>();
}

void enqueue_warmups(pqxx::connection& conn, const TableName& table, int n, int keys) {
  pqxx::work tx(conn);
  for (int i = 1; i <= n; ++i) {
    enqueue(tx, table, kBizType, make_key(i, keys), make_payload(-i));
  }
  tx.commit();
}

int ensure_topic(const std::string& brokers, const std::string& topic) {
  auto conf = base_conf(brokers);
  std::string err;
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  if (!producer) {
    throw std::runtime_error("producer: " + err);
  }
  const std::string marker = "{\"marker\": true}";
  for (int attempt = 0;; ++attempt) {
    auto code =
        producer->produce(topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
                          const_cast<char*>(marker.data()), marker.size(), nullptr, 0, 0, nullptr);
    if (code != RdKafka::ERR_NO_ERROR) {
      throw std::runtime_error("producing the topic marker: " + RdKafka::err2str(code));
    }
    if (producer->flush(15000) == RdKafka::ERR_NO_ERROR) {
      break;
    }
    if (attempt >= 3) {
      throw std::runtime_error("topic " + topic + " could not be created");
    }
  }
  return partition_count(*producer, topic);
}

long long topic_message_count(const std::string& brokers, const std::string& topic) {
  auto conf = base_conf(brokers);
  std::string err;
  std::unique_ptr<RdKafka::Producer> handle(RdKafka::Producer::create(conf.get(), err));
  if (!handle) {
    throw std::runtime_error("producer: " + err);
  }
  int partitions = partition_count(*handle, topic);
  long long total = 0;
  for (int p = 0; p < partitions; ++p) {
    int64_t low = 0;
    int64_t high = 0;
    if (handle->query_watermark_offsets(topic, p, &low, &high, 10000) != RdKafka::ERR_NO_ERROR) {
      throw std::runtime_error("watermarks of " + topic + " unavailable");
    }
    total += high - low;
  }
  return total;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile(values, 50);
}

long read_status_kb(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stol(line.substr(field.size() + 1));
    }
  }
  return -1;
}

std::string run_id() {
  auto t = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  return std::to_string(t % 1000000) + "_" + std::to_string(::getpid());
}

}  // namespace outbox::bench
