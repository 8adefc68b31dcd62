# shellcheck shell=bash disable=SC2154  # build, repo, keep, start: set by the script that sources this
# What bench/run.sh and bench/compare.sh share: the Release build, the test bed (started if
# it is not up, stopped at exit unless it was up or --keep-testbed), and the header of the
# results file. Sourced; expects $repo, $build, $TESTBED_STATE and $keep.

# bench_build TARGET...: a Release build of the targets (and nothing else).
bench_build() {
  echo "== build ($build, Release)" >&2
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target "$@" -j2 >&2
}

# bench_testbed NAME: PostgreSQL and Kafka up (the environment sourced); NAME says who failed.
bench_testbed() {
  was_up=0
  [ -f "$TESTBED_STATE/env" ] && was_up=1
  echo "== test bed ($TESTBED_STATE)" >&2
  # up.sh names the failing service and its log; stop here rather than source "".
  # pg_stat_statements preloaded (a bed started by these scripts): statements per event.
  if ! env_file=$(TESTBED_PG_STATEMENTS=1 "$repo/scripts/testbed/up.sh" pg kafka | tail -n1) ||
    [ ! -f "$env_file" ]; then
    echo "$1: the test bed did not start (see the messages above); nothing was measured" >&2
    exit 1
  fi
  # shellcheck disable=SC1090
  source "$env_file"
  trap bench_stop_testbed EXIT
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
bench_stop_testbed() {
  if [ "$was_up" -eq 0 ] && [ "$keep" -eq 0 ]; then
    "$repo/scripts/testbed/down.sh" >&2 || true
  fi
}

# bench_header WHAT COMMAND: the first lines of a results file (when, which commit, the
# machine and what else was busy at the start, the command), on stdout.
bench_header() {
  echo "# $1 run, $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(free -g | awk '/^Mem:/ {print $2}') GB RAM, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# busiest other processes at start (%CPU, command):"
  ps -eo pcpu=,comm= --sort=-pcpu | head -n 6 | sed 's/^/#   /'
  echo "# command: $2"
}

# bench_footer: the last line of a results file.
bench_footer() {
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); wall time $(($(date +%s) - start)) s"
}
