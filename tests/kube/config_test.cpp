#include "kube/config.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "kube/errors.hpp"

namespace outbox::kube {
namespace {

namespace fs = std::filesystem;

// base64 of "CA-PEM", "CERT-PEM", "KEY-PEM".
constexpr const char* kCaData = "Q0EtUEVN";
constexpr const char* kCertData = "Q0VSVC1QRU0=";
constexpr const char* kKeyData = "S0VZLVBFTQ==";

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/kubeconfig-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string kubeconfig(const std::string& cluster_fields, const std::string& user_fields,
                       const std::string& context_extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
         "clusters:\n- name: c1\n  cluster:\n" +
         cluster_fields + "users:\n- name: u1\n  user:\n" + user_fields +
         "contexts:\n- name: main\n  context:\n    cluster: c1\n    user: u1\n" + context_extra;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

TEST(KubeconfigTest, ParsesInlineDataFieldsAndNamespace) {
  Config config =
      parse_kubeconfig(kubeconfig(std::string("    server: https://api.example.com:6443/prefix/\n"
                                              "    certificate-authority-data: ") +
                                      kCaData + "\n    tls-server-name: kubernetes.default\n",
                                  std::string("    client-certificate-data: ") + kCertData +
                                      "\n    client-key-data: " + kKeyData + "\n",
                                  "    namespace: team-a\n"));
  EXPECT_EQ(config.server, "https://api.example.com:6443/prefix/");
  EXPECT_EQ(config.address.host, "api.example.com");
  EXPECT_EQ(config.address.port, "6443");
  EXPECT_EQ(config.address.base_path, "/prefix");
  EXPECT_FALSE(config.address.host_is_ip);
  EXPECT_EQ(config.ca_pem, "CA-PEM");
  EXPECT_EQ(config.client_cert_pem, "CERT-PEM");
  EXPECT_EQ(config.client_key_pem, "KEY-PEM");
  EXPECT_EQ(config.tls_server_name, "kubernetes.default");
  EXPECT_EQ(config.namespace_name, "team-a");
  EXPECT_FALSE(config.insecure_skip_tls_verify);
}

TEST(KubeconfigTest, ReadsFilesRelativeToTheKubeconfigDirectory) {
  TempDir dir;
  dir.write("ca.crt", "CA-FILE");
  dir.write("client.crt", "CERT-FILE");
  dir.write("client.key", "KEY-FILE");
  dir.write("token", "  file-token\n");
  std::string path = dir.write(
      "config", kubeconfig("    server: https://10.1.2.3\n    certificate-authority: ca.crt\n",
                           "    client-certificate: client.crt\n    client-key: " + dir.path() +
                               "/client.key\n    tokenFile: token\n"));
  Config config = load_kubeconfig(path);
  EXPECT_EQ(config.ca_pem, "CA-FILE");
  EXPECT_EQ(config.client_cert_pem, "CERT-FILE");
  EXPECT_EQ(config.client_key_pem, "KEY-FILE");
  EXPECT_EQ(config.token_file, dir.path() + "/token");
  EXPECT_EQ(config.address.port, "443");
  EXPECT_TRUE(config.address.host_is_ip);
  EXPECT_EQ(config.namespace_name, "default");
}

TEST(KubeconfigTest, TokenWinsOverTokenFileAndInsecureFlagIsRead) {
  Config config = parse_kubeconfig(
      kubeconfig("    server: https://[fd00::1]:8443\n    insecure-skip-tls-verify: true\n",
                 "    token: abc\n    tokenFile: /nonexistent\n"));
  EXPECT_EQ(config.token, "abc");
  EXPECT_TRUE(config.token_file.empty());
  EXPECT_TRUE(config.insecure_skip_tls_verify);
  EXPECT_EQ(config.address.host, "fd00::1");
  EXPECT_EQ(config.address.port, "8443");
  EXPECT_TRUE(config.address.host_is_ip);
  EXPECT_EQ(config.address.authority(), "[fd00::1]:8443");
}

TEST(KubeconfigTest, ContextOverrideSelectsAnotherContext) {
  std::string text = kubeconfig("    server: https://a\n", "    token: t\n") +
                     "- name: other\n  context:\n    cluster: c1\n    user: u1\n"
                     "    namespace: other-ns\n";
  EXPECT_EQ(parse_kubeconfig(text, ".", "other").namespace_name, "other-ns");
  EXPECT_NE(
      error_of([&] { parse_kubeconfig(text, ".", "missing"); }).find("context 'missing' not found"),
      std::string::npos);
}

TEST(KubeconfigTest, KubeconfigListMergesFirstWins) {
  TempDir dir;
  // First file: current-context and a cluster named c1; second file redefines c1 (ignored)
  // and contributes the user and context.
  std::string first = dir.write("first",
                                "current-context: main\nclusters:\n- name: c1\n"
                                "  cluster:\n    server: https://first:1\n");
  std::string second = dir.write(
      "second",
      "current-context: other\nclusters:\n- name: c1\n  cluster:\n    server: https://second:2\n"
      "users:\n- name: u1\n  user:\n    token: from-second\n"
      "contexts:\n- name: main\n  context:\n    cluster: c1\n    user: u1\n");
  auto paths = split_kubeconfig_env(first + "::" + dir.path() + "/missing:" + second);
  ASSERT_EQ(paths.size(), 3u);
  Config config = load_kubeconfig(paths);
  EXPECT_EQ(config.server, "https://first:1");
  EXPECT_EQ(config.token, "from-second");
}

TEST(KubeconfigTest, MalformedInputGivesClearErrors) {
  EXPECT_NE(error_of([] { parse_kubeconfig("clusters: [unclosed"); }).find("invalid YAML"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_kubeconfig("- a\n- b\n"); }).find("top level must be a map"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_kubeconfig(
                  kubeconfig("    server: https://a\n"
                             "    certificate-authority-data: Q0$A\n",
                             "    token: t\n"));
            }).find("certificate-authority-data is not valid base64"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_kubeconfig(kubeconfig("    server: https://a\n",
                                          "    client-certificate-data: Q0VSVC1QRU0=\n"));
            }).find("must be set together"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        parse_kubeconfig(kubeconfig("    insecure-skip-tls-verify: true\n", "    token: t\n"));
      }).find("missing 'server'"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              parse_kubeconfig(kubeconfig("    server: http://a\n", "    token: t\n"));
            }).find("must start with https://"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_kubeconfig(
                  kubeconfig("    server: https://a\n    insecure-skip-tls-verify: "
                             "maybe\n",
                             "    token: t\n"));
            }).find("must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_kubeconfig("clusters: []\n"); }).find("no current-context"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_kubeconfig(kubeconfig("    server: https://a\n", "    tokenFile: /nope/x\n"));
            }).find("cannot read file /nope/x"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        parse_kubeconfig(kubeconfig("    server: https://a\n", "    exec:\n      command: aws\n"));
      }).find("'exec' authentication is not supported"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              parse_kubeconfig("current-context: x\nclusters: {a: 1}\n");
            }).find("'clusters' must be a list"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_kubeconfig("/nonexistent/kubeconfig"); }).find("no readable file"),
            std::string::npos);
}

