#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/publish_options.hpp"

namespace outbox::cli {
namespace {

namespace fs = std::filesystem;

// A Secret as the kubelet mounts it: each key a symlink into a timestamped directory that
// `..data` points at, and the kubelet's own entries starting with dots.
fs::path mounted_secret(const std::map<std::string, std::string>& data) {
  fs::path dir =
      fs::temp_directory_path() /
      ("kafka-config-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  const fs::path versioned = dir / "..2026_12_03_10_00_00.123456789";
  fs::create_directories(versioned);
  for (const auto& [key, value] : data) {
    std::ofstream(versioned / key) << value;
  }
  fs::create_directory_symlink(versioned.filename(), dir / "..data");
  for (const auto& [key, value] : data) {
    fs::create_symlink(fs::path("..data") / key, dir / key);
  }
  return dir;
}

TEST(PublishOptions, KafkaConfigDirReadsOneFilePerPropertyAsTheKubeletMountsIt) {
  const fs::path dir = mounted_secret({{"security.protocol", "SASL_SSL\n"},
                                       {"sasl.mechanism", "SCRAM-SHA-512"},
                                       {"sasl.password", "p'ss \"word\\\n"}});
  PublishOptions o;
  o.brokers = "127.0.0.1:9092";
  o.kafka_config_dir = dir.string();
  o.kafka_properties = {"client.id=from-flag"};
  const kafka::ProducerConfig c = o.producer_config();
  EXPECT_EQ(c.properties.size(), 4u);
  EXPECT_EQ(c.properties.at("security.protocol"), "SASL_SSL") << "trailing newlines dropped";
  EXPECT_EQ(c.properties.at("sasl.mechanism"), "SCRAM-SHA-512");
  EXPECT_EQ(c.properties.at("sasl.password"), "p'ss \"word\\") << "the value byte for byte";
  EXPECT_EQ(c.properties.at("client.id"), "from-flag");
  EXPECT_FALSE(c.properties.contains("..data"));
  fs::remove_all(dir);
}

TEST(PublishOptions, AMissingKafkaConfigDirIsAClearError) {
  PublishOptions o;
  o.kafka_config_dir = "/nonexistent/kafka-config";
  try {
    o.producer_config();
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read kafka config directory /nonexistent"),
              std::string::npos)
        << e.what();
  }
}

// A Secret mounted as files and a path into it, as the relay pod sees a KafkaUser's Secret.
std::string file_in(const fs::path& dir, const std::string& key) {
  return (dir / key).string();
}

TEST(PublishOptions, StrimziTlsUserCredentialsBecomeVerifiedMutualTls) {
  const fs::path user =
      mounted_secret({{"ca.crt", "CA"}, {"user.crt", "CRT"}, {"user.key", "KEY"}});
  PublishOptions o;
  o.brokers = "kafka:9093";
  o.kafka_ca_file = file_in(user, "ca.crt");
  o.kafka_cert_file = file_in(user, "user.crt");
  o.kafka_key_file = file_in(user, "user.key");
  const auto p = o.producer_config().properties;
  EXPECT_EQ(p.at("security.protocol"), "SSL");
  EXPECT_EQ(p.at("ssl.ca.location"), file_in(user, "ca.crt")) << "a path, never the PEM itself";
  EXPECT_EQ(p.at("ssl.certificate.location"), file_in(user, "user.crt"));
  EXPECT_EQ(p.at("ssl.key.location"), file_in(user, "user.key"));
  EXPECT_EQ(p.at("enable.ssl.certificate.verification"), "true");
  EXPECT_EQ(p.at("ssl.endpoint.identification.algorithm"), "https");
  fs::remove_all(user);
}

TEST(PublishOptions, StrimziScramUserCredentialsBecomeSaslOverTls) {
  // One directory per test: the cluster CA's Secret and the user's, mounted side by side.
  const fs::path user = mounted_secret({{"password", "s3cret\n"}, {"ca.crt", "CA"}});
  PublishOptions o;
  o.kafka_ca_file = file_in(user, "ca.crt");
  o.sasl_mechanism = "SCRAM-SHA-512";
  o.sasl_username = "orders-relay";
  o.sasl_password_file = file_in(user, "password");
  const auto p = o.producer_config().properties;
  EXPECT_EQ(p.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(p.at("sasl.mechanism"), "SCRAM-SHA-512");
  EXPECT_EQ(p.at("sasl.username"), "orders-relay");
  EXPECT_EQ(p.at("sasl.password"), "s3cret") << "read from the file, trailing newline dropped";
  o.kafka_ca_file.clear();
  EXPECT_EQ(o.producer_config().properties.at("security.protocol"), "SASL_PLAINTEXT");
  fs::remove_all(user);
}

// Each refusal names what to fix.
void expect_refused(const PublishOptions& o, const std::string& message) {
  try {
    o.producer_config();
    FAIL() << "no error, expected: " << message;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(PublishOptions, IncompleteOrConflictingCredentialsAreRefused) {
  const fs::path user =
      mounted_secret({{"ca.crt", "CA"}, {"user.crt", "CRT"}, {"user.key", "KEY"}});
  PublishOptions o;
  o.kafka_cert_file = file_in(user, "user.crt");
  expect_refused(o, "--kafka-cert-file and --kafka-key-file go together");
  o.kafka_key_file = file_in(user, "missing.key");
  expect_refused(o, "--kafka-key-file: cannot read");
  PublishOptions s;
  s.sasl_mechanism = "SCRAM-SHA-512";
  s.sasl_username = "orders-relay";
  expect_refused(s, "--kafka-sasl-password-file go together");
  PublishOptions c;
  c.kafka_ca_file = file_in(user, "ca.crt");
  c.kafka_properties = {"enable.ssl.certificate.verification=false"};
  expect_refused(c, "enable.ssl.certificate.verification is set twice");
  fs::remove_all(user);
}

TEST(PublishOptions, TheDeadLetterTopicMustBeOneLegalTopicName) {
  PublishOptions o;
  EXPECT_EQ(o.policy().dead_letter_topic, "") << "none unless set";
  o.dead_letter_topic = "orders.dead-letters";
  EXPECT_EQ(o.policy().dead_letter_topic, "orders.dead-letters");
  o.dead_letter_topic = "orders.{biz_type}";
  try {
    o.policy();
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--dead-letter-topic: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace outbox::cli
