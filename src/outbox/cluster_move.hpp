#pragma once

#include <pqxx/pqxx>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outbox/table.hpp"

namespace outbox {

// What a log-mode table does when it finds itself on another PostgreSQL cluster than the one
// its progress was recorded on (a dump and restore, a logical-replication cutover).
// Positions are transaction ids, and the new cluster's are unrelated to the old one's, so new
// rows would sort among or below the restored ones: below the progress they would count as
// sent, unpublished. Rebase (the default): the first session that notices, a writer's insert
// or a relay's start, raises the table's position offset so that every new row sorts after
// every restored one, records the new cluster and the move, and carries on; no write is
// refused and nothing is lost. Refuse: inserts fail and relays stop, saying why, until a
// person runs `migrate --rebase` (for teams that want a human gate).
enum class ClusterMovePolicy { kRebase, kRefuse };
std::string policy_name(ClusterMovePolicy policy);  // "rebase" or "refuse"
// Throws std::invalid_argument for anything but "rebase" or "refuse".
ClusterMovePolicy parse_policy(const std::string& text);

// This cluster's identity as SQL: its system identifier, as text.
inline constexpr const char* kClusterIdSql =
    "(SELECT system_identifier::text FROM pg_control_system())";

// The statements that make `t`'s position function and its rebase function (schema version 6):
// positions continue after `offset` on the cluster whose system identifier is `cluster`, with
// `policy` applied on a session's first insert when the cluster is another or its ids are
// behind the progress.
std::vector<std::string> cluster_move_functions(const TableName& t, std::int64_t offset,
                                                const std::string& cluster,
                                                ClusterMovePolicy policy);

// Makes `t`'s id column draw from its sequence only after the session's move check
// (<table>_next_id() and the column's default). Returns what it did for migrate's list (the
// default set, or why not), nothing when the default was set already. In `tx`: migrate's,
// holding the table's migrate lock.
std::optional<std::string> draw_ids_after_the_move_check(pqxx::dbtransaction& tx,
                                                         const TableName& t);

// What a rebase did, whoever ran it (`migrate --rebase`, a relay, a writer's first insert).
struct RebaseResult {
  std::string recorded_cluster;  // the system identifier recorded before ("" if none)
  std::string cluster;           // this cluster's, recorded now
  std::int64_t offset_before = 0;
  std::int64_t offset = 0;
  bool moved() const { return offset != offset_before || recorded_cluster != cluster; }
  std::string text() const;
};

// Runs `t`'s rebase function in `tx` (schema version 6): when the table's recorded cluster is
// not this one, or this cluster's ids are behind its progress, records this cluster and raises
// the position offset so that every row inserted from now on sorts after every row, progress
// and retry already in the table; changes no row and no progress. Idempotent; concurrent
// callers serialise on the table's migrate lock, and the later ones find it done.
RebaseResult run_rebase(pqxx::transaction_base& tx, const TableName& t);

// The move a rebase recorded last (outbox_meta.moved_from/moved_to/moved_at), for relays to
// report whoever rebased; empty `to` when the table never moved.
struct RecordedMove {
  std::string from, to;     // the clusters' system identifiers
  std::string at;           // when, RFC 3339 in UTC
  std::int64_t offset = 0;  // the position offset since
};
RecordedMove recorded_move(pqxx::transaction_base& tx, const TableName& t);

}  // namespace outbox
