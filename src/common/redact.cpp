#include "common/redact.hpp"

#include "common/percent.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace outbox {
namespace {

constexpr std::string_view kShown = "***";
constexpr std::size_t kShortestSecretPiece = 4;

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
}

// `text` with its valid %XX escapes decoded, and for each decoded character (and one past the
// end) where it starts in `text`: a fragment of the decoded form is traced back to the raw one.
struct Decoded {
  std::string text;
  std::vector<std::size_t> raw_at;
};

Decoded percent_decoded(std::string_view raw) {
  Decoded d;
  for (std::size_t i = 0; i < raw.size();) {
    d.raw_at.push_back(i);
    if (raw[i] == '%' && i + 2 < raw.size() && hex_digit(raw[i + 1]) >= 0 &&
        hex_digit(raw[i + 2]) >= 0) {
      d.text.push_back(static_cast<char>(hex_digit(raw[i + 1]) * 16 + hex_digit(raw[i + 2])));
      i += 3;
    } else {
      d.text.push_back(raw[i]);
      ++i;
    }
  }
  d.raw_at.push_back(raw.size());
  return d;
}

std::string percent_encoded(std::string_view raw) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out += {'%', kHex[u >> 4], kHex[u & 0xf]};
    }
  }
  return out;
}

// A value libpq's key=value syntax quotes: the text between the quotes, backslash escapes undone.
std::string unescaped(std::string_view quoted) {
  std::string out;
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    if (quoted[i] == '\\' && i + 1 < quoted.size()) {
      ++i;
    }
    out.push_back(quoted[i]);
  }
  return out;
}

std::string lowered(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Where the unquoted value of a key=value connection string that starts at `from` ends: at the
// next " keyword=" rather than at the first space, so that a password with a space in it (which
// libpq cuts there, and then quotes the rest as a keyword without "=") is secret as a whole.
std::size_t keyword_value_end(std::string_view dsn, std::size_t from) {
  for (std::size_t i = from; i < dsn.size(); ++i) {
    if (!is_space(dsn[i])) {
      continue;
    }
    std::size_t k = i;
    while (k < dsn.size() && is_space(dsn[k])) {
      ++k;
    }
    std::size_t key_end = k;
    while (key_end < dsn.size() &&
           (std::isalnum(static_cast<unsigned char>(dsn[key_end])) != 0 || dsn[key_end] == '_')) {
      ++key_end;
    }
    std::size_t eq = key_end;
    while (eq < dsn.size() && is_space(dsn[eq])) {
      ++eq;
    }
    if (key_end > k && eq < dsn.size() && dsn[eq] == '=') {
      return i;
    }
  }
  std::size_t end = dsn.size();
  while (end > from && is_space(dsn[end - 1])) {
    --end;
  }
  return end;
}

bool overlaps(std::size_t begin, std::size_t end,
              const std::vector<std::pair<std::size_t, std::size_t>>& spans) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const auto& s) { return begin < s.second && s.first < end; });
}

// Whether some occurrence of `fragment` in `haystack` overlaps a span; `raw_at` traces a decoded
// `haystack` back to the spans' text (empty: `haystack` is that text).
bool occurrence_overlaps(std::string_view haystack, const std::vector<std::size_t>& raw_at,
                         std::string_view fragment,
                         const std::vector<std::pair<std::size_t, std::size_t>>& spans) {
  for (std::size_t at = haystack.find(fragment); at != std::string_view::npos;
       at = haystack.find(fragment, at + 1)) {
    const std::size_t end = at + fragment.size();
    if (raw_at.empty() ? overlaps(at, end, spans) : overlaps(raw_at[at], raw_at[end], spans)) {
      return true;
    }
  }
  return false;
}

// Replaces every occurrence of `secret` in `text`.
void replace_all(std::string& text, std::string_view secret) {
  for (std::size_t at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at + kShown.size())) {
    text.replace(at, secret.size(), kShown);
  }
}

