#pragma once

namespace outbox {

// The value of one hexadecimal digit of a percent-encoding (%2F), or -1 for any other
// character. Shared by the query decoding of the health server and the DSN redaction.
inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace outbox
