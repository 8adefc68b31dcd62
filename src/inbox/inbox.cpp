#include "inbox/inbox.hpp"

#include <regex>

namespace outbox::inbox {

Inbox::Inbox(TableName table, std::string consumer)
    : table_(std::move(table)), consumer_(std::move(consumer)) {}

void Inbox::migrate(pqxx::connection& conn) const {
  pqxx::work tx(conn);
  tx.exec("CREATE TABLE IF NOT EXISTS " + table_.quoted() +
          " (consumer text NOT NULL, event_id uuid NOT NULL, processed_at timestamptz NOT NULL "
          "DEFAULT now(), PRIMARY KEY (consumer, event_id))");
  tx.commit();
}

bool Inbox::record(pqxx::transaction_base& tx, const std::string& event_id) const {
  static const std::regex uuid(
      "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
  if (!std::regex_match(event_id, uuid)) {
    throw std::invalid_argument("event_id \"" + event_id + "\" is not a UUID");
  }
  // ON CONFLICT DO NOTHING: a duplicate is a normal outcome, not an aborted transaction.
  auto r = tx.exec_params("INSERT INTO " + table_.quoted() +
                              " (consumer, event_id) VALUES ($1, $2::uuid) ON CONFLICT DO NOTHING",
                          consumer_, event_id);
  return r.affected_rows() == 1;
}

}  // namespace outbox::inbox
