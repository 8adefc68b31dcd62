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
dest="$TESTBED_CACHE/debezium-$DEBEZIUM_VERSION-kafka-$KAFKA_VERSION"
lib="$dest/lib"
stamp="$dest/.complete"
want="$(cat "$here/pom.xml" <(echo "$KAFKA_VERSION $DEBEZIUM_VERSION $LOG4J_VERSION $SLF4J_VERSION") | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then echo "$lib"; exit 0; fi

command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
mkdir -p "$dest"
exec 9>"$dest/.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then echo "$lib"; exit 0; fi
log "fetching Kafka Connect $KAFKA_VERSION + Debezium $DEBEZIUM_VERSION jars from Maven Central into $lib"
work="$dest/build"
rm -rf "$lib" "$work" && mkdir -p "$work"
cp "$here/pom.xml" "$work/pom.xml"
mvnlog="$dest/mvn.log"
if ! mvn -B -Dstyle.color=never -f "$work/pom.xml" package \
      -Dkafka.version="$KAFKA_VERSION" -Ddebezium.version="$DEBEZIUM_VERSION" \
      -Dlog4j.version="$LOG4J_VERSION" -Dslf4j.version="$SLF4J_VERSION" \
      -Dlib.dir="$lib" >"$mvnlog" 2>&1; then
  tail -n 30 "$mvnlog" >&2
  die "maven failed; log: $mvnlog"
fi
ls "$lib"/connect-runtime-"$KAFKA_VERSION".jar "$lib"/debezium-connector-postgres-"$DEBEZIUM_VERSION".jar \
  >/dev/null 2>&1 || die "connect-runtime or the Debezium connector missing in $lib; log: $mvnlog"
echo "$want" >"$stamp"
echo "$lib"
