#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# Unit: the CRD has one source of truth. The chart's copy (Helm installs
# charts/outbox-operator/crds/ on first install) must be byte-identical to
# crds/, and every sample in operator/samples/ must be a v1alpha1 OutboxRelay or
# a Secret with placeholder values only.
source "$(dirname "$0")/lib.sh"

chart_copy=$CHART_DIR/crds/$(basename "$CRD_FILE")
[ -f "$CRD_FILE" ] || die "$CRD_FILE is missing"
[ -f "$chart_copy" ] || die "$chart_copy is missing (copy it from crds/)"
if cmp -s "$CRD_FILE" "$chart_copy"; then
  pass "chart CRD copy is identical to crds/"
else
  fail "charts/outbox-operator/crds/ differs from crds/; fix with: cp $CRD_FILE $chart_copy"
  diff -u "$CRD_FILE" "$chart_copy" | head -40 >&2 || true
fi

# Only the one CRD lives in either directory: an extra file would be installed
# by Helm but not by `kubectl apply --server-side -f crds/`, or the reverse.
extra=$(comm -3 <(ls "$REPO_ROOT/crds") <(ls "$CHART_DIR/crds"))
expect_eq "crds/ and the chart's crds/ hold the same files" "$extra" ""

for f in "$REPO_ROOT"/operator/samples/*.yaml; do
  name=${f#"$REPO_ROOT"/}
  if grep -q '^kind: OutboxRelay$' "$f"; then
    expect_contains "$name uses outbox.dev/v1alpha1" "$(cat "$f")" "apiVersion: outbox.dev/v1alpha1"
  fi
  if grep -q '^kind: Secret$' "$f"; then
    # Every credential-looking value must be a REPLACE_ME placeholder.
    bad=$(grep -E '^\s+(dsn|[a-z.]*password|[a-z.]*username):' "$f" | grep -v REPLACE_ME || true)
    expect_eq "$name holds placeholders only" "$bad" ""
  fi
  # A literal connection string or password never appears in an OutboxRelay.
  if grep -q '^kind: OutboxRelay$' "$f"; then
    bad=$(grep -nE '^\s*(dsn|password|connectionString):' "$f" || true)
    expect_eq "$name has no literal credential field" "$bad" ""
  fi
done
finish
