// Unit tests of the relay's pure parts: no database, no broker.
#include <gtest/gtest.h>

#include <random>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "common/log.hpp"
#include "kafka/producer.hpp"
#include "outbox/store.hpp"
#include "relay/backoff.hpp"
#include "relay/batch_publisher.hpp"
#include "relay/topic_router.hpp"

namespace outbox {
namespace {

using std::chrono::milliseconds;

TEST(BackoffPolicy, DoublesFromTheInitialDelayUpToTheCapLikeTheSeed) {
  relay::BackoffPolicy p{milliseconds(60'000), milliseconds(64 * 60'000), 0.0};
  EXPECT_EQ(p.delay(1, 0.5), milliseconds(60'000));
  EXPECT_EQ(p.delay(2, 0.5), milliseconds(120'000));
  EXPECT_EQ(p.delay(3, 0.5), milliseconds(240'000));
  EXPECT_EQ(p.delay(7, 0.5), milliseconds(64 * 60'000));
  EXPECT_EQ(p.delay(50, 0.5), milliseconds(64 * 60'000));
}

TEST(BackoffPolicy, JitterStaysWithinItsFraction) {
  relay::BackoffPolicy p{milliseconds(1000), milliseconds(10'000), 0.2};
  EXPECT_EQ(p.delay(1, 0.0), milliseconds(800));
  EXPECT_EQ(p.delay(1, 0.5), milliseconds(1000));
  EXPECT_NEAR(static_cast<double>(p.delay(1, 0.999999).count()), 1200.0, 1.0);
}

TEST(TopicRouter, ExplicitRouteWinsOverTheTemplate) {
  relay::TopicRouter r("outbox.{biz_type}", {{"ORDER_PAID", "payments"}});
  EXPECT_EQ(r.topic_for("ORDER_PAID"), "payments");
  EXPECT_EQ(r.topic_for("ORDER_CREATED"), "outbox.ORDER_CREATED");
  relay::TopicRouter fixed("all-events", {});
  EXPECT_EQ(fixed.topic_for("X"), "all-events");
  relay::TopicRouter twice("{biz_type}.{biz_type}", {});
  EXPECT_EQ(twice.topic_for("a"), "a.a");
  relay::TopicRouter placeholder_route("outbox.{biz_type}", {{"A", "special.{biz_type}"}});
  EXPECT_EQ(placeholder_route.topic_for("A"), "special.A");
}

TEST(TopicRouter, ARouteSplitsAtTheLastEqualsSign) {
  using R = relay::TopicRouter;
  EXPECT_EQ(R::parse_route("ORDER_PAID=payments"),
            (std::pair<std::string, std::string>{"ORDER_PAID", "payments"}));
  // A biz_type may hold '=', a topic name cannot.
  EXPECT_EQ(R::parse_route("ORDER=PAID=payments"),
            (std::pair<std::string, std::string>{"ORDER=PAID", "payments"}));
  EXPECT_EQ(R::parse_route("A=x.{biz_type}"),
            (std::pair<std::string, std::string>{"A", "x.{biz_type}"}));
  for (const char* bad : {"payments", "=payments", "ORDER=", "ORDER=PAID topic"}) {
    try {
      R::parse_route(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("route \"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(FailedEventLine, NamesTheEventIdAndHowToRequeueIt) {
  RetryDecision d{42, true, {}, "Broker: Message size too large"};
  EXPECT_EQ(relay::failed_event_line(d, "0f8e1c2a-uuid"),
            "event_id 0f8e1c2a-uuid (row id 42) moved to FAILED: Broker: Message size too large; "
            "once the cause is fixed: outbox-operator requeue --event-id 0f8e1c2a-uuid");
}

// Sends every log line to a ring buffer while it lives.
class CapturedLog {
 public:
  CapturedLog()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)),
        previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::vector<std::string> warnings() const {
    std::vector<std::string> out;
    for (const auto& m : sink_->last_raw()) {
      if (m.level == spdlog::level::warn) {
        out.emplace_back(m.payload.begin(), m.payload.end());
      }
    }
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

OutboxEvent event(std::int64_t id, const std::string& key) {
  OutboxEvent e;
  e.id = id;
  e.event_id = "00000000-0000-0000-0000-" + std::string(12 - std::to_string(id).size(), '0') +
               std::to_string(id);
  e.biz_type = "order";
  e.biz_id = key;
  return e;
}

kafka::Delivery delivered() {
  return {};
}
kafka::Delivery refused() {
  return {kafka::ErrorClass::kRetryable, "Broker: Invalid timestamp", -1, -1};
}

// The anomaly counter never moves silently: each count comes with a warning that
// names the key, the event that reached Kafka and the earlier one that did not.
TEST(JudgeDeliveries, AnOrderAnomalyIsCountedAndLoggedWithTheKeyAndBothEvents) {
  relay::PublishPolicy policy;
  std::mt19937_64 rng(1);
  std::vector<OutboxEvent> sent = {event(1, "k"), event(2, "other"), event(3, "k"), event(4, "k")};
  CapturedLog log;
  relay::Settlement s = relay::judge_deliveries(
      sent, {refused(), delivered(), delivered(), delivered()}, policy, rng);
  EXPECT_EQ(s.outcome.order_anomalies, 2u);
  EXPECT_EQ(s.outcome.delivered, 3u);
  EXPECT_EQ(s.outcome.retried, 1u);
  EXPECT_EQ(s.held_keys, std::set<std::string>{"k"});
  auto warnings = log.warnings();
  ASSERT_EQ(warnings.size(), 2u) << "one warning per counted anomaly";
  for (std::size_t i = 0; i < warnings.size(); ++i) {
    const std::string& w = warnings[i];
    EXPECT_NE(w.find("'k'"), std::string::npos) << w;
    EXPECT_NE(w.find(sent[0].event_id), std::string::npos) << "the earlier event: " << w;
    EXPECT_NE(w.find(sent[2 + i].event_id), std::string::npos) << "the later event: " << w;
  }
}

// A key's event delivered after a higher id of the key is noticed (what consumers see out of
// order when writers do not lock the key, or after a replay), whatever batch it comes in;
// the same id again (a redelivery) and other keys are not.
TEST(KeyOrderWatch, NoticesALowerIdOfAKeyAfterAHigherOneAndNothingElse) {
  relay::KeyOrderWatch watch;
  EXPECT_FALSE(watch.delivered("k", 5));
  EXPECT_FALSE(watch.delivered("other", 1)) << "keys are apart";
  EXPECT_FALSE(watch.delivered("k", 7));
  EXPECT_FALSE(watch.delivered("k", 7)) << "a redelivery is no regression";
  EXPECT_EQ(watch.delivered("k", 6), 7) << "names the higher id delivered before";
  EXPECT_EQ(watch.delivered("k", 6), 7) << "the highest stays remembered";
  EXPECT_FALSE(watch.delivered("k", 8));
  watch.forget();
  EXPECT_FALSE(watch.delivered("k", 2)) << "after an abandoned batch the events come again";
}

// Memory is bounded: past its capacity a key is kept for one more generation, then dropped.
TEST(KeyOrderWatch, RemembersAtMostTwoGenerationsOfKeys) {
  relay::KeyOrderWatch watch(2);
  EXPECT_FALSE(watch.delivered("a", 10));
  EXPECT_FALSE(watch.delivered("b", 10));
  EXPECT_FALSE(watch.delivered("c", 10));  // a and b move to the older generation
  EXPECT_EQ(watch.delivered("a", 9), 10) << "still known one generation later";
  EXPECT_FALSE(watch.delivered("d", 10));  // the generation that held b is dropped
  EXPECT_FALSE(watch.delivered("b", 1)) << "forgotten";
}

TEST(JudgeDeliveries, InOrderOutcomesCountNoAnomalyAndLogNothing) {
  relay::PublishPolicy policy;
  std::mt19937_64 rng(1);
  std::vector<OutboxEvent> sent = {event(1, "k"), event(2, "other"), event(3, "k")};
  CapturedLog log;
  // A refused last event of a key is no anomaly: nothing after it was delivered.
  relay::Settlement s =
      relay::judge_deliveries(sent, {delivered(), refused(), refused()}, policy, rng);
  EXPECT_EQ(s.outcome.order_anomalies, 0u);
  EXPECT_EQ(s.outcome.delivered, 1u);
  EXPECT_EQ(s.outcome.retried, 2u);
  EXPECT_EQ(s.held_keys, (std::set<std::string>{"k", "other"}));
  EXPECT_TRUE(log.warnings().empty());
}

// The by-topic counts follow the route of each event: delivered ones by their topic, and
// those Kafka's answer moved to FAILED (refused for good, or out of attempts) by theirs.
TEST(JudgeDeliveries, CountsDeliveredAndFailedEventsByTheirTopic) {
  relay::PublishPolicy policy;
  policy.router = relay::TopicRouter("outbox.{biz_type}", {{"payment", "payments"}});
  policy.max_attempts = 2;
  std::mt19937_64 rng(1);
  std::vector<OutboxEvent> sent = {event(1, "a"), event(2, "b"), event(3, "c"), event(4, "d"),
                                   event(5, "e")};
  sent[1].biz_type = "payment";
  sent[2].biz_type = "payment";
  sent[3].retry_count = 1;  // its second attempt: the last one
  const kafka::Delivery too_large{kafka::ErrorClass::kPermanent, "Broker: Message too large", -1,
                                  -1};
  relay::Settlement s = relay::judge_deliveries(
      sent, {delivered(), delivered(), too_large, refused(), refused()}, policy, rng);
  EXPECT_EQ(s.outcome.delivered_by_topic,
            (std::map<std::string, std::size_t>{{"outbox.order", 1}, {"payments", 1}}));
  EXPECT_EQ(s.outcome.failed_by_topic,
            (std::map<std::string, std::size_t>{{"outbox.order", 1}, {"payments", 1}}))
      << "the retry with attempts left is not a failure";
  EXPECT_EQ(s.outcome.retried, 1u);
}

}  // namespace
}  // namespace outbox
