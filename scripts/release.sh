#!/usr/bin/env bash
# release.sh VERSION [--out DIR] [--image] [--allow-dirty]
# Builds what a release of VERSION publishes into DIR (default dist/VERSION):
#   outbox-operator-VERSION.tgz   the Helm chart (helm package)
#   crds.yaml                     the CRD, to apply with kubectl apply --server-side
#   install.yaml                  the plain manifests (the chart rendered with defaults)
#   kubectl-outbox                the kubectl plugin
#   outbox-operator-VERSION.image.tar  with --image: the image built from the Dockerfile
#                                 with buildah (docker-archive, tagged
#                                 ghcr.io/outbox-operator/outbox-operator:VERSION)
#   SHA256SUMS                    of every file above
# It refuses when VERSION is not the version of every place that carries one (CMakeLists.txt
# project(), the chart's version and appVersion), when CHANGELOG.md has no "## VERSION"
# section, when operator/install.yaml is stale, or (without --allow-dirty) when the work tree
# has changes. Pushing and signing are the publisher's steps: docs/release.md.
# Needs helm: $OUTBOX_TESTBED_BIN (the test bed's) or on PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "release: $*" >&2; exit 1; }

version=${1:-}
if [ -z "$version" ] || [ "${version#-}" != "$version" ]; then
  die "usage: $0 VERSION [--out DIR] [--image] [--allow-dirty]"
fi
shift
out="$root/dist/$version" image=0 allow_dirty=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --image) image=1; shift ;;
    --allow-dirty) allow_dirty=1; shift ;;
    *) die "unknown option $1" ;;
  esac
done
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "$version is not a semantic version (1.2.3 or 1.2.3-rc.1)"
helm=${OUTBOX_TESTBED_BIN:+$OUTBOX_TESTBED_BIN/}helm
command -v "$helm" >/dev/null || die "helm not found (set OUTBOX_TESTBED_BIN or put helm on PATH)"

# --- one version everywhere ------------------------------------------------------------
problems=()
cmake_version=$(sed -n 's/^project(outbox_operator VERSION \([^ ]*\) .*/\1/p' "$root/CMakeLists.txt")
chart_version=$(sed -n 's/^version: *//p' "$root/charts/outbox-operator/Chart.yaml")
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/outbox-operator/Chart.yaml")
[ "$cmake_version" = "${version%%-*}" ] || problems+=("CMakeLists.txt project(VERSION) is $cmake_version")
[ "$chart_version" = "$version" ] || problems+=("charts/outbox-operator/Chart.yaml version is $chart_version")
[ "$app_version" = "$version" ] || problems+=("charts/outbox-operator/Chart.yaml appVersion is $app_version")
grep -qE "^## ${version//./\\.}( |$)" "$root/CHANGELOG.md" ||
  problems+=("CHANGELOG.md has no \"## $version\" section (rename \"## Unreleased\")")
if ! cmp -s "$root/operator/install.yaml" <("$root/tests/crd/render_install.sh"); then
  problems+=("operator/install.yaml is stale (tests/crd/render_install.sh > operator/install.yaml)")
fi
if [ "$allow_dirty" = 0 ] && [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
  problems+=("the work tree has uncommitted changes")
fi
if [ ${#problems[@]} -gt 0 ]; then
  printf 'release: not releasing %s:\n' "$version" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  exit 1
fi

# --- the artifacts ----------------------------------------------------------------------
rm -rf "$out" && mkdir -p "$out"
"$helm" package "$root/charts/outbox-operator" --destination "$out" >/dev/null
cp "$root/crds/outbox.dev_outboxrelays.yaml" "$out/crds.yaml"
cp "$root/operator/install.yaml" "$out/install.yaml"
install -m 0755 "$root/kubectl-plugin/kubectl-outbox" "$out/kubectl-outbox"
if [ "$image" = 1 ]; then
  command -v buildah >/dev/null || die "--image needs buildah"
  ref="ghcr.io/outbox-operator/outbox-operator:$version"
  buildah bud --layers --isolation chroot --network host -f "$root/Dockerfile" -t "$ref" "$root"
  buildah push "$ref" "docker-archive:$out/outbox-operator-$version.image.tar:$ref"
fi
(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' >SHA256SUMS)
echo "release: $version in $out"
