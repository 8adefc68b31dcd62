#include "points_service/points_service.hpp"

#include <nlohmann/json.hpp>

namespace example {

PointsService::PointsService(std::string dsn)
    : conn_(dsn), inbox_(outbox::TableName::parse("public.points_inbox"), "points-service") {}

void PointsService::migrate() {
  inbox_.migrate(conn_);
  pqxx::work tx(conn_);
  // Replicas starting at once would race on CREATE TABLE IF NOT EXISTS (PostgreSQL refuses the
  // second with a duplicate key): one at a time, under a lock held to the commit.
  tx.exec("SELECT pg_advisory_xact_lock(hashtext('points-service-schema'))");
  tx.exec(
      "CREATE TABLE IF NOT EXISTS user_points (user_id text PRIMARY KEY, points bigint NOT NULL)");
  tx.commit();
}

PointsService::Outcome PointsService::handle(const std::string& event_id,
                                             const std::string& biz_type,
                                             const std::string& payload, const std::string& key,
                                             std::optional<std::int64_t> seq) {
  if (biz_type != "ORDER_PAID") {
    return Outcome::kIgnored;
  }
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(payload);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("event " + event_id + ": payload is not JSON: " + e.what());
  }
  if (!body.contains("user") || !body["user"].is_string() || !body.contains("amount") ||
      !body["amount"].is_number_integer()) {
    throw std::invalid_argument("event " + event_id +
                                ": payload needs \"user\" (string) and \"amount\" (integer)");
  }
  pqxx::work tx(conn_);
  // The transaction of a duplicate or a stale event commits the inbox's record only.
  if (!seq) {
    if (!inbox_.record(tx, event_id)) {
      return Outcome::kDuplicate;  // the transaction ends unused: nothing to undo
    }
  } else if (const auto o = inbox_.apply(tx, event_id, key, *seq);
             o != outbox::inbox::Inbox::Outcome::kNew) {
    tx.commit();
    return o == outbox::inbox::Inbox::Outcome::kStale ? Outcome::kStale : Outcome::kDuplicate;
  }
  tx.exec_params(
      "INSERT INTO user_points (user_id, points) VALUES ($1, $2) "
      "ON CONFLICT (user_id) DO UPDATE SET points = user_points.points + EXCLUDED.points",
      body["user"].get<std::string>(), body["amount"].get<std::int64_t>() / 10);
  tx.commit();
  return Outcome::kApplied;
}

std::int64_t PointsService::points(const std::string& user) {
  pqxx::nontransaction tx(conn_);
  auto r = tx.exec_params("SELECT points FROM user_points WHERE user_id = $1", user);
  return r.empty() ? 0 : r[0][0].as<std::int64_t>();
}

}  // namespace example
