#!/usr/bin/env bash
# The component folders under src/ include each other in one direction only. What the
# operator and the pods it runs share is src/api/ (the OutboxRelay contract): relay/ never
# includes controller/ and controller/ never includes relay/, and api/ includes no other
# component than kube/ (for the REST resource type) and common/ (durations). kube/ is the
# lowest layer: its controller engine (controller_engine.hpp) knows no OutboxRelay, so kube/
# includes none of api/, controller/, relay/, outbox/, cli/. Fails naming each include that
# crosses.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/src"
bad=()
check() { # check FOLDER FORBIDDEN_REGEX
  local hits
  hits=$(grep -rnE "^#include \"($2)/" "$1" --include='*.cpp' --include='*.hpp' || true)
  [ -z "$hits" ] || bad+=("$hits")
}
check relay 'controller|cli'
check controller 'relay|cli'
check api 'metrics|http|outbox|inbox|kafka|relay|controller|cli'
check outbox 'relay|controller|cli|api'
check kube 'relay|controller|cli|api|outbox'
if [ ${#bad[@]} -gt 0 ]; then
  echo "includes that cross a component boundary:"
  printf '%s\n' "${bad[@]}"
  exit 1
fi
echo "ok: relay/ and controller/ share only api/; api/ depends on kube/ and common/ alone;" \
  "kube/ on none of them"
