#!/usr/bin/env bash
# The README's main job: a local demo of the whole flow on embedded defaults.
# It brings up PostgreSQL, Kafka and a kube-apiserver on loopback, installs the
# CRD, runs the controller locally, applies an OutboxRelay, creates the outbox
# table, starts two relay replicas as local processes (there is no kubelet
# here) that report their backlog into the resource's status, runs the sample
# order service (every fifth transaction rolled back on purpose) and the
# sample points service (a Kafka consumer deduping with the inbox), prints a
# summary with `kubectl get obr`, checks it, and stops everything on exit.
#   scripts/demo.sh [--short]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
orders=500
[ "${1:-}" = "--short" ] && orders=60
# The demo test (tests/demo) runs this from an already built tree.
if [ -z "${OUTBOX_DEMO_SKIP_BUILD:-}" ]; then
  "$root/scripts/deps.sh"
  "$root/scripts/build.sh" >/dev/null
fi
build="${OUTBOX_BUILD_DIR:-$root/build}"
bin="$build/src/outbox-operator"

export TESTBED_STATE="${TESTBED_STATE:-$root/.testbed/demo}"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  "$root/scripts/testbed/down.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# shellcheck source=/dev/null
source "$("$root/scripts/testbed/up.sh" pg kafka kube | tail -n1)"
kubectl() { "$OUTBOX_TESTBED_BIN/kubectl" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" "$@"; }
export OUTBOX_DSN="$OUTBOX_TEST_PG_DSN"  # in Kubernetes this comes from a Secret
export OUTBOX_KAFKA_BOOTSTRAP="$OUTBOX_TEST_KAFKA_BOOTSTRAP"
sql() { /usr/lib/postgresql/15/bin/psql -X -q -tA "$OUTBOX_DSN" -c "$1"; }
logs="$TESTBED_STATE/demo-logs" && mkdir -p "$logs"

echo "== install the CRD, start the controller, apply an OutboxRelay"
kubectl apply --server-side --force-conflicts -f "$root/crds/" >/dev/null
kubectl wait --for condition=Established crd/outboxrelays.outbox.dev --timeout=60s >/dev/null
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n demo create secret generic orders-db --from-literal=dsn="$OUTBOX_DSN" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
"$bin" controller --kubeconfig "$OUTBOX_TEST_KUBECONFIG" --http-port 0 --relay-image outbox-operator:demo \
  >"$logs/controller.log" 2>&1 &
pids+=($!)
kubectl apply -f - >/dev/null <<EOY
apiVersion: outbox.dev/v1alpha1
kind: OutboxRelay
metadata: {name: orders, namespace: demo}
spec:
  database: {dsnSecretRef: {name: orders-db, key: dsn}, table: public.outbox_event}
  kafka: {bootstrapServers: "$OUTBOX_KAFKA_BOOTSTRAP", topic: "demo.{biz_type}"}
  relay: {replicas: 2}
EOY
for _ in $(seq 1 100); do
  kubectl -n demo get deployment orders-relay >/dev/null 2>&1 && break
  sleep 0.2
done
echo "controller applied: $(kubectl -n demo get deploy,cronjob,configmap,service,pdb -o name | tr '\n' ' ')"

echo "== migrate"
"$bin" migrate --table public.outbox_event
sql "DROP TABLE IF EXISTS orders, user_points, points_inbox" 2>/dev/null

echo "== two relay replicas (logs in $logs)"
for i in 1 2; do
  "$bin" relay --table public.outbox_event --topic 'demo.{biz_type}' \
    --listen "127.0.0.1:1808$i" --report-status demo/orders --report-interval 1s \
    --kubeconfig "$OUTBOX_TEST_KUBECONFIG" >"$logs/relay-$i.log" 2>&1 &
  pids+=($!)
done

echo "== order service: $orders orders, every 5th transaction rolled back"
"$build/examples/order-service" --dsn "$OUTBOX_DSN" --orders "$orders" --rollback-every 5 | tee "$logs/orders.log"

echo "== points service (consumer with the inbox)"
"$build/examples/points-service" --dsn "$OUTBOX_DSN" --brokers "$OUTBOX_KAFKA_BOOTSTRAP" \
  --topic demo.ORDER_PAID --group demo-points --idle-exit 5 | tee "$logs/points.log"

committed=$(sql "SELECT count(*) FROM orders")
rolled_back=$((orders - committed))
published=$(sql "SELECT count(*) FROM outbox_event WHERE status = 1")
leaked=$(sql "SELECT count(*) FROM outbox_event e WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = e.biz_id)")
consumed=$(sql "SELECT count(*) FROM points_inbox")
expected_points=$(sql "SELECT COALESCE(sum(amount / 10), 0) FROM orders")
points=$(sql "SELECT COALESCE(sum(points), 0) FROM user_points")

echo "== summary"
printf '%-34s %s\n' "orders committed" "$committed" "orders rolled back" "$rolled_back" \
  "events published" "$published" "rolled-back events published" "$leaked" \
  "events consumed (inbox)" "$consumed" "points expected / granted" "$expected_points / $points"
for i in 1 2; do
  printf 'relay %s: ' "$i"
  curl -s "http://127.0.0.1:1808$i/metrics" | grep -E '^outbox_(events_published_total|shards_owned)' | tr '\n' ' '
  echo
done
"$bin" inspect --table public.outbox_event | head -3
sleep 2  # one more status report after the drain
kubectl -n demo get obr orders
echo "(READY stays False here: no kubelet runs the relay pods; the relays above run as local processes and report the backlog into the status)"
if [ "$published" = "$committed" ] && [ "$leaked" = 0 ] && [ "$consumed" = "$committed" ] &&
  [ "$points" = "$expected_points" ]; then
  echo "demo OK: every committed order published and consumed exactly once, no rolled-back order published"
else
  echo "demo FAILED (logs in $logs)"
  exit 1
fi
