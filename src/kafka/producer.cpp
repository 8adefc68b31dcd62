#include "kafka/producer.hpp"

#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <charconv>
#include <limits>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "common/redact.hpp"

namespace outbox::kafka {

ErrorClass classify_error(int code) {
  switch (static_cast<RdKafka::ErrorCode>(code)) {
    case RdKafka::ERR_NO_ERROR:
      return ErrorClass::kNone;
    case RdKafka::ERR__MSG_TIMED_OUT:
    case RdKafka::ERR__TIMED_OUT:
    case RdKafka::ERR__TRANSPORT:
    case RdKafka::ERR__ALL_BROKERS_DOWN:
    case RdKafka::ERR__QUEUE_FULL:
    case RdKafka::ERR__PURGE_QUEUE:
    case RdKafka::ERR__PURGE_INFLIGHT:
    case RdKafka::ERR_REQUEST_TIMED_OUT:
    case RdKafka::ERR_NETWORK_EXCEPTION:
    case RdKafka::ERR_LEADER_NOT_AVAILABLE:
    case RdKafka::ERR_NOT_LEADER_FOR_PARTITION:
    case RdKafka::ERR_NOT_ENOUGH_REPLICAS:
    case RdKafka::ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RdKafka::ERR_BROKER_NOT_AVAILABLE:
      return ErrorClass::kUnreachable;
    case RdKafka::ERR_MSG_SIZE_TOO_LARGE:
    case RdKafka::ERR_RECORD_LIST_TOO_LARGE:
    case RdKafka::ERR_INVALID_MSG:
    case RdKafka::ERR_INVALID_RECORD:
    case RdKafka::ERR_TOPIC_EXCEPTION:
    case RdKafka::ERR__INVALID_ARG:
    case RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED:
      return ErrorClass::kPermanent;
    default:
      return ErrorClass::kRetryable;
  }
}

namespace {

// Whole decimal number in [min, max]; false for anything else (librdkafka would
// refuse it anyway, with its own message).
bool integer_within(const std::string& text, long long min, long long max) {
  long long n = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  return ec == std::errc() && ptr == end && n >= min && n <= max;
}

std::string refused(const std::string& key, const std::string& value, const std::string& why) {
  return "kafka property " + key + "=" + value + " is refused: " + why +
         "; remove it from the Kafka Secret";
}

}  // namespace

std::string guarantee_problem(const std::map<std::string, std::string>& properties) {
  // Keys are librdkafka's names and their aliases. Values are shown: none of
  // these keys holds a secret.
  for (const auto& [key, value] : properties) {
    if (key == "enable.idempotence" && value != "true") {
      return refused(key, value,
                     "the relay needs the idempotent producer, or a retried request can write an "
                     "event twice or reorder the events of a key");
    }
    if ((key == "acks" || key == "request.required.acks") && value != "all" && value != "-1") {
      return refused(key, value,
                     "only acks=all (-1) makes an event marked sent survive the loss of the "
                     "partition leader");
    }
    if ((key == "max.in.flight.requests.per.connection" || key == "max.in.flight") &&
        !integer_within(value, 1, 5)) {
      return refused(key, value,
                     "the idempotent producer keeps the order of a partition only with 1 to 5 "
                     "requests in flight");
    }
    if ((key == "retries" || key == "message.send.max.retries") &&
        !integer_within(value, 1, std::numeric_limits<int>::max())) {
      return refused(key, value,
                     "without retries a passing broker error fails the request, and the "
                     "idempotent producer requires at least 1");
    }
    if (key == "partitioner" && value != "murmur2_random" && value != "murmur2" &&
        value != "consistent_random" && value != "consistent") {
      return refused(key, value,
                     "the events of a key must all go to the partition their key hashes to, or "
                     "their order is lost; allowed: murmur2_random (the default, as the Java "
                     "client), murmur2, consistent_random, consistent");
    }
  }
  return {};
}

std::string client_event_line(bool error_event, const std::string& facility,
                              const std::string& text, bool broker_reached) {
  if (!error_event && facility == "FAIL") {
    return {};  // the error event that follows carries the same text
  }
  std::string line = error_event ? text : facility + " " + text;
  if (broker_reached) {
    // librdkafka 2.0's two wordings of the hint; what follows it, "(after 12ms
    // in state UP)", stays.
    const std::pair<const char*, const char*> hints[] = {
        {": verify that security.protocol is correctly configured", " by the broker"},
        {": might be caused by incorrect security.protocol", ""}};
    for (const auto& [hint, instead] : hints) {
      if (auto at = line.find(hint); at != std::string::npos) {
        const auto end = line.find(" (after ", at);
        line.replace(at, end == std::string::npos ? std::string::npos : end - at, instead);
      }
    }
  }
  return line;
}

std::string scram_hint(const std::string& line, int librdkafka_version) {
  constexpr int kFixed = 0x020601ff;  // 2.6.1
  if (librdkafka_version >= kFixed || line.find("SASL authentication error") == std::string::npos ||
      line.find("invalid credentials with SASL mechanism SCRAM") == std::string::npos) {
    return {};
  }
  return " (if the password is right: librdkafka before 2.6.1, as this build links, cannot "
         "complete SCRAM with Kafka 4.0 or later brokers; use mutual TLS, or a relay image "
         "with a newer librdkafka)";
}

std::string topic_name_problem(const std::string& topic) {
  if (topic.empty()) {
    return "topic name is empty";
  }
  if (topic.size() > 249) {
    return "topic name longer than 249 characters";
  }
  if (topic == "." || topic == "..") {
    return "topic name cannot be '.' or '..'";
  }
  for (char c : topic) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return "topic name \"" + topic + "\" has a character outside [a-zA-Z0-9._-]";
    }
  }
  return {};
}

