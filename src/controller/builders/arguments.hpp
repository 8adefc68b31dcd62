#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/spec.hpp"
#include "controller/builders/common.hpp"

// The command-line arguments the workloads share: spec strings escaped against Kubernetes'
// variable expansion, the table (and an adopted table's columns), the publishing rules of
// `relay` and `compensate` with the flags of the mounted Kafka credentials, and the OutboxRelay
// every pod reports into.
namespace outbox::controller::builders {

// Kubernetes expands $(VAR) in container args from the container's environment: a spec
// string must reach the process as written, whatever the environment holds now or later.
// `$$` is Kubernetes' escape for a literal `$`, so every `$` of a spec string is doubled.
std::string literal(std::string_view spec_text);

// `--name=value` with the value taken literally (see literal()).
std::string flag(std::string_view name, std::string_view spec_value);

// --table, and for an adopted table (spec.database.columns) one --column per role, defaults
// spelled out: every command then refuses a table adopted with other columns than the resource
// says. InvalidSpec for columns ColumnMap refuses.
std::vector<std::string> table_args(const api::OutboxRelaySpec& spec);

// Flags shared by `relay` and `compensate`: the table, Kafka (with the credentials' files, see
// kafka_mounts) and the publishing rules.
std::vector<std::string> publish_args(const api::OutboxRelaySpec& spec);

// --report-status=<namespace>/<name>: the relay and the jobs report into the OutboxRelay they
// were rendered from.
std::string report_status_arg(const RelayMeta& relay);

}  // namespace outbox::controller::builders
