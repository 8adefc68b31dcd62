#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox {

// Which columns of a table the relay did not create (an adopted table, see
// adopt.hpp) hold the event's fields. The defaults are the column names of
// Debezium's Outbox Event Router; createdAt and headers are optional (empty:
// not mapped, the copy takes now() and no headers).
struct ColumnMap {
  std::string event_id = "id";  // uuid
  std::string biz_type = "aggregatetype";
  std::string biz_id = "aggregateid";
  std::string payload = "payload";  // json or jsonb
  std::string created_at;           // timestamp or timestamptz
  std::string headers;              // json/jsonb object, or text of key=value lines

  // From "role=column" entries (roles: eventId, bizType, bizId, payload,
  // createdAt, headers); the roles not named keep their defaults. Throws
  // std::invalid_argument naming a bad entry, an unknown role or an identifier
  // that is not a plain lower-case SQL name.
  static ColumnMap parse(const std::vector<std::string>& entries);

  // (role, column) for every mapped role, in the order above.
  std::vector<std::pair<std::string, std::string>> entries() const;
  // "eventId=id bizType=aggregatetype ...": what --column would say.
  std::string describe() const;

  bool operator==(const ColumnMap&) const = default;
};

// The role names, in the order of entries().
const std::vector<std::string>& column_roles();

}  // namespace outbox
