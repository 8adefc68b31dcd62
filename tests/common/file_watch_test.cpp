#include "common/file_watch.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/secret_volume.hpp"

namespace outbox {
namespace {

namespace fs = std::filesystem;

using testbed::SecretVolume;

TEST(FileWatch, ASymlinkSwapIsAChangeOfTheVisiblePathOnceAndTheSameContentIsNone) {
  SecretVolume volume;
  volume.publish({{"dsn", "postgresql://a"}});
  FileWatch watch({volume.path("dsn")});
  EXPECT_TRUE(watch.changed().empty());

  // The kubelet's resync writes the same content into a new version: not a change.
  volume.publish({{"dsn", "postgresql://a"}});
  EXPECT_TRUE(watch.changed().empty());

  // A rotation: the path and its symlink are the same, what it resolves to is not.
  volume.publish({{"dsn", "postgresql://b"}});
  EXPECT_EQ(watch.changed(), std::vector<std::string>{volume.path("dsn")});
  EXPECT_TRUE(watch.changed().empty()) << "each change is reported once";
}

TEST(FileWatch, ADirectoryStandsForItsFilesAndLeavesOutTheKubeletsOwnEntries) {
  SecretVolume volume;
  volume.publish({{"client.id", "one"}});
  FileWatch watch({volume.path()});
  EXPECT_TRUE(watch.changed().empty());
  volume.publish({{"client.id", "one"}});
  EXPECT_TRUE(watch.changed().empty()) << "a new ..version directory with the same files";
  volume.publish({{"client.id", "one"}, {"acks", "all"}});
  EXPECT_EQ(watch.changed(), std::vector<std::string>{volume.path()}) << "a key added";
  volume.publish({{"client.id", "two"}, {"acks", "all"}});
  EXPECT_EQ(watch.changed(), std::vector<std::string>{volume.path()}) << "a value changed";
}

TEST(FileWatch, AFileThatAppearsOrGoesIsAChangeAndResetForgetsWhatChanged) {
  SecretVolume volume;
  volume.publish({{"other", "x"}});
  FileWatch watch({volume.path("dsn"), volume.path("other")});
  volume.publish({{"other", "x"}, {"dsn", "postgresql://a"}});
  EXPECT_EQ(watch.changed(), std::vector<std::string>{volume.path("dsn")});
  fs::remove(volume.path("dsn"));
  EXPECT_EQ(watch.changed(), std::vector<std::string>{volume.path("dsn")});

  std::ofstream(volume.path("dsn")) << "postgresql://b";
  watch.reset();
  EXPECT_TRUE(watch.changed().empty());
  EXPECT_TRUE(FileWatch().changed().empty());
  EXPECT_TRUE(FileWatch().empty());
}

}  // namespace
}  // namespace outbox
