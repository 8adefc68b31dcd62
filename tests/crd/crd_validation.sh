#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# e2e: the OutboxRelay CRD on a real kube-apiserver.
#  - it is structural and becomes Established; every schema field has a
#    description (so `kubectl explain` teaches it);
#  - the samples apply with strict field validation and come back with the
#    defaults filled in; printer columns, short name, category, the status
#    and scale subresources work;
#  - a literal credential field is refused with --validate=strict and pruned
#    (never stored) without it;
#  - every file in invalid/ is refused by `kubectl apply` with a message that
#    contains each of its "# expect:" lines (which name the field).
# Needs OUTBOX_TESTBED_BIN and OUTBOX_TEST_KUBECONFIG (scripts/testbed/up.sh kube).
source "$(dirname "$0")/lib.sh"
use_kube
command -v python3 >/dev/null || die "python3 is needed to walk the CRD's JSON"

ns=$(unique_name crd-test)
cleanup() {
  kubectl delete outboxrelays --all -n "$ns" --wait=false >/dev/null 2>&1 || true
  # Without kube-controller-manager the namespace stays Terminating; that is harmless.
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

# --- the CRD itself ---------------------------------------------------------------
kubectl apply --server-side --force-conflicts -f "$CRD_FILE" >/dev/null || die "applying the CRD failed"
kubectl wait --for=condition=Established crd/outboxrelays.outbox.dev --timeout=60s >/dev/null ||
  die "the CRD did not become Established"
pass "CRD applied with server-side apply and Established"
nonstructural=$(kubectl get crd outboxrelays.outbox.dev \
  -o jsonpath='{.status.conditions[?(@.type=="NonStructuralSchema")].status}')
expect_eq "CRD schema is structural" "$nonstructural" ""

undocumented=$(kubectl get crd outboxrelays.outbox.dev -o json | python3 -c '
import json, sys
crd = json.load(sys.stdin)
missing = []
def walk(node, path):
    if "description" not in node and path != ".metadata":
        missing.append(path or "<root>")
    for key, child in node.get("properties", {}).items():
        walk(child, path + "." + key)
    if "items" in node:
        walk(node["items"], path + "[]")
    if isinstance(node.get("additionalProperties"), dict):
        walk(node["additionalProperties"], path + "{}")
for version in crd["spec"]["versions"]:
    walk(version["schema"]["openAPIV3Schema"], "")
print(" ".join(missing))
')
expect_eq "every schema field has a description" "$undocumented" ""

# The API server publishes a changed CRD's OpenAPI a few seconds after it is Established.
for _ in $(seq 1 30); do
  explain=$(kubectl explain outboxrelay.spec.relay 2>&1) && [[ "$explain" == *template* ]] && break
  sleep 1
done
expect_contains "kubectl explain outboxrelay.spec.relay describes batchSize" "$explain" "Events claimed, published and marked per batch"
expect_contains "kubectl explain shows the ordering enum" "$explain" "enum: PerKey, None"
explain=$(kubectl explain outboxrelay.spec.retry.maxBackoff 2>&1)
expect_contains "kubectl explain reaches leaf fields" "$explain" "Upper bound of the delay"

# --- samples and defaults -----------------------------------------------------------
kubectl create namespace "$ns" >/dev/null
out=$(kubectl apply -n "$ns" --validate=strict -f "$REPO_ROOT/operator/samples/" 2>&1) ||
  fail "the samples were refused: $out"
for r in orders payments inventory; do
  expect_contains "sample $r created" "$out" "outboxrelay.outbox.dev/$r created"
done

get() { kubectl get outboxrelay "$1" -n "$ns" -o jsonpath="{$2}"; }
expect_eq "default spec.relay.batchSize" "$(get orders .spec.relay.batchSize)" "500"
expect_eq "default spec.relay.replicas" "$(get orders .spec.relay.replicas)" "2"
expect_eq "default spec.relay.pollInterval" "$(get orders .spec.relay.pollInterval)" "2s"
expect_eq "default spec.relay.coalesceWindow" "$(get orders .spec.relay.coalesceWindow)" "auto"
expect_eq "default spec.relay.ordering" "$(get orders .spec.relay.ordering)" "PerKey"
expect_eq "default spec.relay.onSent" "$(get orders .spec.relay.onSent)" "Mark"
expect_eq "spec.relay.shards has no default (the table's count)" "$(get orders .spec.relay.shards)" ""
expect_eq "default spec.retry.maxAttempts" "$(get orders .spec.retry.maxAttempts)" "10"
expect_eq "default spec.retry.initialBackoff" "$(get orders .spec.retry.initialBackoff)" "1m"
expect_eq "default spec.retry.maxBackoff" "$(get orders .spec.retry.maxBackoff)" "64m"
expect_eq "default spec.retry.jitter" "$(get orders .spec.retry.jitter)" "0.2"
expect_eq "spec.compensation.schedule has no default (spread by the operator)" "$(get orders .spec.compensation.schedule)" ""
expect_eq "default spec.compensation.timeZone" "$(get orders .spec.compensation.timeZone)" "UTC"
expect_eq "default spec.compensation.staleAfter" "$(get orders .spec.compensation.staleAfter)" "5m"
expect_eq "default spec.compensation.batchSize" "$(get orders .spec.compensation.batchSize)" "200"
expect_eq "spec.retention.schedule has no default (spread by the operator)" "$(get orders .spec.retention.schedule)" ""
expect_eq "default spec.retention.timeZone" "$(get orders .spec.retention.timeZone)" "UTC"
expect_eq "default spec.retention.keepSent" "$(get orders .spec.retention.keepSent)" "168h"
expect_eq "default spec.retention.batchSize" "$(get orders .spec.retention.batchSize)" "1000"
expect_eq "default spec.monitoring.stuckAfter" "$(get orders .spec.monitoring.stuckAfter)" "10m"
expect_eq "default spec.suspend" "$(get orders .spec.suspend)" "false"
expect_eq "default spec.database.table" "$(get orders .spec.database.table)" "public.outbox_event"
expect_eq "default spec.kafka.topic" "$(get orders .spec.kafka.topic)" "outbox.{biz_type}"
expect_eq "explicit values are kept (full sample)" "$(get payments .spec.relay.batchSize)" "1000"
expect_eq "column mapping kept (debezium sample)" "$(get inventory .spec.database.columns.bizType)" "aggregatetype"

# --- names, printer columns, status and scale subresources ---------------------------
expect_contains "short name obr" "$(kubectl get obr -n "$ns" -o name)" "outboxrelay.outbox.dev/orders"
expect_contains "category outbox" "$(kubectl get outbox -n "$ns" -o name)" "outboxrelay.outbox.dev/orders"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kubectl patch outboxrelay orders -n "$ns" --subresource=status --type=merge -p "{\"status\":{
  \"observedGeneration\":1,
  \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Relaying\",\"message\":\"2/2 relays ready\",\"lastTransitionTime\":\"$now\",\"observedGeneration\":1}],
  \"relay\":{\"replicas\":2,\"readyReplicas\":2,\"selector\":\"app.kubernetes.io/instance=orders\"},
  \"backlog\":{\"pending\":12,\"failed\":3,\"oldestPendingSeconds\":0.4,\"measuredAt\":\"$now\"},
  \"lastCompensation\":{\"time\":\"$now\",\"outcome\":\"Succeeded\",\"resent\":0,\"failed\":0},
  \"lastCleanup\":{\"time\":\"$now\",\"outcome\":\"Succeeded\",\"removed\":91234,\"archived\":0},
  \"lastRequeue\":{\"time\":\"$now\",\"outcome\":\"Succeeded\",\"requeued\":3,\"request\":\"2026-12-04T10:00:00Z\"}}}" >/dev/null ||
  fail "patching the status subresource failed"
# A field missing from the status schema would be pruned without an error.
expect_eq "status.lastRequeue is kept" "$(kubectl get obr orders -n "$ns" -o jsonpath='{.status.lastRequeue.request} {.status.lastRequeue.requeued}')" "2026-12-04T10:00:00Z 3"
table=$(kubectl get obr orders -n "$ns")
expect_contains "printer columns" "$(head -1 <<<"$table")" "READY   PENDING   FAILED   OLDEST   AGE"
expect_contains "printer column values (Ready, Pending, Failed, Oldest)" "$(tail -1 <<<"$table")" "True    12        3        0.4"
wide=$(kubectl get obr orders -n "$ns" -o wide)
expect_contains "wide columns" "$(head -1 <<<"$wide" | tr -s " ")" "REASON REPLICAS TLS MEASURED AGE"
# The report's time as an age (kubectl prints a date column as one): how stale the figures are.
expect_eq "Measured shows the report's age" "$(tail -1 <<<"$wide" | awk '{print ($(NF-1) ~ /^[0-9]+s$/)}')" "1"
# The status subresource ignores spec changes, and the main resource ignores status.
kubectl patch outboxrelay orders -n "$ns" --subresource=status --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
expect_eq "status subresource does not change spec" "$(get orders .spec.suspend)" "false"
kubectl patch outboxrelay orders -n "$ns" --type=merge -p '{"status":{"backlog":{"pending":999}}}' >/dev/null
expect_eq "the main resource does not change status" "$(get orders .status.backlog.pending)" "12"
out=$(kubectl patch outboxrelay orders -n "$ns" --subresource=status --type=merge -p '{"status":{"conditions":[{"type":"Ready","status":"Maybe","reason":"X","message":"","lastTransitionTime":"'"$now"'"}]}}' 2>&1) &&
  fail "a condition with status Maybe was accepted" ||
  expect_contains "condition status is True/False/Unknown" "$out" "status.conditions[0].status"
kubectl scale outboxrelay orders -n "$ns" --replicas=3 >/dev/null || fail "kubectl scale on the scale subresource failed"
expect_eq "scale subresource sets spec.relay.replicas" "$(get orders .spec.relay.replicas)" "3"

# --- updates are validated too ---------------------------------------------------------
out=$(kubectl patch outboxrelay orders -n "$ns" --type=merge -p '{"spec":{"retry":{"maxBackoff":"30s"}}}' 2>&1) &&
  fail "an update with maxBackoff < initialBackoff was accepted" ||
  expect_contains "updates are validated (maxBackoff < initialBackoff)" "$out" "spec.retry.maxBackoff"

# --- credentials only through Secrets ----------------------------------------------------
literal=$(mktemp) && trap 'rm -f "$literal"; cleanup' EXIT
cat >"$literal" <<'YAML'
apiVersion: outbox.dev/v1alpha1
kind: OutboxRelay
metadata:
  name: literal-dsn
spec:
  database:
    dsnSecretRef: {name: orders-db, key: dsn}
    dsn: postgres://app:s3cret@db:5432/orders
  kafka:
    bootstrapServers: kafka:9092
YAML
out=$(kubectl apply -n "$ns" --validate=strict -f "$literal" 2>&1) &&
  fail "a literal dsn was accepted with --validate=strict" ||
  expect_contains "--validate=strict refuses a literal dsn" "$out" 'unknown field "spec.database.dsn"'
# Server-side apply refuses an undeclared field whatever --validate says.
out=$(kubectl apply -n "$ns" --server-side --validate=false -f "$literal" 2>&1) &&
  fail "server-side apply accepted a literal dsn with --validate=false" ||
  expect_contains "server-side apply refuses a literal dsn even with --validate=false" "$out" ".spec.database.dsn: field not declared in schema"
# A create without validation gets the field pruned: it is stored nowhere.
# (Client-side `kubectl apply --validate=false` would keep the whole input,
# literal included, in the last-applied-configuration annotation: docs/crd.md
# says never to turn validation off.)
kubectl create -n "$ns" --validate=false -f "$literal" >/dev/null 2>&1 || fail "create --validate=false failed"
stored=$(kubectl get outboxrelay literal-dsn -n "$ns" -o json --show-managed-fields)
expect_eq "without strict validation the literal is pruned" "$(get literal-dsn .spec.database.dsn)" ""
expect_not_contains "the pruned literal is stored nowhere" "$stored" "s3cret"

# --- the malformed specs -----------------------------------------------------------------
count=0
for f in "$CRD_TEST_DIR"/invalid/*.yaml; do
  count=$((count + 1))
  name=invalid/$(basename "$f")
  mapfile -t expects < <(sed -n 's/^# expect: //p' "$f")
  if [ ${#expects[@]} -eq 0 ]; then fail "$name has no '# expect:' line"; continue; fi
  if out=$(kubectl apply -n "$ns" --validate=strict -f "$f" 2>&1); then
    fail "$name was accepted: $out"
    continue
  fi
  ok=1
  for e in "${expects[@]}"; do
    [[ "$out" == *"$e"* ]] || { ok=0; fail "$name: refused, but the message lacks '$e':
$out"; }
  done
  [ $ok = 1 ] && pass "$name refused: ${expects[*]}"
done
[ "$count" -ge 20 ] && pass "$count malformed specs checked" || fail "only $count malformed specs (want at least 20)"
stray=$(kubectl get outboxrelays -n "$ns" -o name | grep -v -e /orders -e /payments -e /inventory -e /literal-dsn || true)
expect_eq "no malformed spec was stored" "$stray" ""

finish
