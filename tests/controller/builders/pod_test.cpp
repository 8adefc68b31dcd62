// The pod template every workload shares (builders/pod): the DSN and database TLS files, the
// Kafka credentials as files, the log settings and spec.relay.template.pod, in every pod.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <algorithm>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

// Every pod the operator renders (the relay, both CronJobs, the schema Job, a requeue Job) reads
// the DSN from the one key the spec names, mounted read-only and readable by the pod's group
// only; no environment variable, argument or annotation carries it or references the Secret.
TEST(RenderRelay, TheDsnReachesEveryPodAsAMountedFileNeverTheEnvironment) {
  Json r = relay(
      {{"database", {{"manageSchema", true}, {"dsnSecretRef", {{"name", "db"}, {"key", "uri"}}}}}});
  r["metadata"]["annotations"] = {{kRequeueAnnotation, "t1"}};
  const RenderedRelay rendered = render_relay(r, RenderOptions{"img:1"});
  int pods = 0;
  for (const auto& o : rendered.objects) {
    const Json& obj = o.object;
    const std::string kind = obj.at("kind");
    const char* at = kind == "Deployment" ? "/spec/template/spec"
                     : kind == "CronJob"  ? "/spec/jobTemplate/spec/template/spec"
                     : kind == "Job"      ? "/spec/template/spec"
                                          : nullptr;
    if (at == nullptr) {
      continue;
    }
    ++pods;
    const std::string name = obj.at("/metadata/name"_json_pointer);
    const Json& pod = obj.at(Json::json_pointer(at));
    EXPECT_EQ(pod.at("/volumes/1"_json_pointer),
              Json::parse(R"({"name":"database","secret":{"secretName":"db","defaultMode":288,
                 "items":[{"key":"uri","path":"uri"}]}})"))
        << name;
    const Json& c = pod.at("/containers/0"_json_pointer);
    EXPECT_EQ(
        c.at("/volumeMounts/1"_json_pointer),
        Json({{"name", "database"}, {"mountPath", "/etc/outbox/database"}, {"readOnly", true}}))
        << name;
    EXPECT_EQ(c.at("/env/0"_json_pointer),
              Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/uri"}}))
        << name;
    for (const Json& e : c.at("env")) {
      EXPECT_NE(e.at("name"), "OUTBOX_DSN") << name;
      EXPECT_FALSE(e.contains("/valueFrom/secretKeyRef"_json_pointer)) << name << e.dump();
    }
    EXPECT_EQ(c.at("args").dump().find("dsn"), std::string::npos) << name << c.at("args").dump();
  }
  EXPECT_EQ(pods, 5) << "relay, compensation, cleanup, schema and requeue";
}

