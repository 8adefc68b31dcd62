#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/defaults.hpp"
#include "kafka/producer.hpp"
#include "outbox/store.hpp"
#include "relay/backoff.hpp"
#include "relay/topic_router.hpp"

namespace outbox::relay {

// What a publisher needs to decide an event's fate; shared by the relay and the
// compensation job so that both keep the same ordering and retry rules.
struct PublishPolicy {
  TopicRouter router{"outbox.{biz_type}", {}};
  int max_attempts = api::defaults::kMaxAttempts;
  BackoffPolicy backoff;
  bool delete_on_sent = false;
  // false (--ordering none): no event holds back another of its key, in the
  // claim (ClaimOptions) or here; nothing then counts as an order anomaly.
  bool per_key_order = true;
  // Set: every event moved to FAILED is also published here (a copy: the row stays FAILED,
  // and requeue works as without it), with the reason and the topic it was meant for as
  // headers. Needs a dead-letter producer (dead_letter_producer()).
  std::string dead_letter_topic;
};

struct BatchOutcome {
  std::size_t delivered = 0;
  std::size_t failed = 0;    // moved to FAILED
  std::size_t retried = 0;   // an attempt counted, retry scheduled
  std::size_t deferred = 0;  // left pending, no attempt counted (Kafka unreachable)
  // Delivered after an earlier event of its key was not, or after a later one (higher id)
  // of its key was delivered (KeyOrderWatch).
  std::size_t order_anomalies = 0;
  bool kafka_unreachable = false;
  // `delivered` and the `failed` Kafka refused, by the topic they were sent to (an event that
  // could not be routed has no topic and is counted in `failed` only).
  std::map<std::string, std::size_t> delivered_by_topic;
  std::map<std::string, std::size_t> failed_by_topic;
  // Of `failed`, copied to the dead-letter topic, and the copies Kafka refused (the event is
  // FAILED all the same).
  std::size_t dead_lettered = 0;
  std::size_t dead_letter_refused = 0;
};

// The broker's verdict on a batch, before it is written back to the database.
struct Settlement {
  std::vector<std::int64_t> delivered;   // ids to mark sent
  std::vector<RetryDecision> decisions;  // ids to reschedule or move to FAILED
  BatchOutcome outcome;                  // counts; delivered/failed/retried filled in
  // Keys with an event of the batch that was not delivered: a batch claimed
  // before this settlement is written back must not send later events of them.
  std::set<std::string> held_keys;
  std::vector<std::int64_t> ids;                  // every event of the batch
  std::map<std::int64_t, std::string> event_ids;  // id -> event_id, for the FAILED log line
  // Every event claimed for the batch, sent or kept back (the store needs the kept
  // back ones in log mode, where they are parked rather than left in place).
  std::vector<OutboxEvent> batch;
};

// The broker's verdict on events sent in this order (`deliveries[i]` reports on
// `sent[i]`): what to mark sent, what to reschedule or fail, which keys to hold.
// A delivered event whose key has an earlier event of `sent` that was not
// delivered is an order anomaly: it is counted, and a warning names the key and
// both events, since consumers may see the two out of order.
Settlement judge_deliveries(const std::vector<OutboxEvent>& sent,
                            const std::vector<kafka::Delivery>& deliveries,
                            const PublishPolicy& policy, std::mt19937_64& rng);

// The warning logged when an event moves to FAILED: names it as consumers and
// `requeue` know it (event_id), and how to retry it.
std::string failed_event_line(const RetryDecision& d, const std::string& event_id);

// The producer for PublishPolicy::dead_letter_topic (same brokers and properties as the
// batches'; its own so that a copy never waits behind a batch in flight), or null when no
// topic is set. The topic's name is checked where it comes in (the CRD, --dead-letter-topic).
std::unique_ptr<kafka::BatchProducer> dead_letter_producer(const kafka::ProducerConfig& config,
                                                           const PublishPolicy& policy);

// The copy of `e` for `dead_letter_topic`: its key, payload and headers (the relay's only,
// when its headers column is what made it fail), plus outbox.error (`error`) and
// outbox.topic (`meant_for`, where its route sent it).
kafka::Message dead_letter_message(const OutboxEvent& e, const std::string& meant_for,
                                   const std::string& error, const std::string& dead_letter_topic);

// The last id delivered per key, to notice a key's event delivered after one of its
// later events (a higher id). Per-key order is id order in both modes when writers take
// the key's lock before inserting (docs/relay.md, "Order"); an event that comes out of it
// (writers that do not, a replay, a requeue after later events went out) is what consumers
// see out of order. Bounded: two generations of at most `capacity` keys each, so a key
// not delivered for a while is forgotten (and a regression after it goes unseen).
class KeyOrderWatch {
 public:
  explicit KeyOrderWatch(std::size_t capacity = 65536) : capacity_(capacity) {}
  // Records a delivery; returns the key's id delivered before when it was higher.
  std::optional<std::int64_t> delivered(const std::string& key, std::int64_t id);
  // After an abandoned batch: delivered events not written back come again, legitimately.
  void forget() {
    current_.clear();
    previous_.clear();
  }

