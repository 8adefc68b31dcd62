#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/decode.hpp"

// Splits a watch response body into events. The apiserver writes one JSON object per line, but
// HTTP chunks are cut wherever the network and proxies please: bytes are accumulated and an
// event is decoded only once its terminating newline arrived (JSON escapes newlines inside
// strings, so a raw newline always ends a value).
namespace outbox::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type;
  nlohmann::json object;  // for kError a meta/v1 Status
};

class WatchDecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WatchDecoder {
 public:
  static constexpr size_t kMaxEventBytes = 64 * 1024 * 1024;
  // Refuses a single event larger than `max_event_bytes` (a broken stream would otherwise grow
  // forever). Each event's object is parsed without the `dropped` keys (decode_json).
  explicit WatchDecoder(size_t max_event_bytes = kMaxEventBytes, DroppedKeys dropped = {});

  // Appends bytes and returns the events completed by them, in order. Throws
  // WatchDecodeError on a malformed event; the decoder is unusable afterwards.
  std::vector<WatchEvent> feed(std::string_view bytes);
  // At end of stream: a final event without its newline is still decoded; a partial one is
  // an error (the stream was truncated).
  std::vector<WatchEvent> finish();
  size_t buffered() const { return buffer_.size(); }

 private:
  WatchEvent decode(std::string_view line) const;
  std::string buffer_;
  size_t scanned_ = 0;  // bytes of buffer_ already known to contain no newline
  size_t max_event_bytes_;
  DroppedKeys dropped_;
};

}  // namespace outbox::kube
