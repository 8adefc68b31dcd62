#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// Failures of the Kubernetes client, split by who can act on them:
//  - ConfigError: the kubeconfig or in-cluster environment is unusable (fix the config);
//  - TransportError: no HTTP answer (DNS, connect, TLS, deadline); usually retryable;
//  - ApiError: the apiserver answered with a non-2xx Status; reason and code decide.
namespace outbox::kube {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A write the client's write guard refused before sending it (e.g. this process no longer
// holds its Lease). Nothing reached the apiserver.
class WriteRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One entry of Status.details.causes: for 422 Invalid, the field and what is wrong with it.
struct StatusCause {
  std::string reason;   // e.g. "FieldValueRequired"
  std::string message;  // e.g. "Required value"
  std::string field;    // e.g. "metadata.name"
};

// The meta/v1 Status object the apiserver returns with every error.
struct Status {
  int code = 0;        // HTTP status code
  std::string reason;  // machine-readable: NotFound, AlreadyExists, Conflict, Invalid, Expired, ...
  std::string message;  // human-readable
  std::string kind;     // details.kind
  std::string name;     // details.name
  std::vector<StatusCause> causes;

  // Builds a Status from a response body. A body that is not a Status (a proxy's HTML page,
  // truncated JSON) still yields a Status carrying the HTTP code and the start of the body.
  static Status from_body(int http_code, const std::string& body);
  static Status from_json(int http_code, const nlohmann::json& object);
};

class ApiError : public std::runtime_error {
 public:
  explicit ApiError(Status status);

  const Status& status() const { return status_; }
  int code() const { return status_.code; }
  const std::string& reason() const { return status_.reason; }

  bool is_not_found() const { return status_.code == 404; }
  bool is_conflict() const { return status_.code == 409 && status_.reason != "AlreadyExists"; }
  bool is_already_exists() const {
    return status_.code == 409 && status_.reason == "AlreadyExists";
  }
  // 410 Gone, or reason Expired/Gone (old servers): the resourceVersion or continue token is
  // too old; a watcher must relist.
  bool is_gone() const {
    return status_.code == 410 || status_.reason == "Expired" || status_.reason == "Gone";
  }
  bool is_invalid() const { return status_.code == 422; }

 private:
  Status status_;
};

}  // namespace outbox::kube
