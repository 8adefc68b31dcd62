#include "common/log.hpp"

#include <cstdlib>
#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/redact.hpp"

namespace outbox {
namespace {

// The message of a log record without the secrets this process has read: the last place a
// credential that some path forgot to redact can be stopped before it leaves the process (a
// Job's log is also its termination message, which the OutboxRelay's conditions quote).
std::string redacted(const spdlog::details::log_msg& msg) {
  return redact(std::string_view(msg.payload.data(), msg.payload.size()));
}

// %* in the json pattern: the message as a JSON string, quotes included. Messages
// carry libpq and librdkafka errors verbatim (quotes, newlines, backslashes, bytes
// that are not UTF-8), and a log line a collector cannot parse is lost.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted = nlohmann::json(redacted(msg))
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// `,"name":value` for a JSON line, both escaped (bytes that are not UTF-8 replaced).
std::string json_field(const std::string& name, const std::string& value) {
  // Appended piece by piece: GCC 12's -O3 sees a false overlap in "," + std::string&&.
  std::string pair(1, ',');
  pair += nlohmann::json(name).dump();
  pair += ':';
  pair += nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return pair;
}

// The scoped fields of the logging thread (spdlog's stderr logger formats on the caller's
// thread), innermost last.
thread_local LogFields t_scoped_fields;

// %& in the json pattern: the scoped fields as `,"name":value` pairs.
class JsonScopedFieldsFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (const auto& [name, value] : t_scoped_fields) {
      const std::string pair = json_field(name, value);
      dest.append(pair.data(), pair.data() + pair.size());
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonScopedFieldsFlag>();
  }
};

// %* in the text pattern: the message with control characters spelled out, so
// one record stays one line (a multi-line libpq error would otherwise look like
// several records, the later ones without time or level).
class OneLineMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : redacted(msg)) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '\n') {
        dest.append(std::string_view("\\n"));
      } else if (c == '\r') {
        dest.append(std::string_view("\\r"));
      } else if (c == '\t') {
        dest.append(std::string_view("\\t"));
      } else if (u < 0x20 || u == 0x7f) {
        const char escaped[] = {'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
        dest.append(escaped, escaped + sizeof escaped);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<OneLineMessageFlag>();
  }
};

// What configure_logging was last given.
std::string g_level = "info";
std::string g_format = "text";

}  // namespace

std::string logging_level() {
  return g_level;
}

std::string logging_format() {
  return g_format;
}

LogFields log_fields_from_environment() {
  LogFields fields;
  for (const auto& [variable, field] : {std::pair{"OUTBOX_LOG_NAMESPACE", "namespace"},
                                        std::pair{"OUTBOX_LOG_OUTBOXRELAY", "outboxrelay"},
                                        std::pair{"OUTBOX_LOG_REPLICA", "replica"}}) {
    if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') {
      fields.emplace_back(field, value);
    }
  }
  return fields;
}

bool configure_logging(std::string_view level, std::string_view format, const LogFields& fields) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return false;
  }
  std::unique_ptr<spdlog::pattern_formatter> formatter;
  if (format == "json") {
    // Constant fields, escaped once here; spdlog patterns treat % specially.
    std::string extra;
    for (const auto& [name, value] : fields) {
      for (char c : json_field(name, value)) {
        extra += c;
        if (c == '%') {
          extra += '%';
        }
      }
    }
    formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonMessageFlag>('*');
    formatter->add_flag<JsonScopedFieldsFlag>('&').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":%*)" + extra + "%&}");
  } else if (format == "text") {
    formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<OneLineMessageFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %*");
  } else {
    return false;
  }
  // Replacing the logger (rather than failing on the taken name) lets a test
  // drive both formats through this function in one process.
  spdlog::drop("outbox");
  auto logger = spdlog::stderr_logger_mt("outbox");
  logger->set_formatter(std::move(formatter));
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  g_level = std::string(level);
  g_format = std::string(format);
  return true;
}

ScopedLogField::ScopedLogField(std::string name, std::string value) {
  t_scoped_fields.emplace_back(std::move(name), std::move(value));
}

ScopedLogField::~ScopedLogField() {
  t_scoped_fields.pop_back();
}

}  // namespace outbox
