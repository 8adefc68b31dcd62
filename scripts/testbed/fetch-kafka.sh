#!/usr/bin/env bash
# Lays out a Kafka broker (KRaft) classpath from Maven Central jars into
# $TESTBED_CACHE/kafka-$KAFKA_VERSION/lib and prints that directory.
# Idempotent: returns at once when the stamp matches this pom and these versions.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
maven_lib "$TESTBED_CACHE/kafka-$KAFKA_VERSION" "$here/kafka/pom.xml" "Kafka $KAFKA_VERSION" \
  "$KAFKA_VERSION $LOG4J_VERSION $SLF4J_VERSION" "kafka_2.13-$KAFKA_VERSION.jar" -- \
  -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$LOG4J_VERSION" -Dslf4j.version="$SLF4J_VERSION"
