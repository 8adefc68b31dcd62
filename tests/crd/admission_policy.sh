#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# e2e: the chart's ValidatingAdmissionPolicy against the test bed's real kube-apiserver.
#  - rendered with the chart's RBAC and ServiceAccount, then, as the operator's ServiceAccount
#    (impersonated): nothing in kube-system, nothing unlabelled or unowned, no take-over of
#    another's object, no RoleBinding to a ClusterRole, no Secret read (kube-system, a namespace
#    without an OutboxRelay); an owned, labelled object in a namespace with an OutboxRelay is
#    created, patched and deleted; other users are not matched;
#  - the real controller, authenticated with the ServiceAccount's own token, reconciles an
#    OutboxRelay to a healthy status with the policy enforcing, including the delete of a
#    PodDisruptionBudget it no longer wants and the create and delete of its NetworkPolicy.
# Usage: admission_policy.sh OUTBOX_OPERATOR_BINARY
# Needs OUTBOX_TESTBED_BIN, OUTBOX_TEST_KUBECONFIG, OUTBOX_TEST_KUBE_SERVER and
# OUTBOX_TEST_KUBE_CA (scripts/testbed/up.sh kube).
source "$(dirname "$0")/lib.sh"
use_kube
use_helm
require_env OUTBOX_TEST_KUBE_SERVER OUTBOX_TEST_KUBE_CA
binary=${1:?usage: admission_policy.sh OUTBOX_OPERATOR_BINARY}
[ -x "$binary" ] || die "$binary is not executable"

release=$(unique_name vap)
ns=$(unique_name vap-system)
work=$(unique_name vap-work)
bare=$(unique_name vap-bare)
sa=system:serviceaccount:$ns:$release
tmp=$(mktemp -d)
controller_pid=
cleanup() {
  [ -z "$controller_pid" ] || kill "$controller_pid" 2>/dev/null || true
  [ ! -s "$tmp/rendered.yaml" ] || kubectl delete --wait=false -f "$tmp/rendered.yaml" >/dev/null 2>&1 || true
  kubectl delete deployment -n kube-system "$release-admin" --wait=false >/dev/null 2>&1 || true
  kubectl delete secret -n kube-system "$release-probe" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" "$work" "$bare" --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

kubectl apply --server-side --force-conflicts -f "$CRD_FILE" >/dev/null
kubectl wait --for=condition=Established crd/outboxrelays.outbox.dev --timeout=30s >/dev/null
for n in "$ns" "$work" "$bare"; do kubectl create namespace "$n" >/dev/null; done
"$HELM" template "$release" "$CHART_DIR" --namespace "$ns" --set fullnameOverride="$release" \
  --show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml \
  --show-only templates/admission-policy.yaml >"$tmp/rendered.yaml" ||
  die "helm template of the ServiceAccount, RBAC and admission policy failed"
grep -q 'kind: ValidatingAdmissionPolicyBinding' "$tmp/rendered.yaml" || die "no policy binding rendered"
out=$(kubectl apply -f "$tmp/rendered.yaml" 2>&1) || die "applying the rendered policy: $out"
pass "the chart's ValidatingAdmissionPolicy and binding are accepted by the apiserver"
out=$(kubectl get validatingadmissionpolicy "$release-owned-objects-only" \
  -o jsonpath='{.status.typeChecking.expressionWarnings}' 2>&1)
expect_eq "the policy's expressions type-check without warnings" "$out" ""

as_sa() { kubectl --as="$sa" "$@"; }
# deployment NAME NAMESPACE [owner-uid [owner-name]]: a relay-like Deployment; labelled and
# owned when an owner uid is given.
deployment() {
  local meta="{name: $1, namespace: $2}"
  if [ -n "${3:-}" ]; then
    meta="{name: $1, namespace: $2, labels: {app.kubernetes.io/managed-by: outbox-operator},
      ownerReferences: [{apiVersion: outbox.dev/v1alpha1, kind: OutboxRelay, name: ${4:-orders},
      uid: $3, controller: true, blockOwnerDeletion: true}]}"
  fi
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: $meta
spec:
  replicas: ${REPLICAS:-1}
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec: {containers: [{name: relay, image: ghcr.io/outbox-operator/outbox-operator:test, args: [relay]}]}
YAML
}
apply_as_sa() { as_sa apply --server-side --force-conflicts --field-manager=outbox-operator -f - 2>&1; }

