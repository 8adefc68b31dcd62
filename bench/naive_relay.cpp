#include "naive_relay.hpp"

#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <pqxx/pqxx>
#include <stdexcept>
#include <thread>

namespace outbox::bench {
namespace {

// Remembers the outcome of the one message in flight.
struct LastReport : public RdKafka::DeliveryReportCb {
  RdKafka::ErrorCode err = RdKafka::ERR_NO_ERROR;
  void dr_cb(RdKafka::Message& m) override { err = m.err(); }
};

}  // namespace

NaiveRelay::NaiveRelay(NaiveRelayConfig config, TableName table)
    : config_(std::move(config)), table_(std::move(table)) {}

void NaiveRelay::run(const std::atomic<bool>& stop, std::atomic<std::int64_t>& marked) {
  LastReport report;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  // Same durability as the real relay (idempotent, acks=all). linger.ms=0 is the
  // baseline's best case: nothing to batch when every send is waited for.
  for (const auto& [k, v] : std::initializer_list<std::pair<std::string, std::string>>{
           {"bootstrap.servers", config_.brokers},
           {"enable.idempotence", "true"},
           {"acks", "all"},
           {"partitioner", "murmur2_random"},
           {"linger.ms", "0"}}) {
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) {
      throw std::runtime_error("naive relay: " + k + ": " + err);
    }
  }
  if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&report), err) !=
      RdKafka::Conf::CONF_OK) {
    throw std::runtime_error("naive relay: dr_cb: " + err);
  }
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  if (!producer) {
    throw std::runtime_error("naive relay: producer: " + err);
  }

  pqxx::connection conn(config_.dsn);
  const std::string q = table_.quoted();
  const std::string select_sql =
      "SELECT id, event_id::text, biz_type, biz_id, payload::text, "
      "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM " +
      q + " WHERE status = 0 AND next_retry_time <= now() ORDER BY id LIMIT " +
      std::to_string(config_.select_limit);
  const std::string sent_sql =
      "UPDATE " + q + " SET status = 1, sent_at = now(), updated_at = now() WHERE id = $1";
  const std::string failed_sql = "UPDATE " + q +
                                 " SET retry_count = retry_count + 1, next_retry_time = now() + "
                                 "interval '1 minute', last_error = $2, updated_at = now() "
                                 "WHERE id = $1";

  while (!stop) {
    pqxx::result rows;
    {
      pqxx::nontransaction tx(conn);
      rows = tx.exec(select_sql);
    }
    if (rows.empty()) {
      for (auto until = std::chrono::steady_clock::now() + config_.poll_interval;
           !stop && std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      continue;
    }
    for (const auto& r : rows) {
      if (stop) {
        break;
      }
      const auto id = r[0].as<std::int64_t>();
      const std::string biz_id = r[3].as<std::string>();
      const std::string payload = r[4].as<std::string>();
      RdKafka::Headers* headers = RdKafka::Headers::create();
      headers->add("event_id", r[1].as<std::string>());
      headers->add("biz_type", r[2].as<std::string>());
      headers->add("created_at", r[5].as<std::string>());
      report.err = RdKafka::ERR__TIMED_OUT;
      auto code =
          producer->produce(config_.topic, RdKafka::Topic::PARTITION_UA,
                            RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(payload.data()),
                            payload.size(), biz_id.data(), biz_id.size(), 0, headers, nullptr);
      if (code != RdKafka::ERR_NO_ERROR) {
        delete headers;
        report.err = code;
      } else {
        producer->flush(10000);  // the synchronous send: wait for this one report
      }
      pqxx::nontransaction tx(conn);
      if (report.err == RdKafka::ERR_NO_ERROR) {
        tx.exec_params(sent_sql, id);
        ++marked;
      } else {
        tx.exec_params(failed_sql, id, RdKafka::err2str(report.err));
      }
    }
  }
  producer->flush(10000);
}

}  // namespace outbox::bench
