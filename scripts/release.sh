#!/usr/bin/env bash
# release.sh VERSION [--out DIR] [--image | --image-archive TAR] [--allow-dirty]
#            [--push PREFIX (--key KEY [--key-password-file FILE] [--no-tlog] | --keyless)
#             [--registry-ca FILE]]
# Builds what a release of VERSION publishes into DIR (default dist/VERSION):
#   outbox-operator-VERSION.tgz   the Helm chart (helm package); with --push it names the image
#                                 by digest (values image.repository and image.digest)
#   crds.yaml                     the CRD, to apply with kubectl apply --server-side
#   install.yaml                  the plain manifests (the chart rendered with defaults; with
#                                 --push the packaged chart's, so the image by digest)
#   install-release.sh            verifies a published release with cosign, then installs it
#   kubectl-outbox                the kubectl plugin, and kubectl-outbox-VERSION.tar.gz (it and
#                                 LICENSE) with outbox.krew.yaml, its krew manifest
#   outbox-operator-VERSION.image.tar  with --image: the image built from the Dockerfile
#                                 with buildah (docker-archive, tagged
#                                 ghcr.io/outbox-operator/outbox-operator:VERSION); with
#                                 --image-archive TAR: that archive, built before (the test bed's)
#   SHA256SUMS                    of every file above
# With --push PREFIX (ghcr.io/outbox-operator; the test bed: 127.0.0.1:PORT/outbox-operator) it
# also publishes, and writes what it published:
#   1. the image to PREFIX/outbox-operator:VERSION (crane), with OCI labels (version, revision,
#      created, source, licenses); everything after names its digest;
#   2. sbom.spdx.json, SPDX 2.3 of the pushed image (scripts/release-sbom.py: the Debian packages
#      the image records, librdkafka, the binary), attached as a signed attestation;
#   3. signs the image by digest (cosign), packages the chart with that digest, pushes it to
#      oci://PREFIX/charts/outbox-operator:VERSION (helm) and signs the chart's digest;
#   4. published.env: image=REF@sha256:..., chart=oci://..., chart_digest=sha256:...; and with
#      --key, cosign.pub, the key users verify with.
# Signing: --key KEY signs with a cosign key pair (its password read from --key-password-file,
# empty without one; never from argv or the environment); --keyless signs with the OIDC identity
# of the CI job (GitHub Actions: .github/workflows/release.yml) through Fulcio, logged in Rekor.
# --no-tlog (with --key only) skips the transparency log: the test bed has none to reach.
# --registry-ca FILE: the registry's certificate is verified against FILE (a private registry's
# CA, the test bed's); TLS is never skipped.
# It refuses when VERSION is not the version of every place that carries one (CMakeLists.txt
# project(), the chart's version and appVersion), when CHANGELOG.md has no "## VERSION"
# section, when operator/install.yaml is stale, or (without --allow-dirty) when the work tree
# has changes. docs/release.md says how a release is cut and verified.
# Needs helm: $OUTBOX_TESTBED_BIN (the test bed's) or on PATH; with --image, buildah ($BUILDAH
# may say how to run it, "sudo buildah"); with --push, crane and cosign:
# $CRANE and $COSIGN, the test bed's ($OUTBOX_TESTBED_CRANE, $OUTBOX_TESTBED_COSIGN) or on PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "release: $*" >&2; exit 1; }

usage="usage: $0 VERSION [--out DIR] [--image | --image-archive TAR] [--allow-dirty] [--push PREFIX (--key KEY [--key-password-file FILE] [--no-tlog] | --keyless) [--registry-ca FILE]]"
version=${1:-}
if [ -z "$version" ] || [ "${version#-}" != "$version" ]; then
  die "$usage"
fi
shift
out="$root/dist/$version" image=0 image_archive="" allow_dirty=0
prefix="" key="" key_password_file="" keyless=0 no_tlog=0 registry_ca=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --image) image=1; shift ;;
    --image-archive) image_archive=$2; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    --push) prefix=${2%/}; shift 2 ;;
    --key) key=$2; shift 2 ;;
    --key-password-file) key_password_file=$2; shift 2 ;;
    --keyless) keyless=1; shift ;;
    --no-tlog) no_tlog=1; shift ;;
    --registry-ca) registry_ca=$2; shift 2 ;;
    *) die "unknown option $1 ($usage)" ;;
  esac
