#include "kube/client.hpp"

#include <thread>

#include <spdlog/spdlog.h>

#include "common/version.hpp"

namespace outbox::kube {
namespace {

std::string object_name(const Json& object) {
  auto name = object.value("/metadata/name"_json_pointer, std::string());
  if (name.empty()) {
    throw std::invalid_argument("object has no metadata.name");
  }
  return name;
}

std::string add_query(std::string target, const std::string& key, const std::string& value) {
  target += target.find('?') == std::string::npos ? '?' : '&';
  return target + key + "=" + url_encode(value);
}

}  // namespace

Client::Client(Config config, ClientOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      tokens_(config_.token, config_.token_file),
      limiter_(options_.qps, options_.burst),
      transport_(std::make_unique<Transport>(config_, options_.user_agent)) {}

HttpResponse Client::send_with_retries(HttpRequest request, std::chrono::milliseconds timeout) {
  bool reauthenticated = false;
  for (int attempt = 0;; ++attempt) {
    limiter_.acquire();
    if (request.method != "GET") {
      if (write_guard_) {
        write_guard_(request.method, request.target);
      }
      spdlog::debug("sending {} {}", request.method, request.target);
    }
    auto started = std::chrono::steady_clock::now();
    request.bearer_token = tokens_.token();
    HttpResponse response = transport_->send(request, timeout);
    if (response.status == 401 && tokens_.refreshable() && !reauthenticated) {
      // The kubelet may have rotated the token since we last read it.
      tokens_.invalidate(started);
      reauthenticated = true;
      continue;
    }
    auto wait = retry_delay(response.status, response.retry_after, attempt, options_.max_retries,
                            options_.max_retry_wait);
    if (!wait) {
      return response;
    }
    spdlog::info("{} {}: {} from the apiserver; retrying in {} ms", request.method, request.target,
                 response.status, wait->count());
    std::this_thread::sleep_for(*wait);
  }
}

Json Client::request(const std::string& method, const std::string& target, const std::string& body,
                     const std::string& content_type, std::chrono::milliseconds timeout,
                     const std::string& accept) {
  HttpRequest request{method, target, body, content_type, {}, accept};
  return parse_answer(
      method, target,
      send_with_retries(std::move(request), timeout.count() > 0 ? timeout : options_.timeout), {});
}

Json Client::parse_answer(const std::string& method, const std::string& target,
                          HttpResponse response, const DroppedKeys& dropped) {
  if (response.status < 200 || response.status >= 300) {
    throw ApiError(Status::from_body(response.status, response.body));
  }
  if (response.body.empty()) {
    return Json::object();
  }
  auto parsed = decode_json(response.body, dropped);
  if (parsed.is_discarded()) {
    throw TransportError(method + " " + target +
                         ": response is not JSON: " + response.body.substr(0, 120));
  }
  return parsed;
}

Json Client::get(const Resource& resource, const std::string& ns, const std::string& name,
                 std::chrono::milliseconds timeout) {
  return request("GET", resource.object_path(ns, name), "", "", timeout);
}

Json Client::get_metadata(const Resource& resource, const std::string& ns,
                          const std::string& name) {
  return request("GET", resource.object_path(ns, name), "", "", std::chrono::milliseconds(0),
                 "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
}

Json Client::list(const Resource& resource, const std::string& ns, const ListOptions& options) {
  Json result;
  Json items = Json::array();
  list_pages(resource, ns, options, [&](Json& page) {
    for (auto& item : page["items"]) {
      items.push_back(std::move(item));
    }
    if (result.is_null()) {
      page.erase("items");
      result = std::move(page);  // keeps kind, apiVersion and the snapshot's resourceVersion
    }
  });
  result["items"] = std::move(items);
  result["metadata"].erase("continue");
  result["metadata"].erase("remainingItemCount");
  return result;
}

std::string Client::list_pages(const Resource& resource, const std::string& ns,
                               const ListOptions& options,
                               const std::function<void(Json& page)>& on_page) {
  std::string snapshot_version;
  std::string continue_token;
  bool first = true;
  do {
    std::string target = resource.collection_path(ns);
    if (!options.label_selector.empty()) {
      target = add_query(target, "labelSelector", options.label_selector);
    }
    if (!options.field_selector.empty()) {
      target = add_query(target, "fieldSelector", options.field_selector);
    }
    if (options.page_size > 0) {
      target = add_query(target, "limit", std::to_string(options.page_size));
    }
    if (!continue_token.empty()) {
      target = add_query(target, "continue", continue_token);
    } else if (!options.resource_version.empty()) {
      target = add_query(target, "resourceVersion", options.resource_version);
    }
    HttpRequest request{"GET", target, "", "", {}, "application/json"};
    Json page = parse_answer("GET", target, send_with_retries(std::move(request), options_.timeout),
                             options.dropped_keys);
    if (first) {
      snapshot_version = page.value("/metadata/resourceVersion"_json_pointer, std::string());
      first = false;
    }
    continue_token = page.value("/metadata/continue"_json_pointer, std::string());
    on_page(page);
  } while (!continue_token.empty());
  return snapshot_version;
}

Json Client::create(const Resource& resource, const std::string& ns, const Json& object,
                    std::chrono::milliseconds timeout) {
  return request("POST", resource.collection_path(ns), object.dump(), "application/json", timeout);
}

Json Client::update(const Resource& resource, const std::string& ns, const Json& object,
                    std::chrono::milliseconds timeout) {
  return request("PUT", resource.object_path(ns, object_name(object)), object.dump(),
                 "application/json", timeout);
}

Json Client::update_status(const Resource& resource, const std::string& ns, const Json& object) {
  return request("PUT", resource.object_path(ns, object_name(object), "status"), object.dump(),
                 "application/json");
}

Json Client::remove(const Resource& resource, const std::string& ns, const std::string& name) {
  return request("DELETE", resource.object_path(ns, name));
}

Json Client::merge_patch(const Resource& resource, const std::string& ns, const std::string& name,
                         const Json& patch, const std::string& subresource) {
  return request("PATCH", resource.object_path(ns, name, subresource), patch.dump(),
                 "application/merge-patch+json");
}

Json Client::apply(const Resource& resource, const std::string& ns, const Json& object,
                   const std::string& field_manager, bool force, const std::string& subresource) {
  std::string target = add_query(resource.object_path(ns, object_name(object), subresource),
                                 "fieldManager", field_manager);
  if (force) {
    target = add_query(target, "force", "true");
  }
  // JSON is YAML, so the apply content type accepts a JSON body.
  return request("PATCH", target, object.dump(), "application/apply-patch+yaml");
}

WatchEnd Client::watch(const Resource& resource, const std::string& ns, const WatchOptions& options,
                       const std::function<void(WatchEvent&)>& on_event, std::stop_token stop) {
  std::string target = add_query(resource.collection_path(ns), "watch", "1");
  target = add_query(target, "allowWatchBookmarks", "true");
  target = add_query(target, "timeoutSeconds", std::to_string(options.timeout_seconds));
  if (!options.resource_version.empty()) {
    target = add_query(target, "resourceVersion", options.resource_version);
  }
  if (!options.label_selector.empty()) {
    target = add_query(target, "labelSelector", options.label_selector);
  }
  if (!options.field_selector.empty()) {
    target = add_query(target, "fieldSelector", options.field_selector);
  }
  auto idle = options.idle_timeout.count() > 0
                  ? options.idle_timeout
                  : std::chrono::milliseconds((options.timeout_seconds + 5) * 1000LL);

  limiter_.acquire();
  HttpRequest request{"GET", target, "", "", tokens_.token(), "application/json"};
  WatchDecoder decoder(WatchDecoder::kMaxEventBytes, options.dropped_keys);
  std::string error_body;
  bool stopped = false;
  // Delivering from inside the read loop keeps memory flat and events in order. An ERROR
  // event ends the watch: what follows it is meaningless.
  auto deliver = [&](std::vector<WatchEvent>&& events) {
    for (auto& event : events) {
      if (event.type == WatchEventType::kError) {
        throw ApiError(Status::from_json(500, event.object));
      }
      on_event(event);
    }
  };
  int status = transport_->stream(
      request, options_.timeout, idle,
      [&](std::string_view bytes) { deliver(decoder.feed(bytes)); }, error_body, stop, stopped);
  if (stopped) {
    return WatchEnd::kStopped;
  }
  if (status == 401 && tokens_.refreshable()) {
    tokens_.invalidate(std::chrono::steady_clock::now());
  }
  if (status != 200) {
    throw ApiError(Status::from_body(status, error_body));
  }
  deliver(decoder.finish());
  return WatchEnd::kClosed;
}

}  // namespace outbox::kube