# The apiserver loads a new policy asynchronously: wait until the operator is refused in
# kube-system.
refused_in_kube_system=
for _ in $(seq 1 60); do
  if out=$(deployment probe kube-system fake-uid | as_sa apply --server-side --dry-run=server \
    --field-manager=outbox-operator -f - 2>&1); then
    sleep 0.5
  else
    refused_in_kube_system=$out
    break
  fi
done
[ -n "$refused_in_kube_system" ] || die "the policy never took effect (an owned Deployment in kube-system was still accepted after 30 s)"

# --- refused ----------------------------------------------------------------------------------
out=$(deployment "$release-relay" kube-system fake-uid "$release" | apply_as_sa) &&
  fail "the operator created a Deployment in kube-system" ||
  expect_contains "an owned, labelled Deployment in kube-system is refused, with the policy's message" \
    "$out" "the outbox operator may not write deployments in namespace kube-system"
expect_contains "the refusal names the policy" "$out" "ValidatingAdmissionPolicy '$release-owned-objects-only'"
# An object that exists in kube-system (created by an administrator) cannot be patched either.
deployment "$release-admin" kube-system | kubectl apply -f - >/dev/null
out=$(as_sa patch deployment "$release-admin" -n kube-system --type=merge -p '{"spec":{"replicas":0}}' 2>&1) &&
  fail "the operator patched a Deployment in kube-system" ||
  expect_contains "patching a Deployment in kube-system is refused" "$out" "may not write deployments in namespace kube-system"
out=$(as_sa create role "$release-x" -n kube-system --verb=get --resource=outboxrelays.outbox.dev 2>&1) &&
  fail "the operator created a Role in kube-system" ||
  expect_contains "a Role in kube-system is refused" "$out" "may not write roles in namespace kube-system"
out=$(as_sa create configmap "$release-x" -n kube-public 2>&1) &&
  fail "the operator created a ConfigMap in kube-public" ||
  expect_contains "a ConfigMap in kube-public is refused" "$out" "may not write configmaps in namespace kube-public"

# No read of a Secret either (issue 42): RBAC grants none, in kube-system or in a namespace
# without an OutboxRelay (reads are not admission requests: the ClusterRole alone refuses them).
kubectl create secret generic "$release-probe" -n kube-system --from-literal=k=v >/dev/null
out=$(as_sa get secret "$release-probe" -n kube-system 2>&1) &&
  fail "the operator read a Secret in kube-system" ||
  expect_contains "a Secret in kube-system cannot be read (Forbidden)" "$out" "forbidden"
kubectl create secret generic orders-db -n "$bare" --from-literal=dsn=postgresql://u:p@db/orders >/dev/null
out=$(as_sa get secret orders-db -n "$bare" 2>&1) &&
  fail "the operator read a Secret in a namespace without an OutboxRelay" ||
  expect_contains "a Secret in a namespace without an OutboxRelay cannot be read (Forbidden)" "$out" "forbidden"

out=$(deployment orders-relay "$bare" | apply_as_sa) &&
  fail "the operator created an unlabelled Deployment" ||
  expect_contains "an unlabelled, unowned Deployment in a user namespace is refused" "$out" \
    "may write only objects labelled app.kubernetes.io/managed-by=outbox-operator"
out=$(deployment orders-relay "$bare" | sed 's/^metadata: .*/metadata: {name: orders-relay, namespace: '"$bare"', labels: {app.kubernetes.io\/managed-by: outbox-operator}}/' | apply_as_sa) &&
  fail "the operator created a labelled Deployment no OutboxRelay owns" ||
  expect_contains "a labelled Deployment without an OutboxRelay owner is refused" "$out" \
    "may write only objects an OutboxRelay controls"
out=$(deployment someone-else "$bare" fake-uid orders | apply_as_sa) &&
  fail "the operator created an object whose name does not start with its owner's" ||
  expect_contains "an object whose name does not start with its owner's name is refused" "$out" \
    "may write only objects an OutboxRelay controls"

# --- allowed: owned objects in a namespace with an OutboxRelay -----------------------------------
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: outbox.dev/v1alpha1
kind: OutboxRelay
metadata: {name: orders, namespace: $work}
spec:
  database: {dsnSecretRef: {name: orders-db, key: dsn}}
  kafka: {bootstrapServers: "kafka:9092"}
  relay: {replicas: 2}
YAML
uid=$(kubectl get outboxrelay orders -n "$work" -o jsonpath='{.metadata.uid}')
[ -n "$uid" ] || die "no uid on OutboxRelay $work/orders"
out=$(deployment orders-probe "$work" "$uid" | apply_as_sa) &&
  pass "an owned, labelled Deployment in a namespace with an OutboxRelay is created" ||
  fail "the operator could not create its own Deployment: $out"
