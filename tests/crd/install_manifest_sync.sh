#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# operator/install.yaml (kubectl-only install) must be exactly what the chart
# renders today. Needs helm from the test bed ($OUTBOX_TESTBED_BIN).
source "$(dirname "$0")/lib.sh"
use_helm
want=$(mktemp) && trap 'rm -f "$want"' EXIT
bash "$CRD_TEST_DIR/render_install.sh" >"$want" || die "rendering the chart failed"
if cmp -s "$want" "$REPO_ROOT/operator/install.yaml"; then
  pass "operator/install.yaml matches helm template"
else
  fail "operator/install.yaml is stale; regenerate it with:
    OUTBOX_TESTBED_BIN=$OUTBOX_TESTBED_BIN tests/crd/render_install.sh > operator/install.yaml"
  diff -u "$REPO_ROOT/operator/install.yaml" "$want" | head -60 >&2 || true
fi
finish
