#!/usr/bin/env bash
# kafka-run.sh MAIN-CLASS [ARGS...]: runs a Kafka tool class with the test bed's
# jars and quiet logging, e.g.
#   kafka-run.sh org.apache.kafka.tools.TopicCommand --bootstrap-server "$OUTBOX_TEST_KAFKA_BOOTSTRAP" --list
#   kafka-run.sh org.apache.kafka.tools.ConsoleProducer ... / org.apache.kafka.tools.consumer.ConsoleConsumer ...
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
[ $# -ge 1 ] || die "usage: $0 MAIN-CLASS [ARGS...]"
lib=$("$TESTBED_DIR/fetch-kafka.sh")
exec java -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$TESTBED_DIR/kafka/log4j2.xml" \
  -Dtestbed.log.level=WARN -cp "$lib/*" "$@"
