// Unit tests of the relay's pure parts: no database, no broker.
#include <gtest/gtest.h>

#include <librdkafka/rdkafkacpp.h>

#include <random>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "common/duration.hpp"
#include "common/log.hpp"
#include "kafka/producer.hpp"
#include "metrics/registry.hpp"
#include "outbox/store.hpp"
#include "outbox/table.hpp"
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

TEST(TopicName, IllegalNamesAreExplained) {
  EXPECT_EQ(kafka::topic_name_problem("outbox.order-1_x"), "");
  EXPECT_NE(kafka::topic_name_problem("outbox.ORDER PAID"), "");
  EXPECT_NE(kafka::topic_name_problem(""), "");
  EXPECT_NE(kafka::topic_name_problem(std::string(250, 'a')), "");
}

TEST(TableName, AcceptsPlainAndQualifiedNames) {
  EXPECT_EQ(TableName::parse("outbox_event").quoted(), "\"public\".\"outbox_event\"");
  auto t = TableName::parse("orders.outbox_event");
  EXPECT_EQ(t.schema(), "orders");
  EXPECT_EQ(t.quoted_with_suffix("_enqueue"), "\"orders\".\"outbox_event_enqueue\"");
}

TEST(TableName, RefusesAnythingThatCouldBreakOutOfAQuotedIdentifier) {
  for (const char* bad : {"", "Outbox", "outbox;drop table x", "a\"b", "1abc", "a.b.c", "a-b",
                          "public.", ".t", "x y"}) {
    EXPECT_THROW(TableName::parse(bad), std::invalid_argument) << bad;
  }
  EXPECT_THROW(TableName::parse(std::string(49, 'a')), std::invalid_argument);
  try {
    TableName::parse("outbox;drop");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("invalid character"), std::string::npos);
  }
}

TEST(Duration, ParsesGoStyleDurations) {
  EXPECT_EQ(parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(parse_duration("2s"), milliseconds(2000));
  EXPECT_EQ(parse_duration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500));
  for (const char* bad : {"", "5", "s", "5x", "-1s", "1s2"}) {
    EXPECT_THROW(parse_duration(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(format_duration(milliseconds(5'400'000)), "1h30m");
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
}

TEST(FailedEventLine, NamesTheEventIdAndHowToRequeueIt) {
  RetryDecision d{42, true, {}, "Broker: Message size too large"};
  EXPECT_EQ(relay::failed_event_line(d, "0f8e1c2a-uuid"),
            "event_id 0f8e1c2a-uuid (row id 42) moved to FAILED: Broker: Message size too large; "
            "once the cause is fixed: outbox-operator requeue --event-id 0f8e1c2a-uuid");
}

TEST(ErrorClass, OnlyRealRefusalsCountAsAttempts) {
  EXPECT_EQ(kafka::classify_error(RdKafka::ERR_NO_ERROR), kafka::ErrorClass::kNone);
  EXPECT_EQ(kafka::classify_error(RdKafka::ERR__MSG_TIMED_OUT), kafka::ErrorClass::kUnreachable);
  EXPECT_EQ(kafka::classify_error(RdKafka::ERR__TRANSPORT), kafka::ErrorClass::kUnreachable);
  EXPECT_EQ(kafka::classify_error(RdKafka::ERR_MSG_SIZE_TOO_LARGE), kafka::ErrorClass::kPermanent);
  EXPECT_EQ(kafka::classify_error(RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED),
            kafka::ErrorClass::kPermanent);
  EXPECT_EQ(kafka::classify_error(RdKafka::ERR_POLICY_VIOLATION), kafka::ErrorClass::kRetryable);
}

// What a replicated cluster answers while a leader moves or too few replicas are in
// sync: the cluster's state, never the event's fault, so no attempt may be counted
// (RelayFailover.* moves leaders and stops two brokers of the 3-node test bed).
TEST(ErrorClass, LeadershipMovesAndTooFewInSyncReplicasDefer) {
  for (auto code : {RdKafka::ERR_NOT_LEADER_FOR_PARTITION, RdKafka::ERR_LEADER_NOT_AVAILABLE,
                    RdKafka::ERR_NOT_ENOUGH_REPLICAS, RdKafka::ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                    RdKafka::ERR_REQUEST_TIMED_OUT, RdKafka::ERR_BROKER_NOT_AVAILABLE}) {
    EXPECT_EQ(kafka::classify_error(code), kafka::ErrorClass::kUnreachable)
        << RdKafka::err2str(code);
  }
}

TEST(MetricsRegistry, RendersPrometheusText) {
  metrics::Registry r;
  r.counter("outbox_events_published_total", "Published", {{"table", "public.t"}}).inc(3);
  r.gauge("outbox_pending_events", "Pending").set(7);
  auto& h = r.histogram("outbox_batch_size", "Batch", {1, 10}, {{"table", "t"}});
  h.observe(5);
  h.observe(50);
  std::string text = r.render();
  EXPECT_NE(text.find("# TYPE outbox_events_published_total counter"), std::string::npos);
  EXPECT_NE(text.find("outbox_events_published_total{table=\"public.t\"} 3"), std::string::npos);
  EXPECT_NE(text.find("outbox_pending_events 7"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_bucket{table=\"t\",le=\"1\"} 0"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_bucket{table=\"t\",le=\"10\"} 1"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_bucket{table=\"t\",le=\"+Inf\"} 2"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_count{table=\"t\"} 2"), std::string::npos);
  EXPECT_THROW(r.gauge("outbox_events_published_total", "x"), std::logic_error);
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

TEST(PgArray, TextLiteralsQuoteEveryElement) {
  EXPECT_EQ(pg_text_array({}), "{}");
  EXPECT_EQ(pg_text_array({"a", "b\"c", "d\\e", "{,}"}), R"({"a","b\"c","d\\e","{,}"})");
}

TEST(PgArray, RendersIntegerArrayLiterals) {
  EXPECT_EQ(pg_int_array(std::vector<int>{}), "{}");
  EXPECT_EQ(pg_int_array(std::vector<long>{1, -2, 3}), "{1,-2,3}");
}

}  // namespace
}  // namespace outbox
