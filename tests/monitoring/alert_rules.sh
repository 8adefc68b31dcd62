#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# unit: the chart's alerts, as Prometheus loads them.
#  - the PrometheusRule rendered with default values passes `promtool check rules`, and
#    `promtool test rules alerts_test.yaml` passes: each alert fires on a bad series
#    and stays quiet on a good one (checked here: every alert has a case expecting it
#    and a case expecting nothing, and the test names no alert the chart lacks);
#  - every alert has a summary, a description and a runbook_url, and a severity label;
#  - the values the alerts read (thresholds, for, the runbook base URL) reach them, and
#    the non-default values file (tests/crd/values-nondefault.yaml) renders valid rules.
# Needs OUTBOX_TESTBED_BIN (the test bed's helm; scripts/test.sh exports it) and promtool.
source "$(dirname "$0")/lib.sh"
use_helm
use_promtool
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

render_rules "$tmp/rules.yaml" || die "helm template of the PrometheusRule failed"
sed "s|RUNBOOKS/|$(default_runbooks)/|" "$MON_TEST_DIR/alerts_test.yaml" >"$tmp/alerts_test.yaml"
out=$(promtool check rules "$tmp/rules.yaml" 2>&1) && pass "promtool check rules (default values)" ||
  fail "promtool check rules: $out"
out=$(cd "$tmp" && promtool test rules alerts_test.yaml 2>&1) && pass "promtool test rules alerts_test.yaml" ||
  fail "promtool test rules: $out"

# Every alert: a firing case and a quiet case; no test for an alert that does not exist.
out=$(python3 - "$tmp/rules.yaml" "$tmp/alerts_test.yaml" <<'PY'
import sys, yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"] if "alert" in r]
names = {r["alert"] for r in rules}
fires, quiet = set(), set()
for t in yaml.safe_load(open(sys.argv[2]))["tests"]:
    for c in t.get("alert_rule_test", []):
        (fires if c.get("exp_alerts") else quiet).add(c["alertname"])
problems = []
for n in sorted(names):
    if n not in fires:
        problems.append(f"{n}: no case where it fires")
    if n not in quiet:
        problems.append(f"{n}: no case where it stays quiet")
for n in sorted((fires | quiet) - names):
    problems.append(f"{n}: tested but not in the chart")
for r in rules:
    a, l = r.get("annotations", {}), r.get("labels", {})
    for k in ("summary", "description", "runbook_url"):
        if not a.get(k):
            problems.append(f"{r['alert']}: no {k} annotation")
    if not l.get("severity"):
        problems.append(f"{r['alert']}: no severity label")
print("\n".join(problems))
PY
)
expect_eq "every alert has a firing and a quiet test case, a summary, a description, a runbook_url and a severity" "$out" ""
expect_eq "eleven alerts" "$(alert_names "$tmp/rules.yaml" | wc -l)" "11"

# Values reach the rules.
render_rules "$tmp/custom.yaml" --set metrics.prometheusRule.runbookBaseUrl=https://wiki.example.com/outbox/ \
  --set metrics.prometheusRule.notReadyFor=42m --set metrics.prometheusRule.failedGrowthThreshold=25 \
  --set metrics.prometheusRule.stuckThresholdSeconds=120 || die "helm template with custom alert values failed"
c=$(cat "$tmp/custom.yaml")
expect_contains "runbookBaseUrl (its trailing slash dropped)" "$c" "runbook_url: https://wiki.example.com/outbox/OutboxDatabaseDown.md"
expect_contains "notReadyFor" "$c" "for: 42m"
expect_contains "failedGrowthThreshold" "$c" "> 25"
expect_contains "stuckThresholdSeconds" "$c" "(outbox_oldest_pending_seconds{outbox_component=\"relay\"}) > 120"
out=$(promtool check rules "$tmp/custom.yaml" 2>&1) && pass "promtool check rules (custom alert values)" ||
  fail "promtool check rules (custom alert values): $out"
render_rules "$tmp/nondefault.yaml" -f "$CRD_TEST_DIR/values-nondefault.yaml" || die "helm template with values-nondefault.yaml failed"
out=$(promtool check rules "$tmp/nondefault.yaml" 2>&1) && pass "promtool check rules (values-nondefault.yaml)" ||
  fail "promtool check rules (values-nondefault.yaml): $out"
out=$("$HELM" template x "$CHART_DIR" --set metrics.prometheusRule.runbookBaseUrl=wiki/outbox 2>&1) &&
  fail "a runbookBaseUrl that is not an http(s) URL was accepted" ||
  expect_contains "a runbookBaseUrl that is not an http(s) URL is refused" "$out" "runbookBaseUrl"

finish
