#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# unit: every alert's runbook exists.
#  - each rendered runbook_url is <default runbookBaseUrl>/<AlertName>.md, and
#    docs/runbooks/<AlertName>.md exists with the sections an on-call needs
#    ("## Meaning", "## Confirm", "## Fix");
#  - docs/runbooks/README.md links every runbook, and no runbook is left without an alert;
#  - the default runbook base is this repository's docs/runbooks (the chart's `home`) at
#    the tag of the chart's appVersion, so an unmodified install links the pages written
#    for the version it runs.
# Needs OUTBOX_TESTBED_BIN (the test bed's helm) and python3-yaml.
source "$(dirname "$0")/lib.sh"
use_helm
use_promtool
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runbooks=$REPO_ROOT/docs/runbooks

render_rules "$tmp/rules.yaml" || die "helm template of the PrometheusRule failed"
base=$(default_runbooks)
expect_eq "the default runbookBaseUrl is empty (the tagged pages)" \
  "$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["metrics"]["prometheusRule"]["runbookBaseUrl"])' "$CHART_DIR/values.yaml")" ""

while IFS=$'\t' read -r alert url; do
  expect_eq "$alert: runbook_url" "$url" "$base/$alert.md"
  page=$runbooks/$alert.md
  if [ -f "$page" ]; then
    pass "$alert: docs/runbooks/$alert.md exists"
    body=$(cat "$page")
    for section in "# $alert" "## Meaning" "## Confirm" "## Fix"; do
      expect_contains "$alert: the runbook has \"$section\"" "$body" "$section"
    done
  else
    fail "$alert: docs/runbooks/$alert.md is missing"
  fi
  expect_contains "$alert: listed in docs/runbooks/README.md" "$(cat "$runbooks/README.md" 2>/dev/null)" "($alert.md)"
done < <(python3 -c '
import sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for r in g["rules"]:
        if "alert" in r:
            print(r["alert"], r.get("annotations", {}).get("runbook_url", ""), sep="\t")
' "$tmp/rules.yaml")

alerts=$(alert_names "$tmp/rules.yaml")
for page in "$runbooks"/*.md; do
  name=$(basename "$page" .md)
  [ "$name" = README ] && continue
  grep -qx "$name" <<<"$alerts" && pass "docs/runbooks/$name.md belongs to an alert" ||
    fail "docs/runbooks/$name.md has no alert of that name"
done
finish
