#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# e2e: the Helm chart.
#  - `helm lint --strict` with default and non-default values;
#  - `helm template` renders what the values ask for (default and
#    tests/crd/values-nondefault.yaml), and the schema refuses every file in
#    tests/crd/values-bad/ with a message naming the key;
#  - the rendered manifests and operator/install.yaml pass a server-side dry run;
#  - `helm install` then `helm upgrade` against the real kube-apiserver (no
#    --wait: there is no kubelet, pods never run);
#  - least privilege: the service account's effective permissions
#    (`kubectl auth can-i --list`) are exactly the expected set, spot checks
#    with `kubectl auth can-i`, and real requests made as the service account
#    (server-side apply works, delete is forbidden, the relay's Role passes the
#    RBAC escalation check, a broader Role does not).
# Needs OUTBOX_TESTBED_BIN and OUTBOX_TEST_KUBECONFIG (scripts/testbed/up.sh kube).
source "$(dirname "$0")/lib.sh"
use_kube
use_helm

release=outbox-operator
ns=outbox-system
sa=system:serviceaccount:$ns:outbox-operator
scoped_release=outbox-scoped
scoped_ns=outbox-scoped-system
work_ns=$(unique_name helm-test)
probe=$(unique_name helm-probe)
tmp=$(mktemp -d)
cleanup() {
  kubectl delete secret "$probe" -n kube-system --ignore-not-found >/dev/null 2>&1 || true
  helm uninstall "$release" -n "$ns" >/dev/null 2>&1 || true
  helm uninstall "$scoped_release" -n "$scoped_ns" >/dev/null 2>&1 || true
  kubectl delete namespace "$work_ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# A release left behind by an interrupted run goes first.
helm uninstall "$release" -n "$ns" >/dev/null 2>&1 || true
helm uninstall "$scoped_release" -n "$scoped_ns" >/dev/null 2>&1 || true

# --- lint ----------------------------------------------------------------------------
out=$("$HELM" lint --strict "$CHART_DIR" 2>&1) && pass "helm lint --strict" || fail "helm lint --strict: $out"
out=$("$HELM" lint --strict "$CHART_DIR" -f "$CRD_TEST_DIR/values-nondefault.yaml" 2>&1) &&
  pass "helm lint --strict with values-nondefault.yaml" || fail "helm lint --strict (non-default): $out"

# --- template: defaults ----------------------------------------------------------------
render() { "$HELM" template "$release" "$CHART_DIR" --namespace "$ns" "$@"; }
render >"$tmp/default.yaml" || die "helm template with default values failed"
d=$(cat "$tmp/default.yaml")
for kind in Deployment ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding Service PodDisruptionBudget \
  ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding; do
  expect_contains "default render has a $kind" "$d" "kind: $kind"
done
expect_not_contains "default render has no ServiceMonitor" "$d" "kind: ServiceMonitor"
expect_not_contains "default render has no PrometheusRule" "$d" "kind: PrometheusRule"
expect_not_contains "default render has no Grafana dashboard" "$d" "grafana_dashboard"
expect_not_contains "default render has no kube-state-metrics config" "$d" "CustomResourceStateMetrics"
expect_not_contains "the CRD is not templated (it comes from crds/)" "$d" "kind: CustomResourceDefinition"
expect_contains "two operator replicas" "$d" "replicas: 2"
expect_contains "leader election on" "$d" "- --leader-elect"
rbac=$(render --show-only templates/rbac.yaml)
expect_not_contains "no wildcard in RBAC" "$rbac" '"*"'
verbs=$(grep -E '^\s+verbs: \[' <<<"$rbac")
for v in escalate bind impersonate '"update"' '"delete"'; do
  case $v in
    '"update"') expect_eq "update only on status, finalizers and the Lease" "$(grep -c '"update"' <<<"$verbs")" "3" ;;
    '"delete"') expect_eq "delete only on PodDisruptionBudgets, NetworkPolicies and Services" "$(grep -c '"delete"' <<<"$verbs")" "3" ;;
    *) expect_not_contains "no $v verb in RBAC" "$verbs" "$v" ;;
  esac
