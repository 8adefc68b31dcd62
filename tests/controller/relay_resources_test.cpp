// Rendering (relay_resources): spec -> owned objects, pure.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <algorithm>

#include "controller/relay_resources.hpp"
#include "relay_sample.hpp"

namespace outbox::controller {
namespace {

Json relay(const Json& spec_patch = Json::object()) {
  return testing::sample_relay(spec_patch);
}

const Json* find(const RenderedRelay& r, const std::string& kind, const std::string& name) {
  for (const auto& o : r.objects) {
    if (o.object.at("kind") == kind && o.object.at("/metadata/name"_json_pointer) == name) {
      return &o.object;
    }
  }
  return nullptr;
}

TEST(RenderRelay, NamesOwnersAndPdbFollowReplicas) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay two = render_relay(relay(), opts);
  for (const char* kind :
       {"ServiceAccount", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget"}) {
    ASSERT_NE(find(two, kind, "orders-relay"), nullptr) << kind;
  }
  ASSERT_NE(find(two, "ConfigMap", "orders-config"), nullptr);
  ASSERT_NE(find(two, "CronJob", "orders-compensate"), nullptr);
  ASSERT_NE(find(two, "CronJob", "orders-cleanup"), nullptr);
  ASSERT_NE(find(two, "Service", "orders-metrics"), nullptr);
  for (const auto& o : two.objects) {
    EXPECT_EQ(o.object.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
    EXPECT_EQ(o.object.at("/metadata/namespace"_json_pointer), "shop");
  }
  EXPECT_TRUE(two.wants_pdb);
  RenderedRelay one = render_relay(relay({{"relay", {{"replicas", 1}}}}), opts);
  EXPECT_FALSE(one.wants_pdb);
  EXPECT_EQ(find(one, "PodDisruptionBudget", "orders-relay"), nullptr);
  RenderedRelay suspended = render_relay(relay({{"suspend", true}}), opts);
  EXPECT_EQ(find(suspended, "Deployment", "orders-relay")->at("/spec/replicas"_json_pointer), 0);
  EXPECT_TRUE(
      find(suspended, "CronJob", "orders-cleanup")->at("/spec/suspend"_json_pointer).get<bool>());
  EXPECT_THROW(render_relay(relay(), RenderOptions{}), std::invalid_argument);
  EXPECT_EQ(find(render_relay(relay({{"relay", {{"image", "own:2"}}}}), RenderOptions{}),
                 "Deployment", "orders-relay")
                ->at("/spec/template/spec/containers/0/image"_json_pointer),
            "own:2");
}

// Every pod the operator renders (the relay, both CronJobs, the schema Job, a requeue Job) reads
// the DSN from the one key the spec names, mounted read-only and readable by the pod's group
// only; no environment variable, argument or annotation carries it or references the Secret.
TEST(RenderRelay, TheDsnReachesEveryPodAsAMountedFileNeverTheEnvironment) {
  Json r = relay(
      {{"database", {{"manageSchema", true}, {"dsnSecretRef", {{"name", "db"}, {"key", "uri"}}}}}});
  r["metadata"]["annotations"] = {{kRequeueAnnotation, "t1"}};
  const RenderedRelay rendered = render_relay(r, RenderOptions{"img:1", ""});
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
                 "optional":true,"items":[{"key":"uri","path":"uri"}]}})"))
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
  const RenderOptions opts{"img:1", ""};
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
  RenderOptions opts{"img:1", ""};
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
      RenderOptions{"img:1", ""});
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

TEST(RenderRelay, StrimziScramUserGivesMechanismUserAndPasswordFile) {
  RenderedRelay r =
      render_relay(relay({{"kafka",
                           {{"authentication",
                             {{"type", "scram-sha-512"},
                              {"username", "orders-relay"},
                              {"passwordSecret", {{"secretName", "orders-user"}}}}}}}}),
                   RenderOptions{"img:1", ""});
  const Json& pod = find(r, "Deployment", "orders-relay")->at("/spec/template/spec"_json_pointer);
  EXPECT_EQ(pod.at("/volumes/2/secret/items"_json_pointer),
            Json::parse(R"([{"key":"password","path":"password"}])"));
  const Json& args = pod.at("/containers/0/args"_json_pointer);
  for (const char* want :
       {"--kafka-sasl-mechanism=SCRAM-SHA-512", "--kafka-sasl-username=orders-relay",
        "--kafka-sasl-password-file=/etc/outbox/kafka-user/password"}) {
    EXPECT_NE(std::find(args.begin(), args.end(), want), args.end()) << want << args.dump();
  }
  EXPECT_EQ(std::count_if(args.begin(), args.end(),
                          [](const Json& a) {
                            return a.get<std::string>().find("ca-file") != std::string::npos;
                          }),
            0)
      << "no spec.kafka.tls: SASL_PLAINTEXT";
}

