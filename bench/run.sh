#!/usr/bin/env bash
# bench/run.sh [--quick] [--keep-testbed] [-- RELAY_BENCH_ARGS...]
#
# Builds relay_bench and outbox-operator (Release), brings up a private test bed
# (PostgreSQL + Kafka, state in $TESTBED_STATE, default <repo>/.testbed/bench),
# runs every benchmark phase in one go and prints the results table. The whole
# output is also kept in $BUILD_DIR/bench/last-run.txt.
#
#   --quick          small sizes (a smoke test of every phase, ~2 min)
#   --keep-testbed   leave the test bed running (the next run then reuses the
#                    10M-row table of phase (f) instead of filling it again)
#   -- ARGS          passed to relay_bench (see relay_bench --help), e.g.
#                    -- --phases abc --events 100000
#
# A test bed that was already up is used as it is and left running.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build-bench}
export TESTBED_STATE=${TESTBED_STATE:-$repo/.testbed/bench}
# shellcheck source-path=SCRIPTDIR
source "$repo/bench/lib.sh"

quick=0
keep=0
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --keep-testbed) keep=1 ;;
    --) shift; args+=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$quick" -eq 1 ]; then
  args=(--events 20000 --breakdown-events 20000 --naive-events 500 --latency-seconds 6
        --claim-sent-rows 200000 --claim-backlog 20000 --claim-iterations 100
        --json-rows 10000 --drain-events 20000 "${args[@]}")
fi

bench_build relay_bench outbox-operator
bench_testbed bench

out=$build/bench/last-run.txt
mkdir -p "$(dirname "$out")"
bench_header relay_bench "$build/bench/relay_bench ${args[*]}" | tee "$out"
start=$(date +%s)
set +e
"$build/bench/relay_bench" --log-dir "$build/bench" "${args[@]}" 2>&1 | tee -a "$out"
rc=${PIPESTATUS[0]}
set -e
bench_footer | tee -a "$out"
exit "$rc"
