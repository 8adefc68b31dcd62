// Watch and Informer against the real kube-apiserver, including a forced 410 and cut streams.
#include <atomic>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "e2e_support.hpp"
#include "kube/informer.hpp"

namespace outbox::kube {
namespace {

using namespace std::chrono_literals;
using e2e::admin_client;
using e2e::config_map;
using e2e::eventually;

const Resource& cms = resources::config_maps;

// Everything the handlers saw, as "add ns/name v", "update ns/name v", "delete ns/name", where v
// is the object's data.v.
class Recorder {
 public:
  InformerHandlers handlers() {
    return {[this](const Json& o) { record("add " + Informer::key_of(o) + " " + v(o)); },
            [this](const Json&, const Json& o) {
              record("update " + Informer::key_of(o) + " " + v(o));
            },
            [this](const Json& o) { record("delete " + Informer::key_of(o)); }};
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  bool contains(const std::string& line) const {
    auto all = lines();
    return std::find(all.begin(), all.end(), line) != all.end();
  }

 private:
  static std::string v(const Json& o) { return o.value("/data/v"_json_pointer, std::string("-")); }
  void record(std::string line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
  }
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(KubeWatchE2eTest, WatchSeesAddUpdateDeleteInOrder) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  std::string rv = client.list(cms, ns)["metadata"]["resourceVersion"];

  std::mutex mutex;
  std::vector<std::pair<WatchEventType, std::string>> seen;
  std::jthread watcher([&](std::stop_token stop) {
    WatchOptions options;
    options.resource_version = rv;
    client.watch(
        cms, ns, options,
        [&](WatchEvent& event) {
          if (event.type != WatchEventType::kBookmark) {
            std::lock_guard lock(mutex);
            seen.emplace_back(event.type,
                              event.object.value("/data/v"_json_pointer, std::string("-")));
          }
        },
        stop);
  });
  client.create(cms, ns, config_map("w", {{"v", "1"}}));
  client.merge_patch(cms, ns, "w", {{"data", {{"v", "2"}}}});
  client.merge_patch(cms, ns, "w", {{"data", {{"v", "3"}}}});
  client.remove(cms, ns, "w");
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mutex);
    return seen.size() >= 4;
  }));
  watcher.request_stop();
  watcher.join();  // proves a blocked watch ends promptly on stop
  std::vector<std::pair<WatchEventType, std::string>> expected = {
      {WatchEventType::kAdded, "1"},
      {WatchEventType::kModified, "2"},
      {WatchEventType::kModified, "3"},
      {WatchEventType::kDeleted, "3"}};  // DELETED carries the last state
  EXPECT_EQ(seen, expected);
}

TEST(KubeWatchE2eTest, InformerCachesAndDeliversAddUpdateDelete) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  client.create(cms, ns, config_map("before", {{"v", "0"}}));
  Recorder recorder;
  Informer informer(client, cms, ns, recorder.handlers());
  std::jthread thread([&](std::stop_token stop) { informer.run(stop); });
  ASSERT_TRUE(eventually([&] { return informer.has_synced(); }));
  EXPECT_TRUE(informer.get(ns + "/before").has_value());

  client.create(cms, ns, config_map("a", {{"v", "1"}}));
  client.merge_patch(cms, ns, "a", {{"data", {{"v", "2"}}}});
  client.remove(cms, ns, "before");
  ASSERT_TRUE(eventually([&] { return recorder.contains("delete " + ns + "/before"); }));
  EXPECT_EQ(recorder.lines(),
            (std::vector<std::string>{"add " + ns + "/before 0", "add " + ns + "/a 1",
                                      "update " + ns + "/a 2", "delete " + ns + "/before"}));
  EXPECT_EQ(informer.get(ns + "/a")->at("data").at("v"), "2");
  EXPECT_EQ(informer.get(ns + "/a")->value("kind", ""), "ConfigMap");
  EXPECT_FALSE(informer.get(ns + "/before").has_value());
  EXPECT_EQ(informer.relist_count(), 1);
}

// A controller started before its CRD: the informer says which type is missing and
// why, in one line, instead of an API error per retry; the caches never claim to be synced.
TEST(KubeWatchE2eTest, AnInformerOfATypeWithoutItsCrdNamesTheMissingDefinition) {
  Client client = admin_client();
  const Resource missing{"nosuch.outbox.dev", "v1", "widgets", true};
  Recorder recorder;
  InformerOptions options;
  options.backoff_initial = 50ms;
  Informer informer(client, missing, "", recorder.handlers(), options);
  std::jthread thread([&](std::stop_token stop) { informer.run(stop); });
  ASSERT_TRUE(eventually([&] { return informer.not_served(); }));
  EXPECT_EQ(informer.problem(),
            "watch widgets: the API server does not serve widgets.nosuch.outbox.dev/v1 (404): its "
            "CustomResourceDefinition is not installed");
  EXPECT_FALSE(informer.has_synced());
  EXPECT_TRUE(recorder.lines().empty());

  Informer served(client, cms, e2e::make_namespace(client), recorder.handlers());
  std::jthread served_thread([&](std::stop_token stop) { served.run(stop); });
  ASSERT_TRUE(eventually([&] { return served.has_synced(); }));
  EXPECT_EQ(served.problem(), "");
  EXPECT_FALSE(served.not_served());
}

