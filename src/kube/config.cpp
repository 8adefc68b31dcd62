#include "kube/config.hpp"

#include <arpa/inet.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "kube/errors.hpp"

namespace outbox::kube {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(what + ": cannot read file " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute()) {
    return path;
  }
  return (fs::path(base_dir) / path).string();
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A named entry of clusters/users/contexts, remembered with the file that defined it so
// relative paths resolve against that file's directory.
struct Entry {
  YAML::Node node;
  std::string base_dir;
  std::string source;
};

struct Merged {
  std::string current_context;
  std::map<std::string, Entry> clusters, users, contexts;
};

std::string scalar(const YAML::Node& node, const char* key, const std::string& where) {
  YAML::Node value = node[key];
  if (!value || value.IsNull()) {
    return {};
  }
  if (!value.IsScalar()) {
    throw ConfigError(where + ": field '" + key + "' must be a string");
  }
  return value.as<std::string>();
}

bool boolean(const YAML::Node& node, const char* key, const std::string& where) {
  std::string text = scalar(node, key, where);
  if (text.empty() || text == "false") {
    return false;
  }
  if (text == "true") {
    return true;
  }
  throw ConfigError(where + ": field '" + key + "' must be true or false, got '" + text + "'");
}

void merge_named(const YAML::Node& list, const char* section, const char* inner,
                 const std::string& source, const std::string& base_dir,
                 std::map<std::string, Entry>& into) {
  if (!list || list.IsNull()) {
    return;
  }
  if (!list.IsSequence()) {
    throw ConfigError("kubeconfig " + source + ": '" + section + "' must be a list");
  }
  for (const auto& item : list) {
    std::string where = "kubeconfig " + source + ": " + section;
    if (!item.IsMap()) {
      throw ConfigError(where + ": each entry must be a map");
    }
    std::string name = scalar(item, "name", where);
    if (name.empty()) {
      throw ConfigError(where + ": an entry has no name");
    }
    if (!item[inner] || !item[inner].IsMap()) {
      throw ConfigError(where + " '" + name + "': missing '" + inner + "' map");
    }
    into.try_emplace(name, Entry{item[inner], base_dir, source});  // first wins
  }
}

void merge_document(const std::string& text, const std::string& source, const std::string& base_dir,
                    Merged& merged) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("kubeconfig " + source + ": invalid YAML: " + e.what());
  }
  if (root.IsNull()) {
    return;  // an empty file contributes nothing, as with kubectl
  }
  if (!root.IsMap()) {
    throw ConfigError("kubeconfig " + source + ": top level must be a map");
  }
  if (merged.current_context.empty()) {
    merged.current_context = scalar(root, "current-context", "kubeconfig " + source);
  }
  merge_named(root["clusters"], "clusters", "cluster", source, base_dir, merged.clusters);
  merge_named(root["users"], "users", "user", source, base_dir, merged.users);
  merge_named(root["contexts"], "contexts", "context", source, base_dir, merged.contexts);
}

// Reads "<field>-data" (base64) or "<field>" (a file path); data wins, as in client-go.
std::string data_or_file(const Entry& entry, const std::string& field, const std::string& where) {
  std::string data = scalar(entry.node, (field + "-data").c_str(), where);
  if (!data.empty()) {
    return decode_base64(data, where + ": " + field + "-data");
  }
  std::string path = scalar(entry.node, field.c_str(), where);
  if (path.empty()) {
    return {};
  }
  return read_file(resolve(path, entry.base_dir), where + ": " + field);
}

// The cluster's server and how its certificate is checked; `where` names the cluster in errors.
void read_cluster(const Entry& cluster, const std::string& where, Config& config) {
  config.server = scalar(cluster.node, "server", where);
  if (config.server.empty()) {
    throw ConfigError(where + ": missing 'server'");
  }
  try {
    config.address = ServerAddress::parse(config.server);
  } catch (const ConfigError& e) {
    throw ConfigError(where + ": " + e.what());
  }
  config.ca_pem = data_or_file(cluster, "certificate-authority", where);
  config.insecure_skip_tls_verify = boolean(cluster.node, "insecure-skip-tls-verify", where);
  config.tls_server_name = scalar(cluster.node, "tls-server-name", where);
}

