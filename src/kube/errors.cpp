#include "kube/errors.hpp"

namespace outbox::kube {
namespace {

std::string describe(const Status& status) {
  std::string text = "kubernetes API error " + std::to_string(status.code);
  if (!status.reason.empty()) {
    text += " " + status.reason;
  }
  if (!status.message.empty()) {
    text += ": " + status.message;
  }
  for (const auto& cause : status.causes) {
    text += "; " + (cause.field.empty() ? cause.reason : cause.field) + ": " + cause.message;
  }
  return text;
}

std::string string_field(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it != object.end() && it->is_string()) {
    return it->get<std::string>();
  }
  return {};
}

}  // namespace

Status Status::from_json(int http_code, const nlohmann::json& object) {
  Status status;
  status.code = http_code;
  if (!object.is_object()) {
    return status;
  }
  if (auto code = object.find("code"); code != object.end() && code->is_number_integer()) {
    status.code = code->get<int>();
  }
  status.reason = string_field(object, "reason");
  status.message = string_field(object, "message");
  if (auto details = object.find("details"); details != object.end() && details->is_object()) {
    status.kind = string_field(*details, "kind");
    status.name = string_field(*details, "name");
    if (auto causes = details->find("causes"); causes != details->end() && causes->is_array()) {
      for (const auto& cause : *causes) {
        if (cause.is_object()) {
          status.causes.push_back({string_field(cause, "reason"), string_field(cause, "message"),
                                   string_field(cause, "field")});
        }
      }
    }
  }
  return status;
}

Status Status::from_body(int http_code, const std::string& body) {
  auto object = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (object.is_object() && object.value("kind", "") == "Status") {
    Status status = from_json(http_code, object);
    status.code = http_code;  // the HTTP code is authoritative; the body's code may be 0
    return status;
  }
  Status status;
  status.code = http_code;
  status.message = body.substr(0, 200);
  return status;
}

ApiError::ApiError(Status status)
    : std::runtime_error(describe(status)), status_(std::move(status)) {}

}  // namespace outbox::kube
