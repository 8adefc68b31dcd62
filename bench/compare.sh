#!/usr/bin/env bash
# bench/compare.sh [--rounds N] [--keep-testbed] [-- CDC_COMPARE_ARGS...]
#
# The relay binary (outbox-operator relay, default settings) and Debezium
# (Kafka Connect standalone + debezium-connector-postgres + the Outbox Event
# Router) side by side, one after the other, on one private test bed
# (PostgreSQL 15 with wal_level=logical + Kafka, state in $TESTBED_STATE,
# default <repo>/.testbed/compare): drain rate of 500,000 pre-inserted events,
# the relayer's CPU-seconds and peak RSS, PostgreSQL's CPU-seconds and WAL
# bytes during the drain, dead tuples afterwards. Prints one table per round;
# the whole output is kept in $BUILD_DIR/bench/compare-last-run.txt.
#
#   --rounds N       rounds, each runs both systems (default 3)
#   --keep-testbed   leave the test bed running
#   -- ARGS          passed to cdc_compare (see cdc_compare --help), e.g.
#                    -- --events 100000 --systems debezium,relay
#
# Jars: bench/debezium/fetch.sh (Maven Central, cached under the test bed cache).
# A test bed that was already up is used as it is and left running.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build-bench}
export TESTBED_STATE=${TESTBED_STATE:-$repo/.testbed/compare}
# shellcheck source-path=SCRIPTDIR
source "$repo/bench/lib.sh"

rounds=3
keep=0
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --keep-testbed) keep=1 ;;
    --) shift; args+=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

bench_build cdc_compare outbox-operator

echo "== Kafka Connect + Debezium jars" >&2
lib=$("$repo/bench/debezium/fetch.sh")

bench_testbed compare
# The server's pid: the first line of postmaster.pid in its data directory.
postmaster=$(head -n1 "$(cat "$TESTBED_STATE/pg/pgroot")/data/postmaster.pid")

out=$build/bench/compare-last-run.txt
logs=$build/bench/compare-logs
mkdir -p "$logs"
bench_header cdc_compare "$build/bench/cdc_compare --rounds $rounds ${args[*]}" | tee "$out"
start=$(date +%s)
set +e
"$build/bench/cdc_compare" --rounds "$rounds" --debezium-lib "$lib" --java "$(command -v java)" \
  --log4j-config "$repo/scripts/testbed/kafka/log4j2.xml" --postmaster-pid "$postmaster" \
  --log-dir "$logs" "${args[@]}" 2>&1 | tee -a "$out"
rc=${PIPESTATUS[0]}
set -e
bench_footer | tee -a "$out"
exit "$rc"
