// The requeue and replay annotations read as change requests (builders/change_requests).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;
using testing::requeue_jobs;
using testing::requeue_requested;

// A token is passed to the Job as one argument and names it through its hash: only 1 to 63
// characters of A-Z a-z 0-9 : . _ + - pass; nothing Kubernetes or a shell would expand.
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
  const RenderedRelay rendered = render_relay(replay(ok.dump()), {"img:1"});
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

// A value the Job could not take as it is (empty, too long, a space, `$(VAR)` Kubernetes would
// expand, `=`, a newline, non-ASCII) renders no Job and never reaches an argument; the refusal
// names the annotation. The rest of the relay renders as usual.
TEST(RenderRelay, AnInvalidRequeueTokenIsRefusedNamingTheAnnotation) {
  const RenderOptions opts{"img:1"};
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

}  // namespace
}  // namespace outbox::controller