struct BatchProducer::Callbacks : public RdKafka::DeliveryReportCb, public RdKafka::EventCb {
  // The batch in flight: one result per message, until its report says otherwise
  // counted as not delivered.
  std::vector<Delivery> results;
  std::size_t outstanding = 0;
  bool in_flight = false;
  // Reports of a batch that timed out or was abandoned can arrive during a later
  // batch; the generation in each message's opaque keeps them off the wrong event.
  std::uint32_t generation = 0;

  void dr_cb(RdKafka::Message& m) override {
    auto opaque = reinterpret_cast<std::uintptr_t>(m.msg_opaque());
    if ((opaque >> 32) != generation) {
      return;  // a straggler from an earlier batch, already counted as not delivered
    }
    std::size_t index = opaque & 0xffffffffu;
    if (index < results.size()) {
      Delivery& d = results[index];
      d.error_class = classify_error(m.err());
      broker_reached = broker_reached || m.err() == RdKafka::ERR_NO_ERROR;
      d.error = m.err() == RdKafka::ERR_NO_ERROR ? "" : redact(m.errstr(), secrets);
      d.partition = m.partition();
      d.offset = m.offset();
    }
    if (outstanding > 0) {
      --outstanding;
    }
  }

  void event_cb(RdKafka::Event& e) override {
    const bool error = e.type() == RdKafka::Event::EVENT_ERROR;
    if (!error && (e.type() != RdKafka::Event::EVENT_LOG ||
                   e.severity() > RdKafka::Event::EVENT_SEVERITY_WARNING)) {
      return;
    }
    const std::string line =
        client_event_line(error, error ? std::string() : e.fac(), e.str(), broker_reached);
    if (!line.empty()) {
      spdlog::warn("kafka: {}{}", redact(line, secrets), scram_hint(line, RdKafka::version()));
    }
  }

  // A broker answered on this configuration (a delivery or a metadata reply).
  bool broker_reached = false;
  // The secret properties' values: librdkafka quotes a setting it cannot read (an unsecured
  // JWT config it stops reading at, with the rest of it). Set before the producer exists.
  Secrets secrets;
};

BatchProducer::BatchProducer(const ProducerConfig& config)
    : callbacks_(std::make_unique<Callbacks>()),
      wait_limit_(config.message_timeout + std::chrono::seconds(5)) {
  if (std::string problem = guarantee_problem(config.properties); !problem.empty()) {
    throw std::invalid_argument(problem);
  }
  callbacks_->secrets.add_kafka_properties(config.properties);
  const Secrets& secrets = callbacks_->secrets;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  auto set = [&](const std::string& key, const std::string& value) {
    if (conf->set(key, value, err) != RdKafka::Conf::CONF_OK) {
      // Name the property, never its value: it may be a password. librdkafka's reason quotes
      // the value (of a line that ran two settings together: "PLAIN sasl.password=...").
      throw std::invalid_argument("kafka property " + key + " rejected: " + redact(err, secrets));
    }
  };
  set("bootstrap.servers", config.bootstrap_servers);
  // Idempotence implies acks=all and in-order retries per partition.
  set("enable.idempotence", "true");
  set("acks", "all");
  // Same key -> same partition as the Java client, so mixed producers agree.
  set("partitioner", "murmur2_random");
  set("linger.ms", std::to_string(config.linger.count()));
  set("message.timeout.ms", std::to_string(config.message_timeout.count()));
  // Applied after the defaults so that SASL, TLS and tuning can be set; the ones
  // that would weaken the defaults are refused above.
  for (const auto& [key, value] : config.properties) {
    set(key, value);
  }
  if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(callbacks_.get()), err) !=
          RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", static_cast<RdKafka::EventCb*>(callbacks_.get()), err) !=
          RdKafka::Conf::CONF_OK) {
    throw std::runtime_error("kafka callbacks: " + redact(err, secrets));
  }
  producer_.reset(RdKafka::Producer::create(conf.get(), err));
  if (!producer_) {
    throw std::runtime_error("kafka producer: " + redact(err, secrets));
  }
}

