#!/usr/bin/env bash
# The test bed formats Kafka's storage with a random cluster id; one id in 64 starts with
# '-' (seen: -1V_QUEkpYgZVYGCRcON-A), which the storage tool's parser took for a flag when
# the id was a separate argument. Formats with exactly such an id and checks it was kept.
# shellcheck source-path=SCRIPTDIR source=../../scripts/testbed/lib.sh
source "$(dirname "$0")/../../scripts/testbed/lib.sh"
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
lib=$("$TESTBED_DIR/fetch-kafka.sh")
cid=-1V_QUEkpYgZVYGCRcON-A
cat >"$dir/server.properties" <<EOC
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9
listeners=PLAINTEXT://127.0.0.1:9,CONTROLLER://127.0.0.1:10
controller.listener.names=CONTROLLER
log.dirs=$dir/data
EOC
kafka_format "$lib" "$cid" "$dir/server.properties" "$dir/format.log" ||
  { cat "$dir/format.log"; echo "FAIL: formatting with cluster id $cid failed"; exit 1; }
grep -qx "cluster.id=$cid" "$dir/data/meta.properties" ||
  { cat "$dir/data/meta.properties"; echo "FAIL: meta.properties does not hold cluster id $cid"; exit 1; }
echo "ok: storage formatted with cluster id $cid"
