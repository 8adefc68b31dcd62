// points-service: consumes ORDER_PAID events and adds points, exactly once per
// event_id however often Kafka delivers it. Offsets are committed only after the
// database transaction, so a crash in between means a redelivery, which the inbox
// turns into a no-op.
#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "points_service/points_service.hpp"

namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) {
  g_stop = 1;
}

std::string header(RdKafka::Message& m, const std::string& name) {
  if (m.headers() == nullptr) {
    return {};
  }
  RdKafka::Headers::Header h = m.headers()->get_last(name);
  return h.err() == RdKafka::ERR_NO_ERROR && h.value() != nullptr
             ? std::string(static_cast<const char*>(h.value()), h.value_size())
             : std::string();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"points-service: the example consumer, deduped with the inbox"};
  std::string dsn, brokers, topic = "outbox.ORDER_PAID", group = "points-service";
  double idle_exit = 0;
  app.add_option("--dsn", dsn, "PostgreSQL connection string")->envname("POINTS_DSN")->required();
  app.add_option("--brokers", brokers, "Kafka bootstrap servers")->required();
  app.add_option("--topic", topic, "topic to consume")->capture_default_str();
  app.add_option("--group", group, "consumer group")->capture_default_str();
  app.add_option("--idle-exit", idle_exit,
                 "exit after this many seconds without a message (0: never)");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  example::PointsService service(dsn);
  service.migrate();
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", brokers, err);
  conf->set("group.id", group, err);
  conf->set("auto.offset.reset", "earliest", err);
  conf->set("enable.auto.commit", "false", err);
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!consumer) {
    std::cerr << "kafka consumer: " << err << "\n";
    return 1;
  }
  consumer->subscribe({topic});
  long applied = 0, duplicates = 0, stale = 0, rejected = 0;
  long traced = 0;  // applied with the order service's trace context (a W3C traceparent)
  auto last_message = std::chrono::steady_clock::now();
  while (g_stop == 0) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(200));
    if (m->err() != RdKafka::ERR_NO_ERROR) {
      if (idle_exit > 0 && std::chrono::steady_clock::now() - last_message >
                               std::chrono::duration<double>(idle_exit)) {
        break;
      }
      continue;
    }
    last_message = std::chrono::steady_clock::now();
    std::string payload(static_cast<const char*>(m->payload()), m->len());
    try {
      const std::string seq = header(*m, "outbox.seq");
      std::optional<std::int64_t> seq_value;
      if (!seq.empty()) {
        seq_value = std::stoll(seq);
      }
      switch (service.handle(header(*m, "event_id"), header(*m, "biz_type"), payload,
                             m->key() != nullptr ? *m->key() : std::string(), seq_value)) {
        case example::PointsService::Outcome::kApplied:
          ++applied;
          // A real consumer would start its span as a child of this one.
          traced += header(*m, "traceparent").size() == 55 ? 1 : 0;
          break;
        case example::PointsService::Outcome::kDuplicate:
          ++duplicates;
          break;
        case example::PointsService::Outcome::kStale:
          ++stale;
          break;
        case example::PointsService::Outcome::kIgnored:
          break;
      }
    } catch (const std::invalid_argument& e) {
      // A poison message is reported and skipped, never retried forever.
      ++rejected;
      std::cerr << "skipped: " << e.what() << "\n";
    }
    consumer->commitSync(m.get());
  }
  consumer->close();
  std::cout << "points-service: applied " << applied << ", duplicates skipped " << duplicates
            << ", stale skipped " << stale << ", rejected " << rejected << ", traced " << traced
            << std::endl;
  return 0;
}