// One ClusterIP per resource would exhaust a /24 service range at ~250 resources.
TEST(RenderRelay, MetricsServiceIsHeadless) {
  RenderedRelay r = render_relay(relay(), RenderOptions{"img:1", ""});
  EXPECT_EQ(find(r, "Service", "orders-metrics")->at("/spec/clusterIP"_json_pointer), "None");
}

// spec.database.columns reaches the relay and both jobs as one --column per role,
// Debezium's defaults spelled out, so each refuses a table adopted otherwise; no
// columns, no --column (a table made by migrate).
TEST(RenderRelay, ColumnsReachTheRelayAndBothJobs) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay r = render_relay(
      relay({{"database",
              {{"dsnSecretRef", {{"name", "db"}, {"key", "dsn"}}},
               {"table", "public.outbox"},
               {"columns", {{"bizId", "order_id"}, {"headers", "tracingspancontext"}}}}}}),
      opts);
  const std::vector<std::string> expected = {
      "--column=eventId=id", "--column=bizType=aggregatetype", "--column=bizId=order_id",
      "--column=payload=payload", "--column=headers=tracingspancontext"};
  for (const auto& [kind, name, pointer] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Deployment", "orders-relay", "/spec/template/spec/containers/0/args"},
           {"CronJob", "orders-compensate",
            "/spec/jobTemplate/spec/template/spec/containers/0/args"},
           {"CronJob", "orders-cleanup",
            "/spec/jobTemplate/spec/template/spec/containers/0/args"}}) {
    const Json args = find(r, kind, name)->at(Json::json_pointer(pointer));
    std::vector<std::string> columns;
    for (const auto& a : args) {
      if (a.get<std::string>().rfind("--column=", 0) == 0) {
        columns.push_back(a.get<std::string>());
      }
    }
    EXPECT_EQ(columns, expected) << name << ": " << args.dump();
  }
  const Json plain = find(render_relay(relay(), opts), "Deployment", "orders-relay")
                         ->at("/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(plain.dump().find("--column"), std::string::npos) << plain.dump();
}

// spec.relay.shards reaches the relay as --shards (which then refuses a table of
// another count); unset, no flag: the relay takes the table's. ordering None
// reaches the relay and the compensation job as --ordering=none.
TEST(RenderRelay, ShardsAndOrderingReachTheRelay) {
  RenderOptions opts{"img:1", ""};
  auto args = [&](const Json& patch) {
    return find(render_relay(relay(patch), opts), "Deployment", "orders-relay")
        ->at("/spec/template/spec/containers/0/args"_json_pointer)
        .dump();
  };
  EXPECT_NE(args({{"relay", {{"shards", 128}}}}).find("\"--shards=128\""), std::string::npos);
  EXPECT_EQ(args(Json::object()).find("--shards"), std::string::npos);
  EXPECT_NE(args({{"relay", {{"ordering", "None"}}}}).find("\"--ordering=none\""),
            std::string::npos);
  EXPECT_EQ(args({{"relay", {{"ordering", "PerKey"}}}}).find("--ordering"), std::string::npos);
  const Json compensate =
      find(render_relay(relay({{"relay", {{"ordering", "None"}}}}), opts), "CronJob",
           "orders-compensate")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_NE(compensate.dump().find("\"--ordering=none\""), std::string::npos);
}

// spec.relay.coalesceWindow reaches the relay as --coalesce-window; left out (the API
// server defaults it to 0s), the relay gets the default: claim on every wake-up.
TEST(RenderRelay, TheCoalesceWindowReachesTheRelay) {
  RenderOptions opts{"img:1", ""};
  auto args = [&](const Json& patch) {
    return find(render_relay(relay(patch), opts), "Deployment", "orders-relay")
        ->at("/spec/template/spec/containers/0/args"_json_pointer)
        .dump();
  };
  EXPECT_NE(args({{"relay", {{"coalesceWindow", "200ms"}}}}).find("\"--coalesce-window=200ms\""),
            std::string::npos);
  EXPECT_NE(args(Json::object()).find("\"--coalesce-window=0s\""), std::string::npos);
}

