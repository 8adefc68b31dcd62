#!/usr/bin/env bash
# Every C++ file of the repository is as clang-format (.clang-format at the root) writes it.
# Fails listing the files that are not, with the command that fixes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/deps.sh installs it)"; exit 1; }
if [ -d .git ] && command -v git >/dev/null; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.h' '*.cc')
else
  mapfile -t files < <(find src tests bench examples -name '*.cpp' -o -name '*.hpp')
fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted in the work tree, not yet in the index
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted (${#bad[@]} of ${#files[@]} files):"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "ok: ${#files[@]} files formatted as .clang-format says ($(clang-format --version))"
