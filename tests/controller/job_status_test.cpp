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

}  // namespace
}  // namespace outbox::controller
