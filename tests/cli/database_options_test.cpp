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

// spec.database.tls replaces the DSN's own TLS settings, whatever form the DSN takes: a DSN
// saying sslmode=require cannot weaken verify-full. Values are quoted as libpq reads them back.
TEST(DatabaseOptions, TlsSettingsReplaceTheDsnsOwn) {
  const DatabaseTls tls{"verify-full", "/etc/ca dir/ca.crt", "", ""};
  const std::string from_uri =
      with_tls("postgresql://u:p%27w@db.example:5432/shop?sslmode=require&sslrootcert=/x", tls);
  EXPECT_EQ(from_uri,
            "user='u' password='p\\'w' dbname='shop' host='db.example' port='5432' "
            "sslmode='verify-full' sslrootcert='/etc/ca dir/ca.crt'");
  EXPECT_EQ(sslmode_of(from_uri), "verify-full");
  EXPECT_EQ(with_tls("host=db sslmode=disable", {"", "/ca.crt", "/c.crt", "/c.key"}),
            "host='db' sslmode='disable' sslcert='/c.crt' sslkey='/c.key' sslrootcert='/ca.crt'");
  EXPECT_EQ(with_tls("postgresql://u:secret@db/shop", {}), "postgresql://u:secret@db/shop");
  EXPECT_EQ(sslmode_of("postgresql://db/shop"), "prefer");
  try {
    with_tls("host=db password='unterminated secret", tls);
    ADD_FAILURE() << "parsed";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(is_tls_refusal("SSL error: certificate verify failed"));
  EXPECT_TRUE(is_tls_refusal("server does not support SSL, but SSL was required"));
  EXPECT_FALSE(is_tls_refusal("SSL SYSCALL error: EOF detected")) << "an outage, not a refusal";
  EXPECT_EQ(tls_verification("verify-full", true), "verify-full");
  EXPECT_EQ(tls_verification("require", true), "unverified");
  EXPECT_EQ(tls_verification("verify-full", false), "off");
}

}  // namespace
}  // namespace outbox::cli
