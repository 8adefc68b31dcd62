#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# unit: the Grafana dashboard and the kube-state-metrics config the chart ships.
#  - charts/outbox-operator/dashboards/outbox.json is a dashboard: a uid, a Prometheus
#    data source variable every query uses, and the panels the issue asks for (backlog,
#    oldest age, throughput, failures, shards per replica, database health);
#  - every query parses: 2.42's promtool has no `promql` command, so each query (Grafana
#    variables replaced) becomes a recording rule and `promtool check rules` parses it;
#  - the opt-in ConfigMaps: grafana.dashboards.enabled renders the dashboard with the
#    sidecar label, metrics.kubeStateMetrics.enabled renders the config, and its RBAC
#    only with a ServiceAccount; neither is rendered by default.
# (exported_metrics.sh checks that the queries name only exported metrics.)
# Needs OUTBOX_TESTBED_BIN (the test bed's helm) and promtool.
source "$(dirname "$0")/lib.sh"
use_helm
use_promtool
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$(python3 - "$DASHBOARD" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
problems = []
if not d.get("uid") or not d.get("title"):
    problems.append("no uid or title")
variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
if variables.get("datasource", {}).get("query") != "prometheus":
    problems.append("no Prometheus data source variable named datasource")
for name in ("namespace", "outboxrelay"):
    if name not in variables:
        problems.append(f"no {name} variable")
exprs = []
for p in d.get("panels", []):
    if p.get("type") == "row":
        continue
    if "gridPos" not in p:
        problems.append(f"panel {p.get('title')}: no gridPos")
    if not p.get("targets"):
        problems.append(f"panel {p.get('title')}: no query")
    for t in p.get("targets", []):
        if not t.get("expr"):
            problems.append(f"panel {p.get('title')} {t.get('refId')}: empty query")
        if t.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"panel {p.get('title')} {t.get('refId')}: not on the datasource variable")
        if t.get("expr") and 'outboxrelay=~"$outboxrelay"' not in t["expr"]:
            problems.append(f"panel {p.get('title')} {t.get('refId')}: ignores the outboxrelay variable")
        exprs.append(t.get("expr", ""))
ids = [p.get("id") for p in d.get("panels", [])]
if len(ids) != len(set(ids)):
    problems.append("panel ids repeat")
joined = "\n".join(exprs)
# The issue's panels, by the metric each one needs.
for what, metric in [("backlog", "outbox_pending_events"), ("oldest age", "outbox_oldest_pending_seconds"),
                     ("throughput by topic", "outbox_topic_events_published_total"), ("failures", "outbox_events_failed_total"),
                     ("FAILED rows", "outbox_failed_events"), ("shards per replica", "outbox_shards_owned"),
                     ("database health", "outbox_database_up"), ("vacuum health", "outbox_table_dead_tuples"),
                     ("publish latency percentiles", "outbox_publish_latency_seconds_bucket")]:
    if metric not in joined:
        problems.append(f"no {what} panel ({metric})")
print("\n".join(problems))
PY
)
expect_eq "the dashboard's structure" "$out" ""

python3 "$MON_TEST_DIR/promql_names.py" exprs "$DASHBOARD" >"$tmp/dashboard-rules.yaml" || die "extracting the dashboard's queries failed"
expect_eq "every panel query and variable query extracted" \
  "$(grep -c 'record:' "$tmp/dashboard-rules.yaml")" \
  "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(len(p.get("targets", [])) for p in d["panels"]) + sum(1 for v in d["templating"]["list"] if v["type"] == "query"))' "$DASHBOARD")"
out=$(promtool check rules "$tmp/dashboard-rules.yaml" 2>&1) && pass "every dashboard query parses (promtool check rules)" ||
  fail "a dashboard query does not parse: $out"
