// The relay's producer against the test bed broker's authenticated listeners, with credentials
// laid out as Strimzi's Secrets hold them (up.sh kafka_pki): mutual TLS with a client
// certificate, SCRAM-SHA-512 over TLS, and the refusals a wrong credential must meet.
// Integration: needs `up.sh kafka`.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <librdkafka/rdkafkacpp.h>

#include "cli/publish_options.hpp"
#include "kafka/producer.hpp"
#include "support/testbed.hpp"

namespace outbox::kafka {
namespace {

namespace fs = std::filesystem;

std::string pki(const std::string& file) {
  return testbed::require_env("OUTBOX_TEST_KAFKA_PKI") + "/" + file;
}

cli::PublishOptions options(const std::string& bootstrap_env) {
  cli::PublishOptions o;
  o.brokers = testbed::require_env(bootstrap_env.c_str());
  o.message_timeout = "5s";
  return o;
}

// One message to a fresh topic; the broker's acknowledgement or the reason there is none.
Delivery publish_one(const cli::PublishOptions& o) {
  BatchProducer producer(o.producer_config());
  auto deliveries =
      producer.publish({{testbed::unique_name("auth"), "order-1", R"({"id":1})", {}}});
  return deliveries.at(0);
}

TEST(ProducerAuth, MutualTlsWithAKafkaUsersCertificateDelivers) {
  auto o = options("OUTBOX_TEST_KAFKA_TLS_BOOTSTRAP");
  o.kafka_ca_file = pki("user/ca.crt");
  o.kafka_cert_file = pki("user/user.crt");
  o.kafka_key_file = pki("user/user.key");
  const Delivery d = publish_one(o);
  EXPECT_EQ(d.error_class, ErrorClass::kNone) << d.error;
  EXPECT_GE(d.offset, 0);
}

// A scram-sha-512 KafkaUser's password over TLS. The test bed's broker is Kafka 4.3, which
// checks SCRAM's nonce strictly: librdkafka before 2.6.1 (Debian 12 ships 2.0.2) is refused
// whatever the password, so this also proves the project links its own 2.8 build
// (scripts/librdkafka.sh).
TEST(ProducerAuth, ScramSha512OverTlsWithAKafkaUsersPasswordDelivers) {
  EXPECT_GE(RdKafka::version(), 0x020601ff) << RdKafka::version_str();
  auto o = options("OUTBOX_TEST_KAFKA_SCRAM_BOOTSTRAP");
  o.kafka_ca_file = pki("ca.crt");
  o.sasl_mechanism = "SCRAM-SHA-512";
  o.sasl_username = "outbox-relay";
  o.sasl_password_file = pki("scram/password");
  const Delivery d = publish_one(o);
  EXPECT_EQ(d.error_class, ErrorClass::kNone) << d.error;
  EXPECT_GE(d.offset, 0);
}

TEST(ProducerAuth, TlsWithoutAClientCertificateIsRefused) {
  auto o = options("OUTBOX_TEST_KAFKA_TLS_BOOTSTRAP");
  o.kafka_ca_file = pki("ca.crt");
  const Delivery d = publish_one(o);
  EXPECT_NE(d.error_class, ErrorClass::kNone);
  EXPECT_LT(d.offset, 0);
}

TEST(ProducerAuth, AWrongScramPasswordIsRefused) {
  const fs::path wrong = fs::path(::testing::TempDir()) / "wrong-scram-password";
  std::ofstream(wrong) << "not-the-password\n";
  auto o = options("OUTBOX_TEST_KAFKA_SCRAM_BOOTSTRAP");
  o.kafka_ca_file = pki("ca.crt");
  o.sasl_mechanism = "SCRAM-SHA-512";
  o.sasl_username = "outbox-relay";
  o.sasl_password_file = wrong.string();
  const Delivery d = publish_one(o);
  EXPECT_NE(d.error_class, ErrorClass::kNone);
  EXPECT_LT(d.offset, 0);
}

// TLS is verified: a broker whose certificate does not chain to the given CA is not trusted,
// even with a valid client certificate.
TEST(ProducerAuth, ABrokerCertificateFromAnotherCaIsNotTrusted) {
  const fs::path dir = fs::path(::testing::TempDir()) / testbed::unique_name("other-ca");
  fs::create_directories(dir);
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=other-ca "
      "-keyout " +
      (dir / "ca.key").string() + " -out " + (dir / "ca.crt").string() + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto o = options("OUTBOX_TEST_KAFKA_TLS_BOOTSTRAP");
  o.kafka_ca_file = (dir / "ca.crt").string();
  o.kafka_cert_file = pki("user/user.crt");
  o.kafka_key_file = pki("user/user.key");
  const Delivery d = publish_one(o);
  EXPECT_NE(d.error_class, ErrorClass::kNone);
  EXPECT_LT(d.offset, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace outbox::kafka
