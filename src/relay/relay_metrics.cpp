#include "relay/relay_metrics.hpp"

#include <vector>

#include "metrics/process.hpp"

namespace outbox::relay {
namespace {

// A series' name and help, as the registry renders them.
struct Series {
  const char* name;
  const char* help;
};

constexpr Series kPublished{"outbox_events_published_total",
                            "Events acknowledged by Kafka and marked sent"};
constexpr Series kFailed{"outbox_events_failed_total",
                         "Events moved to FAILED (poison or attempts used up)"};
constexpr Series kRetried{"outbox_events_retried_total",
                          "Delivery failures that scheduled a retry"};
constexpr Series kDeferred{
    "outbox_events_deferred_total",
    "Events left pending, no attempt counted, because Kafka was unreachable"};
constexpr Series kOrderAnomalies{
    "outbox_order_anomalies_total",
    "Events delivered out of their key's order: after an earlier event of the key failed, or "
    "after a later event (higher id) of the key"};
constexpr Series kDeadLettered{"outbox_events_dead_lettered_total",
                               "Events moved to FAILED whose copy reached the dead-letter topic"};
constexpr Series kDeadLetterRefused{
    "outbox_dead_letter_refused_total",
    "Events moved to FAILED whose copy for the dead-letter topic was not delivered (the row is "
    "FAILED all the same)"};
constexpr Series kBatchSize{"outbox_batch_size", "Events per claimed batch"};
constexpr Series kPublishLatency{"outbox_publish_latency_seconds",
                                 "From claim to the last delivery report of a batch"};
constexpr Series kDeliveryLag{
    "outbox_delivery_lag_seconds",
    "From an event's created_at (the database's clock at insert) to its delivery report (the "
    "relay's clock): what a consumer waits; clock skew between the two shows in it"};
constexpr Series kClaimDuration{"outbox_claim_seconds",
                                "One claim query, as the relay waits for it"};
constexpr Series kWriteBackDuration{
    "outbox_write_back_seconds",
    "Writing settled batches' outcome back (and their dead-letter copies) in one statement, "
    "behind the sends"};
constexpr Series kHousekeepingDuration{
    "outbox_housekeeping_seconds",
    "Rebalancing shards, table maintenance and measuring the backlog between batches; the relay "
    "claims nothing meanwhile"};
constexpr Series kPending{"outbox_pending_events", "Pending events (database clock)"};
constexpr Series kFailedEvents{"outbox_failed_events", "Events in FAILED"};
constexpr Series kStuck{"outbox_stuck_events", "Pending events older than the stuck threshold"};
constexpr Series kOldestPending{"outbox_oldest_pending_seconds",
                                "Age of the oldest pending event, on the database clock"};
constexpr Series kShardsOwned{"outbox_shards_owned", "Shards this replica publishes"};
constexpr Series kMembers{"outbox_relay_members", "Live relay replicas on this table"};
constexpr Series kDatabaseUp{"outbox_database_up", "1 when the database session is up"};
constexpr Series kDatabaseMoved{
    "outbox_database_moved",
    "1 while the relay refuses the table because its progress comes from another PostgreSQL "
    "cluster (run migrate --rebase)"};
constexpr Series kClusterRebases{
    "outbox_cluster_rebases_total",
    "Rebases this relay ran on finding its log-mode table moved to another PostgreSQL cluster"};
constexpr Series kDeadTuples{
    "outbox_table_dead_tuples",
    "Dead tuples in the outbox table (claims step over them until vacuum)"};
constexpr Series kLiveTuples{"outbox_table_live_tuples", "Live tuples in the outbox table"};
constexpr Series kOldestTransaction{
    "outbox_database_oldest_transaction_seconds",
    "Age of the oldest open transaction holding back vacuum (xmin horizon)"};
constexpr Series kLastVacuum{
    "outbox_table_last_vacuum_timestamp_seconds",
    "Unix time of the outbox table's last vacuum or autovacuum (database clock); 0 when not "
    "vacuumed since the statistics were reset, so time() minus it alerts as very old"};
constexpr Series kKafkaUp{"outbox_kafka_up", "1 when the last batch or probe reached Kafka"};
constexpr Series kTopicPublished{"outbox_topic_events_published_total",
                                 "Events acknowledged by Kafka and marked sent, by topic"};
constexpr Series kTopicFailed{
    "outbox_topic_events_failed_total",
    "Events moved to FAILED by Kafka's answer (attempts used up, or refused for good), by topic"};

const std::vector<double> kBatchSizeBuckets{1, 5, 10, 50, 100, 250, 500, 1000, 5000};
const std::vector<double> kDeliveryLagBuckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                              2.5,   5,    10,    30,   60,  300,  900, 3600};

// `labels` and one more.
metrics::Labels with(metrics::Labels labels, const std::string& name, const std::string& value) {
  labels[name] = value;
  return labels;
}

}  // namespace

