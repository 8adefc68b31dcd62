#pragma once

#include <map>
#include <string>

#include "metrics/registry.hpp"

namespace outbox::relay {

// Counters and gauges a relay exports, all with the same labels (table, and those of
// RelayConfig::metric_labels).
struct RelayMetrics {
  RelayMetrics(metrics::Registry& registry, const metrics::Labels& labels);
  metrics::Counter& published;
  metrics::Counter& failed;
  metrics::Counter& retried;
  metrics::Counter& deferred;
  metrics::Counter& order_anomalies;
  metrics::Counter& dead_lettered;
  metrics::Counter& dead_letter_refused;
  metrics::Histogram& batch_size;
  metrics::Histogram& publish_latency;
  metrics::Histogram& delivery_lag;  // created_at (database clock) to the delivery report
  // The steps of a turn that hold up the next claim, each timed as the relay waits for it.
  metrics::Histogram& claim_duration;
  metrics::Histogram& write_back_duration;
  metrics::Histogram& housekeeping_duration;
  metrics::Gauge& build_info;
  metrics::Gauge& pending;
  metrics::Gauge& failed_events;
  metrics::Gauge& stuck;
  metrics::Gauge& oldest_pending_seconds;
  metrics::Gauge& shards_owned;
  metrics::Gauge& members;
  metrics::Gauge& database_up;
  // 1 while the table's progress belongs to another PostgreSQL cluster (DatabaseMoved).
  metrics::Gauge& database_moved;
  // Rebases this relay ran (cluster_move.hpp): the table turned up on another cluster.
  metrics::Counter& cluster_rebases;
  metrics::Gauge& dead_tuples;
  metrics::Gauge& live_tuples;
  metrics::Gauge& oldest_transaction_seconds;
  metrics::Gauge& last_vacuum_timestamp;
  metrics::Gauge& kafka_up;
  // By topic, each series registered when the first event reaches its topic (topics follow
  // biz_type, so they are known only then): delivered, and moved to FAILED by Kafka's answer.
  metrics::Counter& published_to(const std::string& topic);
  metrics::Counter& failed_to(const std::string& topic);

 private:
  metrics::Counter& by_topic(std::map<std::string, metrics::Counter*>& known, const char* name,
                             const char* help, const std::string& topic);

  metrics::Registry& registry_;
  metrics::Labels labels_;
  // The series already registered, so that a batch does not look them up in the registry
  // (under its lock) again; used by the relay's thread only.
  std::map<std::string, metrics::Counter*> published_to_;
  std::map<std::string, metrics::Counter*> failed_to_;
};

}  // namespace outbox::relay
