#include "kube/informer.hpp"

#include <set>

#include <spdlog/spdlog.h>

#include "common/backoff.hpp"
#include "common/stop.hpp"

namespace outbox::kube {

Informer::Informer(Client& client, Resource resource, std::string ns, InformerHandlers handlers,
                   InformerOptions options)
    : client_(client),
      resource_(std::move(resource)),
      namespace_(std::move(ns)),
      handlers_(std::move(handlers)),
      options_(std::move(options)) {}

std::string Informer::key_of(const Json& object) {
  auto ns = object.value("/metadata/namespace"_json_pointer, std::string());
  auto name = object.value("/metadata/name"_json_pointer, std::string());
  return ns.empty() ? name : ns + "/" + name;
}

Informer::Entry Informer::pack(const Json& object) {
  return {object.value("/metadata/resourceVersion"_json_pointer, std::string()),
          Json::to_msgpack(object)};
}

std::optional<Json> Informer::get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    return std::nullopt;
  }
  return Json::from_msgpack(it->second.packed);
}

std::vector<Json> Informer::list() const {
  std::lock_guard lock(mutex_);
  std::vector<Json> objects;
  objects.reserve(cache_.size());
  for (const auto& [key, entry] : cache_) {
    objects.push_back(Json::from_msgpack(entry.packed));
  }
  return objects;
}

std::size_t Informer::size() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

std::string Informer::resource_version() const {
  std::lock_guard lock(mutex_);
  return resource_version_;
}

void Informer::set_resource_version(const Json& object) {
  auto rv = object.value("/metadata/resourceVersion"_json_pointer, std::string());
  if (!rv.empty()) {
    std::lock_guard lock(mutex_);
    resource_version_ = rv;
  }
}

void strip_managed_fields(Json& object) {
  if (auto meta = object.find("metadata"); meta != object.end() && meta->is_object()) {
    meta->erase("managedFields");
  }
}

namespace {

// The list's items by key. List items carry no kind/apiVersion (watch events do); they get
// them back, so handlers see the same shape from both sources, and then the transform.
std::map<std::string, Json> items_by_key(Json& snapshot, const Resource& resource,
                                         const std::function<void(Json&)>& transform) {
  std::map<std::string, Json> fresh;
  const std::string list_kind = snapshot.value("kind", std::string());
  const std::string kind =
      list_kind.ends_with("List") ? list_kind.substr(0, list_kind.size() - 4) : std::string();
  for (auto& item : snapshot["items"]) {
    if (!kind.empty() && !item.contains("kind")) {
      item["kind"] = kind;
      item["apiVersion"] = snapshot.value("apiVersion", resource.api_version());
    }
    if (transform) {
      transform(item);
    }
    fresh.emplace(Informer::key_of(item), std::move(item));
  }
  return fresh;
}

// What a relist found changed since the cache was last filled.
struct Changes {
  std::vector<Json> added, deleted;
  std::vector<std::pair<Json, Json>> updated;
};

// Deletes first, then adds, then updates.
void deliver(const InformerHandlers& handlers, const Changes& changes) {
  for (const auto& object : changes.deleted) {
    if (handlers.on_delete) {
      handlers.on_delete(object);
    }
  }
  for (const auto& object : changes.added) {
    if (handlers.on_add) {
      handlers.on_add(object);
    }
  }
  for (const auto& [old_object, new_object] : changes.updated) {
    if (handlers.on_update) {
      handlers.on_update(old_object, new_object);
    }
  }
}

}  // namespace

void Informer::relist() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.page_size = options_.page_size;
  // Empty resourceVersion: a quorum read. After a 410 the watch cache is behind us; reading it
  // ("0") could hand back a snapshot older than what we already delivered.
  Json snapshot = client_.list(resource_, namespace_, list_options);
  std::map<std::string, Json> fresh = items_by_key(snapshot, resource_, options_.transform);
  Changes changes;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, entry] : cache_) {
      if (fresh.count(key) == 0) {
        changes.deleted.push_back(Json::from_msgpack(entry.packed));  // vanished while not watching
      }
    }
    std::map<std::string, Entry> packed;
    for (auto& [key, object] : fresh) {
      auto old = cache_.find(key);
      Entry entry = pack(object);
      if (old == cache_.end()) {
        changes.added.push_back(std::move(object));
      } else if (old->second.resource_version != entry.resource_version) {
        changes.updated.emplace_back(Json::from_msgpack(old->second.packed), std::move(object));
      }
      packed.emplace(key, std::move(entry));
    }
    cache_ = std::move(packed);
    resource_version_ = snapshot.value("/metadata/resourceVersion"_json_pointer, std::string());
  }
  relists_++;
  synced_ = true;
  deliver(handlers_, changes);
}