TEST(KubeWatchE2eTest, ServerEndingTheStreamResumesWithoutLosingEvents) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  Recorder recorder;
  InformerOptions options;
  options.watch_timeout_seconds = 1;  // the server closes each watch after ~1 s
  Informer informer(client, cms, ns, recorder.handlers(), options);
  std::jthread thread([&](std::stop_token stop) { informer.run(stop); });
  ASSERT_TRUE(eventually([&] { return informer.has_synced(); }));

  client.create(cms, ns, config_map("c", {{"v", "0"}}));
  std::vector<std::string> expected = {"add " + ns + "/c 0"};
  // Writes spread over several watch lifetimes: every version must arrive, in order.
  for (int i = 1; i <= 20; ++i) {
    client.merge_patch(cms, ns, "c", {{"data", {{"v", std::to_string(i)}}}});
    expected.push_back("update " + ns + "/c " + std::to_string(i));
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(eventually([&] { return recorder.contains("update " + ns + "/c 20"); }));
  EXPECT_EQ(recorder.lines(), expected);
  EXPECT_GE(informer.watch_count(), 3) << "the server should have ended several watches";
  EXPECT_EQ(informer.relist_count(), 1) << "a clean end re-watches, it does not relist";
}

TEST(KubeWatchE2eTest, IdleDeadlineNoticesASilentConnection) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  std::string rv = client.list(cms, ns)["metadata"]["resourceVersion"];
  WatchOptions options;
  options.resource_version = rv;
  options.timeout_seconds = 60;
  options.idle_timeout = 1500ms;  // nothing happens in this namespace: the stream stays silent
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.watch(cms, ns, options, [](WatchEvent&) {}), TransportError);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 10s);
}

// Forced 410: the informer is stopped, the world changes, and the apiserver restarts (its
// watch cache then starts at the current revision, so the informer's resourceVersion is too
// old). The resumed informer must get 410, relist, and report exactly what it missed,
// including the delete of an object it never saw go.
TEST(KubeWatchE2eTest, GoneAfterApiserverRestartRelistsWithoutLosingObjects) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  client.create(cms, ns, config_map("keep", {{"v", "1"}}));
  client.create(cms, ns, config_map("change", {{"v", "1"}}));
  client.create(cms, ns, config_map("drop", {{"v", "1"}}));

  Recorder recorder;
  Informer informer(client, cms, ns, recorder.handlers());
  {
    std::jthread thread([&](std::stop_token stop) { informer.run(stop); });
    ASSERT_TRUE(eventually([&] { return informer.has_synced(); }));
  }  // stopped
  std::string stale_rv = informer.resource_version();
  size_t before = recorder.lines().size();
  ASSERT_EQ(before, 3u);

  client.merge_patch(cms, ns, "change", {{"data", {{"v", "2"}}}});
  client.remove(cms, ns, "drop");
  client.create(cms, ns, config_map("new", {{"v", "1"}}));
  testbed::control("kube", "restart");

  // The raw watch from the stale version is refused with 410, inside a 200 stream.
  WatchOptions options;
  options.resource_version = stale_rv;
  ApiError gone(Status{});
  ASSERT_TRUE(eventually([&] {
    try {
      client.watch(cms, ns, options, [](WatchEvent&) {});
    } catch (const ApiError& e) {
      gone = e;
      return true;
    } catch (const TransportError&) {
    }
    return false;
  }));
  EXPECT_TRUE(gone.is_gone()) << gone.what();
  EXPECT_EQ(gone.code(), 410);

  std::jthread thread([&](std::stop_token stop) { informer.run(stop); });
  ASSERT_TRUE(eventually([&] { return informer.relist_count() == 2; }));
  ASSERT_TRUE(eventually([&] { return recorder.lines().size() == before + 3; }));
  auto lines = recorder.lines();
  std::vector<std::string> after(lines.begin() + static_cast<long>(before), lines.end());
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, (std::vector<std::string>{"add " + ns + "/new 1", "delete " + ns + "/drop",
                                             "update " + ns + "/change 2"}));
  EXPECT_EQ(informer.list().size(), 3u);
  EXPECT_FALSE(informer.get(ns + "/drop").has_value());

  // And it keeps watching after the relist.
  client.merge_patch(cms, ns, "keep", {{"data", {{"v", "2"}}}});
  EXPECT_TRUE(eventually([&] { return recorder.contains("update " + ns + "/keep 2"); }));
}

// A connection cut mid-stream by an apiserver crash and restart while the informer is watching: the
// informer reconnects (with backoff while the server is down) and ends up with every change.
TEST(KubeWatchE2eTest, ApiserverRestartMidStreamReconnectsAndConverges) {
  Client client = admin_client();
  std::string ns = e2e::make_namespace(client);
  Recorder recorder;
  Informer informer(client, cms, ns, recorder.handlers());
  std::jthread thread([&](std::stop_token stop) { informer.run(stop); });
  ASSERT_TRUE(eventually([&] { return informer.has_synced(); }));
  client.create(cms, ns, config_map("x", {{"v", "1"}}));
  ASSERT_TRUE(eventually([&] { return recorder.contains("add " + ns + "/x 1"); }));
  int watches = informer.watch_count();

  // A crash rather than a graceful stop: the kernel resets the connection under the watch.
  // (A graceful stop also works but waits up to a minute for open watches to drain.)
  testbed::control("kube", "kill9");
  testbed::control("kube", "start");
  client.merge_patch(cms, ns, "x", {{"data", {{"v", "2"}}}});
  client.create(cms, ns, config_map("y", {{"v", "1"}}));
  ASSERT_TRUE(eventually([&] { return recorder.contains("add " + ns + "/y 1"); }, 60s));
  EXPECT_TRUE(recorder.contains("update " + ns + "/x 2"));
  EXPECT_GT(informer.watch_count(), watches) << "the cut watch must have been replaced";
  EXPECT_EQ(informer.get(ns + "/x")->at("data").at("v"), "2");
}

}  // namespace
}  // namespace outbox::kube