 private:
  std::size_t capacity_;
  std::unordered_map<std::string, std::int64_t> current_;
  std::unordered_map<std::string, std::int64_t> previous_;
};

// Publishes claimed batches and writes their outcome back: delivered events are
// marked in one statement, failures recorded in one more. No transaction spans
// the Kafka round trip.
//
// The steps are separate so the relay can overlap them: send() hands a batch to
// the producer and returns; settle() waits for its delivery reports; write_back()
// runs the two statements. One batch is in flight at a time.
class BatchPublisher {
 public:
  // `dead_letters`: the producer for policy.dead_letter_topic (required when it is set).
  BatchPublisher(kafka::BatchProducer& producer, PublishPolicy policy,
                 kafka::BatchProducer* dead_letters = nullptr);

  // send + settle + write_back, for callers that need no overlap.
  BatchOutcome publish(EventStore& store, const std::vector<OutboxEvent>& batch);

  // Sends the batch, except that a key's events go to one topic per batch: from
  // the first event of a key that routes elsewhere than the key's earlier events
  // in the batch, the key's events are kept back (they stay due, and a later
  // claim returns them). Kafka orders a key's events only within a partition, so
  // across topics the later event could be delivered while the earlier one fails.
  // Events of `held` keys, and events the claim found held (log mode), are kept
  // back too. Returns how many events were kept back; their keys are held for the
  // next batch.
  std::size_t send(std::vector<OutboxEvent> batch, const std::set<std::string>& held = {});
  bool in_flight() const { return in_flight_; }
  // The ids of the batch in flight (without the events send() left out), for the
  // next claim to leave out.
  std::vector<std::int64_t> ids_in_flight() const;
  Settlement settle();
  // Writes a settlement back; returns its outcome with the FAILED events logged. With a
  // dead-letter topic, their copies are published first and waited for: a crash before the
  // write-back retries the events, so a copy may be published twice, never missed.
  // May run on another thread beside send() and settle() (the relay's WriteBehind): it
  // uses only the policy and the dead-letter producer, which they do not.
  BatchOutcome write_back(EventStore& store, const Settlement& s);
  // Forgets the batch in flight (its events stay pending and will be claimed again).
  void abandon();

 private:
  // Publishes the copies of the events `s` moves to FAILED; returns the ids whose copy Kafka
  // acknowledged, and counts both outcomes in `out`.
  std::set<std::int64_t> dead_letter(const Settlement& s, BatchOutcome& out);

  kafka::BatchProducer& producer_;
  kafka::BatchProducer* dead_letters_;
  PublishPolicy policy_;
  std::mt19937_64 rng_;
  bool in_flight_ = false;
  std::vector<OutboxEvent> batch_;
  std::vector<std::size_t> produced_;      // batch index of each message sent
  std::vector<RetryDecision> unroutable_;  // found before sending: poison at once
  std::vector<OutboxEvent> kept_back_;     // claimed, not sent (see send())
  KeyOrderWatch order_watch_;
};

}  // namespace outbox::relay
