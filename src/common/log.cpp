#include "common/log.hpp"

#include <libpq-fe.h>

#include <cstdlib>
#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace outbox {
namespace {

// %* in the json pattern: the message as a JSON string, quotes included. Messages
// carry libpq and librdkafka errors verbatim (quotes, newlines, backslashes, bytes
// that are not UTF-8), and a log line a collector cannot parse is lost.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted = nlohmann::json(std::string(msg.payload.data(), msg.payload.size()))
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
    for (char c : msg.payload) {
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

bool is_secret(const PQconninfoOption& option) {
  // libpq marks password fields with dispchar "*" (password, sslpassword); the
  // name test also covers a secret a future libpq adds without that mark.
  return (option.dispchar != nullptr && option.dispchar[0] == '*') ||
         std::string_view(option.keyword).find("password") != std::string_view::npos;
}

// A value in libpq's key=value syntax: quoted when it has to be.
std::string conninfo_value(std::string_view value) {
  bool plain = !value.empty();
  for (char c : value) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' || c == '\\' || c == '=') {
      plain = false;
    }
  }
  if (plain) {
    return std::string(value);
  }
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

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

std::string redact_dsn(std::string_view dsn) {
  // libpq's own parser, so that the result agrees with what libpq connects with
  // whatever the quoting (a regex stops at an escaped quote and leaks the rest).
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(std::string(dsn).c_str(), &error);
  if (options == nullptr) {
    // libpq's message quotes the text it choked on, which may be the password.
    PQfreemem(error);
    return "(connection string not shown: libpq cannot parse it)";
  }
  std::string out;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) {
      continue;  // PQconninfoParse reports only what the string sets
    }
    if (!out.empty()) {
      out.push_back(' ');
    }
    out += o->keyword;
    out += '=';
    out += is_secret(*o) ? "***" : conninfo_value(o->val);
  }
  PQconninfoFree(options);
  return out;
}

}  // namespace outbox