// The user's credentials: a client certificate and key, a token or a token file (exec and
// auth-provider plugins are refused); `where` names the user in errors.
void read_user(const Entry& user, const std::string& where, Config& config) {
  config.client_cert_pem = data_or_file(user, "client-certificate", where);
  config.client_key_pem = data_or_file(user, "client-key", where);
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    throw ConfigError(where + ": client-certificate and client-key must be set together");
  }
  config.token = scalar(user.node, "token", where);
  std::string token_file = scalar(user.node, "tokenFile", where);
  if (config.token.empty() && !token_file.empty()) {
    config.token_file = resolve(token_file, user.base_dir);
    read_file(config.token_file, where + ": tokenFile");  // fail now, not on first call
  }
  for (const char* unsupported : {"exec", "auth-provider", "username"}) {
    if (user.node[unsupported]) {
      throw ConfigError(where + ": '" + unsupported + "' authentication is not supported");
    }
  }
}

Config build(const Merged& merged, const std::string& context_override) {
  std::string context_name = context_override.empty() ? merged.current_context : context_override;
  if (context_name.empty()) {
    throw ConfigError("kubeconfig: no current-context set and no context given");
  }
  auto context = merged.contexts.find(context_name);
  if (context == merged.contexts.end()) {
    throw ConfigError("kubeconfig: context '" + context_name + "' not found");
  }
  std::string where = "kubeconfig " + context->second.source + ": context '" + context_name + "'";
  std::string cluster_name = scalar(context->second.node, "cluster", where);
  std::string user_name = scalar(context->second.node, "user", where);
  auto cluster = merged.clusters.find(cluster_name);
  if (cluster_name.empty() || cluster == merged.clusters.end()) {
    throw ConfigError(where + ": cluster '" + cluster_name + "' not found");
  }

  Config config;
  read_cluster(cluster->second,
               "kubeconfig " + cluster->second.source + ": cluster '" + cluster_name + "'", config);
  if (!user_name.empty()) {
    auto user = merged.users.find(user_name);
    if (user == merged.users.end()) {
      throw ConfigError(where + ": user '" + user_name + "' not found");
    }
    read_user(user->second, "kubeconfig " + user->second.source + ": user '" + user_name + "'",
              config);
  }
  std::string ns = scalar(context->second.node, "namespace", where);
  if (!ns.empty()) {
    config.namespace_name = ns;
  }
  return config;
}

std::string trim(std::string text) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  text.erase(text.begin(), std::find_if(text.begin(), text.end(), not_space));
  text.erase(std::find_if(text.rbegin(), text.rend(), not_space).base(), text.end());
  return text;
}

}  // namespace

ServerAddress ServerAddress::parse(const std::string& url) {
  const std::string scheme = "https://";
  if (url.rfind(scheme, 0) != 0) {
    throw ConfigError("server URL '" + url + "' must start with https://");
  }
  std::string rest = url.substr(scheme.size());
  ServerAddress address;
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) {
    address.base_path = rest.substr(slash);
    while (!address.base_path.empty() && address.base_path.back() == '/') {
      address.base_path.pop_back();
    }
  }
  std::string port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) {
      throw ConfigError("server URL '" + url + "': unterminated IPv6 literal");
    }
    address.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') {
        throw ConfigError("server URL '" + url + "': junk after IPv6 literal");
      }
      port = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    address.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
    }
  }
  if (address.host.empty()) {
    throw ConfigError("server URL '" + url + "' has no host");
  }
  if (port.empty()) {
    port = "443";
  }
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) {
    throw ConfigError("server URL '" + url + "': invalid port '" + port + "'");
  }
  address.port = port;
  address.host_is_ip = is_ip_literal(address.host);
  return address;
}

