// How the producer classifies broker errors, and which topic names it refuses.
#include <gtest/gtest.h>

#include <librdkafka/rdkafkacpp.h>

#include <string>

#include "kafka/producer.hpp"

namespace outbox {
namespace {

TEST(TopicName, IllegalNamesAreExplained) {
  EXPECT_EQ(kafka::topic_name_problem("outbox.order-1_x"), "");
  EXPECT_NE(kafka::topic_name_problem("outbox.ORDER PAID"), "");
  EXPECT_NE(kafka::topic_name_problem(""), "");
  EXPECT_NE(kafka::topic_name_problem(std::string(250, 'a')), "");
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

}  // namespace
}  // namespace outbox
