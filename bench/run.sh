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

echo "== build ($build, Release)" >&2
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target relay_bench outbox-operator -j2 >&2

was_up=0
[ -f "$TESTBED_STATE/env" ] && was_up=1
echo "== test bed ($TESTBED_STATE)" >&2
# up.sh names the failing service and its log; stop here rather than source "".
if ! env_file=$("$repo/scripts/testbed/up.sh" pg kafka | tail -n1) || [ ! -f "$env_file" ]; then
  echo "bench: the test bed did not start (see the messages above); nothing was measured" >&2
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

out=$build/bench/last-run.txt
mkdir -p "$(dirname "$out")"
{
  echo "# relay_bench run, $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(free -g | awk '/^Mem:/ {print $2}') GB RAM, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# busiest other processes at start (%CPU, command):"
  ps -eo pcpu=,comm= --sort=-pcpu | head -n 6 | sed 's/^/#   /'
  echo "# command: $build/bench/relay_bench ${args[*]}"
} | tee "$out"
start=$(date +%s)
set +e
"$build/bench/relay_bench" --log-dir "$build/bench" "${args[@]}" 2>&1 | tee -a "$out"
rc=${PIPESTATUS[0]}
set -e
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); wall time $(( $(date +%s) - start )) s" | tee -a "$out"
exit "$rc"
