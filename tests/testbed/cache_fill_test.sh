#!/usr/bin/env bash
# scripts/cache.sh, the fill every cached test-bed entry goes through: fills started at once
# share one fill and all succeed; a fill killed half way, a failing fill and an entry damaged
# after it was sealed (a file gone, a file truncated) are never trusted and are repaired by
# the next call.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../scripts/cache.sh
source "$(dirname "$0")/../../scripts/cache.sh"
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
failures=0
check() { # check WHAT CMD...: prints ok/FAIL for CMD's status
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# A fill that takes a while, counts its runs and writes two files; FILL_FAIL makes it fail
# after writing one.
fill_slow() {
  echo run >>"$dir/runs"
  echo one >"$1/one"
  sleep "${FILL_SLEEP:-1}"
  [ -z "${FILL_FAIL:-}" ] || return 3
  head -c 4096 /dev/zero >"$1/two"
  mkdir -p "$1/bin" && ln -s ../one "$1/bin/link"
}
# kill_mid_fill FUNCTION ENTRY: runs FUNCTION (cache_fill or cache_fill_in_place) on ENTRY in
# a process group of its own and SIGKILLs the group once the fill has begun (no trap runs).
kill_mid_fill() {
  # shellcheck disable=SC2016  # expanded by the inner bash
  (FILL_SLEEP=30 setsid bash -c 'source "$1"; source "$2"; "$3" "$4" k1 fill_slow' _ \
    "$(dirname "$0")/../../scripts/cache.sh" <(declare -f fill_slow; echo "dir=$dir") "$1" "$2" &
    echo $! >"$dir/killed.pid")
  for _ in $(seq 50); do [ "$(runs)" = 1 ] && break; sleep 0.1; done
  kill -KILL -- "-$(cat "$dir/killed.pid")"
  sleep 0.2
}
complete() { [ -f "$1/one" ] && [ -f "$1/two" ] && [ "$(stat -c %s "$1/two")" = 4096 ] && cache_sealed "$1" k1; }
runs() { if [ -f "$dir/runs" ]; then wc -l <"$dir/runs"; else echo 0; fi; }

# Four fills of one empty entry at once: all succeed, one fill ran, the entry is whole.
entry=$dir/e1
pids=()
for _ in 1 2 3 4; do (cache_fill "$entry" k1 fill_slow) & pids+=($!); done
ok=0
for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
check "four fills at once all succeed ($ok of 4)" [ "$ok" = 4 ]
check "one of them filled, the others waited for it ($(runs) runs)" [ "$(runs)" = 1 ]
check "the entry is complete and sealed" complete "$entry"
cache_fill "$entry" k1 fill_slow
check "a sealed entry is not filled again" [ "$(runs)" = 1 ]

# A fill killed half way (SIGKILL: no trap runs) leaves no entry anyone trusts; the next
# call removes its debris and fills.
rm -f "$dir/runs"
entry=$dir/e2
kill_mid_fill cache_fill "$entry"
check "the killed fill left no entry" [ ! -e "$entry" ]
check "nor a seal anywhere" [ -z "$(find "$dir" -path "$entry*" -name .complete)" ]
FILL_SLEEP=0 cache_fill "$entry" k1 fill_slow
check "the next call filled it" complete "$entry"
check "and removed the killed fill's directory" [ -z "$(find "$dir" -maxdepth 1 -name 'e2.fill-*')" ]

# Damage after sealing: a file truncated, a file deleted, a symlink removed: each refills.
for damage in "truncate -s 100 $entry/two" "rm $entry/one" "rm $entry/bin/link"; do
  rm -f "$dir/runs"
  $damage
  check "damaged ($damage): not trusted" bash -c "source '$(dirname "$0")/../../scripts/cache.sh'; ! cache_sealed '$entry' k1"
  FILL_SLEEP=0 cache_fill "$entry" k1 fill_slow
  check "damaged ($damage): refilled whole" complete "$entry"
  check "damaged ($damage): one fill" [ "$(runs)" = 1 ]
done

# Another key (a new version) fills again; a failing fill leaves the sealed entry alone.
set +e
FILL_SLEEP=0 FILL_FAIL=1 cache_fill "$entry" k2 fill_slow
rc=$?
set -e
check "a failing fill fails (status $rc)" [ "$rc" = 3 ]
check "and leaves the entry as it was" complete "$entry"
check "and removes what it wrote" [ -z "$(find "$dir" -maxdepth 1 -name 'e2.fill-*')" ]
FILL_SLEEP=0 cache_fill "$entry" k2 fill_slow
check "a new key fills" cache_sealed "$entry" k2

# In place (for fills that cannot move): killed half way, emptied and filled by the next call.
rm -f "$dir/runs"
entry=$dir/e3
kill_mid_fill cache_fill_in_place "$entry"
check "in place, killed: the half-filled entry is not trusted" bash -c "source '$(dirname "$0")/../../scripts/cache.sh'; ! cache_sealed '$entry' k1"
FILL_SLEEP=0 cache_fill_in_place "$entry" k1 fill_slow
check "in place: the next call filled it" complete "$entry"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
