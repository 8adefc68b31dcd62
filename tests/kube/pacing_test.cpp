// Small pure pieces: MicroTime, Retry-After, token bucket, token file, URL paths.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "kube/errors.hpp"
#include "kube/micro_time.hpp"
#include "kube/resource.hpp"
#include "kube/retry.hpp"
#include "kube/token_source.hpp"

namespace outbox::kube {
namespace {

using namespace std::chrono_literals;
using std::chrono::system_clock;

TEST(MicroTimeTest, FormatsUtcWithSixFractionalDigits) {
  auto t = system_clock::time_point(std::chrono::microseconds(1714564984000123LL));
  EXPECT_EQ(format_micro_time(t), "2024-05-01T12:03:04.000123Z");
  EXPECT_EQ(format_micro_time(system_clock::time_point{}), "1970-01-01T00:00:00.000000Z");
}

TEST(MicroTimeTest, ParsesWhatItFormatsAndOtherRfc3339Forms) {
  auto t = system_clock::time_point(std::chrono::microseconds(1714564984000123LL));
  EXPECT_EQ(parse_micro_time(format_micro_time(t)), t);
  EXPECT_EQ(parse_micro_time("2024-05-01T12:03:04Z"),
            system_clock::time_point(std::chrono::seconds(1714564984)));
  EXPECT_EQ(parse_micro_time("2024-05-01T14:03:04.5+02:00"),
            system_clock::time_point(std::chrono::milliseconds(1714564984500)));
  EXPECT_EQ(parse_micro_time("2024-05-01T12:03:04.000123456Z"), t);  // nanos truncated
}

TEST(MicroTimeTest, RejectsMalformedText) {
  for (const char* bad :
       {"", "2024-05-01", "2024-05-01T12:03:04", "2024-13-01T12:03:04Z", "2024-05-01T12:03:04.Z",
        "2024-05-01T12:03:04Zjunk", "2024-05-01 12:03:04Z", "x024-05-01T12:03:04Z"}) {
    EXPECT_EQ(parse_micro_time(bad), std::nullopt) << bad;
  }
}

TEST(RetryAfterTest, ParsesSecondsAndHttpDates) {
  auto now = system_clock::time_point(std::chrono::seconds(1445412480));  // 07:28:00 GMT
  EXPECT_EQ(parse_retry_after("3", now), 3s);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0s);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now), 10s);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:20:00 GMT", now), 0s);  // in the past
  EXPECT_EQ(parse_retry_after("", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("-1", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("soon", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("3s", now), std::nullopt);
}

TEST(RetryAfterTest, RetriesTooManyRequestsAndAnnouncedServerErrorsOnly) {
  EXPECT_EQ(retry_delay(429, "2", 0, 5, 10s), 2s);
  EXPECT_EQ(retry_delay(429, "", 0, 5, 10s), 1s) << "a 429 without Retry-After waits 1 s";
  EXPECT_EQ(retry_delay(503, "3", 4, 5, 10s), 3s);
  EXPECT_EQ(retry_delay(500, "120", 0, 5, 10s), 10s) << "capped";
  EXPECT_EQ(retry_delay(503, "", 0, 5, 10s), std::nullopt) << "5xx without Retry-After: final";
  EXPECT_EQ(retry_delay(429, "1", 5, 5, 10s), std::nullopt) << "attempts exhausted";
  EXPECT_EQ(retry_delay(409, "1", 0, 5, 10s), std::nullopt);
  EXPECT_EQ(retry_delay(200, "", 0, 5, 10s), std::nullopt);
}

TEST(TokenBucketTest, AllowsTheBurstThenPacesAtQps) {
  TokenBucket bucket(/*qps=*/100, /*burst=*/5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(bucket.reserve(), Duration::zero());
  }
  auto wait = bucket.reserve();
  EXPECT_GT(wait, 5ms);
  EXPECT_LE(wait, 10ms);
  EXPECT_GT(bucket.reserve(), 15ms);  // queued behind the previous reservation
  TokenBucket unlimited(0, 1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(unlimited.reserve(), Duration::zero());
  }
}

TEST(TokenSourceTest, RereadsTheFileAfterTheRefreshPeriodAndAfterInvalidate) {
  char path[] = "/tmp/token-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "first\n";
  TokenSource source("", path, std::chrono::seconds(60));
  EXPECT_EQ(source.token(), "first");
  std::ofstream(path) << "second\n";
  EXPECT_EQ(source.token(), "first") << "cached within the refresh period";
  source.invalidate(std::chrono::steady_clock::now());  // a 401 for a request started now
  EXPECT_EQ(source.token(), "second");

  TokenSource fast("", path, std::chrono::seconds(0));
  std::ofstream(path) << "third\n";
  EXPECT_EQ(fast.token(), "third");
  std::ofstream(path) << "";  // mid-rotation: keep the last good token
  EXPECT_EQ(fast.token(), "third");
  std::remove(path);

  TokenSource none("", "/nonexistent/token");
  EXPECT_THROW(none.token(), ConfigError);
  EXPECT_EQ(TokenSource("fixed", "").token(), "fixed");
}

TEST(ResourcePathTest, CoreGroupNamespacedAndClusterScopedPaths) {
  EXPECT_EQ(resources::config_maps.collection_path("ns"), "/api/v1/namespaces/ns/configmaps");
  EXPECT_EQ(resources::config_maps.collection_path(""), "/api/v1/configmaps");
  EXPECT_EQ(resources::config_maps.object_path("ns", "a"), "/api/v1/namespaces/ns/configmaps/a");
  EXPECT_EQ(resources::leases.object_path("ns", "l"),
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l");
  EXPECT_EQ(resources::crds.object_path("", "x.example.com"),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.example.com");
  Resource widgets{"example.com", "v1", "widgets", true};
  EXPECT_EQ(widgets.object_path("ns", "w", "status"),
            "/apis/example.com/v1/namespaces/ns/widgets/w/status");
  EXPECT_EQ(widgets.api_version(), "example.com/v1");
  EXPECT_THROW(widgets.object_path("ns", ""), std::invalid_argument);
  EXPECT_THROW(widgets.object_path("", "w"), std::invalid_argument);
  EXPECT_EQ(url_encode("app=a,tier!=b"), "app%3Da%2Ctier%21%3Db");
}

TEST(StatusTest, DecodesCausesAndSurvivesNonStatusBodies) {
  Status status = Status::from_body(
      422, R"({"kind":"Status","status":"Failure","reason":"Invalid","message":"bad","code":422,)"
           R"("details":{"name":"x","kind":"ConfigMap","causes":[{"reason":"FieldValueInvalid",)"
           R"("message":"Invalid value","field":"metadata.name"}]}})");
  EXPECT_EQ(status.code, 422);
  EXPECT_EQ(status.reason, "Invalid");
  ASSERT_EQ(status.causes.size(), 1u);
  EXPECT_EQ(status.causes[0].field, "metadata.name");
  ApiError error(status);
  EXPECT_TRUE(error.is_invalid());
  EXPECT_NE(std::string(error.what()).find("metadata.name: Invalid value"), std::string::npos);

  Status garbage = Status::from_body(502, "<html>bad gateway</html>");
  EXPECT_EQ(garbage.code, 502);
  EXPECT_EQ(garbage.message, "<html>bad gateway</html>");
  EXPECT_TRUE(ApiError(Status::from_body(409, R"({"kind":"Status","reason":"AlreadyExists"})"))
                  .is_already_exists());
  EXPECT_TRUE(ApiError(Status::from_json(500, {{"reason", "Expired"}, {"code", 410}})).is_gone());
}

}  // namespace
}  // namespace outbox::kube
