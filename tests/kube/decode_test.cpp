// Parsing with keys left out: what the informers keep of every object they cache.
#include "kube/decode.hpp"

#include <gtest/gtest.h>

#include "kube/watch_decoder.hpp"

namespace outbox::kube {
namespace {

using Json = nlohmann::json;

const char kList[] = R"({"kind": "DeploymentList", "metadata": {"resourceVersion": "7"},
  "items": [{"metadata": {"name": "a", "managedFields": [{"manager": "x", "fieldsV1": {"f:spec": {}}}],
                          "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                          "outbox.dev/applied-hash": "h"}},
             "spec": {"template": {"metadata": {"labels": {"app": "a"}}}}}]})";

TEST(Decode, TheDroppedKeysAreLeftOutWhereverTheyAppearAndEverythingElseIsKept) {
  const Json all = decode_json(kList, {});
  const Json kept = decode_json(kList, bookkeeping_keys());
  Json want = all;
  want["items"][0]["metadata"].erase("managedFields");
  want["items"][0]["metadata"]["annotations"].erase(
      "kubectl.kubernetes.io/last-applied-configuration");
  EXPECT_EQ(kept, want);
  EXPECT_EQ(kept.at("/items/0/metadata/annotations/outbox.dev~1applied-hash"_json_pointer), "h");
}

TEST(Decode, NotJsonIsDiscardedWithOrWithoutDroppedKeys) {
  EXPECT_TRUE(decode_json("{\"a\": ", {}).is_discarded());
  EXPECT_TRUE(decode_json("{\"managedFields\": [", bookkeeping_keys()).is_discarded());
}

TEST(Decode, AWatchDecoderLeavesTheDroppedKeysOutOfEachEvent) {
  WatchDecoder decoder(WatchDecoder::kMaxEventBytes, bookkeeping_keys());
  const auto events = decoder.feed(
      R"({"type": "ADDED", "object": {"metadata": {"name": "a", "managedFields": []}}})"
      "\n");
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].object, Json({{"metadata", {{"name", "a"}}}}));
}

}  // namespace
}  // namespace outbox::kube
