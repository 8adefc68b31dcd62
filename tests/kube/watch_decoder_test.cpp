#include "kube/watch_decoder.hpp"

#include <gtest/gtest.h>

namespace outbox::kube {
namespace {

const std::string kStream =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"},"
    "\"data\":{\"k\":\"line1\\nline2 { } \\\" \"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"3\"}}}\r\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"4\"}}}\n";

std::vector<WatchEventType> types(const std::vector<WatchEvent>& events) {
  std::vector<WatchEventType> out;
  for (const auto& e : events) {
    out.push_back(e.type);
  }
  return out;
}

const std::vector<WatchEventType> kExpected = {WatchEventType::kAdded, WatchEventType::kModified,
                                               WatchEventType::kBookmark, WatchEventType::kDeleted};

TEST(WatchDecoderTest, EveryChunkSizeYieldsTheSameEvents) {
  for (size_t chunk = 1; chunk <= kStream.size(); ++chunk) {
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    for (size_t pos = 0; pos < kStream.size(); pos += chunk) {
      for (auto& e : decoder.feed(std::string_view(kStream).substr(pos, chunk))) {
        events.push_back(std::move(e));
      }
    }
    for (auto& e : decoder.finish()) {
      events.push_back(std::move(e));
    }
    ASSERT_EQ(types(events), kExpected) << "chunk size " << chunk;
    EXPECT_EQ(events[0].object["data"]["k"], "line1\nline2 { } \" ");
    EXPECT_EQ(events[3].object["metadata"]["resourceVersion"], "4");
  }
}

TEST(WatchDecoderTest, NoEventUntilItsLineIsComplete) {
  WatchDecoder decoder;
  std::string first = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}";
  EXPECT_TRUE(decoder.feed(first).empty());
  EXPECT_EQ(decoder.buffered(), first.size());
  auto events = decoder.feed("\n{\"type\":\"DEL");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
}

TEST(WatchDecoderTest, FinalEventWithoutNewlineIsAcceptedButATruncatedOneIsAnError) {
  WatchDecoder complete;
  complete.feed("{\"type\":\"ADDED\",\"object\":{}}");
  EXPECT_EQ(complete.finish().size(), 1u);

  WatchDecoder truncated;
  truncated.feed("{\"type\":\"ADDED\",\"object\":{\"meta");
  EXPECT_THROW(truncated.finish(), WatchDecodeError);
}

TEST(WatchDecoderTest, InvalidJsonAndWrongShapesAreErrors) {
  EXPECT_THROW(WatchDecoder().feed("{not json}\n"), WatchDecodeError);
  EXPECT_THROW(WatchDecoder().feed("[1,2]\n"), WatchDecodeError);
  EXPECT_THROW(WatchDecoder().feed("{\"type\":\"ADDED\"}\n"), WatchDecodeError);
  EXPECT_THROW(WatchDecoder().feed("{\"type\":7,\"object\":{}}\n"), WatchDecodeError);
  EXPECT_THROW(WatchDecoder().feed("{\"type\":\"RENAMED\",\"object\":{}}\n"), WatchDecodeError);
  try {
    WatchDecoder().feed("{\"type\":\"ADDED\",\"object\":{\"a\":}}\n");
    FAIL() << "expected WatchDecodeError";
  } catch (const WatchDecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid JSON event"), std::string::npos);
  }
}

TEST(WatchDecoderTest, ErrorEventCarriesTheStatus) {
  auto events = WatchDecoder().feed(
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
      "\"Failure\",\"message\":\"too old resource version: 1 (322)\",\"reason\":\"Expired\","
      "\"code\":410}}\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, WatchEventType::kError);
  EXPECT_EQ(events[0].object["code"], 410);
}

TEST(WatchDecoderTest, OversizedEventWithoutLineEndIsRefused) {
  WatchDecoder decoder(/*max_event_bytes=*/64);
  EXPECT_THROW(decoder.feed(std::string(100, ' ') + "x"), WatchDecodeError);
}

}  // namespace
}  // namespace outbox::kube
