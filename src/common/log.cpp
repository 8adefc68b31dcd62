#include "common/log.hpp"

#include <regex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace outbox {

bool configure_logging(std::string_view level, std::string_view format) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return false;
  }
  auto logger = spdlog::stderr_logger_mt("outbox");
  if (format == "json") {
    logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":"%v"})",
                        spdlog::pattern_time_type::utc);
  } else if (format == "text") {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  } else {
    return false;
  }
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return true;
}

std::string redact_dsn(std::string_view dsn) {
  static const std::regex kv(R"((password\s*=\s*)('[^']*'|\S+))", std::regex::icase);
  static const std::regex uri(R"(^([a-z]+://[^:/@]+:)([^@]*)@)", std::regex::icase);
  std::string out = std::regex_replace(std::string(dsn), kv, "$1***");
  return std::regex_replace(out, uri, "$1***@");
}

}  // namespace outbox
