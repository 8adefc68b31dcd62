#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# cluster: the project image the node runs, as scripts/testbed/build-images.sh wrote it (a
# docker-archive tar of this tree's Dockerfile, built by buildah): no layer holds a shell,
# a package manager or coreutils, and its configuration runs the binary as 65532:65532.
# tests/crd/dockerfile_runtime_libs.sh checks the root filesystem the Dockerfile copies; this
# checks what the build made of it.
source "$(dirname "$0")/../crd/lib.sh"
command -v jq >/dev/null || die "jq is needed"

# Usage: image_archive.sh [archive]: by default the archive of this tree, from
# build-images.sh (a warm call returns the cached one at once; it builds otherwise).
if [ $# -gt 0 ]; then
  archive=$1
  ref=
else
  out=$("$REPO_ROOT/scripts/testbed/build-images.sh" | tail -n1) || die "build-images.sh failed"
  archive=$out/outbox-operator.tar
  ref=$(cat "$out/outbox-operator.ref")
fi
[ -f "$archive" ] || die "$archive is missing"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xf "$archive" -C "$work" || die "$archive is not a tar archive"
[ -f "$work/manifest.json" ] || die "$archive has no manifest.json (not a docker-archive)"
expect_eq "the archive holds one image" "$(jq length "$work/manifest.json")" "1"
if [ -n "$ref" ]; then
  expect_eq "the image is the one build-images.sh recorded" "$(jq -r '.[0].RepoTags[0]' "$work/manifest.json")" "$ref"
fi

mapfile -t layers < <(jq -r '.[0].Layers[]' "$work/manifest.json")
[ ${#layers[@]} -gt 0 ] || die "the manifest names no layers"
pass "${#layers[@]} layer(s)"
# Every path of every layer (a later layer could only hide a file by a whiteout, and the
# runtime stage has a single COPY anyway). tar reads gzip'd layers as well as plain ones.
for l in "${layers[@]}"; do tar -tf "$work/$l"; done | sed -e 's|^\./||' -e 's|/$||' | sort -u >"$work/paths"
expect_contains "the binary is in the image" "$(cat "$work/paths")" "usr/local/bin/outbox-operator"
expect_contains "the loader is in the image" "$(cat "$work/paths")" "usr/lib64/ld-linux-x86-64.so.2"
expect_contains "the CA bundle is in the image" "$(cat "$work/paths")" "etc/ssl/certs/ca-certificates.crt"
for f in bin/sh usr/bin/sh bin/bash usr/bin/bash bin/dash usr/bin/dash bin/busybox usr/bin/busybox \
  usr/bin/apt usr/bin/apt-get usr/bin/dpkg usr/bin/cat usr/bin/id usr/bin/env; do
  if grep -qx "$f" "$work/paths"; then fail "the image has /$f"; else pass "no /$f"; fi
done
expect_eq "nothing under /bin, /usr/bin or /sbin" \
  "$(grep -E '^(usr/)?s?bin/.' "$work/paths" | head -5 | tr '\n' ' ')" ""

config=$work/$(jq -r '.[0].Config' "$work/manifest.json")
expect_eq "runs as 65532:65532" "$(jq -r '.config.User' "$config")" "65532:65532"
expect_eq "entrypoint is the binary" "$(jq -c '.config.Entrypoint' "$config")" '["/usr/local/bin/outbox-operator"]'
finish
