#!/usr/bin/env bash
# unit: every shell script in the repository passes shellcheck (following the files it
# sources). A finding that is intended carries a `# shellcheck disable=SCxxxx` with the
# reason beside it, so a new finding is a decision, not noise.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
command -v shellcheck >/dev/null || { echo "shellcheck is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t scripts < <(git ls-files '*.sh' 'kubectl-plugin/kubectl-*')
else
  mapfile -t scripts < <(find . -path ./build -prune -o -path ./.testbed -prune -o -name '*.sh' -print)
fi
[ ${#scripts[@]} -gt 0 ] || { echo "no scripts found under $root" >&2; exit 1; }
if shellcheck -x -f gcc "${scripts[@]}"; then
  echo "shellcheck: ${#scripts[@]} scripts clean"
else
  echo "shellcheck: findings above (fix them, or disable one with its reason)" >&2
  exit 1
fi