// spec.database.tls: the CA (from a Secret or a ConfigMap) and the client certificate are mounted
// read-only under fixed names, and only paths and the mode reach the environment; without the
// field no TLS setting is rendered (the DSN decides).
TEST(RenderRelay, DatabaseTlsMountsTheCaAndClientCertificateAndSetsVerifyFull) {
  const RenderOptions opts{"img:1"};
  const RenderedRelay r =
      render_relay(relay({{"database",
                           {{"tls",
                             {{"ca", {{"secretRef", {{"name", "pg-ca"}}}}},
                              {"clientCertificate", {{"secretName", "pg-client"}}}}}}}}),
                   opts);
  for (const Json* pod :
       {&find(r, "Deployment", "orders-relay")->at("/spec/template/spec"_json_pointer),
        &find(r, "CronJob", "orders-cleanup")
             ->at("/spec/jobTemplate/spec/template/spec"_json_pointer)}) {
    EXPECT_EQ(pod->at("/volumes/2"_json_pointer),
              Json::parse(R"({"name":"database-ca","secret":{"secretName":"pg-ca",
                 "defaultMode":288,"items":[{"key":"ca.crt","path":"ca.crt"}]}})"));
    EXPECT_EQ(pod->at("/volumes/3"_json_pointer),
              Json::parse(R"({"name":"database-client","secret":{"secretName":"pg-client",
                 "defaultMode":288,"items":[{"key":"tls.crt","path":"tls.crt"},
                 {"key":"tls.key","path":"tls.key"}]}})"));
    const Json& c = pod->at("/containers/0"_json_pointer);
    EXPECT_EQ(c.at("/volumeMounts/2"_json_pointer), Json({{"name", "database-ca"},
                                                          {"mountPath", "/etc/outbox/database-ca"},
                                                          {"readOnly", true}}));
    EXPECT_EQ(c.at("/volumeMounts/3/mountPath"_json_pointer), "/etc/outbox/database-client");
    std::map<std::string, std::string> env;
    for (const Json& e : c.at("env")) {
      if (e.contains("value")) {
        env[e.at("name")] = e.at("value");
      }
    }
    EXPECT_EQ(env["OUTBOX_DATABASE_SSLMODE"], "verify-full");
    EXPECT_EQ(env["OUTBOX_DATABASE_CA_FILE"], "/etc/outbox/database-ca/ca.crt");
    EXPECT_EQ(env["OUTBOX_DATABASE_CERT_FILE"], "/etc/outbox/database-client/tls.crt");
    EXPECT_EQ(env["OUTBOX_DATABASE_KEY_FILE"], "/etc/outbox/database-client/tls.key");
  }
  const Json from_config_map =
      find(
          render_relay(
              relay({{"database",
                      {{"tls",
                        {{"mode", "verify-ca"},
                         {"ca", {{"configMapRef", {{"name", "pg-ca"}, {"key", "root.pem"}}}}}}}}}}),
              opts),
          "Deployment", "orders-relay")
          ->at("/spec/template/spec"_json_pointer);
  EXPECT_EQ(from_config_map.at("/volumes/2"_json_pointer),
            Json::parse(R"({"name":"database-ca","configMap":{"name":"pg-ca",
               "defaultMode":288,"items":[{"key":"root.pem","path":"ca.crt"}]}})"));
  EXPECT_NE(from_config_map.at("/containers/0/env"_json_pointer).dump().find("verify-ca"),
            std::string::npos);
  const Json plain = find(render_relay(relay(), opts), "Deployment", "orders-relay")
                         ->at("/spec/template/spec"_json_pointer);
  EXPECT_EQ(plain.dump().find("OUTBOX_DATABASE_"), std::string::npos);
  EXPECT_EQ(plain.at("volumes").size(), 2u);
}

// The Kafka Secret reaches the relay and the compensation job as files (one per librdkafka
// property), never as an argument or an environment variable; the cleanup job gets none.
TEST(RenderRelay, KafkaSecretIsMountedAsFilesNeverArgsOrEnv) {
  RenderOptions opts{"img:1"};
  RenderedRelay r = render_relay(relay({{"kafka", {{"configSecretRef", {{"name", "kc"}}}}}}), opts);
  auto pod_of = [&](const char* kind, const char* name, const char* path) {
    return find(r, kind, name)->at(Json::json_pointer(path));
  };
  for (const Json& pod :
       {pod_of("Deployment", "orders-relay", "/spec/template/spec"),
        pod_of("CronJob", "orders-compensate", "/spec/jobTemplate/spec/template/spec")}) {
    const Json& c = pod.at("/containers/0"_json_pointer);
    EXPECT_EQ(pod.at("/volumes/2"_json_pointer),
              Json({{"name", "kafka-config"},
                    {"secret", {{"secretName", "kc"}, {"defaultMode", 0440}}}}));
    EXPECT_EQ(
        c.at("/volumeMounts/2"_json_pointer),
        Json({{"name", "kafka-config"}, {"mountPath", "/etc/outbox/kafka"}, {"readOnly", true}}));
    const Json& args = c.at("args");
    EXPECT_NE(std::find(args.begin(), args.end(), "--kafka-config-dir=/etc/outbox/kafka"),
              args.end());
    std::vector<std::string> from_secrets;  // beside the log settings (not secrets)
    for (const Json& e : c.at("env")) {
      if (e.contains("/valueFrom/secretKeyRef"_json_pointer)) {
        from_secrets.push_back(e.at("name"));
      }
    }
    EXPECT_EQ(from_secrets, std::vector<std::string>{}) << "no credential in the environment";
    EXPECT_EQ(c.at("terminationMessagePolicy"), "FallbackToLogsOnError");
    EXPECT_EQ(c.dump().find("kafka-property"), std::string::npos) << c.dump();
  }
  const Json cleanup = pod_of("CronJob", "orders-cleanup", "/spec/jobTemplate/spec/template/spec");
  EXPECT_EQ(cleanup.at("volumes").size(), 2u) << "cleanup never talks to Kafka";
  // Without a Kafka Secret: no volume, no flag.
  RenderedRelay plain = render_relay(relay(), opts);
  EXPECT_EQ(find(plain, "Deployment", "orders-relay")
                ->at("/spec/template/spec/volumes"_json_pointer)
                .size(),
            2u);
}

