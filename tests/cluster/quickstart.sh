#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# cluster: docs/install.md's "First relay" block, run as written on the test bed's node
# after the chart is installed (as "With Helm" says). Only what cannot be true here is
# replaced: the namespace (unique per run), the DSN's user, password and host (the test
# bed's PostgreSQL, database "orders", no TLS) and the sample's Kafka address. The block
# must end with the OutboxRelay Ready: manageSchema created the table, the relay pods run.
source "$(dirname "$0")/../crd/lib.sh"
use_kube
use_helm
require_env OUTBOX_TEST_IMAGE OUTBOX_TEST_POD_PG_DSN OUTBOX_TEST_POD_KAFKA_BOOTSTRAP OUTBOX_TEST_PG_DSN
psql() { /usr/lib/postgresql/15/bin/psql -X -q -tA "$@"; }

doc=$REPO_ROOT/docs/install.md
block=$(awk '/^## First relay/{f=1} f && /^```sh$/{b=1; next} b && /^```$/{exit} b' "$doc")
[ -n "$block" ] || die "no sh block under '## First relay' in $doc"
expect_contains "the block applies the minimal sample" "$block" "operator/samples/minimal.yaml"
expect_contains "the block waits for Ready" "$block" "--for=condition=Ready"

ns=$(unique_name quickstart)
work=$(mktemp -d)
cleanup() {
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

helm upgrade --install outbox "$CHART_DIR" --namespace outbox-system --create-namespace \
  --set image.repository="${OUTBOX_TEST_IMAGE%:*}" --set image.tag="${OUTBOX_TEST_IMAGE##*:}" \
  --set image.pullPolicy=Never --wait --timeout 180s >/dev/null || die "helm install failed"

# A database of the doc's name, fresh: the sample's table is created by the operator's Job.
psql "$OUTBOX_TEST_PG_DSN" -c "DROP DATABASE IF EXISTS orders WITH (FORCE)" -c "CREATE DATABASE orders"
dsn="${OUTBOX_TEST_POD_PG_DSN%/*}/orders"
mkdir -p "$work/operator/samples"
sed "s/kafka:9092/$OUTBOX_TEST_POD_KAFKA_BOOTSTRAP/" "$REPO_ROOT/operator/samples/minimal.yaml" \
  >"$work/operator/samples/minimal.yaml"
script=$(sed -e "s|postgresql://USER:PASSWORD@HOST:5432/orders?sslmode=require|$dsn|" \
  -e "s/\bshop\b/$ns/g" <<<"$block")
expect_eq "only the namespace, the DSN and the Kafka address were replaced" \
  "$(grep -c "$ns\|$dsn" <<<"$script")" "$(grep -c 'shop\|USER:PASSWORD' <<<"$block")"

# Run from a directory holding the adjusted sample, with the test bed's kubectl.
if out=$(cd "$work" && KUBECTL="$OUTBOX_TESTBED_BIN/kubectl" bash -euo pipefail -c "
  kubectl() { \"\$KUBECTL\" --kubeconfig \"$OUTBOX_TEST_KUBECONFIG\" \"\$@\"; }
  $script" 2>&1); then
  pass "the First relay block ran as written"
else
  fail "the First relay block failed:
$out
$(kubectl -n "$ns" get obr,jobs,pods -o wide 2>&1)
$(kubectl -n "$ns" get obr orders -o jsonpath='{.status.conditions}' 2>&1)"
fi
expect_contains "kubectl get obr shows it Ready" "$out" "True"
expect_eq "SchemaReady" \
  "$(kubectl -n "$ns" get obr orders -o jsonpath='{.status.conditions[?(@.type=="SchemaReady")].status}')" "True"
expect_eq "the operator's Job created the table" \
  "$(psql "${OUTBOX_TEST_PG_DSN%/*}/orders" -c "SELECT to_regclass('public.outbox_event') IS NOT NULL")" "t"
kubectl delete namespace "$ns" --wait=true --timeout=120s >/dev/null 2>&1 || true
psql "$OUTBOX_TEST_PG_DSN" -c "DROP DATABASE IF EXISTS orders WITH (FORCE)"
finish
