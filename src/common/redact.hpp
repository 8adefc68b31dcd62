#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Keeping credentials out of every text the product emits (log lines, /readyz, /inspect, the
// OutboxRelay's status and conditions, Events, a Job's termination message, the CLI). The
// libraries quote what they cannot parse, and a malformed connection string is quoted where the
// password sits: libpq says `invalid percent-encoded token: "Hunter2%zzSecret"` of a URI whose
// password holds a bare %. So every message that comes from libpq, libpqxx or librdkafka passes
// redact() where it is turned into text, and again where text leaves the process.
namespace outbox {

// The secret material a process holds, as redact() needs it: literal strings that are secret,
// and the connection strings they came from with where in each the secret parts lie (so that a
// quoted fragment of a malformed DSN that only overlaps its password is recognised too).
class Secrets {
 public:
  // A libpq connection string, URI or key=value, parsable or not. Secret: the password of the
  // URI's userinfo (between its first ':' and the last '@' before the host; the user name is
  // not secret), and the value of every keyword holding "password" (password=, sslpassword=, in the
  // key=value form or the URI's query), quoted or not, up to the next keyword when unquoted (a
  // password with a space is not cut at it); each raw, percent-decoded and percent-encoded.
  void add_dsn(std::string_view dsn);
  // librdkafka properties: the values of the secret ones (a name holding "password" or
  // "secret", ssl.key.pem, and sasl.oauthbearer.config with each value in it).
  void add_kafka_properties(const std::map<std::string, std::string>& properties);
  // One secret string (not an empty one).
  void add(std::string_view secret);
  // Adds what `other` holds; whether anything was new.
  bool merge(const Secrets& other);

  // Whether `fragment` (what a library quoted) holds a secret, or is a piece of a connection
  // string, four characters or longer, that overlaps one of its secret parts (raw or
  // percent-decoded).
  bool covers(std::string_view fragment) const;
  // The literal secrets, longest first.
  const std::vector<std::string>& literals() const { return literals_; }

 private:
  // A connection string, the spans [begin, end) of its secret parts, and its percent-decoded
  // form with where each of its characters starts in `text` (libpq decodes a URI's escapes
  // before it quotes a part of it).
  struct Source {
    std::string text;
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    std::string decoded;
    std::vector<std::size_t> decoded_at;
  };
  void add_source(Source source);

  std::vector<std::string> literals_;
  std::vector<Source> sources_;
};

// `text` with every credential replaced by "***": each quoted fragment ('...' or "...") that
// covers() says is secret, each literal secret wherever it appears, and, without knowing any
// secret, the password of a URI's userinfo (scheme://user:***@host) and the value of a key
// holding "password" or "secret" followed by '=' (password=***, sasl.password=***).
std::string redact(std::string_view text, const Secrets& secrets);

// The secrets this process has read (the commands' DatabaseOptions and PublishOptions add the
// DSN and the Kafka properties they read), for the redaction where text leaves the process: the
// log sink, the HTTP server, the status writers. Thread-safe.
void remember_secrets(const Secrets& found);
// redact() with the secrets this process has read.
std::string redact(std::string_view text);

// A libpq DSN (key=value or URI form) rewritten as key=value with every secret
// (password, sslpassword) shown as "***", so that a connection string can appear
// in a log line or an error without leaking it. A DSN libpq cannot parse is not
// shown at all.
std::string redact_dsn(std::string_view dsn);

}  // namespace outbox