// scheme://user:password@host: the password, wherever a URI appears in `text`.
void redact_userinfo(std::string& text) {
  for (std::size_t scheme = text.find("://"); scheme != std::string::npos;
       scheme = text.find("://", scheme + 3)) {
    const std::size_t start = scheme + 3;
    std::size_t end = start;
    while (end < text.size() && !is_space(text[end]) && text[end] != '"' && text[end] != '\'') {
      ++end;
    }
    const std::size_t at = text.rfind('@', end == start ? start : end - 1);
    if (at == std::string::npos || at < start) {
      continue;
    }
    const std::size_t colon = text.find(':', start);
    if (colon < at && text.compare(colon + 1, at - colon - 1, kShown) != 0) {
      text.replace(colon + 1, at - colon - 1, kShown);
    }
  }
}

// key=value where the key holds "password" or "secret": the value, quoted or not.
void redact_secret_keys(std::string& text) {
  const std::string lower = lowered(text);
  std::vector<std::pair<std::size_t, std::size_t>> values;  // [begin, end) in `text`
  for (std::string_view word : {"password", "secret"}) {
    for (std::size_t at = lower.find(word); at != std::string::npos;
         at = lower.find(word, at + 1)) {
      std::size_t i = at + word.size();
      while (i < text.size() && is_key_char(text[i])) {
        ++i;
      }
      while (i < text.size() && text[i] == ' ') {
        ++i;
      }
      if (i >= text.size() || text[i] != '=') {
        continue;
      }
      ++i;
      while (i < text.size() && text[i] == ' ') {
        ++i;
      }
      std::size_t end = i;
      if (i < text.size() && (text[i] == '\'' || text[i] == '"')) {
        end = i + 1;
        while (end < text.size() && text[end] != text[i]) {
          end += text[end] == '\\' ? 2 : 1;
        }
        end = std::min(end + 1, text.size());
      } else {
        while (end < text.size() && !is_space(text[end]) && text[end] != '&' && text[end] != '"' &&
               text[end] != '\'') {
          ++end;
        }
      }
      // A value already shown as *** is left alone, and so is what follows it ("password=***)").
      if (end > i && text.compare(i, kShown.size(), kShown) != 0) {
        values.emplace_back(i, end);
      }
    }
  }
  // From the last one on, so that each replacement leaves the positions before it alone.
  std::sort(values.begin(), values.end());
  std::size_t next_begin = std::string::npos;
  for (auto it = values.rbegin(); it != values.rend(); ++it) {
    const std::size_t end = std::min(it->second, next_begin);
    if (it->first < end) {
      text.replace(it->first, end - it->first, kShown);
      next_begin = it->first;
    }
  }
}

bool is_secret(const PQconninfoOption& option) {
  // libpq marks password fields with dispchar "*" (password, sslpassword); the
  // name test also covers a secret a future libpq adds without that mark.
  return (option.dispchar != nullptr && option.dispchar[0] == '*') ||
         std::string_view(option.keyword).find("password") != std::string_view::npos;
}

// A value in libpq's key=value syntax: quoted when it has to be.
std::string conninfo_value(std::string_view value) {
  bool plain = !value.empty();
  for (char c : value) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' || c == '\\' || c == '=') {
      plain = false;
    }
  }
  if (plain) {
    return std::string(value);
  }
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

// The secrets this process has read; replaced, never changed, so a reader keeps its copy.
std::mutex g_mu;
std::shared_ptr<const Secrets> g_secrets = std::make_shared<const Secrets>();

}  // namespace

void Secrets::add(std::string_view secret) {
  if (secret.empty() || std::find(literals_.begin(), literals_.end(), secret) != literals_.end()) {
    return;
  }
  // Longest first: a secret that holds another is replaced whole.
  const auto at = std::find_if(literals_.begin(), literals_.end(),
                               [&](const std::string& s) { return s.size() < secret.size(); });
  literals_.insert(at, std::string(secret));
}

