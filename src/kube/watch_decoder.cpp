#include "kube/watch_decoder.hpp"

namespace outbox::kube {
namespace {

bool blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string excerpt(std::string_view text) {
  return std::string(text.substr(0, 120)) + (text.size() > 120 ? "..." : "");
}

}  // namespace

WatchDecoder::WatchDecoder(size_t max_event_bytes, DroppedKeys dropped)
    : max_event_bytes_(max_event_bytes), dropped_(std::move(dropped)) {}

WatchEvent WatchDecoder::decode(std::string_view line) const {
  auto value = decode_json(line, dropped_);
  if (value.is_discarded()) {
    throw WatchDecodeError("watch stream: invalid JSON event: " + excerpt(line));
  }
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string() ||
      !value.contains("object") || !value["object"].is_object()) {
    throw WatchDecodeError("watch stream: event without string 'type' and object 'object': " +
                           excerpt(line));
  }
  const std::string type = value["type"].get<std::string>();
  WatchEvent event{WatchEventType::kError, std::move(value["object"])};
  if (type == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    event.type = WatchEventType::kError;
  } else {
    throw WatchDecodeError("watch stream: unknown event type '" + type + "'");
  }
  return event;
}

std::vector<WatchEvent> WatchDecoder::feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<WatchEvent> events;
  size_t start = 0;
  for (;;) {
    size_t newline = buffer_.find('\n', std::max(start, scanned_));
    if (newline == std::string::npos) {
      break;
    }
    std::string_view line(buffer_.data() + start, newline - start);
    if (!blank(line)) {
      events.push_back(decode(line));
    }
    start = newline + 1;
  }
  buffer_.erase(0, start);
  scanned_ = buffer_.size();
  if (buffer_.size() > max_event_bytes_) {
    throw WatchDecodeError("watch stream: event larger than " + std::to_string(max_event_bytes_) +
                           " bytes without a line end");
  }
  return events;
}

std::vector<WatchEvent> WatchDecoder::finish() {
  std::vector<WatchEvent> events;
  if (!blank(buffer_)) {
    std::string rest = std::move(buffer_);
    buffer_.clear();
    auto value = nlohmann::json::parse(rest, nullptr, false);
    if (value.is_discarded()) {
      throw WatchDecodeError("watch stream ended inside an event (" + std::to_string(rest.size()) +
                             " bytes): " + excerpt(rest));
    }
    events.push_back(decode(rest));
  }
  buffer_.clear();
  scanned_ = 0;
  return events;
}

}  // namespace outbox::kube
