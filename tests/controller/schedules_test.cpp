// The CronJobs' schedules for a fleet (controller/schedules.hpp) and how rendering picks them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <sstream>

#include "controller/relay_resources.hpp"
#include "controller/relay_status.hpp"
#include "controller/schedules.hpp"
#include "relay_sample.hpp"

namespace outbox::controller {
namespace {

// Minute and hours of a "m h[,h...] * * *" schedule, as the CronJob controller reads it.
struct Daily {
  int minute = -1;
  std::vector<int> hours;
};

Daily parse_daily(const std::string& schedule) {
  std::istringstream in(schedule);
  std::string minute, hours, dom, month, dow;
  in >> minute >> hours >> dom >> month >> dow;
  EXPECT_EQ(dom + month + dow, "***") << schedule;
  Daily d;
  d.minute = std::stoi(minute);
  std::istringstream hs(hours);
  for (std::string h; std::getline(hs, h, ',');) {
    d.hours.push_back(std::stoi(h));
  }
  return d;
}

// 500 OutboxRelays in 25 namespaces: a platform team's fleet.
std::vector<std::pair<std::string, std::string>> fleet() {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < 500; ++i) {
    out.emplace_back("team-" + std::to_string(i % 25), "svc-" + std::to_string(i));
  }
  return out;
}

TEST(Schedules, StableForOneResourceAndInRange) {
  EXPECT_EQ(spread_compensation_schedule("shop", "orders"),
            spread_compensation_schedule("shop", "orders"));
  EXPECT_NE(spread_compensation_schedule("shop", "orders"),
            spread_compensation_schedule("shop", "payments"));
  EXPECT_NE(spread_compensation_schedule("shop", "orders"),
            spread_compensation_schedule("bank", "orders"));
  for (const auto& [ns, name] : fleet()) {
    const Daily c = parse_daily(spread_compensation_schedule(ns, name));
    ASSERT_EQ(c.hours.size(), 3u);
    EXPECT_TRUE(c.minute >= 0 && c.minute < 60);
    EXPECT_TRUE(c.hours[0] >= 0 && c.hours[0] < 8);
    EXPECT_EQ(c.hours[1], c.hours[0] + 8);
    EXPECT_EQ(c.hours[2], c.hours[0] + 16);
    const Daily r = parse_daily(spread_retention_schedule(ns, name));
    ASSERT_EQ(r.hours.size(), 1u);
    EXPECT_TRUE(r.minute >= 0 && r.minute < 60 && r.hours[0] >= 0 && r.hours[0] < 24);
  }
}

// The fleet target: 500 healthy OutboxRelays start at most 100 Job pods in any hour of the day
// (compensation and retention together), and no minute starts more than a handful.
TEST(Schedules, AFleetOf500HealthyRelaysStartsAtMost100JobPodsAnHour) {
  std::array<int, 24> per_hour{};
  std::array<int, 24 * 60> per_minute{};
  for (const auto& [ns, name] : fleet()) {
    for (const std::string& s :
         {spread_compensation_schedule(ns, name), spread_retention_schedule(ns, name)}) {
      const Daily d = parse_daily(s);
      for (int h : d.hours) {
        ++per_hour[h];
        ++per_minute[h * 60 + d.minute];
      }
    }
  }
  int total = 0;
  for (int n : per_hour) {
    total += n;
  }
  EXPECT_EQ(total, 500 * 4) << "three compensation runs and one retention run a day each";
  EXPECT_LE(*std::max_element(per_hour.begin(), per_hour.end()), 100);
  EXPECT_LE(*std::max_element(per_minute.begin(), per_minute.end()), 8);
}

Json cron(const RenderedRelay& r, const std::string& name) {
  for (const auto& o : r.objects) {
    if (o.object.at("kind") == "CronJob" && o.object.at("/metadata/name"_json_pointer) == name) {
      return o.object;
    }
  }
  ADD_FAILURE() << "no CronJob " << name;
  return Json::object();
}

TEST(Schedules, RenderingPicksTheSpreadScheduleUntilNoRelayIsAlive) {
  RenderOptions alive{"img:1"};
  RenderOptions dead = alive;
  dead.relays_alive = false;
  const Json plain = testing::sample_relay();
  const Json comp = cron(render_relay(plain, alive), "orders-compensate");
  EXPECT_EQ(comp.at("/spec/schedule"_json_pointer), spread_compensation_schedule("shop", "orders"));
  EXPECT_EQ(comp.at("/spec/timeZone"_json_pointer), "UTC");
  EXPECT_EQ(comp.at("/spec/concurrencyPolicy"_json_pointer), "Forbid");
  EXPECT_EQ(comp.at("/spec/startingDeadlineSeconds"_json_pointer), 120);
  const Json clean = cron(render_relay(plain, alive), "orders-cleanup");
  EXPECT_EQ(clean.at("/spec/schedule"_json_pointer), spread_retention_schedule("shop", "orders"));
  EXPECT_EQ(clean.at("/spec/timeZone"_json_pointer), "UTC");
  // No relay alive: the safety net runs every minute, whatever the spec says.
  const Json own = testing::sample_relay(
      {{"compensation", {{"schedule", "*/30 * * * *"}, {"timeZone", "Europe/Berlin"}}},
       {"retention", {{"schedule", "0 2 * * *"}, {"timeZone", "Asia/Tokyo"}}}});
  EXPECT_EQ(cron(render_relay(plain, dead), "orders-compensate").at("/spec/schedule"_json_pointer),
            "*/1 * * * *");
  EXPECT_EQ(cron(render_relay(own, dead), "orders-compensate").at("/spec/schedule"_json_pointer),
            "*/1 * * * *");
  const Json own_comp = cron(render_relay(own, alive), "orders-compensate");
  EXPECT_EQ(own_comp.at("/spec/schedule"_json_pointer), "*/30 * * * *");
  EXPECT_EQ(own_comp.at("/spec/timeZone"_json_pointer), "Europe/Berlin");
  const Json own_clean = cron(render_relay(own, dead), "orders-cleanup");
  EXPECT_EQ(own_clean.at("/spec/schedule"_json_pointer), "0 2 * * *") << "retention unchanged";
  EXPECT_EQ(own_clean.at("/spec/timeZone"_json_pointer), "Asia/Tokyo");
}

TEST(Schedules, RelaysAreAliveWhileTheyReportOrTheResourceIsNew) {
  using namespace std::chrono_literals;
  const auto now = *parse_time("2026-12-06T10:00:00Z");
  Json r = testing::sample_relay();
  r["metadata"]["creationTimestamp"] = "2026-12-06T09:59:00Z";
  EXPECT_TRUE(relays_alive(r, now)) << "a minute old, its relays are starting";
  r["metadata"]["creationTimestamp"] = "2026-12-06T09:00:00Z";
  EXPECT_FALSE(relays_alive(r, now)) << "an hour old and never reported";
  r["status"]["backlog"]["measuredAt"] = "2026-12-06T09:59:30Z";
  EXPECT_TRUE(relays_alive(r, now));
  EXPECT_FALSE(relays_alive(r, now + 91s)) << "the last report is over two minutes old";
}

// No watch event marks the moment the relays stop counting as alive: the reconciler looks again
// then, a second late so that it finds them dead.
TEST(Schedules, RelaysStopCountingAsAliveAtTheLaterOfTheReportTurningStaleAndTheResourceOld) {
  using namespace std::chrono_literals;
  const auto now = *parse_time("2026-12-06T10:00:00Z");
  Json r = testing::sample_relay();
  r["metadata"]["creationTimestamp"] = "2026-12-06T09:59:00Z";
  EXPECT_EQ(relays_alive_ends_in(r, now), 61s) << "never reported: two minutes after creation";
  EXPECT_TRUE(relays_alive(r, now + 60s));
  EXPECT_FALSE(relays_alive(r, now + 61s));
  r["status"]["backlog"]["measuredAt"] = "2026-12-06T09:59:50Z";
  EXPECT_EQ(relays_alive_ends_in(r, now), 111s) << "a report younger than the resource";
  r["status"]["backlog"]["measuredAt"] = "2026-12-06T09:59:00Z";
  EXPECT_EQ(relays_alive_ends_in(r, now), 61s);
  r["metadata"]["creationTimestamp"] = "2026-12-06T09:00:00Z";
  r["status"]["backlog"]["measuredAt"] = "2026-12-06T09:59:30Z";
  EXPECT_EQ(relays_alive_ends_in(r, now), 91s) << "an old resource: its last report";
  EXPECT_FALSE(relays_alive_ends_in(r, now + 91s));
  r["status"].erase("backlog");
  EXPECT_FALSE(relays_alive_ends_in(r, now)) << "old and never reported: dead already";
}

}  // namespace
}  // namespace outbox::controller