RelayMetrics::RelayMetrics(metrics::Registry& r, const metrics::Labels& labels)
    : published(r.counter(kPublished.name, kPublished.help, labels)),
      failed(r.counter(kFailed.name, kFailed.help, labels)),
      retried(r.counter(kRetried.name, kRetried.help, labels)),
      deferred(r.counter(kDeferred.name, kDeferred.help, labels)),
      order_anomalies(r.counter(kOrderAnomalies.name, kOrderAnomalies.help, labels)),
      dead_lettered(r.counter(kDeadLettered.name, kDeadLettered.help, labels)),
      dead_letter_refused(r.counter(kDeadLetterRefused.name, kDeadLetterRefused.help, labels)),
      batch_size(r.histogram(kBatchSize.name, kBatchSize.help, kBatchSizeBuckets, labels)),
      publish_latency(r.histogram(kPublishLatency.name, kPublishLatency.help,
                                  metrics::latency_buckets(), labels)),
      delivery_lag(r.histogram(kDeliveryLag.name, kDeliveryLag.help, kDeliveryLagBuckets, labels)),
      claim_duration(r.histogram(kClaimDuration.name, kClaimDuration.help,
                                 metrics::latency_buckets(), labels)),
      write_back_duration(r.histogram(kWriteBackDuration.name, kWriteBackDuration.help,
                                      metrics::latency_buckets(), labels)),
      housekeeping_duration(r.histogram(kHousekeepingDuration.name, kHousekeepingDuration.help,
                                        metrics::latency_buckets(), labels)),
      build_info(metrics::register_build_info(r, labels)),
      pending(r.gauge(kPending.name, kPending.help, labels)),
      failed_events(r.gauge(kFailedEvents.name, kFailedEvents.help, labels)),
      stuck(r.gauge(kStuck.name, kStuck.help, labels)),
      oldest_pending_seconds(r.gauge(kOldestPending.name, kOldestPending.help, labels)),
      shards_owned(r.gauge(kShardsOwned.name, kShardsOwned.help, labels)),
      members(r.gauge(kMembers.name, kMembers.help, labels)),
      database_up(r.gauge(kDatabaseUp.name, kDatabaseUp.help, labels)),
      database_moved(r.gauge(kDatabaseMoved.name, kDatabaseMoved.help, labels)),
      cluster_rebases(r.counter(kClusterRebases.name, kClusterRebases.help, labels)),
      dead_tuples(r.gauge(kDeadTuples.name, kDeadTuples.help, labels)),
      live_tuples(r.gauge(kLiveTuples.name, kLiveTuples.help, labels)),
      oldest_transaction_seconds(r.gauge(kOldestTransaction.name, kOldestTransaction.help, labels)),
      last_vacuum_timestamp(r.gauge(kLastVacuum.name, kLastVacuum.help, labels)),
      kafka_up(r.gauge(kKafkaUp.name, kKafkaUp.help, labels)),
      registry_(r),
      labels_(labels) {
  r.describe_counter(kTopicPublished.name, kTopicPublished.help);
  r.describe_counter(kTopicFailed.name, kTopicFailed.help);
}

metrics::Counter& RelayMetrics::by_topic(std::map<std::string, metrics::Counter*>& known,
                                         const char* name, const char* help,
                                         const std::string& topic) {
  if (auto it = known.find(topic); it != known.end()) {
    return *it->second;
  }
  metrics::Counter& c = registry_.counter(name, help, with(labels_, "topic", topic));
  known.emplace(topic, &c);
  return c;
}

metrics::Counter& RelayMetrics::published_to(const std::string& topic) {
  return by_topic(published_to_, kTopicPublished.name, kTopicPublished.help, topic);
}

metrics::Counter& RelayMetrics::failed_to(const std::string& topic) {
  return by_topic(failed_to_, kTopicFailed.name, kTopicFailed.help, topic);
}

}  // namespace outbox::relay
