#!/usr/bin/env bash
# install-release.sh VERSION [options] [-- HELM-ARGS...]
# Installs (or upgrades) a published release of the operator with Helm, only once cosign has
# verified what will run: the chart, and the image the chart names. Steps, each of which
# refuses the release when it fails:
#   1. helm pull the chart (oci://.../outbox-operator, VERSION): Helm checks the content
#      against the manifest's digest, which it prints; from here on only that digest is used,
#      so a tag moved after the check changes nothing;
#   2. cosign verify the chart by that digest;
#   3. read the image from the chart's values: it must be by digest (image.digest);
#   4. cosign verify that image, and its SBOM attestation (cosign verify-attestation);
#   5. helm upgrade --install oci://...@<chart digest>, the verified chart.
# Options:
#   --chart oci://REGISTRY/PATH/outbox-operator   (default oci://ghcr.io/outbox-operator/charts/outbox-operator)
#   --key cosign.pub           verify against this public key (a release signed with a key,
#                              such as the test bed's); without it, keyless: the signer must be
#                              the project's release workflow on a v* tag, as Fulcio certified
#   --certificate-identity ID | --certificate-identity-regexp RE, --certificate-oidc-issuer URL
#                              a keyless signer other than the default (ID: exactly this one)
#   --no-tlog                  with --key: the signatures were made without a transparency log
#                              (the test bed's; a public release is always logged)
#   --registry-ca FILE         the registry's TLS certificate is verified against FILE
#   --release NAME             Helm release name (default outbox-operator)
#   --namespace NS             (default outbox-system, created when missing)
#   --verify-only              stop after step 4 (print what would be installed)
# Needs helm and cosign on PATH, or $HELM and $COSIGN.
set -euo pipefail
die() { echo "install-release: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0" >&2; exit 2; }

version=${1:-}
case $version in "" | -*) usage ;; esac
shift
chart=oci://ghcr.io/outbox-operator/charts/outbox-operator
key="" identity_re='^https://github\.com/outbox-operator/outbox-operator/\.github/workflows/release\.yml@refs/tags/v'
identity="" issuer=https://token.actions.githubusercontent.com no_tlog=0 registry_ca="" release=outbox-operator
namespace=outbox-system verify_only=0 helm_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --chart) chart=$2; shift 2 ;;
    --key) key=$2; shift 2 ;;
    --certificate-identity-regexp) identity_re=$2; shift 2 ;;
    --certificate-identity) identity=$2; shift 2 ;;
    --certificate-oidc-issuer) issuer=$2; shift 2 ;;
    --no-tlog) no_tlog=1; shift ;;
    --registry-ca) registry_ca=$2; shift 2 ;;
    --release) release=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --verify-only) verify_only=1; shift ;;
    --) shift; helm_args=("$@"); break ;;
    -h | --help) usage ;;
    *) die "unknown option $1 (--help)" ;;
  esac
done
[[ $chart == oci://* ]] || die "--chart must be an oci:// reference, not $chart"
helm=${HELM:-helm} cosign=${COSIGN:-cosign}
command -v "$helm" >/dev/null || die "helm not found (put it on PATH or set HELM)"
command -v "$cosign" >/dev/null || die "cosign not found (put it on PATH or set COSIGN)"
[ "$no_tlog" = 0 ] || [ -n "$key" ] || die "--no-tlog goes with --key: a keyless signature is proved by its log entry"
helm_tls=()
if [ -n "$registry_ca" ]; then
  [ -r "$registry_ca" ] || die "--registry-ca $registry_ca is not readable"
  helm_tls=(--ca-file "$registry_ca")
  # cosign is Go: its TLS then trusts exactly this file. Verified, never skipped.
  export SSL_CERT_FILE=$registry_ca
fi
verify_args=()
if [ -n "$key" ]; then
  [ -r "$key" ] || die "--key $key is not readable"
  verify_args=(--key "$key")
  [ "$no_tlog" = 0 ] || verify_args+=(--insecure-ignore-tlog=true)
elif [ -n "$identity" ]; then
  verify_args=(--certificate-identity "$identity" --certificate-oidc-issuer "$issuer")
else
  verify_args=(--certificate-identity-regexp "$identity_re" --certificate-oidc-issuer "$issuer")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. The chart, and the digest Helm checked it against.
"$helm" pull "$chart" --version "$version" --destination "$tmp" "${helm_tls[@]}" >"$tmp/pull.log" 2>&1 ||
  die "helm pull $chart $version failed: $(cat "$tmp/pull.log")"
chart_digest=$(sed -n 's/^Digest: *\(sha256:[0-9a-f]\{64\}\)$/\1/p' "$tmp/pull.log")
[ -n "$chart_digest" ] || die "helm pull printed no digest: $(cat "$tmp/pull.log")"
chart_ref=${chart#oci://}@$chart_digest

# 2. Its signature.
if ! "$cosign" verify "${verify_args[@]}" "$chart_ref" >"$tmp/verify-chart.json" 2>"$tmp/verify-chart.log"; then
  die "REFUSED: the chart $chart_ref ($version) has no valid signature:
$(cat "$tmp/verify-chart.log")"
fi
echo "install-release: chart $chart_ref: signature verified" >&2

# 3. The image it names, which must be by digest.
values=$("$helm" show values "$tmp"/outbox-operator-*.tgz)
image_block=$(awk '/^image:/{f=1; next} f && /^[^ #]/{exit} f' <<<"$values")
repository=$(sed -n 's/^  repository: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' <<<"$image_block")
digest=$(sed -n 's/^  digest: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' <<<"$image_block")
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] ||
  die "REFUSED: the chart names its image by tag, not by digest (image.digest is '${digest}')"
[ -n "$repository" ] || die "the chart's values name no image.repository"
image_ref=$repository@$digest

# 4. The image's signature and its SBOM attestation.
if ! "$cosign" verify "${verify_args[@]}" "$image_ref" >"$tmp/verify-image.json" 2>"$tmp/verify-image.log"; then
  die "REFUSED: the image $image_ref has no valid signature:
$(cat "$tmp/verify-image.log")"
fi
echo "install-release: image $image_ref: signature verified" >&2
if ! "$cosign" verify-attestation "${verify_args[@]}" --type spdxjson "$image_ref" \
  >"$tmp/verify-sbom.json" 2>"$tmp/verify-sbom.log"; then
  die "REFUSED: the image $image_ref has no valid SBOM attestation:
$(cat "$tmp/verify-sbom.log")"
fi
echo "install-release: image $image_ref: SBOM attestation verified" >&2

if [ "$verify_only" = 1 ]; then
  printf 'chart=%s\nimage=%s\n' "$chart@$chart_digest" "$image_ref"
  exit 0
fi
# 5. The verified chart, by digest.
"$helm" upgrade --install "$release" "$chart@$chart_digest" --namespace "$namespace" --create-namespace \
  "${helm_tls[@]}" "${helm_args[@]}"
