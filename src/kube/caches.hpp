#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kube/client.hpp"
#include "kube/informer.hpp"

// The informer caches of one controller: its primary kind and every kind its objects own, one
// informer per kind and watched namespace. A reconciler reads them; the ControllerEngine runs
// them and turns their events into keys.
namespace outbox::kube {

// What a controller watches. The Resources must outlive the caches (they are compared by
// address: a reconciler can tell its kinds apart with `&kind == &my_kind`).
struct Watches {
  const Resource* primary = nullptr;  // nullptr: none (keys come from ControllerEngine::enqueue)
  std::vector<const Resource*> owned;
  InformerOptions primary_options;
  InformerOptions owned_options;        // e.g. a label selector: never a whole cluster's kind
  std::vector<std::string> namespaces;  // empty: all namespaces
  // Appended to the primary informer's problem when the apiserver does not serve its kind
  // (how to install the CustomResourceDefinition).
  std::string not_served_hint;
};

class Caches {
 public:
  // Informers relisting at once, each holding one parsed page: a restart over a large fleet
  // reads it a few kinds at a time, not every kind and namespace at once.
  static constexpr std::ptrdiff_t kConcurrentLists = 2;

  Caches(Client& client, Watches watches, const InformerHandlers& primary,
         const std::function<InformerHandlers(const Resource& owned)>& owned);

  // One thread per informer; they stop when the threads are stopped or destroyed.
  std::vector<std::jthread> start();

  bool synced() const;
  // Why not synced ("" once synced): the first informer's problem (the primary's first), or
  // that the caches are syncing.
  std::string not_ready_reason() const;

  // The cached primary object of a "namespace/name" key.
  std::optional<Json> primary(const std::string& key) const;
  // The keys of every cached primary object: what a resync queues, without unpacking a
  // fleet's objects to learn their names.
  std::vector<std::string> primary_keys() const;
  std::size_t primary_count() const;
  // The informer of `kind` that covers namespace `ns` (nullptr if none is watched there).
  const Informer* informer(const Resource& kind, const std::string& ns) const;
  // Every informer of `kind`, one per watched namespace.
  std::vector<const Informer*> informers(const Resource& kind) const;
  // Every kind watched: the primary first.
  std::vector<const Resource*> kinds() const;
  // What the caches of `kind` hold, in bytes (Informer::cached_bytes), across namespaces.
  std::size_t cached_bytes(const Resource& kind) const;

 private:
  Watches watches_;
  // (plural, namespace: "" for all) -> informer.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Informer>> informers_;
};

}  // namespace outbox::kube
