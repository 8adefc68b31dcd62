#include "relay_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "common/duration.hpp"
#include "outbox/schema.hpp"
#include "outbox/store.hpp"
#include "support/testbed.hpp"

namespace outbox::testing {

using Clock = std::chrono::steady_clock;

std::vector<Consumed> consume_all(const std::vector<std::string>& topics, std::size_t expected,
                                  std::chrono::milliseconds timeout,
                                  std::chrono::milliseconds settle, const std::string& bootstrap) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", bootstrap.empty() ? testbed::kafka_bootstrap() : bootstrap, err);
  conf->set("group.id", testbed::unique_name("test-consumer"), err);
  conf->set("auto.offset.reset", "earliest", err);
  conf->set("enable.auto.commit", "false", err);
  conf->set("topic.metadata.refresh.interval.ms", "500", err);
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!consumer) {
    throw std::runtime_error("consumer: " + err);
  }
  consumer->subscribe(topics);
  std::vector<Consumed> out;
  auto deadline = Clock::now() + timeout;
  std::optional<Clock::time_point> settle_until;
  while (Clock::now() < (settle_until ? *settle_until : deadline)) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(200));
    if (m->err() == RdKafka::ERR_NO_ERROR) {
      Consumed c;
      c.topic = m->topic_name();
      c.key = m->key() ? *m->key() : "";
      c.payload.assign(static_cast<const char*>(m->payload()), m->len());
      c.partition = m->partition();
      c.offset = m->offset();
      c.timestamp_ms = m->timestamp().timestamp;
      if (RdKafka::Headers* h = m->headers()) {
        for (const auto& header : h->get_all()) {
          c.headers[header.key()] =
              std::string(static_cast<const char*>(header.value()), header.value_size());
        }
      }
      out.push_back(std::move(c));
    }
    if (!settle_until && out.size() >= expected) {
      settle_until = Clock::now() + settle;
    }
  }
  consumer->close();
  return out;
}

double metric(ThreadRelay& relay, const std::string& name, const std::string& table) {
  const std::string prefix = name + "{table=\"" + table + "\"} ";
  std::istringstream lines(relay.registry().render());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) {
      return std::stod(line.substr(prefix.size()));
    }
  }
  return 0;
}

TableMode table_mode() {
  const char* mode = std::getenv("OUTBOX_TEST_TABLE_MODE");
  return mode == nullptr || *mode == '\0' ? TableMode::kStatus : parse_mode(mode);
}

void migrate_for_test(pqxx::connection& conn, const TableName& table) {
  MigrateOptions options;
  options.shard_count = 16;
  options.mode = table_mode();
  migrate(conn, table, options);
}

OutboxTestTable::OutboxTestTable()
    : dsn(testbed::postgres_dsn()),
      table(TableName::parse(testbed::unique_name("outbox"))),
      topic(testbed::unique_name("topic")) {
  pqxx::connection conn(dsn);
  migrate_for_test(conn, table);
}

std::string OutboxTestTable::events() const {
  return table_mode() == TableMode::kLog ? table.quoted_with_suffix("_status") : table.quoted();
}

void OutboxTestTable::insert(int n, int keys, int start_seq) {
  pqxx::connection conn(dsn);
  pqxx::work tx(conn);
  for (int i = start_seq; i < start_seq + n; ++i) {
    // Appended rather than "k" + to_string(): GCC 12 at -O3 (Release) warns falsely
    // (-Wrestrict) about the operator+ form, and -Werror makes that an error.
    std::string key = "k";
    key += std::to_string(i % keys);
    nlohmann::json payload = {{"seq", i}, {"key", key}};
    enqueue(tx, table, "order", key, payload.dump());
  }
  tx.commit();
}

long long OutboxTestTable::count(const std::string& where) {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  return tx.exec("SELECT count(*) FROM " + events() + " WHERE " + where)[0][0].as<long long>();
}

long long OutboxTestTable::waiting_entries() {
  pqxx::connection conn(dsn);
  pqxx::nontransaction tx(conn);
  return tx.exec("SELECT count(*) FROM " + table.quoted_with_suffix("_waiting"))[0][0]
      .as<long long>();
}

relay::RelayConfig OutboxTestTable::relay_config(const std::string& bootstrap) const {
  relay::RelayConfig c;
  c.dsn = dsn;
  c.table = table.plain();
  c.kafka.bootstrap_servers = bootstrap.empty() ? testbed::kafka_bootstrap() : bootstrap;
  c.kafka.message_timeout = std::chrono::seconds(5);
  c.publish.router = relay::TopicRouter(topic, {});
  c.batch_size = 100;
  c.poll_interval = std::chrono::milliseconds(500);
  c.publish.backoff.initial = std::chrono::milliseconds(200);
  c.publish.backoff.max = std::chrono::milliseconds(1000);
  c.rebalance_interval = std::chrono::milliseconds(200);
  c.backlog_interval = std::chrono::milliseconds(200);
  return c;
}

