#include "topic_admin.hpp"

#include <stdexcept>

namespace outbox::testing {

TopicAdmin::TopicAdmin(const std::string& bootstrap) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err) !=
      RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(err);
  }
  handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (handle_ == nullptr) {
    throw std::runtime_error(err);
  }
  queue_ = rd_kafka_queue_new(handle_);
}

TopicAdmin::~TopicAdmin() {
  rd_kafka_queue_destroy(queue_);
  rd_kafka_destroy(handle_);
}

void TopicAdmin::create(const std::string& topic, int partitions, int replication_factor,
                        const std::map<std::string, std::string>& config) {
  char err[512];
  rd_kafka_NewTopic_t* t =
      rd_kafka_NewTopic_new(topic.c_str(), partitions, replication_factor, err, sizeof err);
  if (t == nullptr) {
    throw std::runtime_error(err);
  }
  for (const auto& [k, v] : config) {
    rd_kafka_NewTopic_set_config(t, k.c_str(), v.c_str());
  }
  rd_kafka_CreateTopics(handle_, &t, 1, nullptr, queue_);
  rd_kafka_NewTopic_destroy(t);
  rd_kafka_event_t* ev = wait("CreateTopics " + topic);
  std::size_t n = 0;
  const rd_kafka_topic_result_t** r =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
  std::string problem = n == 1 && rd_kafka_topic_result_error(r[0]) != RD_KAFKA_RESP_ERR_NO_ERROR
                            ? rd_kafka_err2str(rd_kafka_topic_result_error(r[0]))
                            : "";
  rd_kafka_event_destroy(ev);
  if (!problem.empty()) {
    throw std::runtime_error("creating topic " + topic + ": " + problem);
  }
}

void TopicAdmin::set_config(const std::string& topic,
                            const std::map<std::string, std::string>& config) {
  rd_kafka_ConfigResource_t* res =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
  for (const auto& [k, v] : config) {
    rd_kafka_ConfigResource_set_config(res, k.c_str(), v.c_str());
  }
  rd_kafka_AlterConfigs(handle_, &res, 1, nullptr, queue_);
  rd_kafka_ConfigResource_destroy(res);
  rd_kafka_event_t* ev = wait("AlterConfigs " + topic);
  std::size_t n = 0;
  const rd_kafka_ConfigResource_t** r =
      rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev), &n);
  std::string problem = n == 1 && rd_kafka_ConfigResource_error(r[0]) != RD_KAFKA_RESP_ERR_NO_ERROR
                            ? rd_kafka_err2str(rd_kafka_ConfigResource_error(r[0]))
                            : "";
  rd_kafka_event_destroy(ev);
  if (!problem.empty()) {
    throw std::runtime_error("altering topic " + topic + ": " + problem);
  }
}

std::vector<PartitionInfo> TopicAdmin::partitions(const std::string& topic,
                                                  std::chrono::milliseconds timeout) {
  std::vector<PartitionInfo> out;
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(handle_, topic.c_str(), nullptr);
  if (rkt == nullptr) {
    return out;
  }
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(handle_, 0, rkt, &md, static_cast<int>(timeout.count())) ==
          RD_KAFKA_RESP_ERR_NO_ERROR &&
      md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const rd_kafka_metadata_topic_t& t = md->topics[0];
    for (int i = 0; i < t.partition_cnt; ++i) {
      const rd_kafka_metadata_partition_t& p = t.partitions[i];
      PartitionInfo info;
      info.id = p.id;
      info.leader = p.leader;
      info.replicas.assign(p.replicas, p.replicas + p.replica_cnt);
      info.isr.assign(p.isrs, p.isrs + p.isr_cnt);
      out.push_back(std::move(info));
    }
  }
  if (md != nullptr) {
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(rkt);
  return out;
}

rd_kafka_event_t* TopicAdmin::wait(const std::string& what) {
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue_, 30'000);
  if (ev == nullptr) {
    throw std::runtime_error(what + ": no answer in 30 s");
  }
  if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::string problem = rd_kafka_event_error_string(ev);
    rd_kafka_event_destroy(ev);
    throw std::runtime_error(what + ": " + problem);
  }
  return ev;
}

}  // namespace outbox::testing