std::string ServerAddress::authority() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + port;
}

std::string decode_base64(const std::string& text, const std::string& what) {
  // OpenSSL's streaming decoder: skips line breaks and whitespace, refuses anything else that
  // is not base64, data after padding, and a final group that is not whole (as Go's
  // StdEncoding, which client-go uses for these fields, requires padding).
  std::unique_ptr<EVP_ENCODE_CTX, decltype(&EVP_ENCODE_CTX_free)> ctx(EVP_ENCODE_CTX_new(),
                                                                      EVP_ENCODE_CTX_free);
  if (!ctx) {
    throw std::bad_alloc();
  }
  EVP_DecodeInit(ctx.get());
  std::string out(text.size() / 4 * 3 + 3, '\0');
  int written = 0;
  int last = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  if (EVP_DecodeUpdate(ctx.get(), dst, &written, in, static_cast<int>(text.size())) < 0 ||
      EVP_DecodeFinal(ctx.get(), dst + written, &last) < 0) {
    throw ConfigError(what + " is not valid base64");
  }
  out.resize(static_cast<size_t>(written + last));
  return out;
}

Config parse_kubeconfig(const std::string& yaml_text, const std::string& base_dir,
                        const std::string& context) {
  Merged merged;
  merge_document(yaml_text, "<inline>", base_dir, merged);
  return build(merged, context);
}

Config load_kubeconfig(const std::vector<std::string>& paths, const std::string& context) {
  Merged merged;
  bool any = false;
  for (const auto& path : paths) {
    std::ifstream probe(path);
    if (!probe) {
      continue;
    }
    any = true;
    std::string base_dir = fs::path(path).parent_path().string();
    merge_document(read_file(path, "kubeconfig"), path, base_dir.empty() ? "." : base_dir, merged);
  }
  if (!any) {
    std::string list;
    for (const auto& path : paths) {
      list += (list.empty() ? "" : ":") + path;
    }
    throw ConfigError("kubeconfig: no readable file among '" + list + "'");
  }
  return build(merged, context);
}

Config load_kubeconfig(const std::string& path, const std::string& context) {
  return load_kubeconfig(std::vector<std::string>{path}, context);
}

std::vector<std::string> split_kubeconfig_env(const std::string& value) {
  std::vector<std::string> paths;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ':')) {
    if (!item.empty()) {
      paths.push_back(item);
    }
  }
  return paths;
}

Config in_cluster_config(const InClusterPaths& paths) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    throw ConfigError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  std::string h = host;
  bool v6 = h.find(':') != std::string::npos;
  Config config;
  config.server = "https://" + (v6 ? "[" + h + "]" : h) + ":" + port;
  config.address = ServerAddress::parse(config.server);
  config.ca_pem = read_file(paths.ca, "in-cluster config: CA");
  config.token_file = paths.token;
  if (trim(read_file(paths.token, "in-cluster config: token")).empty()) {
    throw ConfigError("in-cluster config: token file " + paths.token + " is empty");
  }
  const char* pod_namespace = std::getenv("POD_NAMESPACE");
  if (pod_namespace != nullptr && *pod_namespace != '\0') {
    config.namespace_name = pod_namespace;
  } else if (std::ifstream ns(paths.namespace_file); ns) {
    std::string text((std::istreambuf_iterator<char>(ns)), {});
    if (!trim(text).empty()) {
      config.namespace_name = trim(text);
    }
  }
  return config;
}

Config load_default_config() {
  const char* env = std::getenv("KUBECONFIG");
  if (env != nullptr && *env != '\0') {
    return load_kubeconfig(split_kubeconfig_env(env));
  }
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (host != nullptr && *host != '\0') {
    return in_cluster_config();
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr) {
    throw ConfigError("no KUBECONFIG, not in a cluster, and no HOME for ~/.kube/config");
  }
  return load_kubeconfig(std::string(home) + "/.kube/config");
}

}  // namespace outbox::kube
