#include "kube/informer.hpp"

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

std::vector<std::string> Informer::keys() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> keys;
  keys.reserve(cache_.size());
  for (const auto& [key, entry] : cache_) {
    keys.push_back(key);
  }
  return keys;
}

std::size_t Informer::size() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

std::size_t Informer::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_bytes_;
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

namespace {

std::size_t entry_bytes(const std::string& key, const std::vector<std::uint8_t>& packed) {
  return key.size() + packed.size();
}

// One of the shared list slots, while a relist reads its pages.
class ListSlot {
 public:
  explicit ListSlot(std::counting_semaphore<>* slots) : slots_(slots) {
    if (slots_ != nullptr) {
      slots_->acquire();
    }
  }
  ~ListSlot() {
    if (slots_ != nullptr) {
      slots_->release();
    }
  }
  ListSlot(const ListSlot&) = delete;
  ListSlot& operator=(const ListSlot&) = delete;

 private:
  std::counting_semaphore<>* slots_;
};

}  // namespace

void Informer::prepare(Json& object, const std::string& kind,
                       const std::string& api_version) const {
  if (!kind.empty() && !object.contains("kind")) {
    object["kind"] = kind;
    object["apiVersion"] = api_version;
  }
  if (options_.transform) {
    options_.transform(object);
  }
}

// Handlers are told after the cache is replaced, one object unpacked at a time: deletes first,
// then adds, then updates. No watch runs meanwhile (relist and watch share this thread), so the
// cache still holds what is delivered.
void Informer::relist() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.page_size = options_.page_size;
  list_options.dropped_keys = options_.dropped_keys;
  // Empty resourceVersion: a quorum read. After a 410 the watch cache is behind us; reading it
  // ("0") could hand back a snapshot older than what we already delivered.
  std::map<std::string, Entry> fresh;
  std::size_t fresh_bytes = 0;
  ListSlot slot(options_.list_slots.get());
  const std::string version =
      client_.list_pages(resource_, namespace_, list_options, [&](Json& page) {
        const std::string list_kind = page.value("kind", std::string());
        const std::string kind =
            list_kind.ends_with("List") ? list_kind.substr(0, list_kind.size() - 4) : std::string();
        const std::string api_version = page.value("apiVersion", resource_.api_version());
        for (auto& item : page["items"]) {
          prepare(item, kind, api_version);
          std::string key = key_of(item);
          Entry entry = pack(item);
          item = nullptr;  // the page shrinks as it is packed
          fresh_bytes += entry_bytes(key, entry.packed);
          fresh.insert_or_assign(std::move(key), std::move(entry));
        }
      });
  std::vector<std::vector<std::uint8_t>> deleted;
  std::vector<std::string> added;
  std::vector<std::pair<std::vector<std::uint8_t>, std::string>> updated;  // old, key
  {
    std::lock_guard lock(mutex_);
    for (auto& [key, entry] : cache_) {
      auto now = fresh.find(key);
      if (now == fresh.end()) {
        deleted.push_back(std::move(entry.packed));  // vanished while not watching
      } else if (now->second.resource_version != entry.resource_version) {
        updated.emplace_back(std::move(entry.packed), key);
      }
    }
    for (const auto& [key, entry] : fresh) {
      if (!cache_.contains(key)) {
        added.push_back(key);
      }
    }
    cache_ = std::move(fresh);
    cached_bytes_ = fresh_bytes;
    resource_version_ = version;
  }
  relists_++;
  synced_ = true;
  for (const auto& packed : deleted) {
    if (handlers_.on_delete) {
      handlers_.on_delete(Json::from_msgpack(packed));
    }
  }
  for (const std::string& key : added) {
    if (std::optional<Json> object = get(key); object && handlers_.on_add) {
      handlers_.on_add(*object);
    }
  }
  for (const auto& [old_packed, key] : updated) {
    if (std::optional<Json> object = get(key); object && handlers_.on_update) {
      handlers_.on_update(Json::from_msgpack(old_packed), *object);
    }
  }
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
      cached_bytes_ -= entry_bytes(key, it->second.packed);
      cache_.erase(it);
    }
    if (event.type != WatchEventType::kDeleted) {
      Entry entry = pack(event.object);
      cached_bytes_ += entry_bytes(key, entry.packed);
      cache_.emplace(key, std::move(entry));
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
  watch_options.dropped_keys = options.dropped_keys;
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
