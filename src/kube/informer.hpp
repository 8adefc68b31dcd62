#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <stop_token>
#include <string>
#include <vector>

#include "kube/client.hpp"

// List-then-watch of one resource, mirrored into a cache keyed by "namespace/name" (or "name"
// for cluster-scoped objects), with handlers told about every change. The state machine is the
// one kube-rs and client-go use:
//
//   (no snapshot) --list--> (watching from the list's resourceVersion)
//   watching --clean end of stream--> watching again from the last resourceVersion seen
//   watching --410 Gone, HTTP or ERROR event--> (no snapshot): relist from a quorum read
//   any --transport/other error--> same state after exponential backoff (800 ms .. 30 s, equal
//   jitter)
//
// Guarantees: per object, handlers see changes in the order the apiserver made them; after a
// relist, objects that vanished while we were not watching are delivered as deletes (with their
// last known state) and objects that changed as updates, so the cache converges to the server.
// Caveat: intermediate states can be skipped (a cache is a subsequence of the true history),
// and there is no ordering across different objects. Handlers run on the informer's thread
// and must not block; typically they add the key to a WorkQueue.
namespace outbox::kube {

struct InformerHandlers {
  std::function<void(const Json& object)> on_add;
  std::function<void(const Json& old_object, const Json& new_object)> on_update;
  std::function<void(const Json& last_known)> on_delete;
};

struct InformerOptions {
  std::string label_selector;
  std::string field_selector;
  int page_size = 500;
  int watch_timeout_seconds = 290;
  std::chrono::milliseconds idle_timeout{0};  // 0: watch_timeout_seconds + 5 s
  std::chrono::milliseconds backoff_initial{800};
  std::chrono::milliseconds backoff_cap{30'000};
  // Shared by informers that must not all relist at once (Caches shares one): a relist holds
  // one parsed page at a time, so at most this many pages are parsed at once, whatever the
  // number of kinds and namespaces watched. Null: no limit.
  std::shared_ptr<std::counting_semaphore<>> list_slots;
  // Left out of every object as it is parsed, before the transform sees it (decode_json):
  // what is dropped there is never held, not even while a list of thousands is read.
  DroppedKeys dropped_keys;
  // Applied to every object before it is cached or handed to a handler (client-go's
  // SetTransform): what the cache does not need need not be kept.
  std::function<void(Json&)> transform;
};

class Informer {
 public:
  Informer(Client& client, Resource resource, std::string ns, InformerHandlers handlers,
           InformerOptions options = {});

  // Runs until `stop` is requested; call it on a dedicated thread. Calling it again after a
  // stop resumes from the cache and resourceVersion of the previous run.
  void run(std::stop_token stop);

  // True once the first list has been applied to the cache.
  bool has_synced() const { return synced_.load(); }
  std::optional<Json> get(const std::string& key) const;
  std::vector<Json> list() const;
  // The cached objects' keys, without unpacking them.
  std::vector<std::string> keys() const;
  std::size_t size() const;
  // What the cache holds, in bytes: the packed objects and their keys.
  std::size_t cached_bytes() const;
  std::string resource_version() const;
  int relist_count() const { return relists_.load(); }
  int watch_count() const { return watches_.load(); }
  // Why the last list or watch failed, in one line ("" once one succeeds again). A 404
  // on the collection names the missing CustomResourceDefinition.
  std::string problem() const;
  // The last failure was a 404 on the collection: the API server does not serve the type.
  bool not_served() const { return not_served_.load(); }

  static std::string key_of(const Json& object);

 private:
  // Lists page by page, packing each object as its page is read: a relist holds the packed
  // objects and one parsed page, never the whole list parsed.
  void relist();
  // Logs a problem when it first appears or changes (not on every retry), and once
  // when it clears.
  void set_problem(std::string problem, bool not_served = false);
  void apply(WatchEvent& event);
  // Restores kind and apiVersion (list items lack them), then the transform.
  void prepare(Json& object, const std::string& kind, const std::string& api_version) const;
  void set_resource_version(const Json& object);

  Client& client_;
  Resource resource_;
  std::string namespace_;
  InformerHandlers handlers_;
  InformerOptions options_;

  mutable std::mutex mutex_;
  // Objects are kept packed (MessagePack): a parsed nlohmann tree costs several times its
  // text, and a controller caches every object it owns. get() and list() unpack a copy, as
  // they returned a copy before.
  struct Entry {
    std::string resource_version;
    std::vector<std::uint8_t> packed;
  };
  static Entry pack(const Json& object);
  std::map<std::string, Entry> cache_;
  std::size_t cached_bytes_ = 0;  // kept with cache_
  std::string resource_version_;
  std::string problem_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> not_served_{false};
  std::atomic<int> relists_{0};
  std::atomic<int> watches_{0};
};

}  // namespace outbox::kube
