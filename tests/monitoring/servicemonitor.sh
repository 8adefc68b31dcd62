#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# unit: the relays' ServiceMonitor takes namespace and outboxrelay from the target, never from
# the scraped pod: no honorLabels (a pod in one tenant's namespace could otherwise set
# namespace="another" on its series), the relay's own copies dropped, the OutboxRelay taken
# from the operator's Service label.
# Needs OUTBOX_TESTBED_BIN (the test bed's helm) and python3-yaml.
source "$(dirname "$0")/lib.sh"
use_helm
use_promtool
out=$("$HELM" template outbox-operator "$CHART_DIR" --namespace "$RELEASE_NS" \
  --set metrics.serviceMonitor.enabled=true --show-only templates/servicemonitor.yaml | python3 -c '
import sys, yaml
for doc in yaml.safe_load_all(sys.stdin):
    for e in doc["spec"]["endpoints"]:
        name = doc["metadata"]["name"]
        print(name, "honorLabels", e.get("honorLabels", False))
        for r in e.get("metricRelabelings", []):
            print(name, "metricRelabeling", r.get("action"), r.get("regex"))
        for r in e.get("relabelings", []):
            print(name, "relabeling", ",".join(r.get("sourceLabels", [])), r["targetLabel"])
') || die "helm template of the ServiceMonitors failed"
expect_not_contains "no ServiceMonitor honors the scraped labels" "$out" "honorLabels True"
expect_contains "the relays' own namespace and outboxrelay labels are dropped" "$out" \
  "outbox-operator-relays metricRelabeling labeldrop exported_(namespace|outboxrelay)"
expect_contains "outboxrelay comes from the operator's Service" "$out" \
  "outbox-operator-relays relabeling __meta_kubernetes_service_label_app_kubernetes_io_instance outboxrelay"
finish
