#include "kube/caches.hpp"

namespace outbox::kube {

Caches::Caches(Client& client, Watches watches, const InformerHandlers& primary,
               const std::function<InformerHandlers(const Resource& owned)>& owned)
    : watches_(std::move(watches)) {
  auto slots = std::make_shared<std::counting_semaphore<>>(kConcurrentLists);
  watches_.primary_options.list_slots = slots;
  watches_.owned_options.list_slots = slots;
  std::vector<std::string> namespaces = watches_.namespaces;
  if (namespaces.empty()) {
    namespaces.push_back("");
  }
  for (const std::string& ns : namespaces) {
    if (watches_.primary != nullptr) {
      informers_[{watches_.primary->plural, ns}] = std::make_unique<Informer>(
          client, *watches_.primary, ns, primary, watches_.primary_options);
    }
    for (const Resource* kind : watches_.owned) {
      informers_[{kind->plural, ns}] =
          std::make_unique<Informer>(client, *kind, ns, owned(*kind), watches_.owned_options);
    }
  }
}

std::vector<std::jthread> Caches::start() {
  std::vector<std::jthread> threads;
  for (auto& [key, informer] : informers_) {
    threads.emplace_back([i = informer.get()](std::stop_token stop) { i->run(stop); });
  }
  return threads;
}

bool Caches::synced() const {
  for (const auto& [key, informer] : informers_) {
    if (!informer->has_synced()) {
      return false;
    }
  }
  return true;
}

std::string Caches::not_ready_reason() const {
  if (synced()) {
    return {};
  }
  if (watches_.primary != nullptr) {
    for (const Informer* i : informers(*watches_.primary)) {
      if (std::string problem = i->problem(); !problem.empty()) {
        return i->not_served() ? problem + watches_.not_served_hint : problem;
      }
    }
  }
  for (const auto& [key, informer] : informers_) {
    if (std::string problem = informer->problem(); !problem.empty()) {
      return problem;
    }
  }
  return "informer caches not synced yet";
}

std::optional<Json> Caches::primary(const std::string& key) const {
  if (watches_.primary != nullptr) {
    for (const Informer* i : informers(*watches_.primary)) {
      if (std::optional<Json> object = i->get(key)) {
        return object;
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> Caches::primary_keys() const {
  std::vector<std::string> out;
  if (watches_.primary != nullptr) {
    for (const Informer* i : informers(*watches_.primary)) {
      std::vector<std::string> some = i->keys();
      out.insert(out.end(), std::make_move_iterator(some.begin()),
                 std::make_move_iterator(some.end()));
    }
  }
  return out;
}

std::size_t Caches::primary_count() const {
  std::size_t n = 0;
  if (watches_.primary != nullptr) {
    for (const Informer* i : informers(*watches_.primary)) {
      n += i->size();
    }
  }
  return n;
}

const Informer* Caches::informer(const Resource& kind, const std::string& ns) const {
  auto it = informers_.find({kind.plural, watches_.namespaces.empty() ? "" : ns});
  return it == informers_.end() ? nullptr : it->second.get();
}

std::vector<const Informer*> Caches::informers(const Resource& kind) const {
  std::vector<const Informer*> out;
  for (const auto& [key, informer] : informers_) {
    if (key.first == kind.plural) {
      out.push_back(informer.get());
    }
  }
  return out;
}

std::vector<const Resource*> Caches::kinds() const {
  std::vector<const Resource*> out;
  if (watches_.primary != nullptr) {
    out.push_back(watches_.primary);
  }
  out.insert(out.end(), watches_.owned.begin(), watches_.owned.end());
  return out;
}

std::size_t Caches::cached_bytes(const Resource& kind) const {
  std::size_t bytes = 0;
  for (const Informer* i : informers(kind)) {
    bytes += i->cached_bytes();
  }
  return bytes;
}

}  // namespace outbox::kube
