#!/usr/bin/env bash
# The README's main job: the whole flow on a real single-node Kubernetes.
# It brings up PostgreSQL, Kafka and a cluster on loopback (etcd, kube-apiserver,
# controller-manager, scheduler, kubelet with containerd), builds the project's
# image from the Dockerfile, installs the operator with its Helm chart, creates
# the outbox table, applies an OutboxRelay whose relay pods publish to Kafka,
# runs the sample order service (every fifth transaction rolled back on
# purpose) and the sample points service (a Kafka consumer deduping with the
# inbox), prints a summary with `kubectl get obr`, checks it, and stops
# everything on exit.
#   scripts/demo.sh [--short]
# OUTBOX_DEMO_KEEP_TESTBED=1 leaves the test bed running (the demo test shares the
# cluster tests' test bed: one node per machine). OUTBOX_DEMO_NAMESPACE names the namespace
# (default demo; its name also prefixes the topics and the consumer group), and
# OUTBOX_DEMO_OPERATOR=installed runs the flow on an operator already installed to watch it
# (tests/cluster/release_install.sh: a signed release pulled from a registry).
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
cleanup() {
  [ -n "${OUTBOX_DEMO_KEEP_TESTBED:-}" ] || "$root/scripts/testbed/down.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT
echo "== test bed: PostgreSQL, Kafka, a one-node cluster, the image (cold: builds everything)"
# shellcheck source=/dev/null
source "$("$root/scripts/testbed/up.sh" pg kafka kube node | tail -n1)"
kubectl() { "$OUTBOX_TESTBED_BIN/kubectl" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" "$@"; }
helm() { "$OUTBOX_TESTBED_BIN/helm" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" "$@"; }
sql() { /usr/lib/postgresql/15/bin/psql -X -q -tA "$OUTBOX_TEST_PG_DSN" -c "$1"; }
ns=${OUTBOX_DEMO_NAMESPACE:-demo}
logs="$TESTBED_STATE/$ns-logs" && mkdir -p "$logs"

if [ "${OUTBOX_DEMO_OPERATOR:-}" = installed ]; then
  echo "== the operator installed before, watching namespace $ns"
else
  echo "== helm install the operator (image $OUTBOX_TEST_IMAGE)"
  helm upgrade --install outbox "$root/charts/outbox-operator" --namespace outbox-system --create-namespace \
    --set image.repository="${OUTBOX_TEST_IMAGE%:*}" --set image.tag="${OUTBOX_TEST_IMAGE##*:}" \
    --set image.pullPolicy=Never --wait --timeout 180s >/dev/null
  kubectl -n outbox-system get pods -o wide
fi

echo "== the outbox table (migrate), the DSN Secret, an OutboxRelay"
OUTBOX_DSN="$OUTBOX_TEST_PG_DSN" "$bin" migrate --table public.outbox_event
sql "DROP TABLE IF EXISTS orders, user_points, points_inbox, points_inbox_keys; TRUNCATE public.outbox_event" 2>/dev/null
# Each event's status: a log-mode table (migrate's default) has no status column, its _status
# view shows it as the progress implies; a status-mode table (an earlier demo's) has one.
statuses=outbox_event_status
[ "$(sql "SELECT to_regclass('public.outbox_event_status') IS NOT NULL")" = t ] || statuses=outbox_event
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# The relay pods reach PostgreSQL through the pod network: the DSN in the Secret says so.
kubectl -n "$ns" create secret generic orders-db --from-file=dsn=<(printf '%s' "$OUTBOX_TEST_POD_PG_DSN") \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f - >/dev/null <<EOY
apiVersion: outbox.dev/v1alpha1
kind: OutboxRelay
metadata: {name: orders, namespace: $ns}
spec:
  database: {dsnSecretRef: {name: orders-db, key: dsn}, table: public.outbox_event}
  kafka: {bootstrapServers: "$OUTBOX_TEST_POD_KAFKA_BOOTSTRAP", topic: "$ns.{biz_type}"}
  relay: {replicas: 2, pollInterval: 500ms}
EOY
kubectl -n "$ns" wait --for=condition=Ready obr/orders --timeout=180s >/dev/null
kubectl -n "$ns" get deploy,pods,cronjobs -o wide

echo "== order service: $orders orders, every 5th transaction rolled back"
"$build/examples/order-service" --dsn "$OUTBOX_TEST_PG_DSN" --orders "$orders" --rollback-every 5 | tee "$logs/orders.log"

echo "== the relay pods publish every committed event"
for _ in $(seq 1 120); do
  [ "$(sql "SELECT count(*) FROM $statuses WHERE status <> 1")" = 0 ] && break
  sleep 0.5
done

echo "== points service (consumer with the inbox)"
# It stops after 10 s without a message: everything was published before it started.
"$build/examples/points-service" --dsn "$OUTBOX_TEST_PG_DSN" --brokers "$OUTBOX_TEST_KAFKA_BOOTSTRAP" \
  --topic "$ns.ORDER_PAID" --group "$ns-points" --idle-exit 10 | tee "$logs/points.log"

committed=$(sql "SELECT count(*) FROM orders")
rolled_back=$((orders - committed))
published=$(sql "SELECT count(*) FROM $statuses WHERE status = 1")
dead=$(sql "SELECT COALESCE(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relname = 'outbox_event' OR relname LIKE 'outbox\_event\_p%'")
leaked=$(sql "SELECT count(*) FROM outbox_event e WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = e.biz_id)")
consumed=$(sql "SELECT count(*) FROM points_inbox")
expected_points=$(sql "SELECT COALESCE(sum(amount / 10), 0) FROM orders")
points=$(sql "SELECT COALESCE(sum(points), 0) FROM user_points")
traced=$(sed -n 's/.*, traced \([0-9]*\).*/\1/p' "$logs/points.log")

echo "== summary"
printf '%-34s %s\n' "orders committed" "$committed" "orders rolled back" "$rolled_back" \
  "events published" "$published" "rolled-back events published" "$leaked" \
  "events consumed (inbox)" "$consumed" "points expected / granted" "$expected_points / $points" \
  "consumed with their traceparent" "$traced" "dead tuples in the outbox table" "$dead"
for pod in $(kubectl -n "$ns" get pods -l app.kubernetes.io/component=relay -o name); do
  printf '%s: ' "${pod#pod/}"
  kubectl get --raw "/api/v1/namespaces/$ns/pods/${pod#pod/}:8080/proxy/metrics" |
    grep -E '^outbox_(events_published_total|shards_owned)' | tr '\n' ' '
  echo
done
OUTBOX_DSN="$OUTBOX_TEST_PG_DSN" "$bin" inspect --table public.outbox_event | head -3
sleep 2  # one more status report after the drain
kubectl -n "$ns" rollout status deploy/orders-relay --timeout=120s >/dev/null
kubectl -n "$ns" get obr orders
kubectl -n "$ns" get pods -l app.kubernetes.io/component=relay
ready=$(kubectl -n "$ns" get obr orders -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')
running=$(kubectl -n "$ns" get pods -l app.kubernetes.io/component=relay --field-selector=status.phase=Running -o name | wc -l)
if [ "$published" = "$committed" ] && [ "$leaked" = 0 ] && [ "$consumed" = "$committed" ] &&
  [ "$points" = "$expected_points" ] && [ "$traced" = "$committed" ] && [ "$ready" = True ] &&
  [ "$running" = 2 ]; then
  echo "demo OK: every committed order published by the relay pods and consumed exactly once with its trace context, no rolled-back order published, OutboxRelay Ready with 2 relay pods Running"
else
  echo "demo FAILED (ready=$ready, relay pods running=$running; logs in $logs and $TESTBED_STATE)"
  exit 1
fi
