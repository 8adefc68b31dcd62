#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/database_options.hpp"

namespace outbox::cli {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir() {
  fs::path dir = fs::temp_directory_path() /
                 ("database-options-" +
                  std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The DSN file as the operator mounts it: the spec's key as the file name, one trailing newline
// (kubectl create secret --from-file keeps it) trimmed.
TEST(DatabaseOptions, ReadsTheDsnFromTheMountedFile) {
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "uri") << "host=db dbname=shop\n";
  DatabaseOptions o;
  o.dsn_file = (dir / "uri").string();
  EXPECT_EQ(o.resolve_dsn(), "host=db dbname=shop");
}

// A key the Secret lacks leaves the file out of the mount: the error names the key, since it is
// the line the OutboxRelay's Ready condition quotes.
TEST(DatabaseOptions, AMissingDsnFileNamesTheSecretKeyItStandsFor) {
  DatabaseOptions o;
  o.dsn_file = (scratch_dir() / "no-such-key").string();
  try {
    o.resolve_dsn();
    ADD_FAILURE() << "resolved a DSN from a file that does not exist";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the Secret has no key \"no-such-key\""),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(DatabaseOptions().resolve_dsn(), std::invalid_argument);
}

}  // namespace
}  // namespace outbox::cli
