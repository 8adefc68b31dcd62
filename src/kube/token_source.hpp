#pragma once

#include <chrono>
#include <mutex>
#include <string>

// The bearer token for a request. A token file (in-cluster service account, kubeconfig
// tokenFile) is re-read when the cached copy is older than the refresh period and after the
// apiserver answered 401, because the kubelet rotates projected tokens (hourly by default) and
// a process that cached the first token for good starts failing once it expires.
namespace outbox::kube {

class TokenSource {
 public:
  TokenSource(std::string fixed_token, std::string token_file,
              std::chrono::seconds refresh_period = std::chrono::seconds(60));

  // Empty when the config has no token (client-certificate auth).
  std::string token();
  // After a 401: drop the cached token if it was read before the failed request started, so a
  // burst of concurrent 401s re-reads the file once.
  void invalidate(std::chrono::steady_clock::time_point request_started);
  bool refreshable() const { return !file_.empty(); }

 private:
  std::mutex mutex_;
  std::string fixed_;
  std::string file_;
  std::chrono::seconds period_;
  std::string cached_;
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace outbox::kube
