#include "relay/batch_publisher.hpp"

#include <algorithm>
#include <set>
#include <unordered_set>

#include <spdlog/spdlog.h>

namespace outbox::relay {

BatchOutcome BatchPublisher::publish(OutboxStore& store, const std::vector<OutboxEvent>& batch) {
  send(batch);
  return write_back(store, settle());
}

void BatchPublisher::send(std::vector<OutboxEvent> batch) {
  batch_ = std::move(batch);
  produced_.clear();
  unroutable_.clear();
  std::vector<kafka::Message> messages;
  messages.reserve(batch_.size());
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    const OutboxEvent& e = batch_[i];
    std::string topic = policy_.router.topic_for(e.biz_type);
    if (std::string problem = kafka::topic_name_problem(topic); !problem.empty()) {
      // A route that can never work: poison, isolated rather than blocking its key.
      unroutable_.push_back({e.id, true, {}, "routing: " + problem});
      continue;
    }
    messages.push_back(
        {std::move(topic),
         e.biz_id,
         e.payload,
         {{"event_id", e.event_id}, {"biz_type", e.biz_type}, {"created_at", e.created_at}}});
    produced_.push_back(i);
  }
  producer_.send(messages);
  in_flight_ = true;
}

std::vector<std::int64_t> BatchPublisher::ids_in_flight() const {
  std::vector<std::int64_t> ids;
  if (in_flight_) {
    ids.reserve(batch_.size());
    for (const auto& e : batch_) {
      ids.push_back(e.id);
    }
  }
  return ids;
}

Settlement BatchPublisher::settle() {
  Settlement s;
  if (!in_flight_) {
    return s;
  }
  std::vector<kafka::Delivery> deliveries = producer_.collect();
  in_flight_ = false;
  s.decisions = std::move(unroutable_);
  unroutable_.clear();
  BatchOutcome& out = s.outcome;
  std::set<std::string> blocked_keys;  // keys with an earlier event not delivered in this batch
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t m = 0; m < deliveries.size(); ++m) {
    const OutboxEvent& e = batch_[produced_[m]];
    const kafka::Delivery& d = deliveries[m];
    switch (d.error_class) {
      case kafka::ErrorClass::kNone:
        if (blocked_keys.count(e.biz_id) != 0) {
          ++out.order_anomalies;
        }
        s.delivered.push_back(e.id);
        break;
      case kafka::ErrorClass::kUnreachable:
        // Not the event's fault: leave it pending as it was, burn no attempt.
        out.kafka_unreachable = true;
        blocked_keys.insert(e.biz_id);
        ++out.deferred;
        break;
      case kafka::ErrorClass::kPermanent:
        s.decisions.push_back({e.id, true, {}, d.error});
        break;
      case kafka::ErrorClass::kRetryable: {
        int attempts = e.retry_count + 1;
        bool give_up = attempts >= policy_.max_attempts;
        s.decisions.push_back(
            {e.id, give_up, policy_.backoff.delay(attempts, unit(rng_)), d.error});
        blocked_keys.insert(e.biz_id);
        break;
      }
    }
  }
  // Every event not delivered holds its key back.
  const std::unordered_set<std::int64_t> delivered(s.delivered.begin(), s.delivered.end());
  for (const OutboxEvent& e : batch_) {
    s.ids.push_back(e.id);
    if (delivered.count(e.id) == 0) {
      s.held_keys.insert(e.biz_id);
      s.event_ids.emplace(e.id, e.event_id);
    }
  }
  batch_.clear();
  out.delivered = s.delivered.size();
  for (const auto& d : s.decisions) {
    ++(d.failed ? out.failed : out.retried);
  }
  return s;
}

std::string failed_event_line(const RetryDecision& d, const std::string& event_id) {
  return "event_id " + event_id + " (row id " + std::to_string(d.id) +
         ") moved to FAILED: " + d.error +
         "; once the cause is fixed: outbox-operator requeue --event-id " + event_id;
}

BatchOutcome BatchPublisher::write_back(OutboxStore& store, const Settlement& s) {
  store.mark_sent(s.delivered, policy_.delete_on_sent);
  store.record_failures(s.decisions);
  for (const auto& d : s.decisions) {
    if (d.failed) {
      auto it = s.event_ids.find(d.id);
      spdlog::warn("{}", failed_event_line(d, it != s.event_ids.end() ? it->second : "?"));
    }
  }
  return s.outcome;
}

void BatchPublisher::abandon() {
  if (in_flight_) {
    producer_.abandon();
  }
  in_flight_ = false;
  batch_.clear();
  produced_.clear();
  unroutable_.clear();
}

}  // namespace outbox::relay
