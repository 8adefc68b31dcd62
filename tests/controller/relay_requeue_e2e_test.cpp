// The outbox.dev/requeue-failed annotation against a real kube-apiserver: the controller renders
// the requeue Job, the real binary runs the Job's command line against the test bed's
// PostgreSQL and answers the request in status.lastRequeue, and the controller then renders it
// no more; a Job that ends without an answer is answered by the operator.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include <pqxx/pqxx>

#include "../jobs/cli_runner.hpp"
#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "controller_e2e.hpp"
#include "kube/errors.hpp"
#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox::controller {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class RequeueE2E : public ControllerE2E {
 protected:
  std::optional<Json> job(const std::string& name) {
    try {
      return get(owned::jobs, name);
    } catch (const kube::ApiError& e) {
      if (e.is_not_found()) {
        return std::nullopt;
      }
      throw;
    }
  }

  void annotate(const std::string& token) {
    client.merge_patch(kOutboxRelays, ns, "orders",
                       {{"metadata", {{"annotations", {{kRequeueAnnotation, token}}}}}});
  }

  // The name the controller gives the Job of `token` (see requeue_request).
  static std::string job_name(const std::string& token) {
    return "orders-requeue-" + stable_hash(token).substr(0, 8);
  }

  // The Job's command line as its pod runs it, with the admin kubeconfig in place of the
  // ServiceAccount token; each argument single-quoted for the shell.
  static std::string command_of(const Json& job) {
    std::string cmd = OUTBOX_BINARY;
    for (const Json& a : job.at("/spec/template/spec/containers/0/args"_json_pointer)) {
      cmd += " '" + a.get<std::string>() + "'";
    }
    return cmd + " '--kubeconfig=" + testbed::kubeconfig_path() + "'";
  }

  // As the TTL controller deletes a finished Job: at once (background propagation). The REST
  // default for batch/v1 Jobs orphans their pods, which leaves the Job with a finalizer for the
  // garbage collector, and the test bed runs none.
  void delete_job(const std::string& name) {
    testing::kubectl("-n " + ns + " delete job " + name + " --cascade=background --wait=false");
  }

  // Waits until the controller has observed a spec change, so that what it renders (or not)
  // for the current annotation is settled.
  void touch_spec_and_wait(int replicas) {
    client.merge_patch(kOutboxRelays, ns, "orders",
                       {{"spec", {{"relay", {{"replicas", replicas}}}}}});
    ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  }
};

