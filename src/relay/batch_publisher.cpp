#include "relay/batch_publisher.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/log.hpp"

namespace outbox::relay {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kSeqHeader = "outbox.seq";

// The relay's own headers, then the row's headers column (a JSON object; string
// values verbatim, others as their JSON text), except names the relay sets.
// Returns a problem, and no headers, when the column holds something else.
//
// outbox.seq is what the relay orders a key's events by, so it increases per key in
// commit order (not gap-free) and a consumer can refuse an older event after a newer
// one (the inbox's _apply): the row id in status mode; in log mode the row's position
// (the xid column, set only in log mode), where two events of a key can share one.
std::string message_headers(const OutboxEvent& e, Headers& out) {
  out = {{"event_id", e.event_id},
         {"biz_type", e.biz_type},
         {"created_at", e.created_at},
         {kSeqHeader, e.xid != 0 ? std::to_string(e.xid) : std::to_string(e.id)}};
  if (e.headers.empty()) {
    return {};
  }
  const auto row = nlohmann::json::parse(e.headers, nullptr, false);
  if (row.is_null()) {
    return {};
  }
  if (!row.is_object()) {
    return "headers: the column holds " + std::string(row.type_name()) +
           ", not a JSON object of header names to values";
  }
  for (const auto& [name, value] : row.items()) {
    if (name != "event_id" && name != "biz_type" && name != "created_at" && name != kSeqHeader) {
      out.emplace_back(name, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  return {};
}

}  // namespace

std::unique_ptr<kafka::BatchProducer> dead_letter_producer(const kafka::ProducerConfig& config,
                                                           const PublishPolicy& policy) {
  if (policy.dead_letter_topic.empty()) {
    return nullptr;
  }
  return std::make_unique<kafka::BatchProducer>(config);
}

kafka::Message dead_letter_message(const OutboxEvent& e, const std::string& meant_for,
                                   const std::string& error, const std::string& dead_letter_topic) {
  Headers headers;
  message_headers(e, headers);  // on a bad headers column: the relay's own only
  headers.emplace_back("outbox.error", error);
  headers.emplace_back("outbox.topic", meant_for);
  return {dead_letter_topic, e.biz_id, e.payload, std::move(headers)};
}

BatchPublisher::BatchPublisher(kafka::BatchProducer& producer, PublishPolicy policy,
                               kafka::BatchProducer* dead_letters)
    : producer_(producer),
      dead_letters_(dead_letters),
      policy_(std::move(policy)),
      rng_(std::random_device{}()) {
  if (!policy_.dead_letter_topic.empty() && dead_letters_ == nullptr) {
    throw std::logic_error("a dead-letter topic needs a dead-letter producer");
  }
}

BatchOutcome BatchPublisher::publish(EventStore& store, const std::vector<OutboxEvent>& batch) {
  send(batch);
  return write_back(store, settle());
}

std::size_t BatchPublisher::send(std::vector<OutboxEvent> batch,
                                 const std::set<std::string>& held) {
  batch_.clear();
  produced_.clear();
  unroutable_.clear();
  kept_back_.clear();
  batch_.reserve(batch.size());
  std::vector<kafka::Message> messages;
  messages.reserve(batch.size());
  std::unordered_map<std::string, std::string> key_topic;  // the topic a key sends to in this batch
  std::unordered_set<std::string> cut(held.begin(), held.end());  // keys whose events wait
  if (!policy_.per_key_order) {
    cut.clear();
  }
  for (OutboxEvent& e : batch) {
    if (e.held && policy_.per_key_order) {
      cut.insert(e.biz_id);
    }
    if (cut.count(e.biz_id) != 0) {
      kept_back_.push_back(std::move(e));
      continue;
    }
    std::string topic = policy_.router.topic_for(e.biz_type);
    Headers headers;
    std::string problem = kafka::topic_name_problem(topic);
    problem = problem.empty() ? message_headers(e, headers) : "routing: " + problem;
    if (!problem.empty()) {
      // A route or headers that can never work: poison, isolated rather than blocking its key.
      unroutable_.push_back({e.id, true, {}, problem});
      batch_.push_back(std::move(e));
      continue;
    }
    if (auto [it, first] = key_topic.try_emplace(e.biz_id, topic);
        policy_.per_key_order && !first && it->second != topic) {
      cut.insert(e.biz_id);
      kept_back_.push_back(std::move(e));
      continue;
    }
    messages.push_back({std::move(topic), e.biz_id, e.payload, std::move(headers)});
    produced_.push_back(batch_.size());
    batch_.push_back(std::move(e));
  }
  producer_.send(messages);
  in_flight_ = true;
  return kept_back_.size();
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

std::optional<std::int64_t> KeyOrderWatch::delivered(const std::string& key, std::int64_t id) {
  std::optional<std::int64_t> before;
  if (auto it = current_.find(key); it != current_.end()) {
    before = it->second;
  } else if (auto old = previous_.find(key); old != previous_.end()) {
    before = old->second;
  }
  if (current_.size() >= capacity_) {
    previous_ = std::move(current_);
    current_.clear();
  }
  current_[key] = std::max(id, before.value_or(id));
  if (before && *before > id) {
    return before;
  }
  return std::nullopt;
}

namespace {

// Counts (and names) each delivered event of `sent` whose key delivered a higher id before.
void note_id_order(const std::vector<OutboxEvent>& sent, const std::vector<std::int64_t>& delivered,
                   KeyOrderWatch& watch, BatchOutcome& out) {
  const std::unordered_set<std::int64_t> ok(delivered.begin(), delivered.end());
  for (const OutboxEvent& e : sent) {
    if (ok.count(e.id) == 0) {
      continue;
    }
    if (const auto later = watch.delivered(e.biz_id, e.id)) {
      ++out.order_anomalies;
      spdlog::warn(
          "order anomaly on key '{}': event {} (id {}) reached Kafka after the key's event of id "
          "{}; consumers see them out of id order (writers that do not lock the key before "
          "inserting, a replay or a requeue)",
          e.biz_id, e.event_id, e.id, *later);
    }
  }
}

// Every event of `sent` that `s` does not deliver holds its key back; then the counts.
void hold_undelivered(const std::vector<OutboxEvent>& sent, Settlement& s) {
  const std::unordered_set<std::int64_t> delivered(s.delivered.begin(), s.delivered.end());
  for (const OutboxEvent& e : sent) {
    s.ids.push_back(e.id);
    if (delivered.count(e.id) == 0) {
      s.held_keys.insert(e.biz_id);
      s.event_ids.emplace(e.id, e.event_id);
    }
  }
  s.outcome.delivered = s.delivered.size();
  for (const auto& d : s.decisions) {
    ++(d.failed ? s.outcome.failed : s.outcome.retried);
  }
}

}  // namespace

Settlement judge_deliveries(const std::vector<OutboxEvent>& sent,
                            const std::vector<kafka::Delivery>& deliveries,
                            const PublishPolicy& policy, std::mt19937_64& rng) {
  // The producer reports on every message it was given; should one report be
  // missing, the event counts as not delivered (pending, no attempt counted).
  const kafka::Delivery missing{kafka::ErrorClass::kUnreachable, "no delivery report", -1, -1};
  Settlement s;
  BatchOutcome& out = s.outcome;
  // Per key, the first event of this batch that was not delivered.
  std::unordered_map<std::string, const OutboxEvent*> undelivered;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t m = 0; m < sent.size(); ++m) {
    const OutboxEvent& e = sent[m];
    const kafka::Delivery& d = m < deliveries.size() ? deliveries[m] : missing;
    switch (d.error_class) {
      case kafka::ErrorClass::kNone:
        if (auto it = undelivered.find(e.biz_id); policy.per_key_order && it != undelivered.end()) {
          // Delivered is delivered: the relay cannot take it back, only say so.
          ++out.order_anomalies;
          spdlog::warn(
              "order anomaly on key '{}': event {} (id {}) reached Kafka although the earlier "
              "event {} (id {}) of its key was not delivered; consumers may see them out of order",
              e.biz_id, e.event_id, e.id, it->second->event_id, it->second->id);
        }
        s.delivered.push_back(e.id);
        ++out.delivered_by_topic[policy.router.topic_for(e.biz_type)];
        break;
      case kafka::ErrorClass::kUnreachable:
        // Not the event's fault: leave it pending as it was, burn no attempt.
        out.kafka_unreachable = true;
        undelivered.try_emplace(e.biz_id, &e);
        ++out.deferred;
        break;
      case kafka::ErrorClass::kPermanent:
        s.decisions.push_back({e.id, true, {}, d.error});
        ++out.failed_by_topic[policy.router.topic_for(e.biz_type)];
        break;
      case kafka::ErrorClass::kRetryable: {
        int attempts = e.retry_count + 1;
        bool give_up = attempts >= policy.max_attempts;
        s.decisions.push_back({e.id, give_up, policy.backoff.delay(attempts, unit(rng)), d.error});
        if (give_up) {
          ++out.failed_by_topic[policy.router.topic_for(e.biz_type)];
        }
        undelivered.try_emplace(e.biz_id, &e);
        break;
      }
    }
  }
  hold_undelivered(sent, s);
  return s;
}

Settlement BatchPublisher::settle() {
  if (!in_flight_) {
    return {};
  }
  std::vector<kafka::Delivery> deliveries = producer_.collect();
  in_flight_ = false;
  std::vector<OutboxEvent> sent;
  sent.reserve(produced_.size());
  std::vector<bool> was_produced(batch_.size(), false);
  for (std::size_t i : produced_) {
    sent.push_back(batch_[i]);
    was_produced[i] = true;
  }
  Settlement s = judge_deliveries(sent, deliveries, policy_, rng_);
  if (policy_.per_key_order) {
    note_id_order(sent, s.delivered, order_watch_, s.outcome);
  }
  // Unroutable events were never produced: FAILED now, and like every event that
  // was not delivered they hold their key for the next batch.
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    if (!was_produced[i]) {
      s.ids.push_back(batch_[i].id);
      s.held_keys.insert(batch_[i].biz_id);
      s.event_ids.emplace(batch_[i].id, batch_[i].event_id);
    }
  }
  s.outcome.failed += unroutable_.size();
  s.decisions.insert(s.decisions.end(), unroutable_.begin(), unroutable_.end());
  // Kept back: not sent, so their keys wait for the next batch too.
  for (const OutboxEvent& e : kept_back_) {
    s.held_keys.insert(e.biz_id);
  }
  s.batch = std::move(batch_);
  s.batch.insert(s.batch.end(), std::make_move_iterator(kept_back_.begin()),
                 std::make_move_iterator(kept_back_.end()));
  unroutable_.clear();
  produced_.clear();
  batch_.clear();
  kept_back_.clear();
  return s;
}

std::string failed_event_line(const RetryDecision& d, const std::string& event_id) {
  return "event_id " + event_id + " (row id " + std::to_string(d.id) +
         ") moved to FAILED: " + d.error +
         "; once the cause is fixed: outbox-operator requeue --event-id " + event_id;
}

std::set<std::int64_t> BatchPublisher::dead_letter(const Settlement& s, BatchOutcome& out) {
  std::set<std::int64_t> copied;
  if (dead_letters_ == nullptr) {
    return copied;
  }
  std::unordered_map<std::int64_t, const OutboxEvent*> by_id;
  for (const OutboxEvent& e : s.batch) {
    by_id.emplace(e.id, &e);
  }
  std::vector<std::pair<const RetryDecision*, const OutboxEvent*>> failed;
  std::vector<kafka::Message> copies;
  for (const RetryDecision& d : s.decisions) {
    if (auto it = by_id.find(d.id); d.failed && it != by_id.end()) {
      const OutboxEvent& e = *it->second;
      failed.emplace_back(&d, &e);
      copies.push_back(dead_letter_message(e, policy_.router.topic_for(e.biz_type), d.error,
                                           policy_.dead_letter_topic));
    }
  }
  if (copies.empty()) {
    return copied;
  }
  const std::vector<kafka::Delivery> reports = dead_letters_->publish(copies);
  for (std::size_t i = 0; i < failed.size(); ++i) {
    const auto [d, e] = failed[i];
    if (i < reports.size() && reports[i].error_class == kafka::ErrorClass::kNone) {
      copied.insert(d->id);
      ++out.dead_lettered;
      continue;
    }
    ++out.dead_letter_refused;
    const ScopedLogField field("event_id", e->event_id);
    spdlog::warn(
        "the copy of row id {} for dead-letter topic {} was not delivered ({}); the "
        "event is FAILED in the table all the same",
        d->id, policy_.dead_letter_topic,
        i < reports.size() ? reports[i].error : "no delivery report");
  }
  return copied;
}

BatchOutcome BatchPublisher::write_back(EventStore& store, const Settlement& s) {
  BatchOutcome out = s.outcome;
  const std::set<std::int64_t> copied = dead_letter(s, out);
  store.write_back(s.batch, s.delivered, s.decisions, policy_.delete_on_sent);
  for (const auto& d : s.decisions) {
    if (d.failed) {
      auto it = s.event_ids.find(d.id);
      const std::string event_id = it != s.event_ids.end() ? it->second : "?";
      const ScopedLogField field("event_id", event_id);
      spdlog::warn("{}{}", failed_event_line(d, event_id),
                   copied.count(d.id) != 0 ? "; a copy went to " + policy_.dead_letter_topic : "");
    }
  }
  return out;
}

void BatchPublisher::abandon() {
  if (in_flight_) {
    producer_.abandon();
  }
  in_flight_ = false;
  batch_.clear();
  produced_.clear();
  unroutable_.clear();
  kept_back_.clear();
  order_watch_.forget();
}

}  // namespace outbox::relay