out=$(deployment orders-probe "$work" "$uid" | REPLICAS=0 apply_as_sa) &&
  pass "and patched (server-side apply)" || fail "the operator could not patch its own Deployment: $out"
out=$(as_sa create service clusterip orders-probe -n "$work" --tcp=8080:8080 --dry-run=client -o json |
  python3 -c 'import json,sys; s=json.load(sys.stdin); s["metadata"]["labels"]={"app.kubernetes.io/managed-by":"outbox-operator"}; s["metadata"]["ownerReferences"]=[{"apiVersion":"outbox.dev/v1alpha1","kind":"OutboxRelay","name":"orders","uid":sys.argv[1],"controller":True}]; print(json.dumps(s))' "$uid" |
  as_sa apply --server-side --field-manager=outbox-operator -f - 2>&1) &&
  pass "an owned, labelled Service is created" || fail "the operator could not create its own Service: $out"
out=$(as_sa delete service orders-probe -n "$work" 2>&1) &&
  pass "and deleted (the policy reads a delete's oldObject)" || fail "the operator could not delete its own Service: $out"

# The Drop Job of a deleted OutboxRelay has no owner (deletionPolicy Drop): allowed as a Job
# labelled component=drop, named <instance>-drop-..., without a ServiceAccount token; not with one.
drop_job() { # drop_job NAME AUTOMOUNT
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $work
  labels: {app.kubernetes.io/managed-by: outbox-operator, app.kubernetes.io/instance: orders, app.kubernetes.io/component: drop}
spec:
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: $2
      containers: [{name: drop, image: "bench:1", args: ["migrate", "--drop"]}]
YAML
}
out=$(drop_job orders-drop-1a2b3c4d false | as_sa create --dry-run=server -f - 2>&1) &&
  pass "the unowned Drop Job (component=drop, no token) is created" ||
  fail "the operator could not create its Drop Job: $out"
out=$(drop_job orders-drop-1a2b3c4d true | as_sa create --dry-run=server -f - 2>&1) &&
  fail "the operator created an unowned Job that mounts a ServiceAccount token" ||
  expect_contains "an unowned drop Job with a ServiceAccount token is refused" "$out" \
    "may write only objects an OutboxRelay controls"
out=$(drop_job other-drop-1a2b3c4d false | as_sa create --dry-run=server -f - 2>&1) &&
  fail "the operator created an unowned Job named after another instance" ||
  expect_contains "an unowned drop Job not named after its instance is refused" "$out" \
    "may write only objects an OutboxRelay controls"

# No take-over: an object someone else created stays theirs, even under a name the operator uses.
deployment orders-other "$work" | kubectl apply -f - >/dev/null
out=$(deployment orders-other "$work" "$uid" | apply_as_sa) &&
  fail "the operator took over a Deployment it did not create" ||
  expect_contains "labelling and owning an existing object someone else created is refused" "$out" \
    "may not take over deployments $work/orders-other"
# A RoleBinding may bind only the Role of its name, to the ServiceAccount of its name.
rb() {
  cat <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: orders-relay
  namespace: $work
  labels: {app.kubernetes.io/managed-by: outbox-operator}
  ownerReferences: [{apiVersion: outbox.dev/v1alpha1, kind: OutboxRelay, name: orders, uid: $uid, controller: true}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: $1, name: $2}
subjects: [{kind: $3, name: $4, namespace: $work}]
YAML
}
cat <<YAML | as_sa apply --server-side --field-manager=outbox-operator -f - >/dev/null 2>&1 || fail "the operator could not create the relay's Role"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: orders-relay
  namespace: $work
  labels: {app.kubernetes.io/managed-by: outbox-operator}
  ownerReferences: [{apiVersion: outbox.dev/v1alpha1, kind: OutboxRelay, name: orders, uid: $uid, controller: true}]
rules: [{apiGroups: [outbox.dev], resources: [outboxrelays], verbs: [get]}]
YAML
out=$(rb ClusterRole "$release" ServiceAccount orders-relay | apply_as_sa) &&
  fail "the operator bound its own ClusterRole" ||
  expect_contains "a RoleBinding to a ClusterRole is refused" "$out" "may bind only the Role of the RoleBinding's name"
out=$(rb Role orders-relay ServiceAccount orders-relay | apply_as_sa) &&
  pass "the relay's RoleBinding (a Role, to the relay's ServiceAccount) is created" ||
  fail "the operator could not bind the relay's Role: $out"
