#!/usr/bin/env bash
# Lays out a Kafka broker (KRaft) classpath from Maven Central jars into
# $TESTBED_CACHE/kafka-$KAFKA_VERSION/lib and prints that directory.
# Idempotent: returns at once when the stamp matches this pom and these versions.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
dest="$TESTBED_CACHE/kafka-$KAFKA_VERSION"
lib="$dest/lib"
stamp="$dest/.complete"
want="$(cat "$here/kafka/pom.xml" <(echo "$KAFKA_VERSION $LOG4J_VERSION $SLF4J_VERSION") | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then echo "$lib"; exit 0; fi

command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
mkdir -p "$dest"
# One fetch at a time; a caller that waited finds the stamp written.
exec 9>"$dest/.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then echo "$lib"; exit 0; fi
log "fetching Kafka $KAFKA_VERSION jars from Maven Central into $lib"
# Build in the cache, not the work tree, so no target/ appears in the repo.
work="$dest/build"
rm -rf "$lib" "$work" && mkdir -p "$work"
cp "$here/kafka/pom.xml" "$work/pom.xml"
mvnlog="$dest/mvn.log"
if ! mvn -B -Dstyle.color=never -f "$work/pom.xml" package \
      -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$LOG4J_VERSION" \
      -Dslf4j.version="$SLF4J_VERSION" -Dlib.dir="$lib" >"$mvnlog" 2>&1; then
  tail -n 30 "$mvnlog" >&2
  die "maven failed; log: $mvnlog"
fi
ls "$lib"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || die "no kafka_2.13 jar in $lib; log: $mvnlog"
echo "$want" > "$stamp"
echo "$lib"
