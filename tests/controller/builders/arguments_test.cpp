// The command-line flags the workloads share (builders/arguments): the table and columns, the
// publishing rules and Kafka credential flags, and spec strings escaped against expansion.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include <algorithm>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;

TEST(RenderRelay, StrimziScramUserGivesMechanismUserAndPasswordFile) {
  RenderedRelay r =
      render_relay(relay({{"kafka",
                           {{"authentication",
                             {{"type", "scram-sha-512"},
                              {"username", "orders-relay"},
                              {"passwordSecret", {{"secretName", "orders-user"}}}}}}}}),
                   RenderOptions{"img:1"});
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

// spec.database.columns reaches the relay and both jobs as one --column per role,
// Debezium's defaults spelled out, so each refuses a table adopted otherwise; no
// columns, no --column (a table made by migrate).
TEST(RenderRelay, ColumnsReachTheRelayAndBothJobs) {
  RenderOptions opts{"img:1"};
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

TEST(RenderRelay, TheDeadLetterTopicReachesTheRelayAndCompensationOnly) {
  RenderOptions opts{"img:1"};
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

// Kubernetes expands $(VAR) in args from the container's environment, which holds
// OUTBOX_DSN: a spec string must reach the relay as written, never expanded.
TEST(RenderRelay, SpecStringsInArgsAreEscapedAgainstVariableExpansion) {
  RenderOptions opts{"img:1"};
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

}  // namespace
}  // namespace outbox::controller
