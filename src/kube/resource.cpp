#include "kube/resource.hpp"

#include <cctype>
#include <stdexcept>

namespace outbox::kube {

std::string Resource::collection_path(std::string_view ns) const {
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += url_encode(ns);
  }
  return path + "/" + plural;
}

std::string Resource::object_path(std::string_view ns, std::string_view name,
                                  std::string_view subresource) const {
  if (name.empty()) {
    // An empty name would address the collection: a delete would hit every object.
    throw std::invalid_argument("object_path: empty name for " + plural);
  }
  if (namespaced && ns.empty()) {
    throw std::invalid_argument("object_path: namespaced " + plural + " needs a namespace");
  }
  std::string path = collection_path(ns) + "/" + url_encode(name);
  if (!subresource.empty()) {
    path += "/";
    path += subresource;
  }
  return path;
}

std::string url_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

}  // namespace outbox::kube