void Secrets::add_source(Source source) {
  for (const auto& [begin, end] : source.spans) {
    const std::string_view raw = std::string_view(source.text).substr(begin, end - begin);
    add(raw);
    add(percent_decoded(raw).text);
    add(percent_encoded(raw));
  }
  if (!source.spans.empty() && std::none_of(sources_.begin(), sources_.end(), [&](const Source& s) {
        return s.text == source.text;
      })) {
    Decoded decoded = percent_decoded(source.text);
    source.decoded = std::move(decoded.text);
    source.decoded_at = std::move(decoded.raw_at);
    sources_.push_back(std::move(source));
  }
}

void Secrets::add_dsn(std::string_view dsn) {
  Source source;
  source.text = std::string(dsn);
  // The URI form's userinfo. Its end is the last '@' before the query, not the first one as
  // libpq reads it: a password with a bare '@' in it leaves its rest in what libpq takes for
  // the host name, and quotes it.
  std::size_t query = std::string_view::npos;
  const std::size_t scheme = dsn.find("://");
  if (scheme != std::string_view::npos) {
    const std::size_t start = scheme + 3;
    query = dsn.find('?', start);
    std::size_t at = query == std::string_view::npos ? query : dsn.rfind('@', query - 1);
    if (at == std::string_view::npos || at < start) {
      at = dsn.rfind('@');  // a '?' in the password
    }
    if (at != std::string_view::npos && at >= start) {
      if (const std::size_t colon = dsn.find(':', start); colon < at) {
        source.spans.emplace_back(colon + 1, at);
      }
    }
  }
  // Keywords holding "password", in the key=value form or the URI's query.
  const std::string lower = lowered(dsn);
  for (std::size_t at = lower.find("password"); at != std::string::npos;
       at = lower.find("password", at + 1)) {
    std::size_t i = at + 8;
    while (i < dsn.size() && is_space(dsn[i])) {
      ++i;
    }
    if (i < dsn.size() && dsn[i] == '=') {
      ++i;
    } else if (i == at + 8 || i >= dsn.size() || scheme != std::string_view::npos) {
      continue;  // a "password" that is no keyword; "password Hunter2" lacks its '=' only
    }
    while (i < dsn.size() && is_space(dsn[i])) {
      ++i;
    }
    if (i < dsn.size() && dsn[i] == '\'') {
      std::size_t end = i + 1;
      while (end < dsn.size() && dsn[end] != '\'') {
        end += dsn[end] == '\\' ? 2 : 1;
      }
      end = std::min(end, dsn.size());
      source.spans.emplace_back(i + 1, end);
      add(unescaped(dsn.substr(i + 1, end - i - 1)));
    } else if (query != std::string_view::npos && i > query) {
      const std::size_t end = std::min(dsn.find('&', i), dsn.size());
      source.spans.emplace_back(i, end);
    } else {
      const std::size_t end = keyword_value_end(dsn, i);
      source.spans.emplace_back(i, end);
      std::size_t token = i;  // what libpq takes for the value: up to the first space
      while (token < end && !is_space(dsn[token])) {
        ++token;
      }
      add(dsn.substr(i, token - i));
    }
  }
  // What libpq reads, when it can: the values its own parser finds.
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(
      PQconninfoParse(source.text.c_str(), &error), &PQconninfoFree);
  PQfreemem(error);
  for (const PQconninfoOption* o = options.get(); o != nullptr && o->keyword != nullptr; ++o) {
    if (o->val != nullptr && is_secret(*o)) {
      add(o->val);
      add(percent_encoded(o->val));
    }
  }
  add_source(std::move(source));
}