done
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "$version is not a semantic version (1.2.3 or 1.2.3-rc.1)"
helm=${OUTBOX_TESTBED_BIN:+$OUTBOX_TESTBED_BIN/}helm
command -v "$helm" >/dev/null || die "helm not found (set OUTBOX_TESTBED_BIN or put helm on PATH)"
[ "$image" = 0 ] || [ -z "$image_archive" ] || die "--image and --image-archive exclude each other"
[ -z "$image_archive" ] || [ -f "$image_archive" ] || die "--image-archive $image_archive: no such file"
if [ -n "$prefix" ]; then
  [ "$image" = 1 ] || [ -n "$image_archive" ] || die "--push needs the image: --image or --image-archive TAR"
  if [ "$keyless" = 1 ]; then
    [ -z "$key" ] || die "--key and --keyless exclude each other"
    [ "$no_tlog" = 0 ] || die "--no-tlog is for --key only: a keyless signature is proved by its log entry"
  else
    [ -n "$key" ] || die "--push needs --key KEY or --keyless"
    [ -r "$key" ] || die "--key $key is not readable"
  fi
  [ -z "$key_password_file" ] || [ -r "$key_password_file" ] || die "--key-password-file $key_password_file is not readable"
  crane=${CRANE:-${OUTBOX_TESTBED_CRANE:-crane}}
  cosign=${COSIGN:-${OUTBOX_TESTBED_COSIGN:-cosign}}
  command -v "$crane" >/dev/null || die "crane not found (set CRANE or put it on PATH)"
  command -v "$cosign" >/dev/null || die "cosign not found (set COSIGN or put it on PATH)"
  if [ -n "$registry_ca" ]; then
    [ -r "$registry_ca" ] || die "--registry-ca $registry_ca is not readable"
    # Go's TLS (crane, cosign, helm are all Go) trusts exactly this file then: the registry's
    # certificate is verified against the given CA, never skipped.
    export SSL_CERT_FILE=$registry_ca
  fi
elif [ -n "$key$key_password_file$registry_ca" ] || [ "$keyless$no_tlog" != 00 ]; then
  die "--key, --key-password-file, --keyless, --no-tlog and --registry-ca go with --push"
fi

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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/crds/outbox.dev_outboxrelays.yaml" "$out/crds.yaml"
install -m 0755 "$root/kubectl-plugin/kubectl-outbox" "$out/kubectl-outbox"
# What users verify and install the release with, beside it (docs/release.md).
install -m 0755 "$root/scripts/install-release.sh" "$out/install-release.sh"
# The plugin as krew installs it: an archive (the plugin and the licence, fixed owners, order
# and times, so the same tree gives the same bytes and so the same sha256) and a manifest
# naming the archive's sha256 and where the release's assets are downloaded from.
mtime=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
mkdir -p "$tmp/krew"
install -m 0755 "$root/kubectl-plugin/kubectl-outbox" "$tmp/krew/kubectl-outbox"
install -m 0644 "$root/LICENSE" "$tmp/krew/LICENSE"
tar -C "$tmp/krew" --sort=name --mtime="@$mtime" --owner=0 --group=0 --numeric-owner -cf - kubectl-outbox LICENSE |
  gzip -9n >"$out/kubectl-outbox-$version.tar.gz"