TEST(RenderRelay, TheDeadLetterTopicReachesTheRelayAndCompensationOnly) {
  RenderOptions opts{"img:1", ""};
  const RenderedRelay r =
      render_relay(relay({{"kafka", {{"deadLetterTopic", "orders.dead-letters"}}}}), opts);
  const auto args = [&](const char* kind, const char* name, const char* pointer) {
    return find(r, kind, name)->at(Json::json_pointer(pointer)).dump();
  };
  const std::string flag = "\"--dead-letter-topic=orders.dead-letters\"";
  EXPECT_NE(args("Deployment", "orders-relay", "/spec/template/spec/containers/0/args").find(flag),
            std::string::npos);
  EXPECT_NE(
      args("CronJob", "orders-compensate", "/spec/jobTemplate/spec/template/spec/containers/0/args")
          .find(flag),
      std::string::npos);
  EXPECT_EQ(
      args("CronJob", "orders-cleanup", "/spec/jobTemplate/spec/template/spec/containers/0/args")
          .find("dead-letter"),
      std::string::npos);
  EXPECT_EQ(find(render_relay(relay(Json::object()), opts), "Deployment", "orders-relay")
                ->dump()
                .find("dead-letter"),
            std::string::npos);
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
      RenderOptions{"img:1", ""});
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
      find(render_relay(relay(), RenderOptions{"img:1", ""}), "Deployment", "orders-relay")
          ->at("/spec/template/spec/securityContext"_json_pointer);
  EXPECT_EQ(plain.at("runAsUser"), 65532);
}

// spec.database.manageSchema renders one Job running `migrate` for the spec's table (with
// --adopt for columns, shards and mode when set); its name follows the image and arguments,
// so an operator upgrade runs it again and an unchanged spec never does.
TEST(RenderRelay, ManageSchemaRendersAMigrateJobNamedByImageAndArguments) {
  RenderOptions opts{"img:1", ""};
  auto jobs = [](const RenderedRelay& r) {
    std::vector<Json> out;
    for (const auto& o : r.objects) {
      if (o.object.at("kind") == "Job") {
        out.push_back(o.object);
      }
    }
    return out;
  };
  EXPECT_TRUE(jobs(render_relay(relay(), opts)).empty());
  EXPECT_EQ(schema_job_name(relay(), opts), "");
  const Json managed = relay({{"database",
                               {{"manageSchema", true},
                                {"table", "public.outbox"},
                                {"mode", "Log"},
                                {"columns", {{"createdAt", "timestamp"}}}}},
                              {"relay", {{"shards", 16}}}});
  const auto rendered = jobs(render_relay(managed, opts));
  ASSERT_EQ(rendered.size(), 1u);
  const Json& job = rendered[0];
  const std::string name = schema_job_name(managed, opts);
  EXPECT_EQ(job.at("/metadata/name"_json_pointer), name);
  EXPECT_EQ(name.rfind("orders-schema-", 0), 0u) << name;
  EXPECT_LE(name.size(), 63u);
  const Json c = job.at("/spec/template/spec/containers/0"_json_pointer);
  EXPECT_EQ(c.at("args"),
            Json::array({"migrate", "--table=public.outbox", "--column=eventId=id",
                         "--column=bizType=aggregatetype", "--column=bizId=aggregateid",
                         "--column=payload=payload", "--column=createdAt=timestamp", "--adopt",
                         "--shards=16", "--mode=log"}));
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_EQ(job.at("/spec/template/spec/restartPolicy"_json_pointer), "Never");
  EXPECT_EQ(schema_job_name(managed, opts), name) << "stable for the same spec and image";
  EXPECT_NE(schema_job_name(managed, RenderOptions{"img:2", ""}), name) << "a new image reruns it";
  EXPECT_NE(schema_job_name(relay({{"database", {{"manageSchema", true}}}}), opts), name);
  const Json bytes = jobs(
      render_relay(relay({{"database", {{"manageSchema", true}, {"payload", "Bytes"}}}}), opts))[0];
  EXPECT_NE(bytes.at("/spec/template/spec/containers/0/args"_json_pointer)
                .dump()
                .find("\"--payload=bytes\""),
            std::string::npos);
}

// The OutboxRelay with the requeue annotation set to `token`, and `status` when given.
Json requeue_requested(const std::string& token, const Json& status = Json(),
                       const Json& spec_patch = Json::object()) {
  Json r = relay(spec_patch);
  r["metadata"]["annotations"] = {{kRequeueAnnotation, token}, {"other", "kept"}};
  if (!status.is_null()) {
    r["status"] = status;
  }
  return r;
}

std::vector<Json> requeue_jobs(const RenderedRelay& r) {
  std::vector<Json> out;
  for (const auto& o : r.objects) {
    if (o.object.at("kind") == "Job" &&
        o.object.at("/metadata/name"_json_pointer).get<std::string>().find("-requeue-") !=
            std::string::npos) {
      out.push_back(o.object);
    }
  }
  return out;
}