// Annotated: the Job appears (and comes back when deleted before it answered; a spec change
// while it exists leaves it as it was, not refused). Its command line requeues every FAILED
// event and answers the request; from then on the controller does not render it, even once the
// Job is gone. A new token makes a new Job; one that ends without answering is answered by the
// operator (Failed, JobFailed); an invalid value is Degraded, naming the annotation.
TEST_F(RequeueE2E, TheAnnotationRunsOneJobPerRequestAndTheAnswerStopsIt) {
  outbox::testing::OutboxTestTable table;
  testing::create_secret(client, ns, "orders-db", {{"dsn", table.dsn}});
  testing::ControllerProcess ctl(ns, {}, "requeue-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table.table.plain();
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", table.topic}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  table.insert(6, 2);
  pqxx::connection conn(table.dsn);
  pqxx::nontransaction(conn).exec("UPDATE " + table.table.quoted() +
                                  " SET status = 2, last_error = 'broker refused' WHERE id IN "
                                  "(SELECT id FROM " +
                                  table.table.quoted() + " ORDER BY id LIMIT 4)");

  const std::string first = "2026-12-04T10:00:00Z";
  annotate(first);
  ASSERT_TRUE(eventually([&] { return job(job_name(first)).has_value(); }, 20s));
  Json rendered = *job(job_name(first));
  EXPECT_TRUE(
      has_arg(rendered.at("/spec/template/spec/containers/0"_json_pointer), "--request=" + first));
  // Unanswered, a deleted Job is drift: it comes back.
  delete_job(job_name(first));
  ASSERT_TRUE(eventually(
      [&] {
        auto j = job(job_name(first));
        return j && j->at("metadata").at("uid") != rendered.at("metadata").at("uid");
      },
      20s));
  rendered = *job(job_name(first));
  // A change of the pods' settings would change the Job's immutable pod template: the Job is
  // left as it is, and nothing is refused.
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"spec", {{"relay", {{"resources", {{"requests", {{"cpu", "10m"}}}}}}}}}});
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  EXPECT_EQ(condition(relay("orders"), "Degraded").value("status", ""), "False")
      << condition(relay("orders"), "Degraded").value("reason", "");
  EXPECT_EQ(job(job_name(first))->at("metadata").at("uid"), rendered.at("metadata").at("uid"));

  // The pod's command line, run here: every FAILED event requeued, the request answered.
  auto run = outbox::testing::run_cli(table.dsn, command_of(rendered));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("requeued 4 event(s)"), std::string::npos) << run.output;
  EXPECT_EQ(table.count("status = 2"), 0);
  EXPECT_EQ(table.count("status = 0"), 6);
  Json answer = relay("orders").at("/status/lastRequeue"_json_pointer);
  EXPECT_EQ(answer.at("request"), first);
  EXPECT_EQ(answer.at("outcome"), "Succeeded");
  EXPECT_EQ(answer.at("requeued"), 4);
  EXPECT_FALSE(answer.contains("message")) << answer.dump();

  // Answered: deleted (as ttlSecondsAfterFinished does), the Job does not come back, though the
  // controller reconciled since.
  delete_job(job_name(first));
  touch_spec_and_wait(3);
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(job(job_name(first)).has_value());
  EXPECT_EQ(relay("orders").at("/status/lastRequeue"_json_pointer), answer)
      << "the controller's status writes keep the job's field";

  // A new token: a new Job. It ends without its pod answering (here: its deadline passed before
  // the pod ran); the operator answers for it, and JobFailed says so.
  const std::string second = "2026-12-05T08:00:00Z";
  annotate(second);
  ASSERT_TRUE(eventually([&] { return job(job_name(second)).has_value(); }, 20s));
  EXPECT_NE(job_name(second), job_name(first));
  const std::string now = format_time(std::chrono::system_clock::now());
  client.merge_patch(owned::jobs, ns, job_name(second),
                     {{"status",
                       {{"startTime", now},
                        {"conditions", Json::array({{{"type", "FailureTarget"},
                                                     {"status", "True"},
                                                     {"reason", "DeadlineExceeded"},
                                                     {"message", "past its deadline"},
                                                     {"lastTransitionTime", now}},
                                                    {{"type", "Failed"},
                                                     {"status", "True"},
                                                     {"reason", "DeadlineExceeded"},
                                                     {"message", "past its deadline"},
                                                     {"lastTransitionTime", now}}})}}}},
                     "status");
  ASSERT_TRUE(eventually(
      [&] {
        return relay("orders").value("/status/lastRequeue/request"_json_pointer, "") == second;
      },
      20s))
      << relay("orders").at("status").dump();
  answer = relay("orders").at("/status/lastRequeue"_json_pointer);
  EXPECT_EQ(answer.at("outcome"), "Failed");
  EXPECT_FALSE(answer.contains("requeued")) << answer.dump();
  EXPECT_NE(answer.value("message", "").find("DeadlineExceeded"), std::string::npos)
      << answer.dump();
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("orders"), "JobFailed").value("reason", "") == "RequeueFailed";
      },
      20s))
      << relay("orders").at("status").dump();
  EXPECT_TRUE(eventually([&] { return warning_events("RequeueFailed").size() == 1; }, 10s));

  // An invalid value: Degraded names the annotation; no Job, no argument.
  annotate("next tuesday");
  ASSERT_TRUE(eventually(
      [&] {
        return condition(relay("orders"), "Degraded").value("reason", "") == "InvalidAnnotation";
      },
      20s))
      << relay("orders").at("status").dump();
  EXPECT_NE(condition(relay("orders"), "Degraded")
                .at("message")
                .get<std::string>()
                .find("annotation outbox.dev/requeue-failed"),
            std::string::npos);
  EXPECT_TRUE(eventually([&] { return warning_events("InvalidAnnotation").size() == 1; }, 10s));
  const Json jobs = client.list(owned::jobs, ns);
  EXPECT_EQ(jobs.at("items").size(), 1u) << "only the second request's Job: " << jobs.dump();
}

