#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace outbox::testing {

// One partition as the cluster's metadata describes it.
struct PartitionInfo {
  int id = -1;
  int leader = -1;  // broker (node) id; -1 while the partition has none
  std::vector<int> replicas;
  std::vector<int> isr;
};

// Creates topics with particular settings, changes them and reads their
// partitions' leaders, through librdkafka's admin and metadata API.
class TopicAdmin {
 public:
  explicit TopicAdmin(const std::string& bootstrap);
  ~TopicAdmin();
  TopicAdmin(const TopicAdmin&) = delete;
  TopicAdmin& operator=(const TopicAdmin&) = delete;

  void create(const std::string& topic, int partitions, int replication_factor,
              const std::map<std::string, std::string>& config);

  // AlterConfigs replaces the topic's overrides with `config` as a whole.
  void set_config(const std::string& topic, const std::map<std::string, std::string>& config);

  // The topic's partitions, in partition order; empty when no broker answered
  // within `timeout` or the topic is unknown.
  std::vector<PartitionInfo> partitions(const std::string& topic,
                                        std::chrono::milliseconds timeout);

 private:
  // The next admin result; throws on a request-level error (the event is the caller's otherwise).
  rd_kafka_event_t* wait(const std::string& what);

  rd_kafka_t* handle_ = nullptr;
  rd_kafka_queue_t* queue_ = nullptr;
};

}  // namespace outbox::testing
