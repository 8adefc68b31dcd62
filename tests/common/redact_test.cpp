// Unit: no services. libpq, libpqxx and librdkafka are driven for real (connections go to a port
// where nothing listens, producers to no broker), so that their own words about malformed
// credentials are what redact() is checked on.
#include "common/redact.hpp"

#include <libpq-fe.h>
#include <librdkafka/rdkafkacpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "common/log.hpp"

namespace outbox {
namespace {

// A malformed connection string, and what of it must never be shown.
struct BadDsn {
  std::string what;
  std::string dsn;
  std::vector<std::string> secret;
  bool libpq_quotes_it = false;  // whether libpq's own message shows a secret part
};

const std::vector<BadDsn>& bad_dsns() {
  static const std::vector<BadDsn> dsns = {
      {"a bare % in the URI's password",
       "postgresql://outbox:Hunter2%zzSecret@127.0.0.1:1/outbox",
       {"Hunter2", "zzSecret"},
       true},
      {"a bare % and a bad sslmode",
       "postgresql://outbox:Hunter2%zzSecret@127.0.0.1:1/outbox?sslmode=bogus",
       {"Hunter2", "zzSecret"},
       true},
      {"a bare % in the query's password",
       "postgresql://outbox@127.0.0.1:1/outbox?password=Hunter2%zzSecret",
       {"Hunter2", "zzSecret"},
       true},
      {"a bare @ in the URI's password (libpq takes the rest for the host)",
       "postgresql://outbox:Hunter2@zzSecret@127.0.0.1:1/outbox",
       {"Hunter2", "zzSecret"},
       true},
      {"a bare / in the URI's password (libpq takes its start for the port)",
       "postgresql://outbox:Hunter2/zzSecret@127.0.0.1:1/outbox",
       {"Hunter2", "zzSecret"},
       true},
      {"a bad sslmode",
       "postgresql://outbox:Hunter2zzSecret@127.0.0.1:1/outbox?sslmode=bogus",
       {"Hunter2zzSecret"}},
      {"an unknown keyword",
       "postgresql://outbox:Hunter2zzSecret@127.0.0.1:1/outbox?passwort=x",
       {"Hunter2zzSecret"}},
      {"a keyword-form password with a space",
       "host=127.0.0.1 port=1 user=outbox password=Hunter2 zzSecret dbname=outbox",
       {"Hunter2", "zzSecret"},
       true},
      {"a keyword-form password in double quotes (libpq quotes with ')",
       "host=127.0.0.1 port=1 user=outbox password=\"Hunter2 zzSecret\" dbname=outbox",
       {"Hunter2", "zzSecret"},
       true},
      {"a keyword-form password without its =",
       "host=127.0.0.1 port=1 user=outbox password Hunter2zzSecret",
       {"Hunter2zzSecret"}},
      {"an unterminated quote",
       "host=127.0.0.1 port=1 user=outbox password='Hunter2 zzSecret",
       {"Hunter2", "zzSecret"}},
      {"an escaped quote and a bad sslmode",
       R"(host=127.0.0.1 port=1 user=outbox password='Hunter2\' zzSecret' sslmode=bogus)",
       {"Hunter2", "zzSecret"}},
      {"a keyword-form bad sslmode",
       "host=127.0.0.1 port=1 user=outbox password=Hunter2zzSecret sslmode=bogus",
       {"Hunter2zzSecret"}},
      {"an unknown keyword in the key=value form",
       "host=127.0.0.1 port=1 user=outbox password=Hunter2zzSecret sslmod=require",
       {"Hunter2zzSecret"}},
  };
  return dsns;
}

// What libpq and libpqxx say about connecting with `dsn`.
std::vector<std::string> library_messages(const std::string& dsn) {
  std::vector<std::string> out;
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (error != nullptr) {
    out.emplace_back(error);
  }
  PQfreemem(error);
  PQconninfoFree(options);
  PGconn* conn = PQconnectdb(dsn.c_str());
  out.emplace_back(PQerrorMessage(conn));
  PQfinish(conn);
  try {
    pqxx::connection c(dsn);
  } catch (const std::exception& e) {
    out.emplace_back(e.what());
  }
  return out;
}

bool shows_any(const std::string& text, const std::vector<std::string>& secret) {
  for (const std::string& s : secret) {
    if (text.find(s) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(Redact, LibpqsWordsAboutAMalformedDsnKeepNoPartOfItsPassword) {
  for (const BadDsn& bad : bad_dsns()) {
    Secrets secrets;
    secrets.add_dsn(bad.dsn);
    bool quoted = false;
    for (const std::string& message : library_messages(bad.dsn)) {
      quoted = quoted || shows_any(message, bad.secret);
      const std::string shown = redact(message, secrets);
      EXPECT_FALSE(shows_any(shown, bad.secret)) << bad.what << ": " << shown;
      EXPECT_FALSE(shown.empty()) << bad.what;
    }
    // The cases that matter: libpq really does quote part of the password.
    EXPECT_EQ(quoted, bad.libpq_quotes_it) << bad.what;
  }
}

TEST(Redact, WhatLibpqSaysIsKeptAroundTheSecret) {
  const std::string dsn = "postgresql://outbox:Hunter2%zzSecret@127.0.0.1:1/outbox";
  Secrets secrets;
  secrets.add_dsn(dsn);
  EXPECT_EQ(redact("invalid percent-encoded token: \"Hunter2%zzSecret\"\n", secrets),
            "invalid percent-encoded token: \"***\"\n");
  // A fragment that only overlaps the password (libpq read the rest as the host name).
  Secrets at_sign;
  at_sign.add_dsn("postgresql://outbox:Hunter2@zzSecret@db/outbox");
  EXPECT_EQ(redact("could not translate host name \"zzSecret@db\" to address", at_sign),
            "could not translate host name \"***\" to address");
  // What holds no secret stays as it is, the user name included.
  EXPECT_EQ(redact("password authentication failed for user \"outbox\"", secrets),
            "password authentication failed for user \"outbox\"");
}

// Short quoted text that happens to occur in the password is no leak, and stays: the relay's
// /metrics passes through redact(), and a password with digits in it turned every histogram
// bucket of a digit into le="***" (Prometheus cannot read those).
TEST(Redact, ShortQuotedTextThatOccursInThePasswordStays) {
  Secrets secrets;
  secrets.add_dsn("postgresql://outbox:1f14f3e6e802e420bd34a4e84c2d55aa@127.0.0.1:5432/outbox");
  const std::string metrics =
      "outbox_claim_seconds_bucket{table=\"public.outbox_event\",le=\"1\"} 3\n"
      "outbox_batch_size_bucket{table=\"public.outbox_event\",le=\"2.5\"} 0\n";
  EXPECT_EQ(redact(metrics, secrets), metrics);
  EXPECT_EQ(redact("got \"1f14f3\"", secrets), "got \"***\"") << "a longer piece still goes";
  Secrets short_one;
  short_one.add_dsn("host=db password=ab1 user=app");
  EXPECT_EQ(redact("got 'ab1' and ab1", short_one), "got '***' and ***") << "a whole one goes";
}

TEST(Redact, EveryEncodingOfThePasswordIsRemoved) {
  Secrets secrets;
  secrets.add_dsn("postgresql://app:p%40ss%20w0rd%21@db/x");
  for (const std::string form : {"p%40ss%20w0rd%21", "p@ss w0rd!", "app:p%40ss%20w0rd%21"}) {
    const std::string shown = redact("said " + form + " here", secrets);
    EXPECT_EQ(shown.find("ss"), std::string::npos) << shown;
    EXPECT_NE(shown.find("said "), std::string::npos) << shown;
  }
  // The key=value form's quoting, undone.
  Secrets quoted;
  quoted.add_dsn(R"(host=db password='it\'s a secret' user=app)");
  EXPECT_EQ(redact("got it's a secret back", quoted), "got *** back");
  EXPECT_EQ(redact("got it%27s%20a%20secret back", quoted), "got *** back");
}

TEST(Redact, AQuotedFragmentHoldingThePasswordIsRemovedWhole) {
  Secrets secrets;
  secrets.add_dsn("host=db password=Hunter2 user=app");
  EXPECT_EQ(redact(R"(invalid value "xHunter2y" and 'Hunter2' then Hunter2)", secrets),
            R"(invalid value "***" and '***' then ***)");
}

TEST(Redact, CredentialsAreRecognisedWithoutKnowingThem) {
  const Secrets none;
  EXPECT_EQ(redact("connecting to postgresql://app:s3cr%t@db:5432/x failed", none),
            "connecting to postgresql://app:***@db:5432/x failed");
  EXPECT_EQ(redact("dsn host=db password=s3cret user=app", none),
            "dsn host=db password=*** user=app");
  EXPECT_EQ(redact("dsn host=db password = 'a b\\' c' user=app", none),
            "dsn host=db password = *** user=app");
  EXPECT_EQ(redact(R"(x sslpassword="a b" y)", none), "x sslpassword=*** y");
  EXPECT_EQ(redact("Invalid value for \"sasl.mechanisms\": PLAIN sasl.password=k4fka", none),
            "Invalid value for \"sasl.mechanisms\": PLAIN sasl.password=***");
  EXPECT_EQ(redact("beginning at: clientSecret=k4fka", none), "beginning at: clientSecret=***");
  // Redacting twice changes nothing; text without credentials is left alone.
  EXPECT_EQ(redact("password=*** and postgresql://app:***@db", none),
            "password=*** and postgresql://app:***@db");
  EXPECT_EQ(redact("unreachable (host=db password=***): refused", none),
            "unreachable (host=db password=***): refused");
  const std::string plain =
      "connection to server at \"db\" (10.0.0.1), port 5432 failed: FATAL:  password "
      "authentication failed for user \"app\"\n";
  EXPECT_EQ(redact(plain, none), plain);
  EXPECT_EQ(redact("http://127.0.0.1:8080/readyz", none), "http://127.0.0.1:8080/readyz");
}

// librdkafka's own words, collected from its log and error events.
struct KafkaWords : RdKafka::EventCb {
  void event_cb(RdKafka::Event& e) override {
    std::lock_guard lock(mu);
    said.push_back(e.str());
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string out;
    for (const auto& s : said) {
      out += s + "\n";
    }
    return out;
  }
  std::mutex mu;
  std::vector<std::string> said;
};

// Creates a producer with `properties`; returns what librdkafka refused, or what it said until
// it said `awaited` (at most 5 s).
std::string kafka_words(const std::map<std::string, std::string>& properties,
                        const std::string& awaited) {
  KafkaWords words;
  std::string out;
  {
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string err;
    conf->set("bootstrap.servers", "127.0.0.1:1", err);
    conf->set("event_cb", static_cast<RdKafka::EventCb*>(&words), err);
    for (const auto& [key, value] : properties) {
      if (conf->set(key, value, err) != RdKafka::Conf::CONF_OK) {
        return err;
      }
    }
    std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
    if (!producer) {
      return err;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (words.all().find(awaited) == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      producer->poll(100);
    }
  }
  return words.all();
}

TEST(Redact, LibrdkafkasWordsAboutBadCredentialsKeepNoSecret) {
  const std::string password = "Hunter2Kafka";
  const std::vector<std::pair<std::map<std::string, std::string>, bool>> cases = {
      // A mechanism librdkafka does not know, beside a password.
      {{{"security.protocol", "SASL_PLAINTEXT"},
        {"sasl.mechanism", "BOGUS"},
        {"sasl.username", "outbox"},
        {"sasl.password", password}},
       false},
      // Two settings run together on one line of a properties file: librdkafka quotes the value.
      {{{"security.protocol", "SASL_PLAINTEXT"},
        {"sasl.mechanism", "SCRAM-SHA-512 sasl.password=" + password}},
       true},
      // An unsecured-JWT config librdkafka stops reading at, and quotes from there on.
      {{{"security.protocol", "SASL_PLAINTEXT"},
        {"sasl.mechanism", "OAUTHBEARER"},
        {"enable.sasl.oauthbearer.unsecure.jwt", "true"},
        {"sasl.oauthbearer.config", "principal=outbox clientSecret=" + password}},
       true},
      // A key password beside a key that is no PEM.
      {{{"security.protocol", "SSL"}, {"ssl.key.pem", "garbage"}, {"ssl.key.password", password}},
       false},
  };
  for (const auto& [properties, quoted] : cases) {
    Secrets secrets;
    secrets.add_kafka_properties(properties);
    const std::string said = kafka_words(properties, "OAUTHBEARER");
    EXPECT_FALSE(said.empty()) << properties.at("security.protocol");
    EXPECT_EQ(said.find(password) != std::string::npos, quoted) << said;
    const std::string shown = redact(said, secrets);
    EXPECT_EQ(shown.find(password), std::string::npos) << shown;
    EXPECT_EQ(shown.find("Kafka"), std::string::npos) << shown;
  }
}

// The secrets a command read reach the log sink: a line that some path forgot to redact is
// redacted there, in both formats.
TEST(Redact, TheLogSinkLeavesOutTheSecretsTheProcessRead) {
  Secrets found;
  found.add_dsn("postgresql://outbox:Sink%zzSecret@db/outbox");
  remember_secrets(found);
  for (const char* format : {"text", "json"}) {
    char path[] = "/tmp/outbox-redact-test-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    std::fflush(stderr);
    const int saved = ::dup(2);
    ::dup2(fd, 2);
    ASSERT_TRUE(configure_logging("info", format));
    spdlog::error("invalid percent-encoded token: \"Sink%zzSecret\"; also Sink%zzSecret");
    spdlog::default_logger()->flush();
    ::dup2(saved, 2);
    ::close(saved);
    ::close(fd);
    std::ifstream in(path);
    const std::string logged((std::istreambuf_iterator<char>(in)), {});
    std::remove(path);
    EXPECT_EQ(logged.find("zzSecret"), std::string::npos) << logged;
    EXPECT_NE(logged.find("invalid percent-encoded token"), std::string::npos) << logged;
  }
  EXPECT_EQ(redact("a Sink%zzSecret b"), "a *** b");
}

TEST(RedactDsn, HidesEverySecretInTheKeyValueForm) {
  EXPECT_EQ(redact_dsn(R"(host=db user=app password='p\'ss word' sslpassword=k3y dbname=orders)"),
            "user=app password=*** dbname=orders host=db sslpassword=***");
  EXPECT_EQ(redact_dsn("host=db user=app password=s3cret dbname=x"),
            "user=app password=*** dbname=x host=db");
  EXPECT_EQ(redact_dsn("host=db application_name='a b'"), "host=db application_name='a b'");
  EXPECT_EQ(redact_dsn("host=db"), "host=db");
}

TEST(RedactDsn, HidesEverySecretInTheUriForm) {
  EXPECT_EQ(redact_dsn("postgresql://app:s3cret@db:5432/x?sslpassword=k3y&sslmode=require"),
            "user=app password=*** dbname=x host=db port=5432 sslmode=require sslpassword=***");
  EXPECT_EQ(redact_dsn("postgres://db/x?password=s3cret"), "password=*** dbname=x host=db");
}

TEST(RedactDsn, ShowsNothingOfADsnLibpqCannotParse) {
  // libpq reads `"a` as the password and then fails on `b"`; its message would
  // quote the fragment.
  const std::string shown = redact_dsn(R"(host=db password="a b" user=app)");
  EXPECT_EQ(shown, "(connection string not shown: libpq cannot parse it)");
}

}  // namespace
}  // namespace outbox
