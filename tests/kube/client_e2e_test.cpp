// The REST client against the test bed's real kube-apiserver.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "e2e_support.hpp"

namespace outbox::kube {
namespace {

using e2e::admin_client;
using e2e::config_map;

template <class Fn>
ApiError api_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an ApiError";
  return ApiError(Status{});
}

template <class Fn>
std::string transport_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const TransportError& e) {
    return e.what();
  }
  return "<no TransportError>";
}

TEST(KubeClientE2eTest, GetsVersionWithClientCertificate) {
  Config config = load_kubeconfig(testbed::kubeconfig_path());
  ASSERT_FALSE(config.client_cert_pem.empty()) << "the admin kubeconfig uses a client cert";
  ASSERT_TRUE(config.token.empty());
  Client client(config);
  Json version = client.request("GET", "/version");
  EXPECT_TRUE(version.contains("gitVersion")) << version.dump();
  EXPECT_EQ(version.value("major", ""), "1");
  // The certificate is what authenticates: without it the same call is anonymous and refused.
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  Client anonymous(config);
  ApiError error = api_error_of([&] { anonymous.list(resources::namespaces, ""); });
  EXPECT_TRUE(error.code() == 401 || error.code() == 403) << error.what();
}

TEST(KubeClientE2eTest, AuthenticatesWithBearerToken) {
  Config config = load_kubeconfig(testbed::require_env("OUTBOX_TEST_KUBE_TOKEN_KUBECONFIG"));
  ASSERT_FALSE(config.token.empty());
  ASSERT_TRUE(config.client_cert_pem.empty());
  Client client(config);
  Json namespaces = client.list(resources::namespaces, "");
  EXPECT_TRUE(namespaces["items"].is_array());
  EXPECT_FALSE(namespaces["items"].empty());

  config.token = "not-the-token";
  Client wrong(config);
  EXPECT_EQ(api_error_of([&] { wrong.list(resources::namespaces, ""); }).code(), 401);
}

TEST(KubeClientE2eTest, RereadsTokenFileAfter401) {
  Config config = load_kubeconfig(testbed::require_env("OUTBOX_TEST_KUBE_TOKEN_KUBECONFIG"));
  std::string good = config.token;
  std::string file = "/tmp/" + e2e::dns_name("token");
  std::ofstream(file) << "stale-token\n";
  config.token.clear();
  config.token_file = file;
  Client client(config);
  EXPECT_EQ(api_error_of([&] { client.list(resources::namespaces, ""); }).code(), 401);
  std::ofstream(file) << good << "\n";  // "rotation"
  // Still within the 60 s refresh period: only the 401 makes the client re-read the file.
  EXPECT_NO_THROW(client.list(resources::namespaces, ""));
  std::remove(file.c_str());
}

TEST(KubeClientE2eTest, ReportsTlsVerificationFailuresClearly) {
  Config good = load_kubeconfig(testbed::kubeconfig_path());
  ASSERT_TRUE(good.address.host_is_ip);

  // A wrong CA: the admin client certificate is a valid PEM certificate but not the issuer.
  Config wrong_ca = good;
  wrong_ca.ca_pem = good.client_cert_pem;
  std::string message = transport_error_of([&] { Client(wrong_ca).request("GET", "/version"); });
  std::printf("wrong ca: %s\n", message.c_str());
  EXPECT_NE(message.find("TLS verification of 127.0.0.1"), std::string::npos) << message;
  EXPECT_NE(message.find("certificate"), std::string::npos) << message;

  // The right CA but a name the certificate does not carry.
  Config wrong_name = good;
  wrong_name.tls_server_name = "not-the-apiserver.example.com";
  message = transport_error_of([&] { Client(wrong_name).request("GET", "/version"); });
  std::printf("wrong name: %s\n", message.c_str());
  EXPECT_NE(message.find("hostname mismatch"), std::string::npos) << message;

  // A DNS name the certificate does carry, sent as SNI and verified: accepted.
  Config by_name = good;
  by_name.tls_server_name = "localhost";
  EXPECT_NO_THROW(Client(by_name).request("GET", "/version"));

  // No CA at all falls back to the system store, which does not know the test bed's CA.
  Config system_ca = good;
  system_ca.ca_pem.clear();
  message = transport_error_of([&] { Client(system_ca).request("GET", "/version"); });
  EXPECT_NE(message.find("TLS verification"), std::string::npos) << message;

  // insecure-skip-tls-verify really skips verification.
  wrong_ca.insecure_skip_tls_verify = true;
  EXPECT_NO_THROW(Client(wrong_ca).request("GET", "/version"));
}

TEST(KubeClientE2eTest, ConnectionRefusedIsATransportError) {
  Config config = load_kubeconfig(testbed::kubeconfig_path());
  config.address.port = "1";  // nothing listens there
  ClientOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  std::string message =
      transport_error_of([&] { Client(config, options).request("GET", "/version"); });
  EXPECT_NE(message.find("cannot connect to 127.0.0.1:1"), std::string::npos) << message;
}