# The check must be able to fail.
# (head first: sed cut off by head would die of SIGPIPE under pipefail once the file is long)
head -n 5 "$tmp/dashboard-rules.yaml" | sed 's/expr: \(.*\)$/expr: \1 +/' >"$tmp/broken.yaml"
promtool check rules "$tmp/broken.yaml" >/dev/null 2>&1 && fail "promtool accepted a broken query" ||
  pass "promtool refuses a broken query (the parse check can fail)"

# --- the opt-in ConfigMaps ---------------------------------------------------------------
render() { "$HELM" template outbox-operator "$CHART_DIR" --namespace "$RELEASE_NS" "$@"; }
d=$(render) || die "helm template with default values failed"
expect_not_contains "no dashboard ConfigMap by default" "$d" "outbox-operator-dashboard"
expect_not_contains "no kube-state-metrics ConfigMap by default" "$d" "outbox-operator-kube-state-metrics"

render --set grafana.dashboards.enabled=true --set grafana.dashboards.namespace=monitoring \
  --set grafana.dashboards.annotations.grafana_folder=Outbox --show-only templates/grafana-dashboard.yaml >"$tmp/cm.yaml" ||
  die "helm template of the dashboard ConfigMap failed"
out=$(python3 - "$tmp/cm.yaml" "$DASHBOARD" <<'PY'
import json, sys, yaml
cm = yaml.safe_load(open(sys.argv[1]))
problems = []
if cm["kind"] != "ConfigMap":
    problems.append("not a ConfigMap")
if cm["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
    problems.append("no grafana_dashboard: \"1\" label")
if cm["metadata"].get("namespace") != "monitoring":
    problems.append("grafana.dashboards.namespace ignored")
if cm["metadata"].get("annotations", {}).get("grafana_folder") != "Outbox":
    problems.append("grafana.dashboards.annotations ignored")
if json.loads(cm["data"]["outbox.json"]) != json.load(open(sys.argv[2])):
    problems.append("the ConfigMap's outbox.json differs from dashboards/outbox.json")
print("\n".join(problems))
PY
)
expect_eq "grafana.dashboards.enabled: the dashboard ConfigMap for the sidecar" "$out" ""

render --set metrics.kubeStateMetrics.enabled=true --show-only templates/kube-state-metrics.yaml >"$tmp/ksm.yaml" ||
  die "helm template of the kube-state-metrics ConfigMap failed"
out=$(python3 - "$tmp/ksm.yaml" "$KSM_CONFIG" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = [d["kind"] for d in docs]
problems = [] if kinds == ["ConfigMap"] else [f"rendered {kinds}, want only the ConfigMap"]
if yaml.safe_load(docs[0]["data"]["config.yaml"]) != yaml.safe_load(open(sys.argv[2])):
    problems.append("config.yaml differs from files/kube-state-metrics-outboxrelay.yaml")
print("\n".join(problems))
PY
)
expect_eq "metrics.kubeStateMetrics.enabled: the config ConfigMap, no RBAC without a ServiceAccount" "$out" ""
k=$(render --set metrics.kubeStateMetrics.enabled=true --set metrics.kubeStateMetrics.serviceAccount.name=kube-state-metrics \
  --set metrics.kubeStateMetrics.serviceAccount.namespace=monitoring --show-only templates/kube-state-metrics.yaml) ||
  die "helm template of the kube-state-metrics RBAC failed"
expect_contains "a ClusterRoleBinding to kube-state-metrics' ServiceAccount" "$k" \
  $'  - kind: ServiceAccount\n    name: kube-state-metrics\n    namespace: monitoring'
expect_eq "kube-state-metrics may only list and watch" "$(grep 'verbs:' <<<"$k" | sort -u | tr -d ' ')" "verbs:[list,watch]"
out=$(render --set metrics.kubeStateMetrics.enabled=true --set metrics.kubeStateMetrics.serviceAccount.name=ksm 2>&1) &&
  fail "a ServiceAccount without a namespace was accepted" ||
  expect_contains "a ServiceAccount without a namespace is refused" "$out" "metrics.kubeStateMetrics.serviceAccount.namespace"
finish
