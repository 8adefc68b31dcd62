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

echo "== build ($build, Release)" >&2
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target cdc_compare outbox-operator -j2 >&2

echo "== Kafka Connect + Debezium jars" >&2
lib=$("$repo/bench/debezium/fetch.sh")

was_up=0
[ -f "$TESTBED_STATE/env" ] && was_up=1
echo "== test bed ($TESTBED_STATE)" >&2
if ! env_file=$("$repo/scripts/testbed/up.sh" pg kafka | tail -n1) || [ ! -f "$env_file" ]; then
  echo "compare: the test bed did not start (see the messages above); nothing was measured" >&2
  exit 1
fi
# shellcheck disable=SC1090
source "$env_file"
# shellcheck disable=SC2317  # invoked by the EXIT trap
stop_testbed() {
  if [ "$was_up" -eq 0 ] && [ "$keep" -eq 0 ]; then
    "$repo/scripts/testbed/down.sh" >&2 || true
  fi
}
trap stop_testbed EXIT
# The server's pid: the first line of postmaster.pid in its data directory.
postmaster=$(head -n1 "$(cat "$TESTBED_STATE/pg/pgroot")/data/postmaster.pid")

out=$build/bench/compare-last-run.txt
logs=$build/bench/compare-logs
mkdir -p "$logs"
{
  echo "# cdc_compare run, $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(free -g | awk '/^Mem:/ {print $2}') GB RAM, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# busiest other processes at start (%CPU, command):"
  ps -eo pcpu=,comm= --sort=-pcpu | head -n 6 | sed 's/^/#   /'
  echo "# command: $build/bench/cdc_compare --rounds $rounds ${args[*]}"
} | tee "$out"
start=$(date +%s)
set +e
"$build/bench/cdc_compare" --rounds "$rounds" --debezium-lib "$lib" --java "$(command -v java)" \
  --log4j-config "$repo/scripts/testbed/kafka/log4j2.xml" --postmaster-pid "$postmaster" \
  --log-dir "$logs" "${args[@]}" 2>&1 | tee -a "$out"
rc=${PIPESTATUS[0]}
set -e
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); wall time $(( $(date +%s) - start )) s" | tee -a "$out"
exit "$rc"
