#include "relay/batch_publisher.hpp"

#include <set>

#include <spdlog/spdlog.h>

namespace outbox::relay {

BatchOutcome BatchPublisher::publish(OutboxStore& store, const std::vector<OutboxEvent>& batch) {
  BatchOutcome out;
  std::vector<kafka::Message> messages;
  std::vector<std::size_t> produced;  // batch index of each message
  std::vector<RetryDecision> decisions;
  messages.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const OutboxEvent& e = batch[i];
    std::string topic = policy_.router.topic_for(e.biz_type);
    if (std::string problem = kafka::topic_name_problem(topic); !problem.empty()) {
      // A route that can never work: poison, isolated rather than blocking its key.
      decisions.push_back({e.id, true, {}, "routing: " + problem});
      continue;
    }
    messages.push_back(
        {std::move(topic),
         e.biz_id,
         e.payload,
         {{"event_id", e.event_id}, {"biz_type", e.biz_type}, {"created_at", e.created_at}}});
    produced.push_back(i);
  }
  std::vector<kafka::Delivery> deliveries = producer_.publish(messages);

  std::vector<std::int64_t> delivered;
  std::set<std::string> blocked_keys;  // keys with an earlier event not delivered in this batch
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t m = 0; m < deliveries.size(); ++m) {
    const OutboxEvent& e = batch[produced[m]];
    const kafka::Delivery& d = deliveries[m];
    switch (d.error_class) {
      case kafka::ErrorClass::kNone:
        if (blocked_keys.count(e.biz_id) != 0) {
          ++out.order_anomalies;
        }
        delivered.push_back(e.id);
        break;
      case kafka::ErrorClass::kUnreachable:
        // Not the event's fault: leave it pending as it was, burn no attempt.
        out.kafka_unreachable = true;
        blocked_keys.insert(e.biz_id);
        ++out.deferred;
        break;
      case kafka::ErrorClass::kPermanent:
        decisions.push_back({e.id, true, {}, d.error});
        break;
      case kafka::ErrorClass::kRetryable: {
        int attempts = e.retry_count + 1;
        bool give_up = attempts >= policy_.max_attempts;
        decisions.push_back({e.id, give_up, policy_.backoff.delay(attempts, unit(rng_)), d.error});
        blocked_keys.insert(e.biz_id);
        break;
      }
    }
  }
  store.mark_sent(delivered, policy_.delete_on_sent);
  store.record_failures(decisions);
  out.delivered = delivered.size();
  for (const auto& d : decisions) {
    if (d.failed) {
      ++out.failed;
      spdlog::warn("event id {} FAILED: {}", d.id, d.error);
    } else {
      ++out.retried;
    }
  }
  return out;
}

}  // namespace outbox::relay
