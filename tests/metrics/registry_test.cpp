#include "metrics/registry.hpp"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace outbox {
namespace {

TEST(MetricsRegistry, RendersPrometheusText) {
  metrics::Registry r;
  r.counter("outbox_events_published_total", "Published", {{"table", "public.t"}}).inc(3);
  r.gauge("outbox_pending_events", "Pending").set(7);
  auto& h = r.histogram("outbox_batch_size", "Batch", {1, 10}, {{"table", "t"}});
  h.observe(5);
  h.observe(50);
  std::string text = r.render();
  EXPECT_NE(text.find("# TYPE outbox_events_published_total counter"), std::string::npos);
  EXPECT_NE(text.find("outbox_events_published_total{table=\"public.t\"} 3"), std::string::npos);
  EXPECT_NE(text.find("outbox_pending_events 7"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_bucket{table=\"t\",le=\"1\"} 0"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_bucket{table=\"t\",le=\"10\"} 1"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_bucket{table=\"t\",le=\"+Inf\"} 2"), std::string::npos);
  EXPECT_NE(text.find("outbox_batch_size_count{table=\"t\"} 2"), std::string::npos);
  EXPECT_THROW(r.gauge("outbox_events_published_total", "x"), std::logic_error);
}

}  // namespace
TEST(MetricsRegistry, ADescribedCounterFamilyRendersBeforeItsFirstSeries) {
  metrics::Registry r;
  r.describe_counter("outbox_topic_events_published_total", "By topic");
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP outbox_topic_events_published_total By topic\n# TYPE "
                      "outbox_topic_events_published_total counter\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("outbox_topic_events_published_total{"), std::string::npos) << text;
  r.counter("outbox_topic_events_published_total", "By topic", {{"topic", "orders"}}).inc(2);
  text = r.render();
  EXPECT_NE(text.find("outbox_topic_events_published_total{topic=\"orders\"} 2\n"),
            std::string::npos)
      << text;
}

}  // namespace outbox
