// The inbox as the sample points service uses it, against a real PostgreSQL.
#include <unistd.h>

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "points_service/points_service.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

TEST(Inbox, ADuplicateIsRecognisedInsideTheConsumersTransaction) {
  example::PointsService service(testbed::postgres_dsn());
  service.migrate();
  const std::string user = testbed::unique_name("inbox-user");
  const std::string payload = nlohmann::json{{"user", user}, {"amount", 100}}.dump();
  const std::string id =
      "00000000-0000-4000-8000-" + std::to_string(100000000000 + ::getpid() % 1000000);
  EXPECT_EQ(service.handle(id, "ORDER_PAID", payload), example::PointsService::Outcome::kApplied);
  EXPECT_EQ(service.handle(id, "ORDER_PAID", payload), example::PointsService::Outcome::kDuplicate);
  EXPECT_EQ(service.handle(id, "ORDER_CREATED", payload),
            example::PointsService::Outcome::kIgnored);
  EXPECT_THROW(service.handle("not-a-uuid", "ORDER_PAID", payload), std::invalid_argument);
  EXPECT_THROW(service.handle(id, "ORDER_PAID", "{oops"), std::invalid_argument);
  EXPECT_EQ(service.points(user), 10);
}

}  // namespace
}  // namespace outbox
