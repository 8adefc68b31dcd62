#!/usr/bin/env bash
# build-images.sh: builds the container images the test bed's node runs, with no
# registry, and prints the directory holding their archives (docker-archive tars
# that `ctr images import` reads). Cached; a warm call returns at once.
#   debian base   debootstrap --variant=minbase bookworm from the Debian mirror,
#                 tagged debian:bookworm and debian:bookworm-slim for buildah, so the
#                 project's Dockerfile builds unchanged (the one a user builds with
#                 Docker); the test bed only supplies its base image locally
#   pause.tar     the pod sandbox: pause.c from the k8s.io/kubernetes module, static
#   tools.tar     busybox + kubectl, for tests that look at the cluster from a pod
#   outbox-operator-<hash>.tar  the project's Dockerfile built by buildah; <hash>
#                 covers everything the Dockerfile copies, so a source change
#                 rebuilds it and an unchanged tree reuses it
# The project image's reference is written to $OUT/outbox-operator.ref.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
top="$TESTBED_CACHE/images"
OUT="$top/archives"
mkdir -p "$OUT"
exec 8>"$top/.lock"
flock 8
buildlog="$top/build.log"
# buildah keeps its own image store inside the cache, apart from any other user's.
BUILDAH=(buildah --root "$top/storage" --runroot "$top/run" --storage-driver vfs)

step() { # step NAME FUNCTION: runs FUNCTION with its output in the log; names the log on failure
  local t=$SECONDS rc
  set +e; ( set -e; "$2" ) >>"$buildlog" 2>&1; rc=$?; set -e
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$buildlog" >&2
    die "building the $1 image failed; log: $buildlog"
  fi
  log "image $1 ready in $((SECONDS - t)) s"
}

debian_mirror() {
  local m
  m=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
  echo "${m:-http://deb.debian.org/debian}"
}

build_debian() {
  [ -f "$top/.debian-bookworm" ] && return 0
  local root="$top/rootfs-bookworm" c mnt
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "$(debian_mirror)"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  "${BUILDAH[@]}" rmi -f docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim 2>/dev/null || true
  c=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$c")
  cp -a "$root/." "$mnt/"
  "${BUILDAH[@]}" umount "$c"
  "${BUILDAH[@]}" config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  "${BUILDAH[@]}" commit --rm "$c" docker.io/library/debian:bookworm
  # The slim variant differs only in dropped documentation: the same rootfs serves.
  "${BUILDAH[@]}" tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
  rm -rf "$root"
  touch "$top/.debian-bookworm"
}

# save NAME REF: writes REF as $OUT/NAME.tar (docker-archive keeps the full name), under a
# temporary name first: an archive under its own name is always a whole one.
save() {
  rm -f "$OUT/$1.tar.part"
  "${BUILDAH[@]}" push "$2" "docker-archive:$OUT/$1.tar.part:$2"
  mv -f "$OUT/$1.tar.part" "$OUT/$1.tar"
}

# archived NAME: true when $OUT/NAME.tar is there and reads to its end (a truncated archive,
# say from a full disk, is built again rather than imported half).
archived() { [ -f "$OUT/$1.tar" ] && tar -tf "$OUT/$1.tar" >/dev/null 2>&1; }

build_pause() {
  archived pause && return 0
  local src c mnt
  src=$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/build/pause/linux/pause.c
  [ -f "$src" ] || go mod download "k8s.io/kubernetes@$K8S_VERSION"
  c=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$c")
  gcc -Os -static -DVERSION="$K8S_VERSION" -o "$mnt/pause" "$src"
  strip "$mnt/pause"
  "${BUILDAH[@]}" umount "$c"
  "${BUILDAH[@]}" config --entrypoint '["/pause"]' --user 65535:65535 "$c"
  "${BUILDAH[@]}" commit --rm "$c" localhost/pause:local
  save pause localhost/pause:local
}

build_tools() {
  archived tools && return 0
  local c mnt
  c=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$c")
  mkdir -p "$mnt/bin" "$mnt/tmp"
  cp /bin/busybox "$mnt/bin/busybox"
  chroot "$mnt" /bin/busybox --install -s /bin
  cp "$("$TESTBED_DIR/build-k8s.sh")/kubectl" "$mnt/bin/kubectl"
  "${BUILDAH[@]}" umount "$c"
  "${BUILDAH[@]}" config --cmd /bin/sh --env PATH=/bin "$c"
  "${BUILDAH[@]}" commit --rm "$c" localhost/testbed-tools:local
  save tools localhost/testbed-tools:local
}

# Everything the Dockerfile reads: a change to any of it is a new image.
source_hash() {
  (cd "$REPO_ROOT" && find Dockerfile .dockerignore CMakeLists.txt src scripts/librdkafka.sh scripts/image-rootfs.sh -type f -print0 | sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-12)
}

build_project() {
  local ref
  ref="localhost/outbox-operator:dev-$(source_hash)"
  [ -f "$OUT/outbox-operator.ref" ] && [ "$(cat "$OUT/outbox-operator.ref")" = "$ref" ] &&
    archived outbox-operator && return 0
  # Working containers left by an interrupted build (the store is this script's alone,
  # under its lock) would only take space.
  "${BUILDAH[@]}" rm --all >/dev/null 2>&1 || true
  # The vfs driver keeps every cached layer as a full copy (~1 GB per source change, each
  # compile step's layer): past 20 GiB the cache goes, and the next build redoes apt-get.
  if [ "$(du -sk "$top/storage" | cut -f1)" -gt $((20 * 1024 * 1024)) ]; then
    "${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
  fi
  # --layers reuses the apt-get steps between builds; --pull=never: the bases are local.
  # chroot isolation and the host network: the build steps fetch Debian packages, as the
  # host's own apt-get does; the nested runc of an OCI isolation cannot lower
  # oom_score_adj on this VM.
  # 8>&-: the build's processes must not inherit this script's lock (a compile left
  # behind by an interrupted build would otherwise hold it).
  nice -n 10 "${BUILDAH[@]}" bud --layers --pull=never --isolation chroot --network host \
    -f "$REPO_ROOT/Dockerfile" -t "$ref" "$REPO_ROOT" 8>&-
  rm -f "$OUT/outbox-operator.ref"  # the archive below is not this ref's until both are written
  save outbox-operator "$ref"
  echo "$ref" >"$OUT/outbox-operator.ref.part" && mv -f "$OUT/outbox-operator.ref.part" "$OUT/outbox-operator.ref"
  # Keep the store small: images of older trees go (the cached layers stay).
  "${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/outbox-operator:' |
    grep -vx "$ref" | xargs -r "${BUILDAH[@]}" rmi -f || true
}

log "building images (cold: debootstrap ~2 min, the project image ~10 min); log: $buildlog"
step debian build_debian
step pause build_pause
step tools build_tools
step outbox-operator build_project
echo "$OUT"
