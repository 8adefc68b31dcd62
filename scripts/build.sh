#!/usr/bin/env bash
# Configures and builds the project (binary, tests, benchmarks) into build/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${OUTBOX_BUILD_DIR:-$root/build}"
# A compiler cache kept beside the test bed's caches: a clean clone (CI) or a second
# worktree recompiles only what changed. BASEDIR makes the cached commands relative, and
# NOHASHDIR leaves the build directory out of the hash (ccache adds it for -g by default;
# CMakeLists.txt maps the checkout's path out of the debug information instead), so
# checkouts at different paths share hits.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator-testbed/ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
