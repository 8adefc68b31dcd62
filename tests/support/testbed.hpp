#pragma once

#include <string>

// Access to the real services that scripts/testbed/up.sh started. Integration and
// e2e tests fail (not skip) when a service they need was not provided: a green run
// must mean the behaviour was exercised.
namespace outbox::testbed {

// Value of an environment variable the test bed exports; fails the test if unset.
std::string require_env(const char* name);

std::string postgres_dsn();  // OUTBOX_TEST_PG_DSN
// OUTBOX_TEST_PG2_DSN: a second PostgreSQL cluster (`up.sh pg2`), initdb'ed on its own (another
// system identifier, transaction ids that start low), where tests move a database to.
std::string postgres2_dsn();
// OUTBOX_TEST_PG_BIN: the directory of the servers' client tools (pg_dump, pg_restore, psql).
std::string postgres_bin();
std::string kafka_bootstrap();  // OUTBOX_TEST_KAFKA_BOOTSTRAP
// OUTBOX_TEST_KAFKA3_BOOTSTRAP (the 3-node cluster, `up.sh kafka3`), or "" when unset: the
// failover tests skip then, saying so. scripts/test.sh always starts it.
std::string kafka3_bootstrap();
std::string kubeconfig_path();  // OUTBOX_TEST_KUBECONFIG (admin, client certificate)

// Runs scripts/testbed/ctl.sh <service> <action> (service: pg, pg2, kafka, kube, kafka3 or
// one of its nodes kafka3-1..3; action: start, stop, restart, kill9). Same ports as
// before, so clients can reconnect.
void control(const std::string& service, const std::string& action);

// A name unique to this process and call, for tables, topics and namespaces.
std::string unique_name(const std::string& prefix);

}  // namespace outbox::testbed
