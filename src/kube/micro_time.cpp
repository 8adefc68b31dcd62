#include "kube/micro_time.hpp"

#include <cstdio>
#include <ctime>

namespace outbox::kube {

std::string format_micro_time(std::chrono::system_clock::time_point time) {
  using namespace std::chrono;
  auto micros = duration_cast<microseconds>(time.time_since_epoch()).count();
  auto secs = micros / 1'000'000;
  auto frac = micros % 1'000'000;
  if (frac < 0) {  // times before 1970
    frac += 1'000'000;
    secs -= 1;
  }
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(frac));
  return buf;
}

namespace {

bool digits(std::string_view text, size_t pos, size_t count, int& out) {
  if (pos + count > text.size()) {
    return false;
  }
  out = 0;
  for (size_t i = pos; i < pos + count; ++i) {
    if (text[i] < '0' || text[i] > '9') {
      return false;
    }
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

// "YYYY-MM-DDTHH:MM:SS" (or with a lower-case t) at the start of `text`, each field in range;
// false for anything else, or nothing after it.
bool parse_date_time(std::string_view text, std::tm& tm) {
  int year, month, day, hour, minute, second;
  if (!digits(text, 0, 4, year) || text.size() < 20 || text[4] != '-' ||
      !digits(text, 5, 2, month) || text[7] != '-' || !digits(text, 8, 2, day) ||
      (text[10] != 'T' && text[10] != 't') || !digits(text, 11, 2, hour) || text[13] != ':' ||
      !digits(text, 14, 2, minute) || text[16] != ':' || !digits(text, 17, 2, second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return true;
}

// An optional fraction of a second at `pos`: '.' and 1 to 9 digits, kept to the microsecond.
// Moves `pos` past it; false if malformed.
bool parse_fraction(std::string_view text, size_t& pos, long long& micros) {
  micros = 0;
  if (pos >= text.size() || text[pos] != '.') {
    return true;
  }
  ++pos;
  int count = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (count < 6) {
      micros = micros * 10 + (text[pos] - '0');
    }
    ++count;
    ++pos;
  }
  if (count == 0 || count > 9) {
    return false;
  }
  for (int i = count; i < 6; ++i) {
    micros *= 10;
  }
  return true;
}

// The UTC offset at `pos`: 'Z' (or 'z') or "+HH:MM" / "-HH:MM", in seconds east of UTC.
// Moves `pos` past it; false if there is none.
bool parse_offset(std::string_view text, size_t& pos, long long& offset_seconds) {
  offset_seconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
    return true;
  }
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh, om;
    if (!digits(text, pos + 1, 2, oh) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !digits(text, pos + 4, 2, om)) {
      return false;
    }
    offset_seconds = (oh * 3600LL + om * 60LL) * (text[pos] == '+' ? 1 : -1);
    pos += 6;
    return true;
  }
  return false;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_micro_time(std::string_view text) {
  std::tm tm{};
  size_t pos = 19;  // past the date and time
  long long micros = 0;
  long long offset_seconds = 0;
  if (!parse_date_time(text, tm) || !parse_fraction(text, pos, micros) ||
      !parse_offset(text, pos, offset_seconds) || pos != text.size()) {
    return std::nullopt;
  }
  auto seconds = static_cast<long long>(timegm(&tm)) - offset_seconds;
  return std::chrono::system_clock::time_point(
      std::chrono::microseconds(seconds * 1'000'000 + micros));
}

}  // namespace outbox::kube
