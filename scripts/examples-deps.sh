#!/usr/bin/env bash
# examples-deps.sh: installs what the Python and Java points services need (a venv from
# PyPI, the jars from Maven Central) and compiles the Java one, under a cache directory;
# prints "python=<venv python>" and "java_classpath=<classpath>". A second call with the
# same requirements and sources returns at once; calls at once share one fill, and a call
# killed half way leaves nothing the next one trusts (scripts/cache.sh). tests/examples
# runs it. OUTBOX_EXAMPLES_CACHE puts the entries elsewhere (CI fills them fresh each run).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=cache.sh
source "$root/scripts/cache.sh"
cache="${OUTBOX_EXAMPLES_CACHE:-$OUTBOX_CACHE/examples}"
mkdir -p "$cache"

# Python: psycopg 3 uses the system's libpq (libpq-dev is in scripts/deps.sh); the
# confluent-kafka wheel carries its own librdkafka. The venv is created in the fill's own
# directory and renamed into place: it runs from anywhere (bin/python finds its
# pyvenv.cfg beside it; only pip's own launchers would name the old path, and pip runs as
# `python -m pip`).
fill_venv() {
  python3 -m venv "$1"
  "$1/bin/python" -m pip install -q --disable-pip-version-check -r "$2" >&2
  # What the points service imports, imported once: a venv missing either is not complete.
  "$1/bin/python" -c 'import psycopg, confluent_kafka' >&2
}
req="$root/examples/points_service_python/requirements.txt"
venv_key=$(sha256sum <"$req" | cut -c1-12)
venv="$cache/venv-$venv_key"
if ! cache_sealed "$venv" "$venv_key"; then echo "[examples] filling $venv" >&2; fi
cache_fill "$venv" "$venv_key" fill_venv "$req"

# Java: Maven fetches the jars into a repository of its own (under its own lock: two Maven
# processes writing one local repository at once may corrupt it); javac compiles the one file.
java_dir="$root/examples/points_service_java"
fill_java() {
  cache_lock "$cache/m2"
  mkdir -p "$1/classes"
  mvn -q -B -Dstyle.color=never -f "$java_dir/pom.xml" -Dmaven.repo.local="$cache/m2" dependency:copy-dependencies \
    -DoutputDirectory="$1/lib" >&2
  javac -d "$1/classes" -cp "$1/lib/*" "$java_dir/PointsService.java" >&2
}
java_key=$(cat "$java_dir/pom.xml" "$java_dir/PointsService.java" | sha256sum | cut -c1-12)
out="$cache/java-$java_key"
if ! cache_sealed "$out" "$java_key"; then echo "[examples] filling $out" >&2; fi
cache_fill "$out" "$java_key" fill_java

# Entries of older requirements or sources go, unless someone is filling them.
for old in "$cache"/venv-* "$cache"/java-*; do
  case $old in "$venv" | "$out" | *.lock | *.fill-* | *.old-*) continue ;; esac
  cache_prune "$old"
done
echo "python=$venv/bin/python"
echo "java_classpath=$out/classes:$out/lib/*"
