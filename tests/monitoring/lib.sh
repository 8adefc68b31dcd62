# shellcheck shell=bash disable=SC2034 source-path=SCRIPTDIR
# Shared helpers for tests/monitoring. Sourced, not run. Builds on tests/crd/lib.sh
# (pass/fail/finish, use_helm: the test bed's helm from $OUTBOX_TESTBED_BIN).
# shellcheck source=../crd/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../crd" && pwd)/lib.sh"
MON_TEST_DIR=$REPO_ROOT/tests/monitoring
DASHBOARD=$CHART_DIR/dashboards/outbox.json
KSM_CONFIG=$CHART_DIR/files/kube-state-metrics-outboxrelay.yaml
RELEASE_NS=outbox-system

# promtool comes from Debian's prometheus package (scripts/deps.sh).
use_promtool() {
  command -v promtool >/dev/null || die "promtool is not installed (scripts/deps.sh installs Debian's prometheus package)"
  python3 -c 'import yaml' 2>/dev/null || die "python3-yaml is missing"
}

# render_rules OUT [helm --set/-f ...]: the chart's PrometheusRule (enabled) rendered for
# release outbox-operator in $RELEASE_NS; OUT gets its spec, which is a Prometheus rules file.
render_rules() {
  local out=$1; shift
  "$HELM" template outbox-operator "$CHART_DIR" --namespace "$RELEASE_NS" \
    --set metrics.prometheusRule.enabled=true "$@" --show-only templates/prometheusrule.yaml |
    python3 -c '
import sys, yaml
doc = yaml.safe_load(sys.stdin)
assert doc["kind"] == "PrometheusRule", doc["kind"]
yaml.safe_dump(doc["spec"], open(sys.argv[1], "w"), sort_keys=False, width=1000)
' "$out"
}

# default_runbooks: the runbook base the chart uses when runbookBaseUrl is empty, its
# repository's docs/runbooks at the tag of its appVersion.
default_runbooks() {
  local home version
  home=$(sed -n 's/^home: //p' "$CHART_DIR/Chart.yaml")
  version=$(sed -n 's/^appVersion: "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CHART_DIR/Chart.yaml")
  echo "$home/blob/v$version/docs/runbooks"
}

# alert_names RULES_FILE: one alert name a line.
alert_names() {
  python3 -c '
import sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for r in g["rules"]:
        if "alert" in r:
            print(r["alert"])
' "$1"
}
