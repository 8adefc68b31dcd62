#!/usr/bin/env bash
# bench/debezium/fetch.sh: lays out the classpath of Kafka Connect standalone (the
# test bed's Kafka version) with Debezium's PostgreSQL connector, from Maven Central,
# into $TESTBED_CACHE/debezium-$DEBEZIUM_VERSION-kafka-$KAFKA_VERSION/lib, and prints
# that directory. Idempotent: returns at once when the stamp matches this pom and
# these versions; concurrent callers wait for one fetch.
# shellcheck source-path=SCRIPTDIR source=../../scripts/testbed/lib.sh
source "$(dirname "$0")/../../scripts/testbed/lib.sh"
DEBEZIUM_VERSION="${DEBEZIUM_VERSION:-3.6.1.Final}"
here="$(cd "$(dirname "$0")" && pwd)"
maven_lib "$TESTBED_CACHE/debezium-$DEBEZIUM_VERSION-kafka-$KAFKA_VERSION" "$here/pom.xml" \
  "Kafka Connect $KAFKA_VERSION + Debezium $DEBEZIUM_VERSION" \
  "$KAFKA_VERSION $DEBEZIUM_VERSION $LOG4J_VERSION $SLF4J_VERSION" \
  "connect-runtime-$KAFKA_VERSION.jar" "debezium-connector-postgres-$DEBEZIUM_VERSION.jar" -- \
  -Dkafka.version="$KAFKA_VERSION" -Ddebezium.version="$DEBEZIUM_VERSION" \
  -Dlog4j.version="$LOG4J_VERSION" -Dslf4j.version="$SLF4J_VERSION"