plugin_sha=$(sha256sum "$out/kubectl-outbox-$version.tar.gz" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@SHA256@/$plugin_sha/g" "$root/kubectl-plugin/krew/outbox.yaml" >"$out/outbox.krew.yaml"

archive=""
if [ "$image" = 1 ]; then
  # BUILDAH: the command to run buildah with ("sudo buildah" in the release workflow).
  read -r -a buildah <<<"${BUILDAH:-buildah}"
  command -v "${buildah[-1]}" >/dev/null || die "--image needs buildah"
  ref="ghcr.io/outbox-operator/outbox-operator:$version"
  "${buildah[@]}" bud --layers --isolation chroot --network host -f "$root/Dockerfile" -t "$ref" "$root"
  "${buildah[@]}" push "$ref" "docker-archive:$out/outbox-operator-$version.image.tar:$ref"
  archive=$out/outbox-operator-$version.image.tar
elif [ -n "$image_archive" ]; then
  cp "$image_archive" "$out/outbox-operator-$version.image.tar"
  archive=$out/outbox-operator-$version.image.tar
fi

# chart_copy DIR: the chart as released, in DIR/outbox-operator; with DIGEST set, its default
# image is REPOSITORY@DIGEST (values and Artifact Hub's images annotation).
chart_copy() {
  mkdir -p "$1" && cp -r "$root/charts/outbox-operator" "$1/"
  [ -n "${digest:-}" ] || return 0
  local v=$1/outbox-operator/values.yaml c=$1/outbox-operator/Chart.yaml
  sed -i -e "0,/^  repository: .*/s||  repository: $repository|" \
    -e "0,/^  digest: .*/s||  digest: \"$digest\"|" "$v"
  sed -i "s|^\(      image: \)ghcr.io/outbox-operator/outbox-operator:.*|\1$repository@$digest|" "$c"
  grep -q "^  digest: \"$digest\"$" "$v" || die "could not set image.digest in the chart's values"
  grep -q "^  repository: $repository$" "$v" || die "could not set image.repository in the chart's values"
}

# cosign_pw ARG...: cosign with the key's password on stdin, through a pipe (cosign takes a
# character device, /dev/null too, for a terminal and would prompt): the file's content less
# trailing newlines, or empty without --key-password-file. printf is a builtin, so the password
# is in no process's argv; COSIGN_PASSWORD is not passed on.
cosign_pw() {
  local pw=""
  [ -z "$key_password_file" ] || pw=$(cat "$key_password_file")
  env -u COSIGN_PASSWORD "$cosign" "$@" < <(printf '%s' "$pw")
}
if [ -n "$prefix" ]; then
  repository=$prefix/outbox-operator
  sign_args=(--yes)
  if [ "$keyless" = 0 ]; then
    sign_args+=(--key "$key")
    [ "$no_tlog" = 0 ] || sign_args+=(--tlog-upload=false)
  fi
  # 1. The image, with the OCI labels that say which release and source it is (scanners and
  #    registries read them from its config). crane prints the reference by digest of what it
  #    pushed; the labelled image replaces the archive's under the release's tag. The labels
  #    also give the release its own image ID (config digest): a node holding the archive's
  #    build under another name (the test bed's imported image) keeps the two apart.
  "$crane" push "$archive" "$repository:$version" >/dev/null || die "pushing the image to $repository failed"
  revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
  created=$(date -u -d "@$mtime" +%Y-%m-%dT%H:%M:%SZ)
  pushed=$("$crane" mutate "$repository:$version" --tag "$repository:$version" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$created" \
    --label "org.opencontainers.image.source=$(sed -n 's/^home: *//p' "$root/charts/outbox-operator/Chart.yaml")" \
    --label "org.opencontainers.image.licenses=Apache-2.0" \
    --label "org.opencontainers.image.title=outbox-operator") || die "labelling the image in $repository failed"
  digest=${pushed##*@}
  [[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || die "crane printed no digest: $pushed"
  image_ref=$repository@$digest
  echo "release: image $image_ref" >&2
  # 2. Its SBOM, attested (a signed in-toto statement users verify with the image's key).
  SOURCE_DATE_EPOCH=$mtime python3 "$root/scripts/release-sbom.py" --archive "$archive" --version "$version" \
    --image "$image_ref" --librdkafka "$(sed -n 's/^version=//p' "$root/scripts/librdkafka.sh")" \
    >"$out/sbom.spdx.json" || die "writing the SBOM failed"
  cosign_pw sign "${sign_args[@]}" "$image_ref" || die "signing $image_ref failed"
  cosign_pw attest "${sign_args[@]}" --type spdxjson --predicate "$out/sbom.spdx.json" "$image_ref" ||
    die "attesting the SBOM of $image_ref failed"
  # 3. The chart, naming the image by digest; pushed, then signed by its own digest.
  chart_copy "$tmp/chart"
  "$helm" package "$tmp/chart/outbox-operator" --destination "$out" >/dev/null
  "$helm" push "$out/outbox-operator-$version.tgz" "oci://$prefix/charts" >"$tmp/push.log" 2>&1 ||
    die "helm push failed: $(cat "$tmp/push.log")"
  chart_digest=$(sed -n 's/^Digest: *\(sha256:[0-9a-f]\{64\}\)$/\1/p' "$tmp/push.log")
  [ -n "$chart_digest" ] || die "helm push printed no digest: $(cat "$tmp/push.log")"
  chart_ref=$prefix/charts/outbox-operator
  cosign_pw sign "${sign_args[@]}" "$chart_ref@$chart_digest" || die "signing $chart_ref@$chart_digest failed"
  echo "release: chart oci://$chart_ref:$version ($chart_digest)" >&2
  "$root/tests/crd/render_install.sh" "$out/outbox-operator-$version.tgz" >"$out/install.yaml"
  if [ -n "$key" ]; then
    cosign_pw public-key --key "$key" --outfile "$out/cosign.pub" || die "writing cosign.pub failed"
  fi
  printf 'image=%s\nchart=oci://%s\nchart_version=%s\nchart_digest=%s\n' \
    "$image_ref" "$chart_ref" "$version" "$chart_digest" >"$out/published.env"
else
  chart_copy "$tmp/chart"
  "$helm" package "$tmp/chart/outbox-operator" --destination "$out" >/dev/null
  cp "$root/operator/install.yaml" "$out/install.yaml"
fi
(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' >SHA256SUMS)
echo "release: $version in $out"
