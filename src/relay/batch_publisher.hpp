#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "kafka/producer.hpp"
#include "outbox/store.hpp"
#include "relay/backoff.hpp"
#include "relay/topic_router.hpp"

namespace outbox::relay {

// What a publisher needs to decide an event's fate; shared by the relay and the
// compensation job so that both keep the same ordering and retry rules.
struct PublishPolicy {
  TopicRouter router{"outbox.{biz_type}", {}};
  int max_attempts = 10;
  BackoffPolicy backoff;
  bool delete_on_sent = false;
};

struct BatchOutcome {
  std::size_t delivered = 0;
  std::size_t failed = 0;           // moved to FAILED
  std::size_t retried = 0;          // an attempt counted, retry scheduled
  std::size_t deferred = 0;         // left pending, no attempt counted (Kafka unreachable)
  std::size_t order_anomalies = 0;  // delivered after an earlier event of its key was not
  bool kafka_unreachable = false;
};

// Publishes one claimed batch and writes the outcome back: delivered events are
// marked in one statement, failures recorded in one more. Nothing else touches
// the database, and no transaction spans the Kafka round trip.
class BatchPublisher {
 public:
  BatchPublisher(kafka::BatchProducer& producer, PublishPolicy policy)
      : producer_(producer), policy_(std::move(policy)), rng_(std::random_device{}()) {}

  BatchOutcome publish(OutboxStore& store, const std::vector<OutboxEvent>& batch);

 private:
  kafka::BatchProducer& producer_;
  PublishPolicy policy_;
  std::mt19937_64 rng_;
};

}  // namespace outbox::relay
