#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# cluster: a release as a user pulls it, on the test bed's node. scripts/release.sh publishes
# this tree's image (the archive build-images.sh made) and chart to the test bed's registry,
# signed; scripts/install-release.sh verifies chart, image and SBOM with cosign and runs
# `helm upgrade --install oci://...@<chart digest>`; the node's containerd then pulls the image
# from the registry by digest (it was not imported: the node never had it under that name),
# and the operator becomes Ready; the demo's flow (scripts/demo.sh --short) then runs on it. A
# tampered chart pushed under the release's tag, and a chart signed with the release's key
# that names an unsigned image, are refused and install nothing.
# The operator installed here watches only its own namespace (watchNamespaces), beside the
# one the other cluster tests share, and is uninstalled at the end.
source "$(dirname "$0")/../crd/lib.sh"
use_kube
use_helm
require_env TESTBED_STATE OUTBOX_TEST_REGISTRY OUTBOX_TEST_REGISTRY_CA OUTBOX_TESTBED_CRANE OUTBOX_TEST_IMAGE
COSIGN=$("$REPO_ROOT/scripts/testbed/build-release-tools.sh" cosign | tail -n1) || die "building cosign failed"
export OUTBOX_TESTBED_BIN CRANE=$OUTBOX_TESTBED_CRANE COSIGN HELM
ctr_node() { ctr --address "$TESTBED_STATE/node/containerd/containerd.sock" --namespace k8s.io "$@"; }
ctr_node version >/dev/null 2>&1 || die "the node's containerd does not answer (up.sh ... node)"
version=$(sed -n 's/^version: *//p' "$CHART_DIR/Chart.yaml")
name=$(unique_name relnode)
ns=$name
prefix=$OUTBOX_TEST_REGISTRY/$name
tmp=$(mktemp -d)
# The release's key pair, this run's own, with an empty password (cosign reads a password from
# COSIGN_PASSWORD only here, where it is empty; release.sh gives it on a pipe).
(cd "$tmp" && COSIGN_PASSWORD="" "$COSIGN" generate-key-pair >/dev/null 2>&1) || die "cosign generate-key-pair failed"
OUTBOX_TEST_COSIGN_KEY=$tmp/cosign.key OUTBOX_TEST_COSIGN_PUB=$tmp/cosign.pub
shared_scaled=0  # the shared operator scaled to zero for the demo (below)
cleanup() {
  [ "$shared_scaled" = 0 ] || restore_shared || true
  # No relay of this namespace may outlive the test: the demo's table is shared (demo_short).
  declare -F delete_relays_in >/dev/null && delete_relays_in "$ns"
  helm uninstall "$name" --namespace "$ns" --wait --timeout 120s >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- publish this tree's image and chart --------------------------------------------------
images=$("$REPO_ROOT/scripts/testbed/build-images.sh" | tail -n1) || die "build-images.sh failed"
expect_eq "the archive is this tree's image" "$(cat "$images/outbox-operator.ref")" "$OUTBOX_TEST_IMAGE"
tree=$tmp/tree
release_tree "$tree" "$version"
if out=$("$tree/scripts/release.sh" "$version" --allow-dirty --out "$tmp/dist" \
  --image-archive "$images/outbox-operator.tar" --push "$prefix" --key "$OUTBOX_TEST_COSIGN_KEY" --no-tlog \
  --registry-ca "$OUTBOX_TEST_REGISTRY_CA" 2>&1); then
  pass "release.sh published $version to $prefix"
else
  die "release.sh --push failed: $out"
fi
image=$(sed -n 's/^image=//p' "$tmp/dist/published.env")
chart=$(sed -n 's/^chart=//p' "$tmp/dist/published.env")
digest=${image##*@}
# The project image's SBOM lists the Debian packages its libraries come from.
for pkg in libc6 libpq5 libssl3; do
  grep -q "\"pkg:deb/debian/$pkg@" "$tmp/dist/sbom.spdx.json" && pass "the SBOM lists $pkg" ||
    fail "the SBOM does not list $pkg"
done
expect_eq "the node has no image of $prefix before the install" \
  "$(ctr_node images ls -q | grep -c "^$prefix/" || true)" "0"
# The release of the same tree is the same image, byte for byte: a node that pulled it in an
# earlier run on this test bed (a developer's rerun) holds its manifest and fetches nothing.
held_before=$(ctr_node content ls -q 2>/dev/null | grep -cx "$digest" || true)

# --- install as a user would ------------------------------------------------------------------
install_release() {
  KUBECONFIG=$OUTBOX_TEST_KUBECONFIG "$REPO_ROOT/scripts/install-release.sh" "$version" --chart "$chart" \
    --key "$OUTBOX_TEST_COSIGN_PUB" --no-tlog --registry-ca "$OUTBOX_TEST_REGISTRY_CA" "$@"
}
if out=$(install_release --release "$name" --namespace "$ns" -- --set "watchNamespaces={$ns}" \
  --set log.format=text --wait --timeout 300s 2>&1); then
  pass "install-release.sh verified and installed $chart"
else
  fail "install-release.sh failed: $out
$(kubectl -n "$ns" get pods -o wide 2>&1)
$(kubectl -n "$ns" get events --sort-by=.lastTimestamp 2>&1 | tail -n 20)"
fi
expect_contains "the chart's signature was verified" "$out" "signature verified"
expect_contains "the image's SBOM attestation was verified" "$out" "SBOM attestation verified"
deploy=$(kubectl -n "$ns" get deploy -l "app.kubernetes.io/instance=$name" -o name | head -n1)
[ -n "$deploy" ] || die "no Deployment of release $name in $ns"
if kubectl -n "$ns" wait --for=condition=Available "$deploy" --timeout=240s >/dev/null 2>&1; then
  pass "the operator is Available"
else
  fail "the operator did not become Available:
$(kubectl -n "$ns" get pods -o wide 2>&1)
$(kubectl -n "$ns" get events --sort-by=.lastTimestamp 2>&1 | tail -n 20)"
fi
expect_eq "it runs the released image by digest" \
  "$(kubectl -n "$ns" get "$deploy" -o jsonpath='{.spec.template.spec.containers[0].image}')" "$image"
expect_eq "its relays will run the same image" \
  "$(kubectl -n "$ns" get "$deploy" -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="OUTBOX_RELAY_IMAGE")].value}')" \
  "$image"
image_ids=$(kubectl -n "$ns" get pods -l "app.kubernetes.io/instance=$name" \
  -o jsonpath='{range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}')
expect_contains "the pods run the pulled digest" "$image_ids" "$digest"
expect_contains "the node pulled it from the registry" "$(ctr_node images ls -q)" "$image"
if [ "$held_before" != 0 ]; then
  pass "the node held $digest from an earlier run on this test bed (no fetch to see)"
else
  grep -q "GET /v2/${prefix#*/}/outbox-operator/manifests/$digest.*containerd" \
    "$TESTBED_STATE/registry/registry.log" && pass "containerd fetched the manifest from the registry" ||
    fail "the registry's log shows no fetch of $digest by containerd"
fi
leader=$(kubectl -n "$ns" get lease -o jsonpath='{.items[*].spec.holderIdentity}' 2>/dev/null)
[ -n "$leader" ] && pass "an operator pod leads ($leader)" || fail "no operator pod holds the Lease in $ns"

# --- the demo's flow on the released operator -----------------------------------------------
# scripts/demo.sh --short in the release's namespace, on this operator (not on the chart the
# other cluster tests install): its relay pods run the released image, the sample order
# service's committed orders reach Kafka through them and the points service consumes each
# once; nothing rolled back is published. The operator the other cluster tests share watches
# every namespace, this one's too, and would reconcile the demo's OutboxRelay with its own
# image: it is scaled to zero meanwhile (this test runs alone). A demo that ran before on this
# test bed left relays on the same table in namespace demo: they go first.
shared=$(kubectl -n outbox-system get deploy -l app.kubernetes.io/instance=outbox -o name 2>/dev/null | head -n1)
shared_replicas=$([ -z "$shared" ] || kubectl -n outbox-system get "$shared" -o jsonpath='{.spec.replicas}')
# The relays of an OutboxRelay deleted here are gone before anything else runs on its table.
delete_relays_in() {
  kubectl -n "$1" delete obr --all --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  kubectl -n "$1" wait --for=delete pod -l app.kubernetes.io/component=relay --timeout=90s >/dev/null 2>&1 || true
}
restore_shared() {
  [ -n "$shared" ] || return 0
  delete_relays_in "$ns"
  shared_scaled=0
  kubectl -n outbox-system scale "$shared" --replicas="$shared_replicas" >/dev/null &&
    kubectl -n outbox-system rollout status "$shared" --timeout=120s >/dev/null
}
if [ -n "$shared" ]; then
  shared_scaled=1
  kubectl -n outbox-system scale "$shared" --replicas=0 >/dev/null
  kubectl -n outbox-system wait --for=delete pod -l app.kubernetes.io/instance=outbox --timeout=60s >/dev/null 2>&1 || true
fi
delete_relays_in demo
if out=$(OUTBOX_DEMO_SKIP_BUILD=1 OUTBOX_DEMO_KEEP_TESTBED=1 OUTBOX_DEMO_OPERATOR=installed \
  OUTBOX_DEMO_NAMESPACE="$ns" "$REPO_ROOT/scripts/demo.sh" --short 2>&1); then
  pass "the demo's flow passes on the released operator"
else
  fail "the demo's flow failed on the released operator:
$(tail -n 40 <<<"$out")"
fi
expect_contains "the demo checked its summary" "$out" "demo OK"
expect_eq "its relay pods ran the released image" \
  "$(kubectl -n "$ns" get deploy orders-relay -o jsonpath='{.spec.template.spec.containers[0].image}' 2>&1)" "$image"
restore_shared || fail "the shared operator did not come back after the demo"

# --- a tampered chart is refused and installs nothing -----------------------------------------
mkdir -p "$tmp/evil" && tar -xzf "$tmp/dist/outbox-operator-$version.tgz" -C "$tmp/evil"
sed -i 's|^home: .*|home: https://tampered.invalid|' "$tmp/evil/outbox-operator/Chart.yaml"
"$HELM" package "$tmp/evil/outbox-operator" --destination "$tmp/evil" >/dev/null
"$HELM" push "$tmp/evil/outbox-operator-$version.tgz" "oci://$prefix/charts" --ca-file "$OUTBOX_TEST_REGISTRY_CA" \
  >/dev/null 2>&1 || die "pushing the tampered chart failed"
if out=$(install_release --release "$name-evil" --namespace "$ns" -- --wait --timeout 60s 2>&1); then
  fail "install-release.sh installed a tampered chart"
else
  expect_contains "install-release.sh refuses the tampered chart" "$out" "REFUSED: the chart"
fi
expect_eq "no release was made of it" "$(helm list --namespace "$ns" --filter "^$name-evil\$" -q)" ""

# --- a signed chart naming an image nobody signed is refused too ------------------------------
# Another image (the test bed's tools image) pushed beside the release, unsigned, and a chart
# naming it, signed with the release's key: the image's own signature is what is missing.
evil_image=$(SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$CRANE" push "$images/tools.tar" "$prefix/outbox-operator:unsigned" 2>/dev/null) ||
  die "pushing the unsigned image failed"
mkdir -p "$tmp/evil2" && tar -xzf "$tmp/dist/outbox-operator-$version.tgz" -C "$tmp/evil2"
sed -i "s|^  digest: \"$digest\"|  digest: \"${evil_image##*@}\"|" "$tmp/evil2/outbox-operator/values.yaml"
"$HELM" package "$tmp/evil2/outbox-operator" --destination "$tmp/evil2" >/dev/null
d2=$("$HELM" push "$tmp/evil2/outbox-operator-$version.tgz" "oci://$prefix/charts" --ca-file "$OUTBOX_TEST_REGISTRY_CA" 2>&1 |
  sed -n 's/^Digest: *//p')
[ -n "$d2" ] || die "pushing the chart naming the unsigned image failed"
SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$COSIGN" sign --yes --key "$OUTBOX_TEST_COSIGN_KEY" --tlog-upload=false \
  "$prefix/charts/outbox-operator@$d2" < <(:) >/dev/null 2>&1 || die "signing that chart failed"
if out=$(install_release --release "$name-evil" --namespace "$ns" -- --wait --timeout 60s 2>&1); then
  fail "install-release.sh installed a chart naming an unsigned image"
else
  expect_contains "install-release.sh refuses the unsigned image" "$out" "REFUSED: the image $evil_image"
fi
expect_eq "no release was made of that either" "$(helm list --namespace "$ns" --filter "^$name-evil\$" -q)" ""

# --- the node's other images are untouched ----------------------------------------------------
# The release is the archive's build with labels added: the node now holds its layers under
# two images. The test bed's imported image (what every other cluster test runs, never
# pullable) must still start under its own name.
kubectl -n "$ns" run probe-local-image --image="$OUTBOX_TEST_IMAGE" --image-pull-policy=Never --restart=Never \
  --overrides='{"spec":{"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"probe-local-image","image":"'"$OUTBOX_TEST_IMAGE"'","imagePullPolicy":"Never","args":["--version"],"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}' \
  >/dev/null || die "could not create the probe pod"
if kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/probe-local-image --timeout=60s >/dev/null 2>&1; then
  pass "the node still runs $OUTBOX_TEST_IMAGE, its imported image"
else
  fail "the node no longer runs $OUTBOX_TEST_IMAGE after the release was pulled:
$(kubectl -n "$ns" get pod probe-local-image -o jsonpath='{.status.containerStatuses[0].state}' 2>&1)"
fi
finish