// Strimzi-shaped credentials: the cluster CA and a tls KafkaUser's certificate and key are
// mounted as files (only the keys named), the relay's flags point at them, and no credential
// value is anywhere in the pod spec.
TEST(RenderRelay, StrimziTlsUserIsMountedAsFilesWithFlagsPointingAtThem) {
  RenderedRelay r = render_relay(
      relay({{"kafka",
              {{"tls", {{"trustedCertificates", Json::array({{{"secretName", "cluster-ca"}}})}}},
               {"authentication",
                {{"type", "tls"},
                 {"certificateAndKey",
                  {{"secretName", "orders-user"}, {"certificate", "tls.crt"}}}}}}}}),
      RenderOptions{"img:1"});
  for (const Json* pod :
       {&find(r, "Deployment", "orders-relay")->at("/spec/template/spec"_json_pointer),
        &find(r, "CronJob", "orders-compensate")
             ->at("/spec/jobTemplate/spec/template/spec"_json_pointer)}) {
    EXPECT_EQ(pod->at("/volumes/2"_json_pointer),
              Json::parse(R"({"name":"kafka-ca","secret":{"secretName":"cluster-ca",
                 "defaultMode":288,"items":[{"key":"ca.crt","path":"ca.crt"}]}})"));
    EXPECT_EQ(pod->at("/volumes/3"_json_pointer),
              Json::parse(R"({"name":"kafka-user","secret":{"secretName":"orders-user",
                 "defaultMode":288,"items":[{"key":"tls.crt","path":"user.crt"},
                 {"key":"user.key","path":"user.key"}]}})"));
    const Json& c = pod->at("/containers/0"_json_pointer);
    EXPECT_EQ(c.at("/volumeMounts/2/mountPath"_json_pointer), "/etc/outbox/kafka-ca");
    EXPECT_EQ(c.at("/volumeMounts/3/mountPath"_json_pointer), "/etc/outbox/kafka-user");
    const Json& args = c.at("args");
    for (const char* want : {"--kafka-ca-file=/etc/outbox/kafka-ca/ca.crt",
                             "--kafka-cert-file=/etc/outbox/kafka-user/user.crt",
                             "--kafka-key-file=/etc/outbox/kafka-user/user.key"}) {
      EXPECT_NE(std::find(args.begin(), args.end(), want), args.end()) << want << args.dump();
    }
  }
}

