#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include <nlohmann/json.hpp>

#include "common/version.hpp"

#include "kube/config.hpp"
#include "kube/decode.hpp"
#include "kube/errors.hpp"
#include "kube/resource.hpp"
#include "kube/retry.hpp"
#include "kube/token_source.hpp"
#include "kube/transport.hpp"
#include "kube/watch_decoder.hpp"

// A typed-enough REST client for the Kubernetes API: objects are nlohmann::json, errors are
// ApiError (carrying the server's Status), TransportError or ConfigError.
//
// Guarantees: every call has a deadline; 429 and 5xx answers carrying Retry-After (and any
// 429) are retried up to max_retries, waiting what the server asked (capped); a 401 with a
// file-based token re-reads the token and retries once; all calls share a QPS/burst token
// bucket and a pool of keep-alive connections. Thread-safe: one Client serves all threads.
// Caveat: requests are not retried on transport errors (a POST may or may not have happened);
// callers that retry must tolerate AlreadyExists/NotFound.
namespace outbox::kube {

using Json = nlohmann::json;

struct ClientOptions {
  double qps = 20;  // client-go defaults to 5/10; an operator with a few controllers needs more
  int burst = 40;
  std::chrono::milliseconds timeout{30'000};  // default per-request deadline
  int max_retries = 5;                        // for 429/5xx with Retry-After
  std::chrono::milliseconds max_retry_wait{10'000};
  std::string user_agent = std::string("outbox-operator/") + kVersion;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int page_size = 500;  // client-go's pager default; 0 asks for everything at once
  // "" = quorum read (most recent); "0" = any cached version is fine.
  std::string resource_version;
  DroppedKeys dropped_keys;  // left out of every item as the pages are parsed (decode_json)
};

struct WatchOptions {
  std::string resource_version;  // from the preceding list or the last event seen
  std::string label_selector;
  std::string field_selector;
  int timeout_seconds = 290;  // server ends the watch after this (kube-rs default, < 295)
  // No byte for this long after the stream started = dead connection. Defaults to
  // timeout_seconds + 5 s when zero.
  std::chrono::milliseconds idle_timeout{0};
  DroppedKeys dropped_keys;  // left out of every event's object as it is parsed
};

enum class WatchEnd {
  kClosed,   // the server ended the stream cleanly: re-watch from the last resourceVersion
  kStopped,  // the caller's stop_token was triggered
};

class Client {
 public:
  explicit Client(Config config, ClientOptions options = {});

  const Config& config() const { return config_; }
  const ClientOptions& options() const { return options_; }

  // `timeout` on the typed calls: the deadline of each attempt; zero means options().timeout.
  Json get(const Resource& resource, const std::string& ns, const std::string& name,
           std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // The object's metadata only (a meta.k8s.io/v1 PartialObjectMetadata): for a Secret, its name,
  // labels and resourceVersion without the values, which then never enter this process.
  Json get_metadata(const Resource& resource, const std::string& ns, const std::string& name);
  // Follows `continue` tokens and returns one List object: all items, and the
  // metadata.resourceVersion of the first page (the snapshot a watch resumes from).
  Json list(const Resource& resource, const std::string& ns, const ListOptions& options = {});
  // The same list one page at a time: `on_page` gets each List page (its items, kind and
  // apiVersion) and may consume it; only one page is in memory at once. Returns the
  // metadata.resourceVersion of the first page.
  std::string list_pages(const Resource& resource, const std::string& ns,
                         const ListOptions& options,
                         const std::function<void(Json& page)>& on_page);
  Json create(const Resource& resource, const std::string& ns, const Json& object,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // PUT; when object.metadata.resourceVersion is set the write is conditional (409 if stale).
  Json update(const Resource& resource, const std::string& ns, const Json& object,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  Json update_status(const Resource& resource, const std::string& ns, const Json& object);
  // Returns the deleted object or a Status, as the server answers.
  Json remove(const Resource& resource, const std::string& ns, const std::string& name);
  Json merge_patch(const Resource& resource, const std::string& ns, const std::string& name,
                   const Json& patch, const std::string& subresource = "");
  // Server-side apply: `object` must carry apiVersion, kind, metadata.name and every field
  // this manager owns; fields the manager stops sending are removed.
  Json apply(const Resource& resource, const std::string& ns, const Json& object,
             const std::string& field_manager, bool force = true,
             const std::string& subresource = "");
  Json apply_status(const Resource& resource, const std::string& ns, const Json& object,
                    const std::string& field_manager, bool force = true) {
    return apply(resource, ns, object, field_manager, force, "status");
  }

  // Called right before each attempt of every request that is not a GET (after the rate
  // limiter and any retry wait, so time spent queued counts); it throws (WriteRefused) to stop
  // the write. Set it before the client is shared between threads; empty: no guard.
  using WriteGuard = std::function<void(const std::string& method, const std::string& target)>;
  void set_write_guard(WriteGuard guard) { write_guard_ = std::move(guard); }

  // Any request; returns the parsed JSON body of a 2xx answer, throws ApiError otherwise.
  // `timeout` zero means options().timeout.
  Json request(const std::string& method, const std::string& target, const std::string& body = "",
               const std::string& content_type = "",
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
               const std::string& accept = "application/json");

  // One watch request, blocking until it ends. Events are handed to `on_event` in order.
  // Throws ApiError when the server refuses the watch (e.g. 410 Gone) or sends an ERROR
  // event (a 410 in a 200 stream is the usual "too old resource version"), TransportError
  // when the connection fails or stays idle too long, WatchDecodeError on garbage.
  WatchEnd watch(const Resource& resource, const std::string& ns, const WatchOptions& options,
                 const std::function<void(WatchEvent&)>& on_event, std::stop_token stop = {});

 private:
  HttpResponse send_with_retries(HttpRequest request, std::chrono::milliseconds timeout);
  Json parse_answer(const std::string& method, const std::string& target, HttpResponse response,
                    const DroppedKeys& dropped);

  Config config_;
  ClientOptions options_;
  TokenSource tokens_;
  TokenBucket limiter_;
  std::unique_ptr<Transport> transport_;
  WriteGuard write_guard_;
};

}  // namespace outbox::kube
