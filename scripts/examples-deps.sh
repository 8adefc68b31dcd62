#!/usr/bin/env bash
# examples-deps.sh: installs what the Python and Java points services need (a venv from
# PyPI, the jars from Maven Central) and compiles the Java one, under a cache directory;
# prints "python=<venv python>" and "java_classpath=<classpath>". A second call with the
# same requirements and sources returns at once. tests/examples runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator-testbed/examples"
mkdir -p "$cache"

# Python: psycopg 3 uses the system's libpq (libpq-dev is in scripts/deps.sh); the
# confluent-kafka wheel carries its own librdkafka.
req="$root/examples/points_service_python/requirements.txt"
venv="$cache/venv-$(sha256sum <"$req" | cut -c1-12)"
if [ ! -f "$venv/.complete" ]; then
  echo "[examples] creating $venv" >&2
  rm -rf "$cache"/venv-*  # older requirements
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi

# Java: Maven fetches the jars into a repository of its own; javac compiles the one file.
java_dir="$root/examples/points_service_java"
stamp=$(cat "$java_dir/pom.xml" "$java_dir/PointsService.java" | sha256sum | cut -c1-12)
out="$cache/java-$stamp"
if [ ! -f "$out/.complete" ]; then
  echo "[examples] fetching jars and compiling into $out" >&2
  rm -rf "$cache"/java-*  # older sources
  mkdir -p "$out/classes"
  mvn -q -B -Dstyle.color=never -f "$java_dir/pom.xml" -Dmaven.repo.local="$cache/m2" dependency:copy-dependencies \
    -DoutputDirectory="$out/lib" >&2
  javac -d "$out/classes" -cp "$out/lib/*" "$java_dir/PointsService.java" >&2
  touch "$out/.complete"
fi
echo "python=$venv/bin/python"
echo "java_classpath=$out/classes:$out/lib/*"
