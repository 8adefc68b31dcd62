#pragma once

#include <string>
#include <vector>

// Where the apiserver is and how to authenticate to it: from kubeconfig files (what kubectl
// uses) or from the service-account mount inside a pod. Loading validates everything it can
// (base64, required fields, files readable) so that a bad config fails at start-up with a
// ConfigError naming the file and field, not later with an obscure TLS or HTTP failure.
namespace outbox::kube {

// The server URL split for the transport. IPv6 literals are kept without brackets in `host`.
struct ServerAddress {
  std::string host;
  std::string port;       // "443" when the URL has none
  std::string base_path;  // path prefix from the URL ("" usually), without trailing '/'
  bool host_is_ip = false;

  // Parses "https://host[:port][/prefix]"; "http" is refused (credentials in clear text).
  static ServerAddress parse(const std::string& url);
  // host:port with IPv6 hosts bracketed, for messages and the Host header.
  std::string authority() const;
};

struct Config {
  std::string server;  // https URL
  ServerAddress address;

  // PEM text. An empty CA means the system trust store.
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;

  // Bearer token: a fixed `token`, or `token_file` re-read periodically and after a 401
  // (service-account tokens are rotated by the kubelet). `token` wins when both are set.
  std::string token;
  std::string token_file;

  bool insecure_skip_tls_verify = false;
  // Name to send as SNI and to verify the certificate against, instead of the URL's host.
  std::string tls_server_name;
  std::string namespace_name = "default";
};

// Parses one kubeconfig document. `base_dir` resolves relative file paths (client-go resolves
// them against the kubeconfig's own directory). `context` overrides current-context.
Config parse_kubeconfig(const std::string& yaml_text, const std::string& base_dir = ".",
                        const std::string& context = "");

// Loads and merges kubeconfig files the way client-go does for KUBECONFIG=a:b:c: the first file
// to set a cluster, user or context name (or current-context) wins. Missing files are skipped,
// unless none exists.
Config load_kubeconfig(const std::vector<std::string>& paths, const std::string& context = "");
Config load_kubeconfig(const std::string& path, const std::string& context = "");

// Splits a KUBECONFIG value on ':' (empty entries ignored).
std::vector<std::string> split_kubeconfig_env(const std::string& value);

// Paths of the service-account mount; overridable for tests.
struct InClusterPaths {
  std::string token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// In-cluster config: https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT (IPv6 bracketed),
// the mounted CA, the token file (re-read, never cached for good), the namespace from
// POD_NAMESPACE or the mounted namespace file.
Config in_cluster_config(const InClusterPaths& paths = {});

// client-go's order: $KUBECONFIG, then in-cluster (when KUBERNETES_SERVICE_HOST is set), then
// ~/.kube/config.
Config load_default_config();

// Strict base64 (standard alphabet, padding required as in client-go, line breaks and
// whitespace ignored; decoded by OpenSSL); throws ConfigError naming `what` on invalid input.
std::string decode_base64(const std::string& text, const std::string& what);

}  // namespace outbox::kube
