#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# e2e (the test bed's registry and helm): scripts/release.sh --push publishes a release a user
# can verify, and scripts/install-release.sh installs only a verified one.
#  - the image is pushed and named by digest everywhere: the packaged chart's values, its
#    Artifact Hub images annotation, install.yaml; the chart is an OCI artifact in the registry;
#  - cosign verify succeeds for the image and the chart with the release's public key, and the
#    SBOM (SPDX 2.3, listing the image's Debian packages, librdkafka and the binary) verifies as
#    an attestation of the image;
#  - tampering is refused: another image pushed under the release's tag fails cosign verify;
#    an unsigned chart pushed under the chart's tag, a chart signed by another key, and a chart
#    signed with the right key but naming an unsigned image are each refused by
#    install-release.sh, before Helm talks to any cluster.
# The image here is a small one made for the test (a layer with the files the SBOM reads), so
# the fast phase needs no image build; tests/cluster/release_install.sh publishes the project's
# real image and installs it on the node.
source "$(dirname "$0")/lib.sh"
use_helm
require_env OUTBOX_TEST_REGISTRY OUTBOX_TEST_REGISTRY_CA OUTBOX_TESTBED_CRANE
# cosign from the test bed's cache (scripts/test.sh builds it beside the first phase; this
# waits for that build, or builds it).
COSIGN=$("$REPO_ROOT/scripts/testbed/build-release-tools.sh" cosign | tail -n1) || die "building cosign failed"
export OUTBOX_TESTBED_BIN CRANE=$OUTBOX_TESTBED_CRANE COSIGN HELM
crane() { SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$CRANE" "$@"; }
cosign() { SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$COSIGN" "$@"; }
version=$(sed -n 's/^version: *//p' "$CHART_DIR/Chart.yaml")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The release's key pair, this run's own, with an empty password (cosign reads a password from
# COSIGN_PASSWORD only here, where it is empty; release.sh gives it on a pipe).
(cd "$tmp" && COSIGN_PASSWORD="" "$COSIGN" generate-key-pair >/dev/null 2>&1) || die "cosign generate-key-pair failed"
OUTBOX_TEST_COSIGN_KEY=$tmp/cosign.key OUTBOX_TEST_COSIGN_PUB=$tmp/cosign.pub
# A repository path of this run's own: runs at once, or earlier runs, never meet.
prefix=$OUTBOX_TEST_REGISTRY/$(unique_name release)

# --- the release tree and a small image ---------------------------------------------------
tree=$tmp/tree
release_tree "$tree" "$version"

# make_image TAR MARKER: a one-layer image (what the SBOM reads: the binary's path and a
# Debian package record) as a docker-archive tarball; MARKER makes its digest its own.
make_image() {
  local l=$tmp/layer-$2
  mkdir -p "$l/usr/local/bin" "$l/var/lib/dpkg/status.d"
  printf '#!/not-a-shell\n%s\n' "$2" >"$l/usr/local/bin/outbox-operator"
  dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nSource: ${source:Package}\n' \
    libc6 >"$l/var/lib/dpkg/status.d/libc6"
  tar -C "$l" -cf "$l.tar" usr var
  crane append --new_layer "$l.tar" --new_tag "release-test/$2:latest" --output "$1" >/dev/null 2>&1 ||
    die "crane append could not make the test image"
}
make_image "$tmp/good.tar" good
make_image "$tmp/evil.tar" evil

# --- release and push -------------------------------------------------------------------
dist=$tmp/dist
if out=$("$tree/scripts/release.sh" "$version" --allow-dirty --out "$dist" --image-archive "$tmp/good.tar" \
  --push "$prefix" --key "$OUTBOX_TEST_COSIGN_KEY" --no-tlog --registry-ca "$OUTBOX_TEST_REGISTRY_CA" 2>&1); then
  pass "release.sh $version --push $prefix"
else
  die "release.sh --push failed: $out"
fi
[ -s "$dist/published.env" ] || die "release.sh wrote no published.env"
image=$(sed -n 's/^image=//p' "$dist/published.env")
chart=$(sed -n 's/^chart=//p' "$dist/published.env")
chart_digest=$(sed -n 's/^chart_digest=//p' "$dist/published.env")
digest=${image##*@}
expect_eq "the image is $prefix/outbox-operator by digest" "${image%@*}" "$prefix/outbox-operator"
expect_eq "the release's tag names the pushed digest" "$(crane digest "$prefix/outbox-operator:$version")" "$digest"
# The pushed image carries the release's OCI labels; its layers are the archive's own.
labels=$(crane config "$image" | python3 -c 'import json,sys
for k, v in sorted(json.load(sys.stdin)["config"]["Labels"].items()):
    print(f"{k}={v}")')
for want in "org.opencontainers.image.version=$version" "org.opencontainers.image.licenses=Apache-2.0" \
  "org.opencontainers.image.source=https://github.com/outbox-operator/outbox-operator"; do
  expect_contains "the image is labelled $want" "$labels" "$want"
done
expect_contains "the image names the revision it was built from" "$labels" "org.opencontainers.image.revision="
expect_eq "the image's layers are the archive's" \
  "$(crane config "$image" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rootfs"]["diff_ids"])')" \
  "$(tar -xOf "$tmp/good.tar" manifest.json | python3 -c 'import json,sys,tarfile
m = json.load(sys.stdin)[0]
print(json.load(tarfile.open(sys.argv[1]).extractfile(m["Config"]))["rootfs"]["diff_ids"])' "$tmp/good.tar")"
expect_eq "the chart is oci://$prefix/charts/outbox-operator" "$chart" "oci://$prefix/charts/outbox-operator"
expect_eq "the chart's tag names the pushed chart" "$(crane digest "$prefix/charts/outbox-operator:$version")" "$chart_digest"
expect_eq "the chart is a Helm chart artifact" \
  "$(crane manifest "$prefix/charts/outbox-operator@$chart_digest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["config"]["mediaType"])')" \
  "application/vnd.cncf.helm.config.v1+json"

# The image by digest, in the chart, its annotation and install.yaml; no tag reference left.
values=$("$HELM" show values "$dist/outbox-operator-$version.tgz")
expect_contains "the chart's image.digest is the pushed one" "$values" "  digest: \"$digest\""
expect_contains "the chart's image.repository is the pushed one" "$values" "  repository: $prefix/outbox-operator"
expect_contains "Artifact Hub's images annotation names the digest" \
  "$("$HELM" show chart "$dist/outbox-operator-$version.tgz")" "image: $image"
expect_eq "install.yaml runs only $image" \
  "$(grep -E '(image|value): .*outbox-operator[:@]' "$dist/install.yaml" | sed 's/.*: //; s/"//g' | sort -u)" "$image"
(cd "$dist" && sha256sum --quiet -c SHA256SUMS) && pass "SHA256SUMS verifies" || fail "SHA256SUMS does not verify"
for f in sbom.spdx.json cosign.pub published.env install.yaml; do
  grep -q " $f\$" "$dist/SHA256SUMS" && pass "SHA256SUMS covers $f" || fail "SHA256SUMS lacks $f"
done
cmp -s "$dist/cosign.pub" "$OUTBOX_TEST_COSIGN_PUB" && pass "dist/cosign.pub is the signing key's" ||
  fail "dist/cosign.pub is not the public half of the signing key"

# The SBOM: SPDX 2.3 of this image.
sbom=$(python3 - "$dist/sbom.spdx.json" "$digest" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
names = {p["name"]: p for p in d["packages"]}
print("version", d["spdxVersion"])
print("describes", [p["versionInfo"] for p in d["packages"] if p["SPDXID"] == d["documentDescribes"][0]][0])
for n in ("outbox-operator", "librdkafka", "libc6"):
    refs = [r["referenceLocator"] for r in names.get(n, {}).get("externalRefs", [])]
    print(n, names.get(n, {}).get("versionInfo"), refs[0] if refs else None)
EOF
) || die "the SBOM is not the JSON expected: $(head -c 400 "$dist/sbom.spdx.json")"
expect_contains "the SBOM is SPDX 2.3" "$sbom" "version SPDX-2.3"
expect_contains "the SBOM describes the pushed image" "$sbom" "describes $digest"
expect_contains "the SBOM names the binary at $version" "$sbom" "outbox-operator $version pkg:github/outbox-operator/outbox-operator@v$version"
expect_contains "the SBOM names librdkafka" "$sbom" "librdkafka $(sed -n 's/^version=//p' "$REPO_ROOT/scripts/librdkafka.sh")"
expect_contains "the SBOM names the image's Debian packages" "$sbom" \
  "libc6 $(dpkg-query -W -f='${Version}' libc6) pkg:deb/debian/libc6@"

# --- what a user verifies ------------------------------------------------------------------
verify=(--key "$OUTBOX_TEST_COSIGN_PUB" --insecure-ignore-tlog=true)
cosign verify "${verify[@]}" "$image" >/dev/null 2>"$tmp/v.log" && pass "cosign verify: the image" ||
  fail "cosign verify of $image failed: $(cat "$tmp/v.log")"
cosign verify "${verify[@]}" "$prefix/charts/outbox-operator@$chart_digest" >/dev/null 2>"$tmp/v.log" &&
  pass "cosign verify: the chart" || fail "cosign verify of the chart failed: $(cat "$tmp/v.log")"
if att=$(cosign verify-attestation "${verify[@]}" --type spdxjson "$image" 2>"$tmp/v.log"); then
  pass "cosign verify-attestation: the SBOM"
  expect_contains "the attested predicate is the SBOM" \
    "$(python3 -c 'import base64,json,sys; print(json.loads(base64.b64decode(json.loads(sys.stdin.readline())["payload"]))["predicate"]["name"])' <<<"$att")" \
    "outbox-operator-$version-image"
else
  fail "cosign verify-attestation failed: $(cat "$tmp/v.log")"
fi
install_release() {
  "$REPO_ROOT/scripts/install-release.sh" "$version" --chart "$chart" --key "$OUTBOX_TEST_COSIGN_PUB" --no-tlog \
    --registry-ca "$OUTBOX_TEST_REGISTRY_CA" "$@"
}
if out=$(install_release --verify-only 2>&1); then
  pass "install-release.sh verifies the release"
  expect_contains "it would install the chart by digest" "$out" "chart=$chart@$chart_digest"
  expect_contains "it would run the image by digest" "$out" "image=$image"
else
  fail "install-release.sh --verify-only refused the release: $out"
fi

# --- tampering ---------------------------------------------------------------------------
# refused WHAT EXPECTED-TEXT: install-release.sh, for real (no --verify-only) against no cluster
# at all, must refuse with EXPECTED-TEXT: the refusal comes before Helm reaches for a cluster.
refused() {
  local out
  if out=$(KUBECONFIG=$tmp/no-such-kubeconfig install_release 2>&1); then
    fail "install-release.sh installed $1"
  else
    expect_contains "install-release.sh refuses $1" "$out" "$2"
    expect_not_contains "...before Helm reaches a cluster ($1)" "$out" "Kubernetes cluster unreachable"
  fi
}
# 1. Another image under the release's tag: the tag no longer verifies; the signed digest does.
crane push "$tmp/evil.tar" "$prefix/outbox-operator:$version" >/dev/null 2>&1 || die "pushing the tampered image failed"
evil_digest=$(crane digest "$prefix/outbox-operator:$version")
[ "$evil_digest" != "$digest" ] || die "the tampered image has the release's digest"
cosign verify "${verify[@]}" "$prefix/outbox-operator:$version" >/dev/null 2>&1 &&
  fail "cosign verify accepted a tampered image under the tag" || pass "cosign verify refuses the tampered image's tag"
cosign verify "${verify[@]}" "$image" >/dev/null 2>&1 && pass "the released digest still verifies" ||
  fail "the released digest no longer verifies"

# A chart of the release, with the image's digest replaced by DIGEST, packaged into DIR.
tampered_chart() {
  mkdir -p "$2" && tar -xzf "$dist/outbox-operator-$version.tgz" -C "$2"
  sed -i "s|^  digest: \"$digest\"|  digest: \"$1\"|" "$2/outbox-operator/values.yaml"
  "$HELM" package "$2/outbox-operator" --destination "$2" >/dev/null
}
# push_chart DIR: helm push of DIR's package over the chart's tag; prints the new digest.
push_chart() {
  "$HELM" push "$1/outbox-operator-$version.tgz" "oci://$prefix/charts" --ca-file "$OUTBOX_TEST_REGISTRY_CA" 2>&1 |
    sed -n 's/^Digest: *//p'
}
# 2. An unsigned chart under the chart's tag (it runs the tampered image).
tampered_chart "$evil_digest" "$tmp/chart-unsigned"
d2=$(push_chart "$tmp/chart-unsigned")
[ -n "$d2" ] && [ "$d2" != "$chart_digest" ] || die "pushing the tampered chart failed"
refused "an unsigned chart" "REFUSED: the chart"
# 3. The same chart signed by someone else's key.
(cd "$tmp" && COSIGN_PASSWORD="" "$COSIGN" generate-key-pair --output-key-prefix attacker >/dev/null 2>&1) ||
  die "cosign generate-key-pair failed"
cosign sign --yes --key "$tmp/attacker.key" --tlog-upload=false "$prefix/charts/outbox-operator@$d2" < <(:) \
  >/dev/null 2>&1 || die "signing with the other key failed"
refused "a chart signed by another key" "REFUSED: the chart"
# push_and_sign_chart DIR WHAT: pushes DIR's chart package and signs it with the release's key.
push_and_sign_chart() {
  local d
  d=$(push_chart "$1")
  cosign sign --yes --key "$OUTBOX_TEST_COSIGN_KEY" --tlog-upload=false "$prefix/charts/outbox-operator@$d" < <(:) \
    >/dev/null 2>&1 || die "signing $2 failed"
}
# 4. A chart signed with the release's key that names an unsigned image: the image is checked too.
tampered_chart "$evil_digest" "$tmp/chart-signed"
sed -i 's|^home: .*|home: https://tampered.invalid|' "$tmp/chart-signed/outbox-operator/Chart.yaml"
"$HELM" package "$tmp/chart-signed/outbox-operator" --destination "$tmp/chart-signed" >/dev/null
push_and_sign_chart "$tmp/chart-signed" "the chart naming an unsigned image"
refused "a signed chart naming an unsigned image" "REFUSED: the image $prefix/outbox-operator@$evil_digest has no valid signature"
# 5. A chart naming its image by tag only.
mkdir -p "$tmp/chart-tag" && tar -xzf "$dist/outbox-operator-$version.tgz" -C "$tmp/chart-tag"
sed -i "s|^  digest: \"$digest\"|  digest: \"\"|" "$tmp/chart-tag/outbox-operator/values.yaml"
"$HELM" package "$tmp/chart-tag/outbox-operator" --destination "$tmp/chart-tag" >/dev/null
push_and_sign_chart "$tmp/chart-tag" "the chart naming its image by tag"
refused "a chart naming its image by tag" "REFUSED: the chart names its image by tag"
finish