TEST(KubeClientE2eTest, ConfigMapCrudWithTypedConflicts) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  const auto& cms = resources::config_maps;

  Json created = client.create(cms, ns, config_map("app", {{"color", "red"}}));
  std::string rv1 = created["metadata"]["resourceVersion"];
  EXPECT_FALSE(rv1.empty());
  EXPECT_EQ(client.get(cms, ns, "app")["data"]["color"], "red");

  ApiError exists = api_error_of([&] { client.create(cms, ns, config_map("app", {})); });
  EXPECT_EQ(exists.code(), 409);
  EXPECT_TRUE(exists.is_already_exists());
  EXPECT_EQ(exists.status().name, "app");

  Json changed = created;
  changed["data"]["color"] = "blue";
  Json updated = client.update(cms, ns, changed);
  EXPECT_EQ(updated["data"]["color"], "blue");
  EXPECT_NE(updated["metadata"]["resourceVersion"], rv1);

  // A PUT carrying the old resourceVersion loses: optimistic concurrency.
  changed["data"]["color"] = "green";
  ApiError conflict = api_error_of([&] { client.update(cms, ns, changed); });
  EXPECT_EQ(conflict.code(), 409);
  EXPECT_TRUE(conflict.is_conflict());
  EXPECT_EQ(conflict.reason(), "Conflict");

  Json patched =
      client.merge_patch(cms, ns, "app", {{"data", {{"size", "L"}, {"color", nullptr}}}});
  EXPECT_EQ(patched["data"], Json({{"size", "L"}}));

  client.remove(cms, ns, "app");
  ApiError gone = api_error_of([&] { client.get(cms, ns, "app"); });
  EXPECT_TRUE(gone.is_not_found());
  EXPECT_EQ(gone.reason(), "NotFound");
}

// The operator checks Secrets this way: their values never reach it.
TEST(KubeClientE2eTest, GetMetadataReturnsASecretsVersionButNotItsValues) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  const Resource secrets{"", "v1", "secrets", true};
  Json created = client.create(secrets, ns,
                               {{"apiVersion", "v1"},
                                {"kind", "Secret"},
                                {"metadata", {{"name", "db"}}},
                                {"stringData", {{"dsn", "postgresql://u:hunter2@db/x"}}}});
  Json meta = client.get_metadata(secrets, ns, "db");
  EXPECT_EQ(meta.value("kind", ""), "PartialObjectMetadata");
  EXPECT_EQ(meta.at("/metadata/resourceVersion"_json_pointer),
            created.at("/metadata/resourceVersion"_json_pointer));
  EXPECT_FALSE(meta.contains("data"));
  EXPECT_EQ(meta.dump().find("hunter2"), std::string::npos);
  EXPECT_EQ(meta.dump().find("cG9zdGdyZXNxbDov"), std::string::npos) << "base64 of the value";
  EXPECT_TRUE(api_error_of([&] { client.get_metadata(secrets, ns, "nope"); }).is_not_found());
}

TEST(KubeClientE2eTest, ServerSideApplyCreatesUpdatesAndPrunesOwnedFields) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  const auto& cms = resources::config_maps;

  Json applied = client.apply(cms, ns, config_map("ssa", {{"a", "1"}, {"b", "2"}}), "outbox-test");
  EXPECT_EQ(applied["data"], Json({{"a", "1"}, {"b", "2"}}));
  bool managed = false;
  for (const auto& entry : applied["metadata"]["managedFields"]) {
    managed |= entry["manager"] == "outbox-test" && entry["operation"] == "Apply";
  }
  EXPECT_TRUE(managed) << applied["metadata"]["managedFields"].dump();

  // Another manager takes field "a" with a plain update: a non-forced apply conflicts...
  client.merge_patch(cms, ns, "ssa", {{"data", {{"a", "theirs"}}}});
  ApiError conflict = api_error_of([&] {
    client.apply(cms, ns, config_map("ssa", {{"a", "1"}, {"b", "2"}}), "outbox-test",
                 /*force=*/false);
  });
  EXPECT_EQ(conflict.code(), 409);
  // ...and a forced one takes it back. Dropping "b" from our intent removes it.
  applied = client.apply(cms, ns, config_map("ssa", {{"a", "1"}}), "outbox-test", /*force=*/true);
  EXPECT_EQ(applied["data"], Json({{"a", "1"}}));
}

TEST(KubeClientE2eTest, InvalidObjectIs422WithFieldCauses) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  ApiError invalid =
      api_error_of([&] { client.create(resources::config_maps, ns, config_map("Not_Valid", {})); });
  EXPECT_EQ(invalid.code(), 422);
  EXPECT_TRUE(invalid.is_invalid());
  EXPECT_EQ(invalid.reason(), "Invalid");
  ASSERT_FALSE(invalid.status().causes.empty());
  EXPECT_EQ(invalid.status().causes[0].field, "metadata.name");
  EXPECT_NE(std::string(invalid.what()).find("metadata.name"), std::string::npos);
}