void Informer::apply(WatchEvent& event) {
  set_resource_version(event.object);
  if (event.type == WatchEventType::kBookmark) {
    return;  // carries only a resourceVersion
  }
  if (options_.transform) {
    options_.transform(event.object);
  }
  const std::string key = key_of(event.object);
  std::optional<Json> old;
  {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      old = Json::from_msgpack(it->second.packed);
    }
    if (event.type == WatchEventType::kDeleted) {
      cache_.erase(key);
    } else {
      cache_[key] = pack(event.object);
    }
  }
  if (event.type == WatchEventType::kDeleted) {
    if (handlers_.on_delete) {
      handlers_.on_delete(event.object);
    }
  } else if (old) {
    if (handlers_.on_update) {
      handlers_.on_update(*old, event.object);
    }
  } else if (handlers_.on_add) {
    handlers_.on_add(event.object);
  }
}

std::string Informer::problem() const {
  std::lock_guard lock(mutex_);
  return problem_;
}

void Informer::set_problem(std::string problem, bool not_served) {
  not_served_ = not_served;
  std::lock_guard lock(mutex_);
  if (problem == problem_) {
    return;
  }
  if (problem.empty()) {
    spdlog::info("{}: recovered", problem_);
  } else {
    spdlog::warn("{}; retrying with backoff", problem);
  }
  problem_ = std::move(problem);
}

namespace {

// A watch from `resource_version` with the informer's selectors and timeouts.
WatchOptions watch_options_from(const InformerOptions& options,
                                const std::string& resource_version) {
  WatchOptions watch_options;
  watch_options.resource_version = resource_version;
  watch_options.label_selector = options.label_selector;
  watch_options.field_selector = options.field_selector;
  watch_options.timeout_seconds = options.watch_timeout_seconds;
  watch_options.idle_timeout = options.idle_timeout;
  return watch_options;
}

// A 404 on the collection itself (a namespaced list of an existing type answers 200): the
// type's CustomResourceDefinition is not installed.
std::string not_served_problem(const std::string& what, const Resource& resource) {
  return "watch " + what + ": the API server does not serve " + resource.plural +
         (resource.group.empty() ? "" : "." + resource.group) + "/" + resource.version +
         " (404): its CustomResourceDefinition is not installed";
}

}  // namespace

void Informer::run(std::stop_token stop) {
  Backoff backoff(options_.backoff_initial, options_.backoff_cap);
  // A second run() after a stop resumes from where the first left off: the watch either
  // continues from the last resourceVersion or, if that is too old by now, gets 410 and relists.
  bool listed = synced_.load();
  const std::string what = resource_.plural + (namespace_.empty() ? "" : " in " + namespace_);
  while (!stop.stop_requested()) {
    try {
      if (!listed) {
        relist();
        listed = true;
        backoff.reset();
        set_problem({});
      }
      const WatchOptions watch_options = watch_options_from(options_, resource_version());
      watches_++;
      int events = 0;
      auto started = Clock::now();
      WatchEnd end = client_.watch(
          resource_, namespace_, watch_options,
          [&](WatchEvent& event) {
            if (++events == 1) {
              set_problem({});
            }
            apply(event);
          },
          stop);
      if (end == WatchEnd::kStopped) {
        break;
      }
      set_problem({});  // the watch was served
      if (events > 0) {
        backoff.reset();
      } else if (Clock::now() - started < std::chrono::seconds(1)) {
        // An immediately closed, empty watch means something is wrong; don't spin.
        spdlog::warn("watch {}: ended at once without events; backing off", what);
        sleep_unless_stopped(stop, backoff.next());
      }
      // Clean end of stream: re-watch from the last resourceVersion, no relist needed.
    } catch (const ApiError& e) {
      if (e.is_gone()) {
        spdlog::info("watch {}: {}; relisting", what, e.what());
        listed = false;
        continue;
      }
      if (e.is_not_found()) {
        // The collection itself is missing: a namespaced list of an existing type answers 200.
        set_problem(not_served_problem(what, resource_), true);
      } else {
        set_problem("watch " + what + ": " + e.what());
      }
      sleep_unless_stopped(stop, backoff.next());
    } catch (const std::exception& e) {
      // TransportError (cut, idle, refused), WatchDecodeError: resume from the last version.
      set_problem("watch " + what + ": " + e.what());
      sleep_unless_stopped(stop, backoff.next());
    }
  }
}

}  // namespace outbox::kube
