#pragma once

#include <string>
#include <string_view>

namespace outbox {

// A validated outbox table name, optionally schema-qualified. Identifiers are
// restricted to lower-case letters, digits and underscores so that they can be
// quoted safely; they are never spliced into SQL unvalidated.
class TableName {
 public:
  // Throws std::invalid_argument naming `what` and what is wrong with `text`.
  static TableName parse(std::string_view text, std::string_view what = "table name");

  const std::string& schema() const { return schema_; }
  const std::string& table() const { return table_; }
  // "schema"."table", ready for SQL.
  std::string quoted() const;
  // "schema"."table<suffix>": objects that belong to the table (functions, triggers).
  std::string quoted_with_suffix(std::string_view suffix) const;
  // schema.table, for logs, metrics and the NOTIFY channel.
  std::string plain() const { return schema_ + "." + table_; }
  // The LISTEN/NOTIFY channel the insert trigger signals.
  // (Schema left out to stay under the 63-byte channel limit; a shared name only
  // causes a spurious wake-up.)
  std::string notify_channel() const { return "outbox_" + table_; }

 private:
  TableName(std::string schema, std::string table)
      : schema_(std::move(schema)), table_(std::move(table)) {}
  std::string schema_;
  std::string table_;
};

// Validates one identifier; throws std::invalid_argument that names `what`.
void validate_identifier(std::string_view text, std::string_view what);

// Maximum identifier length: PostgreSQL's 63 less room for the longest suffix
// ("_enqueue") that migrate appends for the table's own objects.
inline constexpr std::size_t kMaxTableNameLength = 48;

}  // namespace outbox