// The outbox.dev/replay annotation and the JSON form of outbox.dev/requeue-failed, as
// `kubectl outbox replay|requeue` write them: a bounded selection runs a Job whose command line
// changes exactly those events and answers in status.lastReplay (lastRequeue); each request is
// announced once by a Normal Event naming the requester the annotation gives and the field
// manager the API server recorded; an unbounded or malformed selection is refused (Degraded
// InvalidAnnotation) and runs nothing.
TEST_F(RequeueE2E, ReplayAndSelectiveRequeueRequestsRunBoundedJobsAndNameTheRequester) {
  outbox::testing::OutboxTestTable table;
  testing::create_secret(client, ns, "orders-db", {{"dsn", table.dsn}});
  testing::ControllerProcess ctl(ns, {}, "replay-" + ns);
  Json spec = base_spec();
  spec["database"]["table"] = table.table.plain();
  spec["kafka"] = {{"bootstrapServers", testbed::kafka_bootstrap()}, {"topic", table.topic}};
  client.create(kOutboxRelays, ns, relay_object("orders", spec));
  ASSERT_TRUE(eventually([&] { return observed("orders"); }, 20s));
  table.insert(8, 2);
  pqxx::connection conn(table.dsn);
  const std::string q = table.table.quoted();
  pqxx::nontransaction(conn).exec("UPDATE " + q + " SET status = 1, sent_at = now()");
  const auto ids =
      pqxx::nontransaction(conn).exec("SELECT id, event_id::text FROM " + q + " ORDER BY id");
  const std::int64_t first_id = ids[0][0].as<std::int64_t>();

  const std::string token = "2026-12-06T11:00:00Z-1";
  const Json request = {{"request", token},
                        {"requestedBy", "alice@example.com"},
                        {"fromId", first_id},
                        {"toId", first_id + 2}};
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"metadata", {{"annotations", {{kReplayAnnotation, request.dump()}}}}}});
  const std::string replay_job = "orders-replay-" + stable_hash(token).substr(0, 8);
  ASSERT_TRUE(eventually([&] { return job(replay_job).has_value(); }, 20s))
      << relay("orders").value("status", Json::object()).dump();
  const Json rendered = *job(replay_job);
  const Json container = rendered.at("/spec/template/spec/containers/0"_json_pointer);
  EXPECT_EQ(container.at("args").at(0), "replay") << container.dump();
  EXPECT_TRUE(has_arg(container, "--from-id=" + std::to_string(first_id))) << container.dump();
  EXPECT_TRUE(has_arg(container, "--to-id=" + std::to_string(first_id + 2))) << container.dump();
  EXPECT_TRUE(has_arg(container, "--request=" + token)) << container.dump();
  ASSERT_TRUE(eventually([&] { return events("ReplayRequested", "Normal").size() == 1; }, 10s));
  const std::string said = events("ReplayRequested", "Normal").at(0).value("message", "");
  EXPECT_NE(said.find("requested by alice@example.com"), std::string::npos) << said;
  EXPECT_NE(said.find("field manager"), std::string::npos) << said;
  EXPECT_NE(said.find(replay_job), std::string::npos) << said;

  auto run = outbox::testing::run_cli(table.dsn, command_of(rendered));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("replayed 3 event(s)"), std::string::npos) << run.output;
  EXPECT_EQ(table.count("status = 0"), 3);
  EXPECT_EQ(table.count("status = 1"), 5);
  const Json answer = relay("orders").at("/status/lastReplay"_json_pointer);
  EXPECT_EQ(answer.at("request"), token);
  EXPECT_EQ(answer.at("outcome"), "Succeeded");
  EXPECT_EQ(answer.at("replayed"), 3);
  // Answered: the controller renders it no more, and announces nothing again.
  delete_job(replay_job);
  touch_spec_and_wait(3);
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(job(replay_job).has_value());
  EXPECT_EQ(events("ReplayRequested", "Normal").size(), 1u);

  // A selective requeue in the JSON form: only the event named.
  pqxx::nontransaction(conn).exec("UPDATE " + q + " SET status = 2, last_error = 'refused'");
  const std::string requeue_token = "2026-12-06T11:05:00Z-2";
  client.merge_patch(kOutboxRelays, ns, "orders",
                     {{"metadata",
                       {{"annotations",
                         {{kRequeueAnnotation, Json({{"request", requeue_token},
                                                     {"requestedBy", "bob"},
                                                     {"eventIds", {ids[4][1].as<std::string>()}}})
                                                   .dump()}}}}}});
  const std::string requeue_job = job_name(requeue_token);
  ASSERT_TRUE(eventually([&] { return job(requeue_job).has_value(); }, 20s));
  const Json requeue_container =
      job(requeue_job)->at("/spec/template/spec/containers/0"_json_pointer);
  EXPECT_TRUE(has_arg(requeue_container, "--event-id=" + ids[4][1].as<std::string>()))
      << requeue_container.dump();
  EXPECT_FALSE(has_arg(requeue_container, "--all")) << requeue_container.dump();
  ASSERT_TRUE(eventually([&] { return events("RequeueRequested", "Normal").size() == 1; }, 10s));
  EXPECT_NE(events("RequeueRequested", "Normal").at(0).value("message", "").find("bob"),
            std::string::npos);
  run = outbox::testing::run_cli(table.dsn, command_of(*job(requeue_job)));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(table.count("status = 2"), 7) << "only the event named was requeued";
  EXPECT_EQ(relay("orders").value("/status/lastRequeue/requeued"_json_pointer, -1), 1);

  // Unbounded (a biz_type's whole history), then malformed: refused, no Job.
  for (const auto& [bad, why] :
       {std::pair{Json({{"request", "2026-12-06T11:10:00Z-3"}, {"bizType", "order"}}).dump(),
                  std::string("must be bounded")},
        std::pair{std::string("{\"request\": \"x\", \"eventIds\": [\"1; DROP TABLE\"]}"),
                  std::string("not a UUID")},
        std::pair{std::string("not json"), std::string("not a JSON object")}}) {
    client.merge_patch(kOutboxRelays, ns, "orders",
                       {{"metadata", {{"annotations", {{kReplayAnnotation, bad}}}}}});
    ASSERT_TRUE(eventually(
        [&] {
          const Json d = condition(relay("orders"), "Degraded");
          const std::string message = d.value("message", "");
          return d.value("reason", "") == "InvalidAnnotation" &&
                 message.find("annotation outbox.dev/replay") != std::string::npos &&
                 message.find(why) != std::string::npos;
        },
        20s))
        << bad << "\n"
        << relay("orders").at("status").dump();
  }
  const Json jobs = client.list(owned::jobs, ns);
  EXPECT_EQ(jobs.at("items").size(), 1u) << "only the requeue's Job: " << jobs.dump();
}

}  // namespace
}  // namespace outbox::controller