// A token is passed to the Job as one argument and names it through its hash: only 1 to 63
// characters of A-Z a-z 0-9 : . _ + - pass; nothing Kubernetes or a shell would expand.
// deletionPolicy: Drop. The Job runs `migrate --drop` with the DSN as a file, and has no owner
// and no API token: it outlives owned objects a foreground deletion removes first.
TEST(RenderRelay, TheDropJobMigratesDropWithTheDsnFileAndNoOwnerOrToken) {
  const Json adopted = relay({{"database",
                               {{"manageSchema", true},
                                {"table", "public.outbox"},
                                {"columns", {{"createdAt", "timestamp"}}}}},
                              {"deletionPolicy", "Drop"}});
  EXPECT_TRUE(drops_on_deletion(adopted));
  EXPECT_FALSE(drops_on_deletion(relay()));
  EXPECT_FALSE(drops_on_deletion(relay({{"deletionPolicy", "Retain"}})));
  const OwnedObject job = drop_job(adopted, RenderOptions{"img:1", ""});
  EXPECT_EQ(job.resource, &owned::jobs);
  const Json& o = job.object;
  EXPECT_EQ(o.at("/metadata/name"_json_pointer), drop_job_name(adopted));
  EXPECT_EQ(drop_job_name(adopted).rfind("orders-drop-", 0), 0u);
  EXPECT_LE(drop_job_name(adopted).size(), 57u);
  Json other = adopted;
  other["metadata"]["uid"] = "u-2";
  EXPECT_NE(drop_job_name(other), drop_job_name(adopted)) << "a new resource, a new Job";
  EXPECT_FALSE(o.at("metadata").contains("ownerReferences"));
  EXPECT_EQ(o.at("/metadata/labels/app.kubernetes.io~1instance"_json_pointer), "orders");
  EXPECT_EQ(o.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer), "drop");
  const Json& pod = o.at("/spec/template/spec"_json_pointer);
  EXPECT_FALSE(pod.contains("serviceAccountName"));
  EXPECT_EQ(pod.at("automountServiceAccountToken"), false);
  EXPECT_EQ(pod.at("restartPolicy"), "Never");
  const Json& c = pod.at("/containers/0"_json_pointer);
  EXPECT_EQ(c.at("args"),
            Json::array({"migrate", "--drop", "--table=public.outbox", "--column=eventId=id",
                         "--column=bizType=aggregatetype", "--column=bizId=aggregateid",
                         "--column=payload=payload", "--column=createdAt=timestamp", "--adopt"}));
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_EQ(c.at("/volumeMounts/1/mountPath"_json_pointer), "/etc/outbox/database");
  EXPECT_EQ(o.at("/spec/ttlSecondsAfterFinished"_json_pointer), 86400);
  // Never among the objects a live resource renders.
  for (const auto& rendered : render_relay(adopted, RenderOptions{"img:1", ""}).objects) {
    EXPECT_NE(rendered.object.at("/metadata/name"_json_pointer), drop_job_name(adopted));
  }
}

TEST(RenderRelay, RequeueTokensAreShortAndPlain) {
  const std::vector<std::string> good = {"2026-12-04T10:00:00Z", "1733306400", "a", "v1.2_3+4-5:6",
                                         std::string(63, 'x')};
  for (const std::string& token : good) {
    EXPECT_EQ(requeue_token_problem(token), "") << token;
  }
  const std::vector<std::string> bad = {"",
                                        std::string(64, 'x'),
                                        "a b",
                                        "$(OUTBOX_DSN)",
                                        "--table=x",
                                        "a;b",
                                        "a\nb",
                                        "a/b",
                                        "\xc3\xa9t\xc3\xa9",
                                        std::string("a\0b", 3)};
  for (const std::string& token : bad) {
    EXPECT_NE(requeue_token_problem(token), "") << token;
  }
  EXPECT_NE(requeue_token_problem(std::string(64, 'x')).find("at most 63"), std::string::npos);
}