done
# Small variants.
v=$(render --set replicaCount=1)
expect_not_contains "no PodDisruptionBudget with one replica" "$v" "kind: PodDisruptionBudget"
v=$(render --set replicaCount=1 --set leaderElection.enabled=false)
expect_not_contains "no --leader-elect when disabled" "$v" "--leader-elect"
expect_not_contains "no Lease Role when leader election is disabled" "$v" "leader-election"
# The operator's NetworkPolicy (rendered only; the test bed's network plugin enforces none).
expect_not_contains "no NetworkPolicy by default" "$d" "kind: NetworkPolicy"
expect_not_contains "no API server CIDRs for the controller by default" "$d" "OUTBOX_NETWORK_POLICY_API_SERVER"
np=$(render --set networkPolicy.enabled=true --show-only templates/networkpolicy.yaml)
expect_contains "networkPolicy.enabled: a NetworkPolicy" "$np" "kind: NetworkPolicy"
expect_contains "it selects the operator's pods" "$np" $'matchLabels:\n      app.kubernetes.io/name: outbox-operator\n      app.kubernetes.io/instance: outbox-operator'
expect_contains "it limits both directions" "$np" 'policyTypes: ["Ingress", "Egress"]'
expect_contains "without metricsFrom, no ingress at all (never a rule without from)" "$np" "ingress: []"
expect_contains "egress to DNS" "$np" $'- {port: 53, protocol: UDP}\n        - {port: 53, protocol: TCP}'
expect_contains "egress to the API server's ports" "$np" $'- {port: 443, protocol: TCP}\n        - {port: 6443, protocol: TCP}'
expect_not_contains "without apiServerCIDRs, no address restriction" "$np" "ipBlock"
np=$(render --set networkPolicy.enabled=true --set 'networkPolicy.apiServerCIDRs={10.0.0.1/32,10.0.0.2/32}' \
  --set-json 'networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]' \
  --set http.port=9090)
expect_contains "metricsFrom reaches the HTTP port" "$np" $'    - from:\n        - namespaceSelector:\n            matchLabels:\n              kubernetes.io/metadata.name: monitoring\n      ports:\n        - port: 9090'
expect_contains "apiServerCIDRs narrow the API server egress" "$np" $'      to:\n        - ipBlock: {cidr: "10.0.0.1/32"}\n        - ipBlock: {cidr: "10.0.0.2/32"}'
expect_contains "apiServerCIDRs reach the controller (relays' NetworkPolicies)" "$np" \
  $'name: OUTBOX_NETWORK_POLICY_API_SERVER\n              value: "10.0.0.1/32,10.0.0.2/32"'
render --set networkPolicy.enabled=true --set 'networkPolicy.apiServerCIDRs={10.0.0.1/32}' \
  --set-json 'networkPolicy.metricsFrom=[{"podSelector":{"matchLabels":{"app":"prometheus"}}}]' \
  --show-only templates/networkpolicy.yaml >"$tmp/networkpolicy.yaml"
# The admission policy (tests/crd/admission_policy.sh proves what it refuses).
vap=$(render --show-only templates/admission-policy.yaml)
expect_contains "the policy matches the operator's ServiceAccount only" "$vap" \
  "request.userInfo.username == \"system:serviceaccount:$ns:outbox-operator\""
