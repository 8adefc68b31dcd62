#pragma once

#include <pqxx/pqxx>

#include <string>

// The relay's statements run hundreds of times a second, and their plans must not depend on
// the table's statistics: a backlog inserted in bulk before autovacuum has analyzed the table
// would otherwise be read with a bitmap or sequential scan plus a sort of every pending row per
// claim (docs/benchmarks.md, phase u). Both table modes set their relay sessions up this way.
namespace outbox {

// Session settings under which the cheapest plan left for an ordered claim walks its index in
// order and stops at the limit, whatever the statistics (sorts, bitmap and sequential scans are
// priced out, not forbidden: a statement with no other way still runs), with no JIT (the costs
// this gives the plans priced out would switch it on for a millisecond query), and one generic
// plan per prepared statement (planning the claims cost the database more than running them;
// the sessions run nothing whose plan should follow its parameters' values).
void use_fixed_plans(pqxx::connection& conn);

// Prepares `sql` on `conn` (lazily, at its first use) under a name made from its text, so two
// readers of one table on one connection share it. Returns the name for exec_prepared.
std::string prepared(pqxx::connection& conn, const std::string& sql);

}  // namespace outbox
