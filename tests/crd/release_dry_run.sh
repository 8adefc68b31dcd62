#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# scripts/release.sh: refuses a version the tree does not carry everywhere (naming each
# place), and on a copy of the tree whose CHANGELOG has the version's section it writes the
# chart package, the CRD, the plain manifests and the plugin with checksums that verify, all
# of them for that one version. The image (--image) is built by the cluster phase's own
# image build from the same Dockerfile, so it is not built again here.
source "$(dirname "$0")/lib.sh"
use_helm
export OUTBOX_TESTBED_BIN=${OUTBOX_TESTBED_BIN:-$(dirname "$HELM")}
version=$(sed -n 's/^version: *//p' "$CHART_DIR/Chart.yaml")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A version nothing carries: refused, every place named, nothing written.
if out=$("$REPO_ROOT/scripts/release.sh" 9.9.9 --allow-dirty --out "$tmp/refused" 2>&1); then
  fail "release.sh 9.9.9 succeeded on a tree at $version"
else
  for place in "CMakeLists.txt project(VERSION)" "Chart.yaml version" "Chart.yaml appVersion" \
    'CHANGELOG.md has no "## 9.9.9" section'; do
    expect_contains "refusal names $place" "$out" "$place"
  done
fi
[ ! -e "$tmp/refused" ] && pass "nothing written when refused" || fail "$tmp/refused was written"

# A copy of what a release reads, with the Unreleased section named after the version.
tree=$tmp/tree
mkdir -p "$tree/scripts" "$tree/tests"
cp -r "$REPO_ROOT/charts" "$REPO_ROOT/crds" "$REPO_ROOT/operator" "$REPO_ROOT/kubectl-plugin" \
  "$REPO_ROOT/CMakeLists.txt" "$REPO_ROOT/LICENSE" "$tree/"
cp -r "$REPO_ROOT/tests/crd" "$tree/tests/"
cp "$REPO_ROOT/scripts/release.sh" "$REPO_ROOT/scripts/install-release.sh" "$tree/scripts/"
sed "s/^## Unreleased$/## $version - $(date +%F)/" "$REPO_ROOT/CHANGELOG.md" >"$tree/CHANGELOG.md"
if out=$("$tree/scripts/release.sh" "$version" --allow-dirty --out "$tmp/dist" 2>&1); then
  pass "release.sh $version writes the release"
else
  fail "release.sh $version failed: $out"
fi
for f in "outbox-operator-$version.tgz" crds.yaml install.yaml install-release.sh kubectl-outbox \
  "kubectl-outbox-$version.tar.gz" outbox.krew.yaml SHA256SUMS; do
  [ -s "$tmp/dist/$f" ] && pass "dist has $f" || fail "dist lacks $f"
done
(cd "$tmp/dist" && sha256sum --quiet -c SHA256SUMS) && pass "SHA256SUMS verifies" ||
  fail "SHA256SUMS does not verify"
expect_eq "SHA256SUMS covers the seven other files" "$(wc -l <"$tmp/dist/SHA256SUMS")" "7"
packaged=$(tar -xzOf "$tmp/dist/outbox-operator-$version.tgz" outbox-operator/Chart.yaml)
expect_contains "the packaged chart is version $version" "$packaged" "version: $version"
expect_contains "the packaged chart carries the CRD" "$(tar -tzf "$tmp/dist/outbox-operator-$version.tgz")" \
  "outbox-operator/crds/outbox.dev_outboxrelays.yaml"
expect_contains "install.yaml runs the image of $version" "$(cat "$tmp/dist/install.yaml")" \
  "ghcr.io/outbox-operator/outbox-operator:$version"
cmp -s "$tmp/dist/crds.yaml" "$CRD_FILE" && pass "crds.yaml is the CRD" || fail "crds.yaml differs from crds/"

# --- krew: the manifest names this release's archive, which holds the plugin as shipped ---
krew=$(cat "$tmp/dist/outbox.krew.yaml")
archive=kubectl-outbox-$version.tar.gz
expect_contains "krew manifest: version v$version" "$krew" "version: v$version"
expect_contains "krew manifest: the archive's sha256" "$krew" \
  "sha256: \"$(sha256sum "$tmp/dist/$archive" | cut -d' ' -f1)\""
expect_contains "krew manifest: the release's download address" "$krew" \
  "uri: https://github.com/outbox-operator/outbox-operator/releases/download/v$version/$archive"
expect_not_contains "krew manifest: no placeholder left" "$krew" "@"
expect_eq "the archive holds the plugin and the licence" "$(tar -tzf "$tmp/dist/$archive" | sort | tr '\n' ' ')" \
  "LICENSE kubectl-outbox "
cmp -s <(tar -xzOf "$tmp/dist/$archive" kubectl-outbox) "$REPO_ROOT/kubectl-plugin/kubectl-outbox" &&
  pass "the archived plugin is kubectl-plugin/kubectl-outbox" || fail "the archived plugin differs"
expect_eq "the archived plugin is executable" "$(tar -tvzf "$tmp/dist/$archive" kubectl-outbox | cut -c1-10)" "-rwxr-xr-x"
# The same tree gives the same archive (and so the same sha256 in the manifest).
"$tree/scripts/release.sh" "$version" --allow-dirty --out "$tmp/again" >/dev/null 2>&1 || fail "a second release.sh failed"
cmp -s "$tmp/dist/$archive" "$tmp/again/$archive" && pass "the plugin archive is reproducible" ||
  fail "two runs gave two different plugin archives"

# --- Artifact Hub: the packaged chart's annotations -----------------------------------------
chart_meta=$(tar -xzOf "$tmp/dist/outbox-operator-$version.tgz" outbox-operator/Chart.yaml)
annotation() { # annotation NAME: the block of the chart's artifacthub.io/NAME annotation
  awk -v k="  artifacthub.io/$1:" 'index($0, k) == 1 {f=1; sub(/^[^:]*: *[|]? */, ""); if ($0 != "") print; next}
    f && /^    / {print; next} f {exit}' <<<"$chart_meta"
}
expect_eq "artifacthub.io/operator" "$(annotation operator)" '"true"'
expect_eq "artifacthub.io/license is the LICENSE's" "$(annotation license)" "Apache-2.0"
expect_contains "artifacthub.io/images: the image of $version" "$(annotation images)" \
  "image: ghcr.io/outbox-operator/outbox-operator:$version"
crd_name=$(sed -n '0,/^  name: /s/^  name: //p' "$CRD_FILE")
expect_contains "artifacthub.io/crds names the CRD ($crd_name)" "$(annotation crds)" "name: $crd_name"
expect_contains "artifacthub.io/crds: its kind" "$(annotation crds)" "kind: $(sed -n 's/^    kind: //p' "$CRD_FILE")"
# The example is operator/samples/minimal.yaml, indented under the annotation.
sample=$(grep -v -e '^#' -e '^ *#' "$REPO_ROOT/operator/samples/minimal.yaml")
example=$(annotation crdsExamples | sed 's/^    //; s/^- //; s/^  //')
expect_eq "artifacthub.io/crdsExamples is the minimal sample" "$example" "$sample"
finish
