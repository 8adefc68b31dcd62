#include "outbox/column_map.hpp"

#include <stdexcept>

#include "outbox/table.hpp"

namespace outbox {
namespace {

using Member = std::string ColumnMap::*;

const std::vector<std::pair<std::string, Member>>& roles() {
  static const std::vector<std::pair<std::string, Member>> all = {
      {"eventId", &ColumnMap::event_id},     {"bizType", &ColumnMap::biz_type},
      {"bizId", &ColumnMap::biz_id},         {"payload", &ColumnMap::payload},
      {"createdAt", &ColumnMap::created_at}, {"headers", &ColumnMap::headers},
  };
  return all;
}

}  // namespace

const std::vector<std::string>& column_roles() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [name, member] : roles()) {
      v.push_back(name);
    }
    return v;
  }();
  return names;
}

ColumnMap ColumnMap::parse(const std::vector<std::string>& entries) {
  ColumnMap map;
  for (const auto& entry : entries) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("column mapping \"" + entry + "\" is not role=column");
    }
    const std::string role = entry.substr(0, eq);
    const std::string column = entry.substr(eq + 1);
    bool known = false;
    for (const auto& [name, member] : roles()) {
      if (name == role) {
        validate_identifier(column, "columns." + role);
        map.*member = column;
        known = true;
      }
    }
    if (!known) {
      std::string all;
      for (const auto& name : column_roles()) {
        all += (all.empty() ? "" : ", ") + name;
      }
      throw std::invalid_argument("column mapping \"" + entry + "\": unknown role \"" + role +
                                  "\" (roles: " + all + ")");
    }
  }
  for (const auto& [a, column_a] : map.entries()) {
    for (const auto& [b, column_b] : map.entries()) {
      if (a < b && column_a == column_b) {
        throw std::invalid_argument("columns." + a + " and columns." + b + " both name column " +
                                    column_a + ": every role needs its own column");
      }
    }
  }
  return map;
}

std::vector<std::pair<std::string, std::string>> ColumnMap::entries() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, member] : roles()) {
    if (!(this->*member).empty()) {
      out.emplace_back(name, this->*member);
    }
  }
  return out;
}

std::string ColumnMap::describe() const {
  std::string out;
  for (const auto& [role, column] : entries()) {
    out += (out.empty() ? "" : " ") + role + "=" + column;
  }
  return out;
}

}  // namespace outbox
