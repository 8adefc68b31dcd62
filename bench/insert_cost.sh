#!/usr/bin/env bash
# bench/insert_cost.sh [--rounds N] [--rows N] [--commits N] [--keep-testbed]
#
# What a log-mode table's position (the xid column's default, <table>_position(): a
# snapshot per row, and the cluster-move guard at a session's first insert) costs the
# services' inserts, against the default it replaced (the transaction's own id,
# pg_current_xact_id()). Two log tables made by `outbox-operator migrate --mode log`, one
# given the old default back; alternating rounds on one test bed (PostgreSQL and Kafka,
# state in $TESTBED_STATE, default <repo>/.testbed/compare), each timing, by psql's clock:
#   bulk:    one INSERT ... SELECT of --rows rows (the per-row cost, no commit in it);
#   commits: --commits one-row transactions through <table>_enqueue, in one session.
# Prints every round and min/median/max per table and measure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build-bench}
export TESTBED_STATE=${TESTBED_STATE:-$repo/.testbed/compare}
# shellcheck source-path=SCRIPTDIR
source "$repo/bench/lib.sh"

rounds=5 rows=200000 commits=5000 keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --rows) rows=$2; shift ;;
    --commits) commits=$2; shift ;;
    --keep-testbed) keep=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "insert_cost.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

bench_build outbox-operator
bench_testbed insert_cost
start=$(date +%s)
bench_header insert_cost "$0 --rounds $rounds --rows $rows --commits $commits"

run=$$
position=bench_position_$run   # the default migrate makes
own_xid=bench_own_xid_$run     # the default before schema version 5
for t in "$position" "$own_xid"; do
  OUTBOX_DSN=$OUTBOX_TEST_PG_DSN "$build/src/outbox-operator" migrate --table "public.$t" \
    --mode log >/dev/null
done
sql() { psql -X -q -v ON_ERROR_STOP=1 "$OUTBOX_TEST_PG_DSN" "$@"; }
sql -c "ALTER TABLE public.$own_xid ALTER COLUMN xid SET DEFAULT pg_current_xact_id()"
trap 'sql -c "DROP TABLE public.$position, public.$own_xid CASCADE" >/dev/null 2>&1 || true; bench_stop_testbed' EXIT

# ms TABLE KIND: one timed round, in milliseconds.
ms() {
  local body
  if [ "$2" = bulk ]; then
    body="INSERT INTO public.$1 (biz_type, biz_id, payload) SELECT 'order', 'k' || (i % 1000), jsonb_build_object('i', i) FROM generate_series(1, $rows) i;"
  else
    body=$(for _ in $(seq "$commits"); do echo "SELECT public.${1}_enqueue('order', 'k', '{}');"; done)
  fi
  { printf '%s\n' '\timing on'; echo "$body"; } | sql | awk '/^Time:/ {s += $2} END {printf "%.0f\n", s}'
}

declare -A results
for r in $(seq "$rounds"); do
  for kind in bulk commits; do
    # Alternate which table goes first, so drift in the machine's load hits both alike.
    if [ $((r % 2)) -eq 1 ]; then order=("$position" "$own_xid"); else order=("$own_xid" "$position"); fi
    for t in "${order[@]}"; do
      v=$(ms "$t" "$kind")
      results[$t.$kind]+="$v "
      echo "round $r $kind ${t%_"$run"}: $v ms"
    done
  done
done
summary() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {printf "min %d, median %d, max %d ms", a[1], a[int((NR+1)/2)], a[NR]}'; }
for kind in bulk commits; do
  what=$([ "$kind" = bulk ] && echo "$rows rows in one INSERT" || echo "$commits one-row commits")
  for t in "$position" "$own_xid"; do
    echo "$kind ($what), ${t%_"$run"}: $(echo "${results[$t.$kind]}" | summary)"
  done
done
bench_footer
