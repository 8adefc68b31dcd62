#!/usr/bin/env bash
# Benchmark (not a timed test): N OutboxRelays (with their Secrets) reconciled by one controller.
#   source "$(scripts/testbed/up.sh kube | tail -1)"
#   tests/controller/bench_controller.sh [N] [path/to/outbox-operator]
# Phase 1 "reconciled": every resource has status.observedGeneration == metadata.generation and
# Degraded=False, i.e. its 9 owned objects were applied and its status written.
# Phase 2 "Ready": there is no kubelet, so the script plays the Deployment controller and patches
# every relay Deployment's status to 2/2 ready; measured until every resource reports Ready=True.
set -euo pipefail
N=${1:-200}
BIN=${2:-$(dirname "$0")/../../build-ctl/src/outbox-operator}
export KUBECONFIG=$OUTBOX_TEST_KUBECONFIG PATH=$OUTBOX_TESTBED_BIN:$PATH
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NS=obr-bench-$$-$RANDOM
kubectl apply --server-side --force-conflicts -f "$ROOT/crds/" >/dev/null
kubectl wait --for=condition=Established crd/outboxrelays.outbox.dev --timeout=30s >/dev/null
kubectl create namespace "$NS" >/dev/null
manifest=$(mktemp)
for i in $(seq 1 "$N"); do
  cat >>"$manifest" <<YAML
apiVersion: v1
kind: Secret
metadata: {name: db-$i}
stringData: {dsn: "postgresql://u:p@db-$i/orders"}
---
apiVersion: outbox.dev/v1alpha1
kind: OutboxRelay
metadata: {name: relay-$i}
spec:
  database: {dsnSecretRef: {name: db-$i, key: dsn}}
  kafka: {bootstrapServers: "kafka:9092"}
---
YAML
done
kubectl -n "$NS" apply -f "$manifest" >/dev/null
rm -f "$manifest"

# Resources whose status is for generation 1 and whose condition $1 has status $2.
count() {
  kubectl -n "$NS" get obr -o jsonpath="{range .items[?(@.status.observedGeneration==1)]}{.status.conditions[?(@.type==\"$1\")].status}{\"\\n\"}{end}" |
    grep -c "^$2\$" || true
}
log=$(mktemp)
start=$(date +%s.%N)
"$BIN" --log-level warn controller --namespaces "$NS" --relay-image bench:1 \
  --http-address 127.0.0.1 --http-port 0 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
while [ "$(count Degraded False)" -lt "$N" ]; do
  kill -0 $pid || { cat "$log"; exit 1; }
  sleep 0.2
done
t1=$(echo "$(date +%s.%N) - $start" | bc)
rss1=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
hwm1=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
echo "reconciled: $N OutboxRelays in ${t1} s (controller RSS ${rss1} KiB, peak ${hwm1} KiB)"

p_start=$(date +%s.%N)
seq 1 "$N" | xargs -P 8 -I{} kubectl -n "$NS" patch deployment relay-{}-relay --subresource=status \
  --type=merge -p '{"status":{"observedGeneration":1,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2}}' >/dev/null
p_done=$(echo "$(date +%s.%N) - $p_start" | bc)
while [ "$(count Ready True)" -lt "$N" ]; do
  sleep 0.2
done
t2=$(echo "$(date +%s.%N) - $p_start" | bc)
rss2=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
echo "ready: all $N Ready=True ${t2} s after the status patches began (patching took ${p_done} s; RSS ${rss2} KiB)"
echo "namespace $NS left behind (the test bed has no namespace controller)"
