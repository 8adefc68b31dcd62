// The jobs' own status patch (job_status), and what the status makes of it.
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/job_status.hpp"
#include "controller/relay_status.hpp"
#include "relay_sample.hpp"

namespace outbox::controller {
namespace {

Json relay(const Json& spec_patch = Json::object()) {
  return testing::sample_relay(spec_patch);
}

TEST(JobStatus, PatchTouchesOnlyItsOwnFieldAndClearsWhatTheRunDidNotSet) {
  JobRun ok;
  ok.field = kLastCompensationField;
  ok.counts = {{"resent", 7}, {"failed", 1}};
  ok.finished = std::chrono::system_clock::from_time_t(1'700'000'000);
  EXPECT_EQ(job_status_patch(ok),
            Json::parse(R"({"status":{"lastCompensation":{"time":"2023-11-14T22:13:20Z",
              "outcome":"Succeeded","resent":7,"failed":1,"message":null}}})"));

  JobRun bad;
  bad.field = kLastCleanupField;
  bad.succeeded = false;
  bad.counts = {{"removed", std::nullopt}, {"archived", std::nullopt}};
  bad.message = std::string(5000, 'x');
  const Json p = job_status_patch(bad);
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(p.at("status").size(), 1u);
  const Json& c = p.at("/status/lastCleanup"_json_pointer);
  EXPECT_EQ(c.at("outcome"), "Failed");
  EXPECT_TRUE(c.at("removed").is_null());
  EXPECT_TRUE(c.at("archived").is_null());
  EXPECT_EQ(c.at("message").get<std::string>().size(), 1024u) << "the CRD's maxLength";
  // A job's message quotes libpq: it is written without a credential (issue 42).
  bad.message = "cleanup failed: cannot reach host=db password=s3cret";
  EXPECT_EQ(job_status_patch(bad).at("/status/lastCleanup/message"_json_pointer),
            "cleanup failed: cannot reach host=db password=***");

  // The operator's server-side apply of its status never names the jobs' fields, so it neither
  // owns nor removes them.
  Json r = relay();
  r["status"] = {{"lastCompensation", {{"outcome", "Succeeded"}}},
                 {"lastCleanup", {{"outcome", "Failed"}}}};
  const Json s =
      compute_status({r, nullptr, std::nullopt, std::chrono::system_clock::now(), "", "", nullptr});
  EXPECT_FALSE(s.contains("lastCompensation"));
  EXPECT_FALSE(s.contains("lastCleanup"));
}

// The requeue Job answers a request: its token goes back with the count, so the operator knows
// the request was run (and runs it no more); a failed run still answers it, without a count.
TEST(JobStatus, RequeuePatchCarriesTheRequestItAnswersAndTheCount) {
  JobRun ok;
  ok.field = kLastRequeueField;
  ok.request = "2026-12-04T10:00:00Z";
  ok.counts = {{"requeued", 3}};
  ok.finished = std::chrono::system_clock::from_time_t(1'700'000'000);
  EXPECT_EQ(job_status_patch(ok),
            Json::parse(R"({"status":{"lastRequeue":{"time":"2023-11-14T22:13:20Z",
              "outcome":"Succeeded","requeued":3,"request":"2026-12-04T10:00:00Z",
              "message":null}}})"));

  JobRun bad = ok;
  bad.succeeded = false;
  bad.counts = {{"requeued", std::nullopt}};
  bad.message = "requeue failed: connection refused";
  const Json c = job_status_patch(bad).at("/status/lastRequeue"_json_pointer);
  EXPECT_EQ(c.at("outcome"), "Failed");
  EXPECT_TRUE(c.at("requeued").is_null()) << "an earlier run's count does not stay";
  EXPECT_EQ(c.at("request"), "2026-12-04T10:00:00Z");
  EXPECT_EQ(c.at("message"), "requeue failed: connection refused");

  JobRun compensation;
  compensation.field = kLastCompensationField;
  EXPECT_FALSE(job_status_patch(compensation)
                   .at("/status/lastCompensation"_json_pointer)
                   .contains("request"))
      << "only a run that answers a request names one";
}

// A requeue Job that ended without its pod's report (it never started, ran past its deadline,
// or the report was refused): the operator answers the request with the Job's outcome and no
// count; while the Job runs, nothing.
TEST(JobStatus, AnEndedRequeueJobIsAnsweredWithItsOutcomeAndNoCount) {
  Json job = {{"metadata", {{"name", "orders-requeue-1234abcd"}}},
              {"status", {{"active", 1}, {"conditions", Json::array()}}}};
  EXPECT_FALSE(ended_requeue_run(job, "t1").has_value());
  job["status"]["conditions"] = Json::array({{{"type", "FailureTarget"}, {"status", "True"}}});
  EXPECT_FALSE(ended_requeue_run(job, "t1").has_value()) << "not ended yet";
  job["status"]["conditions"].push_back({{"type", "Failed"},
                                         {"status", "True"},
                                         {"reason", "DeadlineExceeded"},
                                         {"message", "Job was active longer than specified"},
                                         {"lastTransitionTime", "2026-12-04T10:10:00Z"}});
  const auto failed = ended_requeue_run(job, "t1");
  ASSERT_TRUE(failed.has_value());
  const Json p = job_status_patch(*failed).at("/status/lastRequeue"_json_pointer);
  EXPECT_EQ(p.at("outcome"), "Failed");
  EXPECT_EQ(p.at("request"), "t1");
  EXPECT_EQ(p.at("time"), "2026-12-04T10:10:00Z");
  EXPECT_TRUE(p.at("requeued").is_null());
  const std::string message = p.at("message");
  EXPECT_NE(message.find("DeadlineExceeded"), std::string::npos) << message;
  EXPECT_NE(message.find("kubectl logs job/orders-requeue-1234abcd"), std::string::npos);
  EXPECT_NE(message.find("outbox.dev/requeue-failed"), std::string::npos) << message;

  job["status"]["conditions"] = Json::array({{{"type", "Complete"}, {"status", "True"}}});
  const auto complete = ended_requeue_run(job, "t2");
  ASSERT_TRUE(complete.has_value());
  const Json c = job_status_patch(*complete).at("/status/lastRequeue"_json_pointer);
  EXPECT_EQ(c.at("outcome"), "Succeeded");
  EXPECT_EQ(c.at("request"), "t2");
  EXPECT_TRUE(c.at("requeued").is_null()) << "the count is the pod's, and it did not report";
}

}  // namespace
}  // namespace outbox::controller
