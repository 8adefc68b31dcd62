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

}  // namespace
}  // namespace outbox::cli