TEST(Base64Test, DecodesWithAndWithoutPaddingAndRejectsGarbage) {
  EXPECT_EQ(decode_base64("aGVsbG8=", "x"), "hello");
  EXPECT_THROW(decode_base64("aGVsbG8", "x"), ConfigError);  // unpadded, as Go's StdEncoding
  EXPECT_EQ(decode_base64("aGVs\nbG8=\n", "x"), "hello");
  EXPECT_THROW(decode_base64("aGVsbG8=a", "x"), ConfigError);  // data after padding
  EXPECT_THROW(decode_base64("a", "x"), ConfigError);          // truncated
  EXPECT_THROW(decode_base64("aGV*", "x"), ConfigError);
}

TEST(InClusterConfigTest, BracketsIpv6HostAndReadsMountedFiles) {
  TempDir dir;
  InClusterPaths paths{dir.write("token", "sa-token\n"), dir.write("ca.crt", "SA-CA"),
                       dir.write("namespace", "operators\n")};
  setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  unsetenv("POD_NAMESPACE");
  Config config = in_cluster_config(paths);
  EXPECT_EQ(config.server, "https://[fd00:10:96::1]:443");
  EXPECT_EQ(config.address.host, "fd00:10:96::1");
  EXPECT_TRUE(config.address.host_is_ip);
  EXPECT_EQ(config.ca_pem, "SA-CA");
  EXPECT_EQ(config.token_file, paths.token);
  EXPECT_EQ(config.namespace_name, "operators");
  setenv("POD_NAMESPACE", "from-env", 1);
  EXPECT_EQ(in_cluster_config(paths).namespace_name, "from-env");
  unsetenv("POD_NAMESPACE");
  unsetenv("KUBERNETES_SERVICE_PORT");
  EXPECT_THROW(in_cluster_config(paths), ConfigError);
  unsetenv("KUBERNETES_SERVICE_HOST");
}

}  // namespace
}  // namespace outbox::kube
