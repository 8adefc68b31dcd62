# shellcheck shell=bash disable=SC2034
# Shared helpers for the tests in tests/crd. Sourced, not run.
# The tests FAIL (never skip) when what they need is missing: a green run must
# mean the behaviour was exercised.
set -euo pipefail

CRD_TEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$CRD_TEST_DIR/../.." && pwd)
CRD_FILE=$REPO_ROOT/crds/outbox.dev_outboxrelays.yaml
CHART_DIR=$REPO_ROOT/charts/outbox-operator
TEST_NAME=$(basename "$0" .sh)

failures=0
pass() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*" >&2; failures=$((failures + 1)); }
die() { printf 'FAIL  %s: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
finish() {
  if [ "$failures" -gt 0 ]; then
    printf '%s: %d check(s) failed\n' "$TEST_NAME" "$failures" >&2
    exit 1
  fi
  printf '%s: all checks passed\n' "$TEST_NAME"
}

# require_env NAME...: fails the test when a variable the test bed exports is unset.
require_env() {
  local v
  for v in "$@"; do
    [ -n "${!v:-}" ] || die "\$$v is not set. Start the test bed and source its env file first:
      source \"\$(scripts/testbed/up.sh kube | tail -n1)\""
  done
}

# Binaries from the test bed ($OUTBOX_TESTBED_BIN), never whatever is on PATH:
# the versions must match the apiserver's.
use_helm() {
  require_env OUTBOX_TESTBED_BIN
  HELM=$OUTBOX_TESTBED_BIN/helm
  [ -x "$HELM" ] || die "$HELM is missing or not executable"
}
use_kube() {
  require_env OUTBOX_TESTBED_BIN OUTBOX_TEST_KUBECONFIG
  [ -x "$OUTBOX_TESTBED_BIN/kubectl" ] || die "$OUTBOX_TESTBED_BIN/kubectl is missing or not executable"
  [ -r "$OUTBOX_TEST_KUBECONFIG" ] || die "kubeconfig $OUTBOX_TEST_KUBECONFIG is not readable"
  export KUBECONFIG=$OUTBOX_TEST_KUBECONFIG
  kubectl version >/dev/null 2>&1 || die "the kube-apiserver behind $OUTBOX_TEST_KUBECONFIG does not answer"
}
kubectl() { "$OUTBOX_TESTBED_BIN/kubectl" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" "$@"; }
helm() { "$HELM" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" "$@"; }

# A DNS label unique to this run.
unique_name() { printf '%s-%s-%04x' "$1" "$$" "$RANDOM"; }

# expect_eq DESCRIPTION ACTUAL EXPECTED
expect_eq() {
  if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi
}
# expect_contains DESCRIPTION HAYSTACK NEEDLE
expect_contains() {
  if [[ "$2" == *"$3"* ]]; then pass "$1"; else fail "$1: output does not contain '$3':
$2"; fi
}
# expect_not_contains DESCRIPTION HAYSTACK NEEDLE
expect_not_contains() {
  if [[ "$2" != *"$3"* ]]; then pass "$1"; else fail "$1: output unexpectedly contains '$3'"; fi
}

# release_tree DIR VERSION: what scripts/release.sh reads from a checkout, copied into DIR, with
# CHANGELOG.md's Unreleased section named VERSION (the release tests publish from it).
release_tree() {
  local tree=$1 version=$2
  mkdir -p "$tree/scripts" "$tree/tests"
  cp -r "$REPO_ROOT/charts" "$REPO_ROOT/crds" "$REPO_ROOT/operator" "$REPO_ROOT/kubectl-plugin" \
    "$REPO_ROOT/CMakeLists.txt" "$REPO_ROOT/LICENSE" "$tree/"
  cp -r "$REPO_ROOT/tests/crd" "$tree/tests/"
  cp "$REPO_ROOT/scripts/release.sh" "$REPO_ROOT/scripts/install-release.sh" "$REPO_ROOT/scripts/release-sbom.py" \
    "$REPO_ROOT/scripts/librdkafka.sh" "$tree/scripts/"
  sed "s/^## Unreleased$/## $version - $(date +%F)/" "$REPO_ROOT/CHANGELOG.md" >"$tree/CHANGELOG.md"
}