TEST(KubeClientE2eTest, ListFollowsContinueTokensAcrossPages) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  for (int i = 0; i < 7; ++i) {
    client.create(resources::config_maps, ns, config_map("cm-" + std::to_string(i), {}));
  }
  ListOptions options;
  options.page_size = 2;
  Json list = client.list(resources::config_maps, ns, options);
  // The namespace also holds kube-root-ca.crt only if a controller-manager runs; count ours.
  int ours = 0;
  for (const auto& item : list["items"]) {
    ours += item["metadata"]["name"].get<std::string>().rfind("cm-", 0) == 0;
  }
  EXPECT_EQ(ours, 7);
  EXPECT_FALSE(list["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_FALSE(list["metadata"].contains("continue"));

  options.label_selector = "absent=true";
  EXPECT_TRUE(client.list(resources::config_maps, ns, options)["items"].empty());
}

TEST(KubeClientE2eTest, CustomResourceCrudApplyAndStatusSubresource) {
  Client client = admin_client();
  std::string group = e2e::dns_name("g") + ".example.com";
  std::string crd_name = "widgets." + group;
  Json schema = {
      {"type", "object"},
      {"properties",
       {{"spec", {{"type", "object"}, {"properties", {{"size", {{"type", "integer"}}}}}}},
        {"status", {{"type", "object"}, {"properties", {{"phase", {{"type", "string"}}}}}}}}}};
  Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", crd_name}}},
              {"spec",
               {{"group", group},
                {"scope", "Namespaced"},
                {"names",
                 {{"plural", "widgets"},
                  {"singular", "widget"},
                  {"kind", "Widget"},
                  {"listKind", "WidgetList"}}},
                {"versions", Json::array({{{"name", "v1"},
                                           {"served", true},
                                           {"storage", true},
                                           {"subresources", {{"status", Json::object()}}},
                                           {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
  client.create(resources::crds, "", crd);
  ASSERT_TRUE(e2e::eventually([&] {
    for (const auto& c : client.get(resources::crds, "", crd_name)
                             .value("/status/conditions"_json_pointer, Json::array())) {
      if (c["type"] == "Established" && c["status"] == "True") {
        return true;
      }
    }
    return false;
  })) << "CRD never became Established";

  Resource widgets{group, "v1", "widgets", true};
  std::string ns = e2e::make_namespace(client);
  Json widget = {{"apiVersion", group + "/v1"},
                 {"kind", "Widget"},
                 {"metadata", {{"name", "w1"}}},
                 {"spec", {{"size", 1}}}};
  // Right after Established the discovery of the new type can lag for a moment.
  ASSERT_TRUE(e2e::eventually([&] {
    try {
      client.create(widgets, ns, widget);
      return true;
    } catch (const ApiError&) {
      return false;
    }
  }));
  EXPECT_EQ(client.get(widgets, ns, "w1")["spec"]["size"], 1);

  // The main resource ignores status; /status ignores everything but status.
  Json with_status = client.get(widgets, ns, "w1");
  with_status["status"] = {{"phase", "Ignored"}};
  with_status["spec"]["size"] = 2;
  Json updated = client.update(widgets, ns, with_status);
  EXPECT_EQ(updated["spec"]["size"], 2);
  EXPECT_FALSE(updated.contains("status"));

  updated["status"] = {{"phase", "Ready"}};
  updated["spec"]["size"] = 99;
  Json status_updated = client.update_status(widgets, ns, updated);
  EXPECT_EQ(status_updated["status"]["phase"], "Ready");
  EXPECT_EQ(status_updated["spec"]["size"], 2);

  Json status_apply = {{"apiVersion", group + "/v1"},
                       {"kind", "Widget"},
                       {"metadata", {{"name", "w1"}}},
                       {"status", {{"phase", "Applied"}}}};
  EXPECT_EQ(client.apply_status(widgets, ns, status_apply, "outbox-test")["status"]["phase"],
            "Applied");
  EXPECT_EQ(client.merge_patch(widgets, ns, "w1", {{"status", {{"phase", "Patched"}}}},
                               "status")["status"]["phase"],
            "Patched");

  Json spec_apply = widget;
  spec_apply["spec"]["size"] = 5;
  EXPECT_EQ(client.apply(widgets, ns, spec_apply, "outbox-test")["spec"]["size"], 5);
  EXPECT_EQ(client.list(widgets, ns)["items"].size(), 1u);

  // A type error in the spec is a 422 with the field named.
  Json bad = widget;
  bad["metadata"]["name"] = "w2";
  bad["spec"]["size"] = "large";
  ApiError invalid = api_error_of([&] { client.create(widgets, ns, bad); });
  EXPECT_EQ(invalid.code(), 422);
  ASSERT_FALSE(invalid.status().causes.empty());
  EXPECT_EQ(invalid.status().causes[0].field, "spec.size");

  client.remove(widgets, ns, "w1");
  EXPECT_TRUE(api_error_of([&] { client.get(widgets, ns, "w1"); }).is_not_found());
  client.remove(resources::crds, "", crd_name);
}

TEST(KubeClientE2eTest, ReusesConnectionsAcrossManyRequests) {
  Client client = admin_client();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 30; ++i) {
    client.request("GET", "/version");
  }
  // 30 fresh TLS handshakes (RSA-2048) cost far more than 30 requests on one connection;
  // mostly this checks that reuse does not break anything.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace outbox::kube