BatchProducer::~BatchProducer() {
  if (producer_) {
    producer_->flush(5000);
  }
}

std::vector<Delivery> BatchProducer::publish(const std::vector<Message>& messages) {
  send(messages);
  return collect();
}

void BatchProducer::send(const std::vector<Message>& messages) {
  Callbacks& cb = *callbacks_;
  if (cb.in_flight) {
    throw std::logic_error("BatchProducer::send while a batch is uncollected");
  }
  cb.results.assign(messages.size(),
                    Delivery{ErrorClass::kUnreachable, "no delivery report", -1, -1});
  cb.outstanding = 0;
  cb.in_flight = true;
  for (const Message& m : messages) {
    learn_topic(m.topic);
  }
  const std::uintptr_t generation = ++cb.generation;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    RdKafka::Headers* headers = RdKafka::Headers::create();
    for (const auto& [name, value] : m.headers) {
      headers->add(name, value);
    }
    RdKafka::ErrorCode code;
    while (true) {
      code = producer_->produce(m.topic, RdKafka::Topic::PARTITION_UA,
                                RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(m.payload.data()),
                                m.payload.size(), m.key.data(), m.key.size(), 0, headers,
                                reinterpret_cast<void*>((generation << 32) | i));
      if (code != RdKafka::ERR__QUEUE_FULL) {
        break;
      }
      producer_->poll(10);  // local queue full: let deliveries drain, then retry
    }
    if (code == RdKafka::ERR_NO_ERROR) {
      ++cb.outstanding;  // headers now belong to librdkafka
    } else {
      delete headers;
      cb.results[i].error_class = classify_error(code);
      cb.results[i].error = RdKafka::err2str(code);
    }
  }
  // Serve reports that are already in (cheap), so collect() rarely waits long.
  producer_->poll(0);
}

// librdkafka looks up a topic it has not seen on its next one-second topic scan
// when a metadata request is already under way, so the first batch to a new topic
// could wait a second. Asking for the topic's metadata once, up front, avoids it.
void BatchProducer::learn_topic(const std::string& topic) {
  if (!known_topics_.insert(topic).second) {
    return;
  }
  std::string err;
  std::unique_ptr<RdKafka::Topic> handle(
      RdKafka::Topic::create(producer_.get(), topic, nullptr, err));
  RdKafka::Metadata* raw = nullptr;
  if (handle &&  // best effort: failure is harmless
      producer_->metadata(false, handle.get(), &raw, 1000) == RdKafka::ERR_NO_ERROR) {
    callbacks_->broker_reached = true;
  }
  delete raw;
}

std::vector<Delivery> BatchProducer::collect() {
  Callbacks& cb = *callbacks_;
  if (!cb.in_flight) {
    return {};
  }
  auto deadline = std::chrono::steady_clock::now() + wait_limit_;
  while (cb.outstanding > 0 && std::chrono::steady_clock::now() < deadline) {
    producer_->poll(50);
  }
  if (cb.outstanding > 0) {
    // Reports that never came: purge, and count them as not delivered (they may
    // have been; at-least-once allows it). The generation bump keeps their late
    // reports off the next batch.
    producer_->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT);
    ++cb.generation;
    producer_->poll(0);
  }
  cb.in_flight = false;
  return std::move(cb.results);
}

void BatchProducer::abandon() {
  ++callbacks_->generation;
  callbacks_->in_flight = false;
  callbacks_->results.clear();
}

void BatchProducer::flush(std::chrono::milliseconds timeout) {
  producer_->flush(static_cast<int>(timeout.count()));
}

bool BatchProducer::probe(std::chrono::milliseconds timeout) {
  RdKafka::Metadata* raw = nullptr;
  auto code = producer_->metadata(false, nullptr, &raw, static_cast<int>(timeout.count()));
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  const bool reached = code == RdKafka::ERR_NO_ERROR && metadata && !metadata->brokers()->empty();
  callbacks_->broker_reached = callbacks_->broker_reached || reached;
  return reached;
}

}  // namespace outbox::kafka