// spec.relay.template reaches the relay pods, both jobs' pods and the
// ServiceAccount; the operator's own labels win (its selectors depend on them);
// relay.resources reach the job containers too (a ResourceQuota needs them).
TEST(RenderRelay, TheTemplateReachesEveryPodAndTheServiceAccount) {
  const Json pod_template = {
      {"metadata",
       {{"labels", {{"team", "payments"}, {"app.kubernetes.io/component", "hijacked"}}},
        {"annotations", {{"cluster-autoscaler.kubernetes.io/safe-to-evict", "true"}}}}},
      {"nodeSelector", {{"pool", "relays"}}},
      {"tolerations", Json::array({{{"key", "dedicated"}, {"operator", "Exists"}}})},
      {"affinity", {{"nodeAffinity", Json::object()}}},
      {"topologySpreadConstraints",
       Json::array({{{"maxSkew", 1}, {"topologyKey", "topology.kubernetes.io/zone"}}})},
      {"priorityClassName", "outbox-critical"},
      {"imagePullSecrets", Json::array({{{"name", "registry"}}})},
      {"securityContext", {{"runAsNonRoot", true}}}};
  const Json resources = {{"requests", {{"cpu", "50m"}, {"memory", "32Mi"}}}};
  RenderedRelay r = render_relay(
      relay({{"relay",
              {{"resources", resources},
               {"template",
                {{"pod", pod_template},
                 {"serviceAccount",
                  {{"metadata",
                    {{"annotations",
                      {{"eks.amazonaws.com/role-arn", "arn:aws:iam::1:role/x"}}}}}}}}}}}}),
      RenderOptions{"img:1"});
  for (const auto& [kind, name, pointer] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Deployment", "orders-relay", "/spec/template"},
           {"CronJob", "orders-compensate", "/spec/jobTemplate/spec/template"},
           {"CronJob", "orders-cleanup", "/spec/jobTemplate/spec/template"}}) {
    const Json& pod = find(r, kind, name)->at(Json::json_pointer(pointer));
    EXPECT_EQ(pod.at("/metadata/labels/team"_json_pointer), "payments") << name;
    EXPECT_NE(pod.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer), "hijacked")
        << name << ": the operator's label wins";
    EXPECT_EQ(
        pod.at(
            "/metadata/annotations/cluster-autoscaler.kubernetes.io~1safe-to-evict"_json_pointer),
        "true")
        << name;
    for (const char* field :
         {"nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
          "priorityClassName", "imagePullSecrets", "securityContext"}) {
      EXPECT_EQ(pod.at("spec").at(field), pod_template.at(field)) << name << " " << field;
    }
    const Json& c = pod.at("/spec/containers/0"_json_pointer);
    EXPECT_EQ(c.at("resources"), resources) << name;
    EXPECT_FALSE(c.at("securityContext").contains("runAsUser")) << name << ": no fixed uid";
    EXPECT_EQ(c.at("/securityContext/readOnlyRootFilesystem"_json_pointer), true) << name;
  }
  EXPECT_EQ(find(r, "ServiceAccount", "orders-relay")
                ->at("/metadata/annotations/eks.amazonaws.com~1role-arn"_json_pointer),
            "arn:aws:iam::1:role/x");
  // Without a template: the default pod security context, uid 65532.
  const Json plain =
      find(render_relay(relay(), RenderOptions{"img:1"}), "Deployment", "orders-relay")
          ->at("/spec/template/spec/securityContext"_json_pointer);
  EXPECT_EQ(plain.at("runAsUser"), 65532);
}

// Every pod the operator starts logs as the operator does, and says in each JSON line which
// namespace, OutboxRelay and pod it is (the downward API gives the last).
TEST(RenderRelay, PodsGetTheOperatorsLogSettingsAndTheirIdentity) {
  RenderOptions opts{"img:1"};
  opts.log_level = "debug";
  opts.log_format = "json";
  RenderedRelay r = render_relay(relay({{"database", {{"manageSchema", true}}}}), opts);
  for (const auto& o : r.objects) {
    const std::string kind = o.object.at("kind");
    if (kind != "Deployment" && kind != "CronJob" && kind != "Job") {
      continue;
    }
    const Json spec = kind == "CronJob" ? o.object.at("/spec/jobTemplate/spec"_json_pointer)
                                        : o.object.at("spec");
    std::map<std::string, Json> env;
    for (const Json& e : spec.at("/template/spec/containers/0/env"_json_pointer)) {
      env[e.at("name")] = e.contains("value") ? e.at("value") : e.at("valueFrom");
    }
    const std::string name = o.object.at("/metadata/name"_json_pointer);
    EXPECT_EQ(env["OUTBOX_LOG_LEVEL"], "debug") << name;
    EXPECT_EQ(env["OUTBOX_LOG_FORMAT"], "json") << name;
    EXPECT_EQ(env["OUTBOX_LOG_OUTBOXRELAY"], "orders") << name;
    EXPECT_EQ(env["OUTBOX_LOG_NAMESPACE"].at("/fieldRef/fieldPath"_json_pointer),
              "metadata.namespace")
        << name;
    EXPECT_EQ(env["OUTBOX_LOG_REPLICA"].at("/fieldRef/fieldPath"_json_pointer), "metadata.name")
        << name;
  }
}

}  // namespace
}  // namespace outbox::controller