expect_contains "the policy denies the system namespaces" "$vap" "!(request.namespace in ['kube-system','kube-public','kube-node-lease'])"
expect_not_contains "without watchNamespaces, no namespace allow-list" "$vap" "may write only in its watchNamespaces"
expect_contains "the binding denies" "$vap" 'validationActions: ["Deny"]'
v=$(render --set 'watchNamespaces={team-a,team-b}' --show-only templates/admission-policy.yaml)
expect_contains "with watchNamespaces, writes only there" "$v" "request.namespace in ['team-a','team-b']"
v=$(render --set 'admissionPolicy.validationActions={Warn,Audit}' --show-only templates/admission-policy.yaml)
expect_contains "validationActions from values" "$v" 'validationActions: ["Warn","Audit"]'
v=$(render --set admissionPolicy.enabled=false)
expect_not_contains "admissionPolicy.enabled=false: no policy" "$v" "kind: ValidatingAdmissionPolicy"
v=$(render --kube-version 1.29.0)
expect_not_contains "below Kubernetes 1.30 (no admissionregistration.k8s.io/v1 policy): no policy" "$v" "kind: ValidatingAdmissionPolicy"
v=$(render --set controller.burst=1000000)
expect_contains "a large burst is passed as an integer" "$v" 'value: "1000000"'
expect_contains "default workers" "$d" $'name: OUTBOX_WORKERS\n              value: "4"'
expect_contains "default qps" "$d" $'name: OUTBOX_QPS\n              value: "150"'
expect_contains "default burst" "$d" $'name: OUTBOX_BURST\n              value: "300"'
expect_contains "default resync period" "$d" $'name: OUTBOX_RESYNC_PERIOD\n              value: "10m"'
v=$(render --set leaderElection.leaseDuration=1m30s --set leaderElection.renewDeadline=1m --set leaderElection.retryPeriod=2.5s) &&
  pass "compound durations that satisfy the lease rules render" || fail "1m30s / 1m / 2.5s refused: $v"
v=$(render --set replicaCount=1 --set leaderElection.enabled=false --set leaderElection.leaseDuration=5s) &&
  pass "lease timing is not checked without leader election" || fail "leader election off, still refused: $v"
# The controller refuses these at start-up (client-go's rules): the chart must refuse them first.
lease_bad() { # lease_bad LEASE RENEW RETRY EXPECTED
  local out
  if out=$(render --set leaderElection.leaseDuration="$1" --set leaderElection.renewDeadline="$2" \
    --set leaderElection.retryPeriod="$3" 2>&1); then
    fail "leaseDuration $1, renewDeadline $2, retryPeriod $3 rendered (the operator would crash-loop)"
  else
    expect_contains "leaseDuration $1, renewDeadline $2, retryPeriod $3 refused" "$out" "$4"
  fi
}
lease_bad 5s 10s 2s "leaderElection.leaseDuration must be greater than renewDeadline + retryPeriod"
lease_bad 12s 10s 2s "leaderElection.leaseDuration must be greater than renewDeadline + retryPeriod"
lease_bad 15s 2s 2s "leaderElection.renewDeadline must be greater than 1.2 x retryPeriod"
lease_bad 500ms 200ms 100ms "leaderElection.leaseDuration must be at least 1s"
v=$(render --set image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef)
expect_contains "image by digest" "$v" 'image: "ghcr.io/outbox-operator/outbox-operator@sha256:0123'