void Secrets::add_kafka_properties(const std::map<std::string, std::string>& properties) {
  for (const auto& [key, value] : properties) {
    const std::string name = lowered(key);
    if (name.find("password") != std::string::npos || name.find("secret") != std::string::npos ||
        name == "ssl.key.pem") {
      add(value);
    } else if (name == "sasl.oauthbearer.config") {
      // name=value pairs (principal, scope, lifeSeconds, extension_*): librdkafka quotes the
      // config from the pair it cannot read on. Every value but the settings that are no secret.
      add(value);
      std::size_t i = 0;
      while (i < value.size()) {
        const std::size_t end = std::min(value.find(' ', i), value.size());
        const std::string_view pair = std::string_view(value).substr(i, end - i);
        if (const std::size_t eq = pair.find('='); eq != std::string_view::npos) {
          const std::string_view setting = pair.substr(0, eq);
          if (setting != "principal" && setting != "scope" && setting != "lifeSeconds" &&
              setting != "principalClaimName" && setting != "scopeClaimName") {
            add(pair);
            add(pair.substr(eq + 1));
          }
        }
        i = end + 1;
      }
    }
  }
}

bool Secrets::merge(const Secrets& other) {
  const std::size_t literals = literals_.size();
  const std::size_t sources = sources_.size();
  for (const std::string& s : other.literals_) {
    add(s);
  }
  for (const Source& s : other.sources_) {
    if (std::none_of(sources_.begin(), sources_.end(),
                     [&](const Source& mine) { return mine.text == s.text; })) {
      sources_.push_back(s);
    }
  }
  return literals_.size() != literals || sources_.size() != sources;
}

bool Secrets::covers(std::string_view fragment) const {
  if (fragment.empty()) {
    return false;
  }
  for (const std::string& secret : literals_) {
    if (fragment.find(secret) != std::string_view::npos) {
      return true;
    }
  }
  // A quoted piece shorter than this that is no whole secret gives next to nothing away, and
  // such pieces are everywhere: every `le="1"` of /metrics is one of a password with a 1 in it.
  if (fragment.size() < kShortestSecretPiece) {
    return false;
  }
  for (const Source& source : sources_) {
    if (occurrence_overlaps(source.text, {}, fragment, source.spans) ||
        occurrence_overlaps(source.decoded, source.decoded_at, fragment, source.spans)) {
      return true;
    }
  }
  return false;
}

std::string redact(std::string_view text, const Secrets& secrets) {
  // Quoted fragments first, whole: a fragment of a malformed DSN may hold only part of the
  // password, which no literal matches.
  std::string out;
  std::size_t copied = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '"' && text[i] != '\'') {
      continue;
    }
    const std::size_t close = text.find(text[i], i + 1);
    if (close == std::string_view::npos || !secrets.covers(text.substr(i + 1, close - i - 1))) {
      continue;  // the next quote may open the fragment that matters
    }
    out.append(text.substr(copied, i + 1 - copied));
    out.append(kShown);
    copied = close;
    i = close;
  }
  out.append(text.substr(copied));
  for (const std::string& secret : secrets.literals()) {
    replace_all(out, secret);
  }
  redact_userinfo(out);
  redact_secret_keys(out);
  return out;
}

void remember_secrets(const Secrets& found) {
  std::lock_guard lock(g_mu);
  auto next = std::make_shared<Secrets>(*g_secrets);
  if (next->merge(found)) {
    g_secrets = std::move(next);
  }
}

std::string redact(std::string_view text) {
  std::shared_ptr<const Secrets> secrets;
  {
    std::lock_guard lock(g_mu);
    secrets = g_secrets;
  }
  return redact(text, *secrets);
}

std::string redact_dsn(std::string_view dsn) {
  // libpq's own parser, so that the result agrees with what libpq connects with
  // whatever the quoting (a regex stops at an escaped quote and leaks the rest).
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(std::string(dsn).c_str(), &error);
  if (options == nullptr) {
    // libpq's message quotes the text it choked on, which may be the password.
    PQfreemem(error);
    return "(connection string not shown: libpq cannot parse it)";
  }
  std::string out;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) {
      continue;  // PQconninfoParse reports only what the string sets
    }
    if (!out.empty()) {
      out.push_back(' ');
    }
    out += o->keyword;
    out += '=';
    out += is_secret(*o) ? "***" : conninfo_value(o->val);
  }
  PQconninfoFree(options);
  return out;
}

}  // namespace outbox