// outbox.dev/replay (and the JSON form of outbox.dev/requeue-failed): what `kubectl outbox`
// writes. A bounded selection becomes the Job's arguments, each selector one argument; what is
// unbounded, malformed or unknown is refused with the reason and renders no Job.
TEST(RenderRelay, ReplayRequestsAreBoundedAndValidatedBeforeAnyJob) {
  auto replay = [](const std::string& value, const Json& status = Json()) {
    Json r = relay();
    r["metadata"]["annotations"] = {{kReplayAnnotation, value}};
    if (!status.is_null()) {
      r["status"] = status;
    }
    return r;
  };
  const std::string id = "5f0c6a36-9d7c-4c55-9c64-0d7f3d0b5e11";
  const Json ok = {{"request", "t-1"},
                   {"requestedBy", "alice@example.com"},
                   {"eventIds", {id}},
                   {"bizType", "order$(X)"},
                   {"from", "2026-12-01T00:00:00Z"},
                   {"to", "2026-12-02T00:00:00.5+01:00"},
                   {"fromId", 3},
                   {"toId", 9}};
  const ChangeRequest request = replay_request(replay(ok.dump()));
  EXPECT_EQ(request.problem, "");
  EXPECT_EQ(request.token, "t-1");
  EXPECT_EQ(request.requested_by, "alice@example.com");
  EXPECT_EQ(request.job, "orders-replay-" + stable_hash("t-1").substr(0, 8));
  const std::vector<std::string> want = {"--event-id=" + id,
                                         "--biz-type=order$$(X)",
                                         "--from=2026-12-01T00:00:00Z",
                                         "--to=2026-12-02T00:00:00.5+01:00",
                                         "--from-id=3",
                                         "--to-id=9"};
  EXPECT_EQ(request.selector_args, want);
  const RenderedRelay rendered = render_relay(replay(ok.dump()), {"img:1", ""});
  const Json* job = nullptr;
  for (const auto& o : rendered.objects) {
    if (o.object.at("/metadata/name"_json_pointer) == request.job) {
      job = &o.object;
    }
  }
  ASSERT_NE(job, nullptr);
  const Json args = job->at("/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(args.at(0), "replay");
  EXPECT_NE(args.dump().find("\"--request=t-1\""), std::string::npos) << args.dump();
  EXPECT_EQ(args.dump().find("--all"), std::string::npos) << args.dump();
  EXPECT_EQ(replay_request(replay(ok.dump(), {{"lastReplay", {{"request", "t-1"}}}})).job, "")
      << "answered";

  const std::vector<std::pair<std::string, std::string>> refused = {
      {"2026-12-04T10:00:00Z", "not a JSON object"},
      {"{\"eventIds\": [\"" + id + "\"]}", "\"request\""},
      {"{\"request\": \"a b\", \"eventIds\": [\"" + id + "\"]}", "character"},
      {"{\"request\": \"t\", \"bizType\": \"order\"}", "must be bounded"},
      {"{\"request\": \"t\", \"from\": \"2026-12-01T00:00:00Z\"}", "must be bounded"},
      {"{\"request\": \"t\", \"fromId\": 5}", "must be bounded"},
      {"{\"request\": \"t\", \"all\": true}", "not offered for a replay"},
      {"{\"request\": \"t\"}", "no events are selected"},
      {"{\"request\": \"t\", \"eventIds\": [\"x' OR 1=1\"]}", "not a UUID"},
      {"{\"request\": \"t\", \"eventIds\": []}", "1 to 100"},
      {"{\"request\": \"t\", \"from\": \"yesterday\", \"to\": \"today\"}", "RFC 3339"},
      {"{\"request\": \"t\", \"fromId\": 9, \"toId\": 3}", "above toId"},
      {"{\"request\": \"t\", \"fromId\": -1, \"toId\": 3}", "0 or more"},
      {"{\"request\": \"t\", \"evenIds\": [\"" + id + "\"]}", "unknown key"},
      {"{\"request\": \"t\", \"requestedBy\": \"a`b\", \"eventIds\": [\"" + id + "\"]}",
       "requestedBy"},
      {"{\"request\": \"t\", \"requestedBy\": \"a\", \"requestedBy\": \"b\", \"fromId\": 1, "
       "\"toId\": 2}",
       "more than once"},
      {"{\"request\": \"t\", \"requestedBy\": \"a\", \"\\u0072equestedBy\": \"b\", \"fromId\": 1, "
       "\"toId\": 2}",
       "backslash"},
      {"{\"request\": \"t\", \"fromId\": 1, \"toId\": 2, \"pad\": \"" + std::string(9000, 'x') +
           "\"}",
       "longer than"},
  };
  for (const auto& [value, why] : refused) {
    const ChangeRequest r = replay_request(replay(value));
    EXPECT_EQ(r.job, "") << value;
    EXPECT_NE(r.problem.find("annotation outbox.dev/replay"), std::string::npos) << value;
    EXPECT_NE(r.problem.find(why), std::string::npos) << value << ": " << r.problem;
  }

  // The requeue annotation takes the plain token (every FAILED event) or the same JSON form,
  // with `all` allowed.
  Json requeue = relay();
  requeue["metadata"]["annotations"] = {
      {kRequeueAnnotation, Json({{"request", "t-2"}, {"eventIds", {id}}}).dump()}};
  EXPECT_EQ(requeue_request(requeue).selector_args, std::vector<std::string>{"--event-id=" + id});
  requeue["metadata"]["annotations"] = {
      {kRequeueAnnotation, Json({{"request", "t-3"}, {"all", true}}).dump()}};
  EXPECT_EQ(requeue_request(requeue).selector_args, std::vector<std::string>{"--all"});
  requeue["metadata"]["annotations"] = {{kRequeueAnnotation, "t-4"}};
  EXPECT_EQ(requeue_request(requeue).selector_args, std::vector<std::string>{"--all"});
}

// outbox.dev/requeue-failed: one Job per request token, named by its hash, running `requeue
// --all` on the spec's table in the relay's image and pod settings (the DSN from the Secret,
// never an argument), writing the token back as status.lastRequeue.request. Once the status
// holds the token (whatever the outcome), the Job is no longer rendered; a new token renders a
// new Job.
TEST(RenderRelay, ARequeueAnnotationRendersOneJobUntilItsRequestIsAnswered) {
  const RenderOptions opts{"img:1", ""};
  const std::string token = "2026-12-04T10:00:00Z";
  const std::string name = "orders-requeue-" + stable_hash(token).substr(0, 8);
  const RequeueRequest request = requeue_request(requeue_requested(token));
  EXPECT_EQ(request.token, token);
  EXPECT_EQ(request.job, name);
  EXPECT_EQ(request.problem, "");
  const auto jobs = requeue_jobs(render_relay(requeue_requested(token), opts));
  ASSERT_EQ(jobs.size(), 1u);
  const Json& job = jobs[0];
  EXPECT_EQ(job.at("/metadata/name"_json_pointer), name);
  EXPECT_LE(name.size(), 63u);
  EXPECT_EQ(job.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
  EXPECT_EQ(job.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer), "requeue");
  EXPECT_EQ(job.at("/spec/backoffLimit"_json_pointer), 2);
  EXPECT_EQ(job.at("/spec/activeDeadlineSeconds"_json_pointer), 600);
  EXPECT_EQ(job.at("/spec/ttlSecondsAfterFinished"_json_pointer), 86400);
  const Json pod = job.at("/spec/template/spec"_json_pointer);
  EXPECT_EQ(pod.at("serviceAccountName"), "orders-relay") << "its token may patch the status";
  EXPECT_EQ(pod.at("restartPolicy"), "Never");
  EXPECT_TRUE(pod.at("/securityContext/runAsNonRoot"_json_pointer).get<bool>());
  const Json c = pod.at("/containers/0"_json_pointer);
  EXPECT_EQ(c.at("name"), "requeue");
  EXPECT_EQ(c.at("image"), "img:1");
  EXPECT_EQ(c.at("args"),
            Json::array({"requeue", "--table=public.outbox_event", "--all",
                         "--request=2026-12-04T10:00:00Z", "--report-status=shop/orders"}));
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_TRUE(c.at("/securityContext/readOnlyRootFilesystem"_json_pointer).get<bool>());
  EXPECT_EQ(c.at("volumeMounts").size(), 2u) << "no Kafka credentials: " << c.dump();

  // An adopted table's columns reach it too, and it runs beside the schema Job.
  const Json adopted = requeue_requested(token, Json(),
                                         {{"database",
                                           {{"manageSchema", true},
                                            {"table", "public.outbox"},
                                            {"columns", {{"createdAt", "timestamp"}}}}}});
  const RenderedRelay both = render_relay(adopted, opts);
  EXPECT_NE(find(both, "Job", schema_job_name(adopted, opts)), nullptr);
  const Json args =
      requeue_jobs(both).at(0).at("/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(args.at(1), "--table=public.outbox");
  EXPECT_NE(std::find(args.begin(), args.end(), "--column=createdAt=timestamp"), args.end());

  // Answered, Succeeded or Failed: not rendered again, even after the Job is deleted.
  for (const char* outcome : {"Succeeded", "Failed"}) {
    const Json answered = requeue_requested(
        token, {{"lastRequeue", {{"request", token}, {"outcome", outcome}, {"requeued", 3}}}});
    EXPECT_EQ(requeue_request(answered).job, "") << outcome;
    EXPECT_TRUE(requeue_jobs(render_relay(answered, opts)).empty()) << outcome;
  }
  // A new token after an answered one: a new Job.
  const Json next = requeue_requested(
      "2026-12-05T08:00:00Z", {{"lastRequeue", {{"request", token}, {"outcome", "Succeeded"}}}});
  const auto next_jobs = requeue_jobs(render_relay(next, opts));
  ASSERT_EQ(next_jobs.size(), 1u);
  EXPECT_NE(next_jobs[0].at("/metadata/name"_json_pointer), name);
  EXPECT_EQ(next_jobs[0].at("/metadata/name"_json_pointer), requeue_request(next).job);
  // No annotation: no Job, nothing to answer.
  EXPECT_TRUE(requeue_jobs(render_relay(relay(), opts)).empty());
  EXPECT_EQ(requeue_request(relay()).token, "");
}

// A value the Job could not take as it is (empty, too long, a space, `$(VAR)` Kubernetes would
// expand, `=`, a newline, non-ASCII) renders no Job and never reaches an argument; the refusal
// names the annotation. The rest of the relay renders as usual.
TEST(RenderRelay, AnInvalidRequeueTokenIsRefusedNamingTheAnnotation) {
  const RenderOptions opts{"img:1", ""};
  const std::vector<std::string> bad = {
      "", "a b", "$(OUTBOX_DSN)", "x --table=evil", std::string(64, '1'), "a\nb", "t\xc3\xa9"};
  for (const std::string& token : bad) {
    const RequeueRequest request = requeue_request(requeue_requested(token));
    EXPECT_EQ(request.token, "") << token;
    EXPECT_EQ(request.job, "") << token;
    EXPECT_EQ(request.problem.rfind("annotation outbox.dev/requeue-failed: ", 0), 0u)
        << request.problem;
    RenderedRelay r;
    ASSERT_NO_THROW(r = render_relay(requeue_requested(token), opts)) << token;
    EXPECT_TRUE(requeue_jobs(r).empty()) << token;
    EXPECT_NE(find(r, "Deployment", "orders-relay"), nullptr);
    for (const auto& o : r.objects) {
      EXPECT_EQ(o.object.dump().find("--request"), std::string::npos) << o.object.dump();
    }
  }
  EXPECT_NE(requeue_request(requeue_requested(std::string(64, '1'))).problem.find("at most 63"),
            std::string::npos);
}

// Every pod the operator starts logs as the operator does, and says in each JSON line which
// namespace, OutboxRelay and pod it is (the downward API gives the last).
TEST(RenderRelay, PodsGetTheOperatorsLogSettingsAndTheirIdentity) {
  RenderOptions opts{"img:1", ""};
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

// Kubernetes expands $(VAR) in args from the container's environment, which holds
// OUTBOX_DSN: a spec string must reach the relay as written, never expanded.
TEST(RenderRelay, SpecStringsInArgsAreEscapedAgainstVariableExpansion) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay r = render_relay(
      relay({{"kafka",
              {{"configSecretRef", {{"name", "kc"}}},
               {"topic", "t.$(OUTBOX_DSN)"},
               {"routes", Json::array({{{"bizType", "$(OUTBOX_DSN)"}, {"topic", "x$y"}}})}}},
             {"retention", {{"archiveTable", "$(OUTBOX_DSN)"}}}}),
      opts);
  const Json args = find(r, "Deployment", "orders-relay")
                        ->at("/spec/template/spec/containers/0/args"_json_pointer);
  auto has = [&](const Json& list, const std::string& arg) {
    return std::find(list.begin(), list.end(), arg) != list.end();
  };
  EXPECT_TRUE(has(args, "--route=$$(OUTBOX_DSN)=x$$y")) << args.dump();
  EXPECT_TRUE(has(args, "--topic=t.$$(OUTBOX_DSN)")) << args.dump();
  const Json compensate =
      find(r, "CronJob", "orders-compensate")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_TRUE(has(compensate, "--route=$$(OUTBOX_DSN)=x$$y")) << compensate.dump();
  const Json cleanup =
      find(r, "CronJob", "orders-cleanup")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_TRUE(has(cleanup, "--archive-table=$$(OUTBOX_DSN)")) << cleanup.dump();
  // No unescaped reference, in any container.
  for (const auto& o : r.objects) {
    const std::string text = o.object.dump();
    for (auto at = text.find("$(OUTBOX_DSN)"); at != std::string::npos;
         at = text.find("$(OUTBOX_DSN)", at + 1)) {
      EXPECT_TRUE(at > 0 && text[at - 1] == '$') << text;
    }
  }
}

TEST(RenderRelay, ConfigHashChangesWithRelaySettingsOnly) {
  RenderOptions opts{"img:1", ""};
  auto hash = [&](const Json& patch) {
    return find(render_relay(relay(patch.is_null() ? Json::object() : patch), opts), "Deployment",
                "orders-relay")
        ->at("/spec/template/metadata/annotations"_json_pointer)
        .at(kConfigHashAnnotation)
        .get<std::string>();
  };
  EXPECT_EQ(hash({}), hash({{"relay", {{"replicas", 5}}}}));
  EXPECT_NE(hash({}), hash({{"relay", {{"batchSize", 7}}}}));
  EXPECT_EQ(stable_hash("abc"), "e71fa2190541574b");
}

// Both jobs write their outcome into the OutboxRelay's status, so their pods carry the relay's
// ServiceAccount token and name the resource; the relay's Role lets exactly that through.
TEST(RenderRelay, CronJobPodsGetTheRelayTokenAndReportStatus) {
  RenderOptions opts{"img:1", ""};
  RenderedRelay r = render_relay(relay({{"retention", {{"archiveTable", "public.old"}}}}), opts);
  for (const char* name : {"orders-compensate", "orders-cleanup"}) {
    const Json* cron = find(r, "CronJob", name);
    ASSERT_NE(cron, nullptr) << name;
    const Json pod = cron->at("/spec/jobTemplate/spec/template/spec"_json_pointer);
    EXPECT_EQ(pod.at("serviceAccountName"), "orders-relay") << name;
    EXPECT_TRUE(pod.at("automountServiceAccountToken").get<bool>()) << name;
    EXPECT_EQ(pod.at("restartPolicy"), "Never") << name;
    const Json& args = pod.at("/containers/0/args"_json_pointer);
    EXPECT_EQ(std::count(args.begin(), args.end(), "--report-status=shop/orders"), 1)
        << name << ": " << args.dump();
  }
  const Json cleanup_args =
      find(r, "CronJob", "orders-cleanup")
          ->at("/spec/jobTemplate/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(cleanup_args.at(0), "cleanup");
  EXPECT_NE(std::find(cleanup_args.begin(), cleanup_args.end(), "--archive-table=public.old"),
            cleanup_args.end());
  EXPECT_EQ(find(r, "CronJob", "orders-compensate")
                ->at("/spec/jobTemplate/spec/template/spec/containers/0/args/0"_json_pointer),
            "compensate");

  const Json* role = find(r, "Role", "orders-relay");
  ASSERT_NE(role, nullptr);
  bool may_patch_status = false;
  for (const Json& rule : role->at("rules")) {
    const Json& verbs = rule.at("verbs");
    if (rule.at("resources") == Json::array({"outboxrelays/status"})) {
      EXPECT_EQ(rule.at("resourceNames"), Json::array({"orders"}));
      may_patch_status = std::find(verbs.begin(), verbs.end(), "patch") != verbs.end();
    }
  }
  EXPECT_TRUE(may_patch_status) << role->dump();
}

// A rotated Secret (new resourceVersion) must change the relay pod template, so the pods roll
// and read the new value; nothing else about the Secrets may.
TEST(RenderRelay, SecretVersionsChangeThePodTemplateAndNothingElse) {
  auto rendered = [](const std::string& versions) {
    RenderOptions opts{"img:1", versions};
    return render_relay(relay(), opts);
  };
  auto annotations = [](const RenderedRelay& r) {
    return find(r, "Deployment", "orders-relay")
        ->at("/spec/template/metadata/annotations"_json_pointer);
  };
  RenderedRelay before = rendered("orders-db=100\n");
  RenderedRelay after = rendered("orders-db=101\n");
  EXPECT_NE(annotations(before).at(kSecretsHashAnnotation),
            annotations(after).at(kSecretsHashAnnotation));
  EXPECT_EQ(annotations(before).at(kConfigHashAnnotation),
            annotations(after).at(kConfigHashAnnotation));
  EXPECT_EQ(*find(before, "ConfigMap", "orders-config"),
            *find(after, "ConfigMap", "orders-config"));
}

// A spec the renderer cannot read (the CRD should have refused it) is InvalidSpec, which the
// reconciler treats as terminal; before, a field of the wrong type escaped as a JSON error and
// was retried with backoff for ever.
TEST(RenderRelay, ASpecOfTheWrongShapeIsInvalidSpec) {
  const RenderOptions opts{"img:1", ""};
  EXPECT_THROW(render_relay(relay(), RenderOptions{}), InvalidSpec);
  EXPECT_THROW(render_relay(relay({{"kafka", {{"bootstrapServers", 9092}}}}), opts), InvalidSpec);
  EXPECT_THROW(
      render_relay(relay({{"kafka", {{"routes", Json::array({{{"bizType", "order"}}})}}}}), opts),
      InvalidSpec);
  EXPECT_THROW(render_relay(relay({{"relay", {{"replicas", "two"}}}}), opts), InvalidSpec);
}

}  // namespace
}  // namespace outbox::controller
