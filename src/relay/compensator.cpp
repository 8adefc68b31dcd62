#include "relay/compensator.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/log_store.hpp"
#include "outbox/schema.hpp"
#include "outbox/shards.hpp"

namespace outbox::relay {

CompensationReport compensate(const CompensationConfig& config) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + config.time_budget;
  pqxx::connection conn(config.dsn);
  require_own_session(conn, config.dsn);
  const TableInfo info = inspect_table(conn, TableName::parse(config.table), {config.columns});
  const TableName table = info.relay_table(TableName::parse(config.table));
  kafka::BatchProducer producer(config.kafka);
  std::unique_ptr<kafka::BatchProducer> dead_letters =
      dead_letter_producer(config.kafka, config.publish);
  BatchPublisher publisher(producer, config.publish, dead_letters.get());
  LogCursor cursor;
  std::unique_ptr<EventStore> store =
      open_store(conn, table, info, cursor, config.publish.per_key_order);
  ShardOwnership shards(conn, table, info.shard_count);

  CompensationReport report;
  report.shards_total = info.shard_count;
  shards.acquire_unowned();
  report.shards_taken = static_cast<int>(shards.owned().size());
  while (!shards.owned().empty() && Clock::now() < deadline) {
    auto batch = store->claims().claim_batch(shards.owned(), config.batch_size, {});
    if (batch.empty()) {
      break;
    }
    BatchOutcome o = publisher.publish(*store, batch);
    report.resent += o.delivered;
    report.failed += o.failed;
    report.retried += o.retried;
    report.deferred += o.deferred;
    if (o.kafka_unreachable) {
      report.kafka_unreachable = true;
      break;
    }
  }
  shards.release_all();
  report.backlog = store->backlog(config.stale_after);
  return report;
}

std::string CompensationReport::summary_line() const {
  return "compensation: took " + std::to_string(shards_taken) + " of " +
         std::to_string(shards_total) + " shards (the rest are held by live relays), resent " +
         std::to_string(resent) + ", failed " + std::to_string(failed) + ", retry scheduled " +
         std::to_string(retried) + ", deferred " + std::to_string(deferred) +
         (kafka_unreachable ? " (kafka unreachable)" : "") + "; pending " +
         std::to_string(backlog.pending) + ", stuck " + std::to_string(backlog.stuck) +
         ", FAILED " + std::to_string(backlog.failed);
}

std::string CompensationReport::json() const {
  return nlohmann::json{{"shardsTotal", shards_total},
                        {"shardsTaken", shards_taken},
                        {"resent", resent},
                        {"failed", failed},
                        {"retried", retried},
                        {"deferred", deferred},
                        {"kafkaUnreachable", kafka_unreachable},
                        {"backlog",
                         {{"pending", backlog.pending},
                          {"stuck", backlog.stuck},
                          {"failed", backlog.failed},
                          {"oldestPendingSeconds", backlog.oldest_pending_seconds}}}}
      .dump();
}

}  // namespace outbox::relay