# --- template: non-default values ------------------------------------------------------
render -f "$CRD_TEST_DIR/values-nondefault.yaml" >"$tmp/nondefault.yaml" || die "helm template with values-nondefault.yaml failed"
n=$(cat "$tmp/nondefault.yaml")
expect_contains "replicaCount 3" "$n" "replicas: 3"
expect_contains "custom image" "$n" 'image: "registry.example.com/platform/outbox-operator:0.1.0-rc.1"'
expect_contains "relay image passed to the controller" "$n" 'value: "registry.example.com/platform/outbox-relay:0.1.0"'
expect_contains "watch namespaces passed to the controller" "$n" 'value: "team-a,team-b"'
expect_contains "custom lease name in the Role" "$n" 'resourceNames: ["outbox-leader"]'
expect_not_contains "watchNamespaces: no ClusterRoleBinding" "$n" "kind: ClusterRoleBinding"
expect_contains "watchNamespaces: RoleBinding in team-a" "$n" "namespace: team-a"
expect_contains "watchNamespaces: RoleBinding in team-b" "$n" "namespace: team-b"
expect_contains "ServiceMonitor enabled" "$n" "kind: ServiceMonitor"
expect_contains "PrometheusRule enabled" "$n" "kind: PrometheusRule"
for alert in OutboxEventsStuck OutboxEventsFailing OutboxFailedEventsGrowing OutboxFailedEventsPresent \
  OutboxOrderAnomalies OutboxDatabaseDown OutboxKafkaDown OutboxRelayDown OutboxRelayNotReady OutboxOperatorDown; do
  expect_contains "alert $alert" "$n" "alert: $alert"
  expect_contains "alert $alert: runbook under runbookBaseUrl" "$n" "runbook_url: https://wiki.example.com/outbox/runbooks/$alert.md"
done
expect_contains "stuck threshold from values" "$n" "(outbox_oldest_pending_seconds{outbox_component=\"relay\"}) > 300"
expect_contains "FAILED growth threshold from values" "$n" $'offset 1h))\n            > 10'
expect_contains "not-Ready duration from values" "$n" "for: 30m"
expect_contains "kube-state-metrics config ConfigMap" "$n" "name: outbox-kube-state-metrics"
expect_contains "Grafana dashboard ConfigMap" "$n" "name: outbox-dashboard"
expect_contains "dashboard ConfigMap carries the sidecar label" "$n" 'grafana_dashboard: "1"'
expect_contains "dashboard ConfigMap annotations from values" "$n" "grafana_folder: Outbox"
expect_contains "PodDisruptionBudget minAvailable from values" "$n" "minAvailable: 2"
expect_contains "non-default: the admission policy allows only the watchNamespaces" "$n" "request.namespace in ['team-a','team-b']"
expect_contains "non-default: deniedNamespaces from values" "$n" "['kube-system','kube-public','kube-node-lease','platform']"
expect_contains "non-default: the operator's NetworkPolicy" "$n" "kind: NetworkPolicy"
expect_contains "non-default: metrics peers on the HTTP port" "$n" $'app.kubernetes.io/name: prometheus\n      ports:\n        - port: 9090'
expect_contains "HTTP port from values" "$n" "containerPort: 9090"
expect_contains "workers from values" "$n" $'name: OUTBOX_WORKERS\n              value: "8"'
expect_contains "qps from values" "$n" $'name: OUTBOX_QPS\n              value: "200.5"'
expect_contains "burst from values" "$n" $'name: OUTBOX_BURST\n              value: "400"'
expect_contains "resync period from values" "$n" $'name: OUTBOX_RESYNC_PERIOD\n              value: "5m"'

