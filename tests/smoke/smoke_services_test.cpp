// Proves from C++ that each real service of the test bed answers: a libpqxx round
// trip, and a librdkafka produce then consume of one message with headers.
#include <gtest/gtest.h>

#include <librdkafka/rdkafkacpp.h>
#include <pqxx/pqxx>

#include <chrono>
#include <memory>

#include "support/testbed.hpp"

namespace {

TEST(Smoke, PostgresRoundTrip) {
  pqxx::connection conn(outbox::testbed::postgres_dsn());
  pqxx::work tx(conn);
  auto r = tx.exec_params("SELECT $1::int + 1, current_setting('server_version_num')::int", 41);
  EXPECT_EQ(r[0][0].as<int>(), 42);
  EXPECT_GE(r[0][1].as<int>(), 150000) << "PostgreSQL 15 or newer";
}

TEST(Smoke, KafkaProduceThenConsumeWithHeaders) {
  const std::string topic = outbox::testbed::unique_name("smoke");
  std::string err;
  std::unique_ptr<RdKafka::Conf> pconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(pconf->set("bootstrap.servers", outbox::testbed::kafka_bootstrap(), err),
            RdKafka::Conf::CONF_OK);
  pconf->set("enable.idempotence", "true", err);
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(pconf.get(), err));
  ASSERT_TRUE(producer) << err;
  RdKafka::Headers* headers = RdKafka::Headers::create();
  headers->add("event_id", "0e6f6a58-0000-4000-8000-000000000001");
  std::string payload = R"({"hello":"kafka"})";
  std::string key = "k1";
  ASSERT_EQ(producer->produce(topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
                              payload.data(), payload.size(), key.data(), key.size(), 0, headers,
                              nullptr),
            RdKafka::ERR_NO_ERROR);
  ASSERT_EQ(producer->flush(30000), RdKafka::ERR_NO_ERROR);

  std::unique_ptr<RdKafka::Conf> cconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  cconf->set("bootstrap.servers", outbox::testbed::kafka_bootstrap(), err);
  cconf->set("group.id", topic, err);
  cconf->set("auto.offset.reset", "earliest", err);
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(cconf.get(), err));
  ASSERT_TRUE(consumer) << err;
  consumer->subscribe({topic});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool got = false;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(500));
    if (m->err() != RdKafka::ERR_NO_ERROR) {
      continue;
    }
    got = true;
    EXPECT_EQ(*m->key(), key);
    EXPECT_EQ(std::string(static_cast<const char*>(m->payload()), m->len()), payload);
    ASSERT_NE(m->headers(), nullptr);
    auto h = m->headers()->get_last("event_id");
    EXPECT_EQ(std::string(static_cast<const char*>(h.value()), h.value_size()),
              "0e6f6a58-0000-4000-8000-000000000001");
  }
  consumer->close();
  EXPECT_TRUE(got) << "the message came back from the broker";
}

}  // namespace