kubectl delete rolebinding orders-relay -n "$work" >/dev/null 2>&1 || true
out=$(rb Role orders-relay User mallory | apply_as_sa) &&
  fail "the operator bound a Role to a user" || expect_contains "a RoleBinding to a user is refused" "$out" "may bind only the Role of the RoleBinding's name"

# --- other users are not matched ---------------------------------------------------------------------
out=$(deployment "$release-unlabelled" "$bare" | kubectl apply --dry-run=server -f - 2>&1) &&
  pass "an administrator still creates an unlabelled Deployment" || fail "the policy refused another user: $out"

# --- the real controller, as the ServiceAccount, with the policy enforcing ---------------------------
token=$(kubectl create token "$release" -n "$ns" --duration=1h) || die "kubectl create token failed"
cat >"$tmp/sa.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: testbed, cluster: {server: "$OUTBOX_TEST_KUBE_SERVER", certificate-authority: "$OUTBOX_TEST_KUBE_CA"}}]
users: [{name: operator, user: {token: "$token"}}]
contexts: [{name: operator, context: {cluster: testbed, user: operator}}]
current-context: operator
YAML
kubectl delete deployment orders-probe orders-other -n "$work" >/dev/null
kubectl delete role orders-relay -n "$work" >/dev/null
kubectl create secret generic orders-db -n "$work" --from-literal=dsn=postgresql://u:p@db/orders >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$binary" controller --kubeconfig="$tmp/sa.kubeconfig" --namespaces="$work" \
  --listen="127.0.0.1:$port" --relay-image=ghcr.io/outbox-operator/outbox-operator:test \
  >"$tmp/controller.log" 2>&1 &
controller_pid=$!
healthy() { # healthy GENERATION: observed and not Degraded
  local got
  got=$(kubectl get outboxrelay orders -n "$work" -o \
    jsonpath='{.status.observedGeneration}/{.status.conditions[?(@.type=="Degraded")].status}' 2>/dev/null)
  [ "$got" = "$1/False" ]
}
wait_for() { # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}
if wait_for 60 healthy 1; then
  pass "the controller, as its ServiceAccount under the policy, reconciles an OutboxRelay (observed, not Degraded)"
else
  fail "the controller did not reconcile under the policy: $(kubectl get outboxrelay orders -n "$work" -o jsonpath='{.status}')
$(tail -20 "$tmp/controller.log")"
fi
for obj in deployment/orders-relay serviceaccount/orders-relay role/orders-relay rolebinding/orders-relay \
  configmap/orders-config service/orders-metrics cronjob/orders-compensate cronjob/orders-cleanup \
  poddisruptionbudget/orders-relay; do
  expect_eq "the controller applied $obj" "$(kubectl get "$obj" -n "$work" -o name 2>/dev/null | cut -d/ -f2)" "${obj#*/}"
done
kubectl patch outboxrelay orders -n "$work" --type=merge -p '{"spec":{"relay":{"replicas":1}}}' >/dev/null
pdb_gone() { ! kubectl get poddisruptionbudget orders-relay -n "$work" >/dev/null 2>&1; }
if wait_for 60 pdb_gone && wait_for 30 healthy 2; then
  pass "scaled to one replica, the controller deletes its PodDisruptionBudget under the policy"
else
  fail "the PodDisruptionBudget was not deleted under the policy: $(tail -20 "$tmp/controller.log")"
fi
# The opt-in NetworkPolicy: created, then deleted, by the ServiceAccount under the policy.
kubectl patch outboxrelay orders -n "$work" --type=merge -p '{"spec":{"networkPolicy":{"enabled":true,
  "egress":[{"to":[{"ipBlock":{"cidr":"10.0.3.7/32"}}],"ports":[{"port":5432}]}]}}}' >/dev/null
np_there() { kubectl get networkpolicy orders-relay -n "$work" >/dev/null 2>&1; }
if wait_for 60 np_there && wait_for 30 healthy 3; then
  pass "spec.networkPolicy: the controller creates its NetworkPolicy under the policy"
else
  fail "no NetworkPolicy under the policy: $(tail -20 "$tmp/controller.log")"
fi
kubectl patch outboxrelay orders -n "$work" --type=merge -p '{"spec":{"networkPolicy":{"enabled":false}}}' >/dev/null
if wait_for 60 eval '! np_there' && wait_for 30 healthy 4; then
  pass "turned off, the controller deletes its NetworkPolicy under the policy"
else
  fail "the NetworkPolicy was not deleted under the policy: $(tail -20 "$tmp/controller.log")"
fi
expect_not_contains "the controller's log has no refusal by the policy" "$(cat "$tmp/controller.log")" "owned-objects-only"

finish
