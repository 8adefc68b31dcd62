#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# cluster: examples/keda/scaledobject.yaml against KEDA's own ScaledObject CRD, and the HPA
# KEDA would make from it against Kubernetes' own HPA controller: the HPA must get the
# OutboxRelay's scale through the target the example names. KEDA's operator is not run; the
# HPA below is written by this test in its place (examples/keda/README.md says why).
source "$(dirname "$0")/../crd/lib.sh"
use_kube

example=$REPO_ROOT/examples/keda/scaledobject.yaml
keda_crd=$("$REPO_ROOT/scripts/testbed/fetch-keda-crd.sh") || die "fetching KEDA's CRD failed"
ns=$(unique_name keda)
work=$(mktemp -d)
cleanup() {
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

kubectl apply --server-side --force-conflicts -f "$CRD_FILE" >/dev/null
kubectl apply --server-side -f "$keda_crd" >/dev/null
kubectl wait --for=condition=Established crd/scaledobjects.keda.sh crd/outboxrelays.outbox.dev \
  --timeout=60s >/dev/null || die "the CRDs were not established"
kubectl create namespace "$ns" >/dev/null

# The OutboxRelay the example scales: the minimal sample in this namespace, 2 replicas (not
# the default, so that reading them proves the HPA reads this resource's scale).
kubectl -n "$ns" apply -f "$REPO_ROOT/operator/samples/minimal.yaml" >/dev/null
kubectl -n "$ns" patch outboxrelay orders --type merge -p '{"spec":{"relay":{"replicas":2}}}' >/dev/null
sed -e "s/namespace: shop/namespace: $ns/" -e "s/namespace=\"shop\"/namespace=\"$ns\"/g" \
  "$example" >"$work/so.yaml"
out=$(kubectl apply -f "$work/so.yaml" 2>&1) && pass "KEDA's schema accepts the example" ||
  fail "KEDA's schema refuses the example: $out"
target=$(kubectl -n "$ns" get scaledobject orders-relay \
  -o jsonpath='{.spec.scaleTargetRef.apiVersion} {.spec.scaleTargetRef.kind} {.spec.scaleTargetRef.name}')
expect_eq "the ScaledObject targets the OutboxRelay" "$target" "outbox.dev/v1alpha1 OutboxRelay orders"

# The HPA KEDA's operator makes for a ScaledObject: keda-hpa-<name>, its scaleTargetRef and
# bounds, one External metric per trigger (s<i>-<type>) selected by the ScaledObject's name.
hpa_for() { # hpa_for NAME TARGET_NAME: the HPA as JSON, from the applied ScaledObject
  kubectl -n "$ns" get scaledobject orders-relay -o json | python3 -c '
import json, sys
so, name, target = json.load(sys.stdin), sys.argv[1], sys.argv[2]
spec = so["spec"]
ref = dict(spec["scaleTargetRef"], name=target)
metrics = [{"type": "External", "external": {
    "metric": {"name": "s%d-%s" % (i, t["type"]),
               "selector": {"matchLabels": {"scaledobject.keda.sh/name": so["metadata"]["name"]}}},
    "target": {"type": "AverageValue", "averageValue": t["metadata"]["threshold"]}}}
    for i, t in enumerate(spec["triggers"])]
print(json.dumps({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": name},
    "spec": {"scaleTargetRef": ref, "minReplicas": spec["minReplicaCount"],
             "maxReplicas": spec["maxReplicaCount"], "metrics": metrics}}))
' "$1" "$2"
}
hpa_for keda-hpa-orders-relay orders >"$work/hpa.json"
hpa_for keda-hpa-nobody nobody >"$work/hpa-wrong.json"
kubectl -n "$ns" apply -f "$work/hpa.json" -f "$work/hpa-wrong.json" >/dev/null

# AbleToScale: the HPA controller read the target's /scale (it syncs every 15 s).
able_to_scale() { # able_to_scale HPA: "<status> <reason>" of its AbleToScale condition
  kubectl -n "$ns" get hpa "$1" \
    -o jsonpath='{range .status.conditions[?(@.type=="AbleToScale")]}{.status} {.reason}{end}'
}
for _ in $(seq 1 60); do
  [ -n "$(able_to_scale keda-hpa-orders-relay)" ] && [ -n "$(able_to_scale keda-hpa-nobody)" ] && break
  sleep 2
done
expect_eq "the HPA gets the OutboxRelay's scale through the example's target" \
  "$(able_to_scale keda-hpa-orders-relay)" "True SucceededGetScale"
expect_eq "an HPA naming no OutboxRelay does not (the check can fail)" \
  "$(able_to_scale keda-hpa-nobody)" "False FailedGetScale"
expect_eq "the HPA reads the OutboxRelay's replicas (spec.relay.replicas through /scale)" \
  "$(kubectl -n "$ns" get hpa keda-hpa-orders-relay -o jsonpath='{.status.currentReplicas}')" "2"
finish