ThreadRelay::ThreadRelay(relay::RelayConfig config)
    : relay_(std::make_unique<relay::Relay>(std::move(config), registry_, health_)),
      thread_([this] { relay_->run(stop_.get_token()); }) {}

ThreadRelay::~ThreadRelay() {
  stop();
}

void ThreadRelay::stop() {
  stop_.request_stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

ProcessRelay::ProcessRelay(const relay::RelayConfig& c, const std::string& log_path) {
  std::vector<std::string> args = {
      OUTBOX_BINARY,
      "relay",
      "--table=" + c.table,
      "--brokers=" + c.kafka.bootstrap_servers,
      "--topic=" + c.publish.router.default_template(),
      "--batch-size=" + std::to_string(c.batch_size),
      "--poll-interval=" + format_duration(c.poll_interval),
      "--coalesce-window=" + coalesce_window_text(c.coalesce_window),
      "--initial-backoff=" + format_duration(c.publish.backoff.initial),
      "--max-backoff=" + format_duration(c.publish.backoff.max),
      "--message-timeout=" + format_duration(c.kafka.message_timeout),
      "--listen=127.0.0.1:0"};
  // The DSN goes in the environment, as from a Secret, not on the command line.
  process_ = std::make_unique<testbed::ChildProcess>(
      args, std::map<std::string, std::string>{{"OUTBOX_DSN", c.dsn}}, log_path);
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

std::size_t distinct_seqs(const std::vector<Consumed>& messages) {
  std::set<int> seqs;
  for (const auto& m : messages) {
    seqs.insert(nlohmann::json::parse(m.payload).at("seq").get<int>());
  }
  return seqs.size();
}

std::string missing_seqs(const std::vector<Consumed>& messages, int count, int limit) {
  std::set<int> seen;
  for (const auto& m : messages) {
    seen.insert(nlohmann::json::parse(m.payload).at("seq").get<int>());
  }
  std::string out;
  int listed = 0;
  for (int seq = 0; seq < count && listed < limit; ++seq) {
    if (seen.count(seq) == 0) {
      out += (listed++ == 0 ? "" : ", ") + std::to_string(seq);
    }
  }
  return out;
}

std::string partition_report(const std::string& topic, const std::vector<Consumed>& messages) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", testbed::kafka_bootstrap(), err);
  std::unique_ptr<RdKafka::Producer> client(RdKafka::Producer::create(conf.get(), err));
  if (!client) {
    return "no Kafka client: " + err;
  }
  std::unique_ptr<RdKafka::Topic> handle(RdKafka::Topic::create(client.get(), topic, nullptr, err));
  RdKafka::Metadata* raw = nullptr;
  if (!handle || client->metadata(false, handle.get(), &raw, 5000) != RdKafka::ERR_NO_ERROR) {
    return "no metadata for " + topic;
  }
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  std::map<int, std::vector<std::int64_t>> read;
  for (const auto& m : messages) {
    if (m.topic == topic) {
      read[m.partition].push_back(m.offset);
    }
  }
  std::string out;
  for (const auto* t : *metadata->topics()) {
    for (const auto* p : *t->partitions()) {
      std::int64_t low = -1;
      std::int64_t high = -1;
      client->query_watermark_offsets(topic, p->id(), &low, &high, 5000);
      const auto& offsets = read[p->id()];
      const auto [first, last] = std::minmax_element(offsets.begin(), offsets.end());
      out +=
          (out.empty() ? "p" : "; p") + std::to_string(p->id()) + " holds [" + std::to_string(low) +
          "," + std::to_string(high) + ") read " + std::to_string(offsets.size()) +
          (offsets.empty() ? ""
                           : " in [" + std::to_string(*first) + "," + std::to_string(*last) + "]");
    }
  }
  return out;
}

std::string per_key_order_problem(const std::vector<Consumed>& messages) {
  // Per key: all seqs, sorted, give each event its rank. A message whose rank is
  // more than one past the highest rank seen so far overtook an earlier event of
  // its key that had not been delivered yet. Replays (going back) are allowed.
  std::map<std::string, std::vector<int>> seqs;
  for (const auto& m : messages) {
    seqs[m.key].push_back(nlohmann::json::parse(m.payload).at("seq").get<int>());
  }
  for (auto& [key, v] : seqs) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  std::map<std::string, long> highest;
  for (const auto& m : messages) {
    int seq = nlohmann::json::parse(m.payload).at("seq").get<int>();
    const auto& v = seqs[m.key];
    long rank = std::lower_bound(v.begin(), v.end(), seq) - v.begin();
    long& h = highest.try_emplace(m.key, -1).first->second;
    if (rank > h + 1) {
      return "key " + m.key + ": seq " + std::to_string(seq) + " arrived before seq " +
             std::to_string(v[static_cast<std::size_t>(h + 1)]);
    }
    h = std::max(h, rank);
  }
  return {};
}

}  // namespace outbox::testing
