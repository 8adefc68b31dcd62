#!/usr/bin/env bash
# scripts/examples-deps.sh on an empty cache, as a new user's first `scripts/test.sh` runs it
# (two consumer-example tests start it at once): one call killed half way, then two at once.
# Both must succeed with a venv that imports what the points service needs and a classpath
# holding the compiled class, and a third call must find it all cached. Fills from PyPI and
# Maven Central every run, so the cold path is exercised wherever the tests run.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
export OUTBOX_EXAMPLES_CACHE="$dir/cache"
fail() { echo "FAIL: $*"; exit 1; }

# Killed (SIGKILL, the whole process group) while it installs into the venv.
setsid "$root/scripts/examples-deps.sh" >"$dir/killed.out" 2>&1 &
killed=$!
for _ in $(seq 600); do
  compgen -G "$OUTBOX_EXAMPLES_CACHE/venv-*.fill-*/bin/python" >/dev/null && break
  sleep 0.1
done
sleep 2
kill -KILL -- "-$killed" 2>/dev/null || true
wait "$killed" 2>/dev/null || true
echo "ok: a fill killed half way ($(find "$OUTBOX_EXAMPLES_CACHE" -maxdepth 1 -name '*.fill-*' -printf '%f ' || true))"

"$root/scripts/examples-deps.sh" >"$dir/a.out" 2>"$dir/a.err" &
a=$!
"$root/scripts/examples-deps.sh" >"$dir/b.out" 2>"$dir/b.err" &
b=$!
wait "$a" || { cat "$dir/a.err"; fail "the first of two calls at once failed"; }
wait "$b" || { cat "$dir/b.err"; fail "the second of two calls at once failed"; }
cmp -s "$dir/a.out" "$dir/b.out" || fail "the two calls printed different entries: $(cat "$dir/a.out" "$dir/b.out")"
echo "ok: two calls at once both succeeded"

python=$(sed -n 's/^python=//p' "$dir/a.out")
classpath=$(sed -n 's/^java_classpath=//p' "$dir/a.out")
"$python" -c 'import psycopg, confluent_kafka' || fail "$python cannot import psycopg and confluent_kafka"
echo "ok: the venv imports psycopg and confluent_kafka"
[ -f "${classpath%%:*}/PointsService.class" ] || fail "no PointsService.class in ${classpath%%:*}"
compgen -G "${classpath#*:}" >/dev/null || fail "no jars in ${classpath#*:}"
echo "ok: the Java classpath holds the compiled class and its jars"
[ -z "$(find "$OUTBOX_EXAMPLES_CACHE" -maxdepth 1 -name '*.fill-*')" ] || fail "the killed fill's directory is still there"

start=$SECONDS
"$root/scripts/examples-deps.sh" >"$dir/c.out" 2>"$dir/c.err" || { cat "$dir/c.err"; fail "a warm call failed"; }
cmp -s "$dir/a.out" "$dir/c.out" || fail "a warm call printed other entries"
[ ! -s "$dir/c.err" ] || { cat "$dir/c.err"; fail "a warm call filled again"; }
echo "ok: a warm call returns the cached entries at once ($((SECONDS - start)) s)"
