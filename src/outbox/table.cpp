#include "outbox/table.hpp"

#include <stdexcept>

namespace outbox {

void validate_identifier(std::string_view text, std::string_view what) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(what) + " \"" + std::string(text) + "\" " + why +
                                " (allowed: lower-case letters, digits and _, starting "
                                "with a letter or _, at most " +
                                std::to_string(kMaxTableNameLength) + " characters)");
  };
  if (text.empty()) {
    fail("is empty");
  }
  if (text.size() > kMaxTableNameLength) {
    fail("is too long");
  }
  if (!((text[0] >= 'a' && text[0] <= 'z') || text[0] == '_')) {
    fail("must start with a lower-case letter or _");
  }
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      fail("contains an invalid character");
    }
  }
}

TableName TableName::parse(std::string_view text, std::string_view what) {
  auto dot = text.find('.');
  std::string_view schema = "public";
  std::string_view table = text;
  if (dot != std::string_view::npos) {
    schema = text.substr(0, dot);
    table = text.substr(dot + 1);
    validate_identifier(schema, std::string(what) + " (schema part)");
  }
  validate_identifier(table, what);
  return TableName(std::string(schema), std::string(table));
}

std::string TableName::quoted() const {
  return "\"" + schema_ + "\".\"" + table_ + "\"";
}

std::string TableName::quoted_with_suffix(std::string_view suffix) const {
  return "\"" + schema_ + "\".\"" + table_ + std::string(suffix) + "\"";
}

}  // namespace outbox