# --- the values schema ------------------------------------------------------------------
for f in "$CRD_TEST_DIR"/values-bad/*.yaml; do
  name=values-bad/$(basename "$f")
  want=$(sed -n 's/^# expect: //p' "$f")
  if out=$("$HELM" template x "$CHART_DIR" -f "$f" 2>&1); then
    fail "$name was accepted by the values schema"
  else
    expect_contains "$name refused by values.schema.json" "$out" "$want"
  fi
done
out=$("$HELM" template x "$CHART_DIR" --set replicaCount=two 2>&1) && fail "--set replicaCount=two accepted" ||
  expect_contains "--set replicaCount=two refused" "$out" "replicaCount"

# --- server-side dry run of what the chart and install.yaml produce -----------------------------
kubectl apply --server-side -f "$CRD_FILE" >/dev/null
kubectl create namespace "$work_ns" >/dev/null
for n2 in "$ns" team-a team-b; do kubectl create namespace "$n2" >/dev/null 2>&1 || true; done
out=$(kubectl apply --dry-run=server -f "$tmp/default.yaml" 2>&1) &&
  pass "default render passes a server-side dry run" || fail "default render refused by the apiserver: $out"
render -f "$CRD_TEST_DIR/values-nondefault.yaml" --set metrics.serviceMonitor.enabled=false \
  --set metrics.prometheusRule.enabled=false >"$tmp/nondefault-core.yaml"
out=$(kubectl apply --dry-run=server -f "$tmp/nondefault-core.yaml" 2>&1) &&
  pass "non-default render passes a server-side dry run" || fail "non-default render refused by the apiserver: $out"
render --set metrics.kubeStateMetrics.enabled=true --set metrics.kubeStateMetrics.serviceAccount.name=kube-state-metrics \
  --set metrics.kubeStateMetrics.serviceAccount.namespace=monitoring --show-only templates/kube-state-metrics.yaml >"$tmp/ksm.yaml"
out=$(kubectl apply --dry-run=server -f "$tmp/ksm.yaml" 2>&1) &&
  pass "the kube-state-metrics ConfigMap and RBAC pass a server-side dry run" || fail "kube-state-metrics objects refused: $out"
out=$(kubectl apply --dry-run=server -f "$tmp/networkpolicy.yaml" 2>&1) &&
  pass "the operator's NetworkPolicy passes a server-side dry run" || fail "the operator's NetworkPolicy refused: $out"
out=$(kubectl apply --dry-run=server -f "$REPO_ROOT/operator/install.yaml" 2>&1) &&
  pass "operator/install.yaml passes a server-side dry run" || fail "operator/install.yaml refused: $out"

# --- install and upgrade ----------------------------------------------------------------------
out=$(helm install "$release" "$CHART_DIR" -n "$ns" --create-namespace 2>&1) &&
  pass "helm install" || die "helm install failed: $out"
expect_contains "NOTES.txt shows the next steps" "$out" "kubectl get obr -A"
expect_contains "NOTES.txt names the admission policy" "$out" "ValidatingAdmissionPolicy outbox-operator-owned-objects-only"
jp() { kubectl get "$1" -n "$ns" -o jsonpath="{$2}"; }
expect_eq "Deployment has 2 replicas" "$(jp deploy/outbox-operator .spec.replicas)" "2"
expect_eq "controller args" "$(jp deploy/outbox-operator '.spec.template.spec.containers[0].args[*]')" "controller --leader-elect"
c='.spec.template.spec.containers[0]'
expect_eq "liveness probe /healthz" "$(jp deploy/outbox-operator "$c.livenessProbe.httpGet.path")" "/healthz"
expect_eq "readiness probe /readyz" "$(jp deploy/outbox-operator "$c.readinessProbe.httpGet.path")" "/readyz"
expect_eq "probe port 8080" "$(jp deploy/outbox-operator "$c.ports[?(@.name==\"http\")].containerPort")" "8080"
expect_eq "runAsNonRoot" "$(jp deploy/outbox-operator "$c.securityContext.runAsNonRoot")" "true"
expect_eq "runAsUser 65532" "$(jp deploy/outbox-operator "$c.securityContext.runAsUser")" "65532"
expect_eq "readOnlyRootFilesystem" "$(jp deploy/outbox-operator "$c.securityContext.readOnlyRootFilesystem")" "true"
expect_eq "allowPrivilegeEscalation false" "$(jp deploy/outbox-operator "$c.securityContext.allowPrivilegeEscalation")" "false"
expect_eq "capabilities drop ALL" "$(jp deploy/outbox-operator "$c.securityContext.capabilities.drop[*]")" "ALL"
expect_eq "seccomp RuntimeDefault" "$(jp deploy/outbox-operator "$c.securityContext.seccompProfile.type")" "RuntimeDefault"
expect_eq "POD_NAMESPACE from the downward API" \
  "$(jp deploy/outbox-operator "$c.env[?(@.name==\"POD_NAMESPACE\")].valueFrom.fieldRef.fieldPath")" "metadata.namespace"
expect_eq "POD_NAME from the downward API" \
  "$(jp deploy/outbox-operator "$c.env[?(@.name==\"POD_NAME\")].valueFrom.fieldRef.fieldPath")" "metadata.name"
expect_eq "PodDisruptionBudget minAvailable 1" "$(jp pdb/outbox-operator .spec.minAvailable)" "1"
expect_eq "metrics Service port" "$(jp svc/outbox-operator-metrics '.spec.ports[0].name'):$(jp svc/outbox-operator-metrics '.spec.ports[0].port')" "metrics:8080"
expect_eq "CRD present after install" "$(kubectl get crd outboxrelays.outbox.dev -o name)" \
  "customresourcedefinition.apiextensions.k8s.io/outboxrelays.outbox.dev"

out=$(helm upgrade "$release" "$CHART_DIR" -n "$ns" --set replicaCount=3 --set log.level=debug 2>&1) &&
  pass "helm upgrade" || fail "helm upgrade failed: $out"
expect_eq "upgrade changed replicas" "$(jp deploy/outbox-operator .spec.replicas)" "3"
expect_eq "upgrade changed the log level" "$(jp deploy/outbox-operator "$c.env[?(@.name==\"OUTBOX_LOG_LEVEL\")].value")" "debug"
expect_eq "release at revision 2" "$(helm history "$release" -n "$ns" --max 1 -o json | grep -o '"revision":[0-9]*')" '"revision":2'

# --- RBAC: the effective permissions are exactly these ---------------------------------------
# `kubectl auth can-i --list` rows as "resource|resourceNames|verbs", minus what
# every authenticated user gets (measured with a service account that has no bindings).
perms() {
  kubectl auth can-i --list --as="$1" -n "$2" | awk -F'  +' 'NR > 1 && $1 != "" { print $1 "|" $3 "|" $4 }' | sort -u
}
nobody=system:serviceaccount:$ns:nobody-$$
expected_cluster_rows='configmaps|[]|[get list watch create patch]
cronjobs.batch|[]|[get list watch create patch]
networkpolicies.networking.k8s.io|[]|[get list watch create patch delete]
deployments.apps|[]|[get list watch create patch]
jobs.batch|[]|[get list watch create patch]
events.events.k8s.io|[]|[create patch]
events|[]|[list create patch]
outboxrelays.outbox.dev/finalizers|[]|[update]
outboxrelays.outbox.dev/status|[]|[get update patch]
outboxrelays.outbox.dev|[]|[get list watch patch]
poddisruptionbudgets.policy|[]|[get list watch create patch delete]
pods|[]|[list]
rolebindings.rbac.authorization.k8s.io|[]|[get list watch create patch]
roles.rbac.authorization.k8s.io|[]|[get list watch create patch]
serviceaccounts|[]|[get list watch create patch]
services|[]|[get list watch create patch delete]'
expected_lease_rows='leases.coordination.k8s.io|[]|[create]
leases.coordination.k8s.io|[outbox-operator-leader]|[get update]'
got=$(comm -23 <(perms "$sa" "$work_ns") <(perms "$nobody" "$work_ns"))
expect_eq "permissions in a workload namespace are exactly the ClusterRole's" "$got" "$(sort <<<"$expected_cluster_rows")"
got=$(comm -23 <(perms "$sa" "$ns") <(perms "$nobody" "$ns"))
expect_eq "permissions in the release namespace add only the Lease" "$got" \
  "$(sort -u <<<"$expected_cluster_rows"$'\n'"$expected_lease_rows")"

can() { # can yes|no VERB RESOURCE [kubectl auth can-i flags...]
  local want=$1 verb=$2 res=$3; shift 3
  local got; got=$(kubectl auth can-i "$verb" "$res" --as="$sa" "$@" 2>/dev/null || true)
  expect_eq "can-i $verb $res $*" "$got" "$want"
}
can yes list outboxrelays.outbox.dev --all-namespaces
can yes watch outboxrelays.outbox.dev --all-namespaces
can yes patch outboxrelays.outbox.dev --subresource=status -n "$work_ns"
can yes update outboxrelays.outbox.dev --subresource=finalizers -n "$work_ns"
can yes patch outboxrelays.outbox.dev -n "$work_ns"
can no update outboxrelays.outbox.dev -n "$work_ns"
can no delete outboxrelays.outbox.dev -n "$work_ns"
can yes patch deployments.apps -n "$work_ns"
can yes create cronjobs.batch -n "$work_ns"
can no delete deployments.apps -n "$work_ns"
can no update deployments.apps -n "$work_ns"
can yes delete poddisruptionbudgets.policy -n "$work_ns"
# No Secret at all, not even by name (issue 42): a missing one is what the kubelet's Events say.
can no get secrets -n "$work_ns"
can no get secrets -n kube-system
can no list secrets -n "$work_ns"
can no list secrets --all-namespaces
can no watch secrets --all-namespaces
can yes list events -n "$work_ns"
can no watch events --all-namespaces
can no get events -n "$work_ns"
can no delete namespaces
can no create pods -n "$work_ns"
can no create pods/exec -n "$work_ns"
can no create clusterroles.rbac.authorization.k8s.io
can no create clusterrolebindings.rbac.authorization.k8s.io
can no escalate roles.rbac.authorization.k8s.io -n "$work_ns"
can no bind roles.rbac.authorization.k8s.io -n "$work_ns"
can no impersonate users
can no list nodes
can no patch customresourcedefinitions.apiextensions.k8s.io
can yes get leases.coordination.k8s.io/outbox-operator-leader -n "$ns"
can yes update leases.coordination.k8s.io/outbox-operator-leader -n "$ns"
can yes create leases.coordination.k8s.io -n "$ns"
can no update leases.coordination.k8s.io/someone-else -n "$ns"
can no list leases.coordination.k8s.io -n "$ns"
can no delete leases.coordination.k8s.io/outbox-operator-leader -n "$ns"
can no get leases.coordination.k8s.io/outbox-operator-leader -n "$work_ns"
can no create leases.coordination.k8s.io -n "$work_ns"
can no create leases.coordination.k8s.io -n kube-system

# --- RBAC: real requests as the service account -------------------------------------------
# The objects carry what the chart's admission policy asks of the operator's writes: its
# managed-by label and a controller ownerReference to an OutboxRelay.
as_sa() { kubectl --as="$sa" "$@"; }
owned='labels: {app.kubernetes.io/managed-by: outbox-operator}
  ownerReferences: [{apiVersion: outbox.dev/v1alpha1, kind: OutboxRelay, name: orders, uid: 0b0e6d1c-0000-4000-8000-000000000001, controller: true}]'
cat >"$tmp/relay-deploy.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: orders-relay
  namespace: $work_ns
  $owned
spec:
  replicas: 2
  selector: {matchLabels: {app: orders-relay}}
  template:
    metadata: {labels: {app: orders-relay}}
    spec: {containers: [{name: relay, image: ghcr.io/outbox-operator/outbox-operator:0.1.0, args: [relay]}]}
YAML
out=$(as_sa apply --server-side --field-manager=outbox-operator -f "$tmp/relay-deploy.yaml" 2>&1) &&
  pass "server-side apply creates a Deployment as the operator" || fail "server-side apply (create) as the operator: $out"
sed -i 's/replicas: 2/replicas: 0/' "$tmp/relay-deploy.yaml"
out=$(as_sa apply --server-side --field-manager=outbox-operator -f "$tmp/relay-deploy.yaml" 2>&1) &&
  pass "server-side apply updates it as the operator (create + patch suffice)" || fail "server-side apply (patch) as the operator: $out"
out=$(as_sa delete deployment orders-relay -n "$work_ns" 2>&1) && fail "the operator could delete a Deployment" ||
  expect_contains "the operator cannot delete a Deployment" "$out" "forbidden"
out=$(as_sa get secrets -n "$work_ns" 2>&1) && fail "the operator could list Secrets" ||
  expect_contains "the operator cannot list Secrets" "$out" "forbidden"
kubectl create secret generic orders-db -n "$work_ns" --from-literal=dsn=postgresql://u:p@db/orders >/dev/null
out=$(as_sa get secret orders-db -n "$work_ns" 2>&1) && fail "the operator read a Secret by name" ||
  expect_contains "the operator cannot get a Secret by name, even one an OutboxRelay would name" "$out" "forbidden"
kubectl create secret generic "$probe" -n kube-system --from-literal=k=v >/dev/null
out=$(as_sa get secret "$probe" -n kube-system 2>&1) && fail "the operator read a Secret in kube-system" ||
  expect_contains "the operator cannot get a Secret in kube-system (Forbidden)" "$out" "forbidden"
# The relay's Role: grants only what the operator holds, so the escalation check passes.
cat >"$tmp/relay-role.yaml" <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: orders-relay
  namespace: $work_ns
  $owned
rules:
  - {apiGroups: [outbox.dev], resources: [outboxrelays], verbs: [get]}
  - {apiGroups: [outbox.dev], resources: [outboxrelays/status], verbs: [get, patch, update]}
  - {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: orders-relay
  namespace: $work_ns
  $owned
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: orders-relay}
subjects: [{kind: ServiceAccount, name: orders-relay, namespace: $work_ns}]
YAML
out=$(as_sa apply --server-side --field-manager=outbox-operator -f "$tmp/relay-role.yaml" 2>&1) &&
  pass "the operator can create and bind the relay's Role (no escalation)" ||
  fail "creating the relay's Role and RoleBinding as the operator: $out"
out=$(as_sa create role too-broad -n "$work_ns" --verb=list --resource=secrets 2>&1) &&
  fail "the operator could create a Role broader than its own rights" ||
  expect_contains "a Role broader than the operator's rights is refused" "$out" "attempting to grant RBAC permissions not currently held"

# --- a namespace-scoped install ----------------------------------------------------------------
out=$(helm install "$scoped_release" "$CHART_DIR" -n "$scoped_ns" --create-namespace \
  --set 'watchNamespaces={team-a}' 2>&1) && pass "helm install with watchNamespaces" || fail "scoped install: $out"
ssa=system:serviceaccount:$scoped_ns:outbox-scoped-outbox-operator
expect_eq "scoped: can list outboxrelays in team-a" "$(kubectl auth can-i list outboxrelays.outbox.dev -n team-a --as="$ssa" 2>/dev/null || true)" "yes"
expect_eq "scoped: cannot list outboxrelays in team-b" "$(kubectl auth can-i list outboxrelays.outbox.dev -n team-b --as="$ssa" 2>/dev/null || true)" "no"
expect_eq "scoped: cannot list outboxrelays cluster-wide" "$(kubectl auth can-i list outboxrelays.outbox.dev -A --as="$ssa" 2>/dev/null || true)" "no"

# --- uninstall keeps the CRD (and with it every OutboxRelay) ------------------------------------
out=$(helm uninstall "$release" -n "$ns" 2>&1) && pass "helm uninstall" || fail "helm uninstall: $out"
expect_eq "the CRD survives helm uninstall" "$(kubectl get crd outboxrelays.outbox.dev -o name)" \
  "customresourcedefinition.apiextensions.k8s.io/outboxrelays.outbox.dev"
expect_eq "the ClusterRole is gone after uninstall" "$(kubectl get clusterrole outbox-operator -o name 2>/dev/null || true)" ""

finish
