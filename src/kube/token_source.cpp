#include "kube/token_source.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "kube/errors.hpp"

namespace outbox::kube {

TokenSource::TokenSource(std::string fixed_token, std::string token_file,
                         std::chrono::seconds refresh_period)
    : fixed_(std::move(fixed_token)), file_(std::move(token_file)), period_(refresh_period) {}

std::string TokenSource::token() {
  if (!fixed_.empty() || file_.empty()) {
    return fixed_;
  }
  std::lock_guard lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  if (!cached_.empty() && now - read_at_ < period_) {
    return cached_;
  }
  std::ifstream in(file_);
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  token.erase(token.begin(), std::find_if(token.begin(), token.end(), not_space));
  token.erase(std::find_if(token.rbegin(), token.rend(), not_space).base(), token.end());
  if (token.empty()) {
    if (!cached_.empty()) {
      return cached_;  // mid-rotation or transient read failure: keep the last good token
    }
    throw ConfigError("token file " + file_ + " is missing or empty");
  }
  cached_ = token;
  read_at_ = now;
  return cached_;
}

void TokenSource::invalidate(std::chrono::steady_clock::time_point request_started) {
  std::lock_guard lock(mutex_);
  if (read_at_ <= request_started) {
    read_at_ = {};
  }
}

}  // namespace outbox::kube
