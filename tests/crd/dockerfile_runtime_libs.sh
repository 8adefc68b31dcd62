#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# Unit: the runtime image holds the binary and what it loads, and nothing to exec
# into. There is no Docker engine here, so the check runs the Dockerfile's own
# rootfs script (scripts/image-rootfs.sh) against the built binary into a temporary
# directory, as the build stage does into /rootfs, and looks at the result:
#  - it is self-contained: the binary runs chrooted into it (as root only; otherwise
#    that step is skipped with a note), every library it names is there, the loader
#    is at the binary's PT_INTERP path, CA bundle, zoneinfo and the user 65532 are there;
#  - it has no shell, no package manager and no coreutils;
#  - the Dockerfile's runtime stage is `FROM scratch`, copies only the build stage's
#    /rootfs, runs as 65532:65532 and has the binary as its entrypoint; the build
#    stage is debian:bookworm, builds without tests and runs the same script.
# The image itself (every layer of the archive the test bed builds) is checked in the
# cluster phase: tests/cluster/image_archive.sh.
# Usage: dockerfile_runtime_libs.sh <path to the built outbox-operator> [Dockerfile]
source "$(dirname "$0")/lib.sh"

binary=${1:-}
dockerfile=${2:-$REPO_ROOT/Dockerfile}
rootfs_script=$REPO_ROOT/scripts/image-rootfs.sh
[ -n "$binary" ] || die "usage: $0 <path to the built outbox-operator binary> [Dockerfile]"
[ -x "$binary" ] || die "$binary is not an executable file (build the outbox-operator target first)"
[ -f "$dockerfile" ] || die "$dockerfile not found"
[ -x "$rootfs_script" ] || die "$rootfs_script is missing or not executable"

# --- the Dockerfile's stages ----------------------------------------------------------
# Join continuation lines, then split into stages at each FROM.
joined=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$dockerfile")
stage_count=$(grep -c '^FROM ' <<<"$joined")
[ "$stage_count" -ge 2 ] && pass "multi-stage build ($stage_count stages)" || fail "the Dockerfile is not multi-stage"
build_stage=$(awk '/^FROM /{n++} n==1' <<<"$joined")
runtime_stage=$(awk -v last="$stage_count" '/^FROM /{n++} n==last' <<<"$joined")
expect_contains "build stage is debian:bookworm" "$(head -1 <<<"$build_stage")" "FROM debian:bookworm AS build"
expect_contains "build stage builds without tests" "$build_stage" "-DOUTBOX_BUILD_TESTS=OFF"
expect_contains "build stage installs ca-certificates and tzdata" \
  "$(grep -o 'apt-get install[^&;]*' <<<"$build_stage" | tr -s ' ' '\n' | grep -x -e ca-certificates -e tzdata | sort | tr '\n' ' ')" \
  "ca-certificates tzdata"
expect_contains "build stage copies the rootfs script" "$build_stage" "COPY scripts/image-rootfs.sh scripts/"
expect_contains "build stage runs the rootfs script into /rootfs" "$build_stage" \
  "scripts/image-rootfs.sh /out/usr/local/bin/outbox-operator /rootfs"

expect_eq "runtime stage is FROM scratch" "$(head -1 <<<"$runtime_stage" | awk '{print $1, $2}')" "FROM scratch"
# Its instructions (comments aside): one COPY, of the build stage's /rootfs, and no RUN
# (there is nothing to run it with).
instructions=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' <<<"$runtime_stage")
expect_eq "runtime stage copies only the build stage's /rootfs" \
  "$(grep -E '^(COPY|ADD) ' <<<"$instructions")" "COPY --from=build /rootfs/ /"
expect_eq "runtime stage runs nothing" "$(grep -E '^RUN ' <<<"$instructions" || true)" ""
expect_eq "runtime stage runs as 65532:65532" "$(grep '^USER ' <<<"$instructions")" "USER 65532:65532"
expect_eq "PATH finds the binary (kubectl exec <pod> -- outbox-operator)" "$(grep '^ENV PATH=' <<<"$instructions")" "ENV PATH=/usr/local/bin"
expect_eq "entrypoint is the binary" "$(grep '^ENTRYPOINT ' <<<"$instructions")" 'ENTRYPOINT ["/usr/local/bin/outbox-operator"]'

# --- the root filesystem the script lays out --------------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/rootfs
if out=$("$rootfs_script" "$binary" "$root" 2>&1); then pass "image-rootfs.sh lays out $root"
else die "image-rootfs.sh failed: $out"
fi
# The script refuses to write over an earlier result (a stale file would reach the image).
if "$rootfs_script" "$binary" "$root" >/dev/null 2>&1; then fail "image-rootfs.sh wrote into a non-empty directory"
else pass "image-rootfs.sh refuses a non-empty directory"
fi

if [ "$(id -u)" = 0 ]; then
  version=$(chroot "$root" /usr/local/bin/outbox-operator --version 2>&1) &&
    pass "the binary runs chrooted into the rootfs: $version" ||
    fail "chroot $root /usr/local/bin/outbox-operator --version failed: $version"
else
  printf 'skip  chroot into the rootfs needs root (running as uid %s); the file checks below still run\n' "$(id -u)"
fi

# Every library the loader will look up, under the name it looks up (ldd's left column),
# is in a directory it searches; the loader is at the path the binary names.
interp=$(ldd "$binary" | awk '$1 ~ /^\// && $2 ~ /^\(0x/ {print $1}')
[ -n "$interp" ] && [ -f "$root$interp" ] && pass "loader at $interp" || fail "the loader ($interp) is not in the rootfs"
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] && pass "/lib64/ld-linux-x86-64.so.2 exists" ||
  fail "/lib64/ld-linux-x86-64.so.2 is missing"
# libc's directory (x86_64-linux-gnu on amd64) is one the loader searches without a cache.
libdir=$(dirname "$(ldd "$binary" | awk '$1 == "libc.so.6" {print $3}')")
libdir=/usr${libdir#/usr}
missing=()
while read -r soname arrow _; do
  [ "$arrow" = "=>" ] || continue
  [ -f "$root$libdir/$soname" ] || missing+=("$soname")
done < <(ldd "$binary")
expect_eq "every library ldd lists is in the rootfs" "${missing[*]}" ""

[ -s "$root/etc/ssl/certs/ca-certificates.crt" ] && pass "CA bundle" || fail "no /etc/ssl/certs/ca-certificates.crt"
[ -f "$root/usr/share/zoneinfo/Europe/Berlin" ] && pass "zoneinfo" || fail "no /usr/share/zoneinfo"
# Package records for scanners and the SBOM (scripts/release-sbom.py): one per Debian package a
# copied file came from, in dpkg's status format.
for pkg in libc6 libpq5 libssl3 libstdc++6 ca-certificates tzdata; do
  expect_eq "/var/lib/dpkg/status.d records $pkg" \
    "$(sed -n 's/^Package: //p' "$root/var/lib/dpkg/status.d/$pkg" 2>/dev/null)" "$pkg"
done
expect_eq "every record names a version" \
  "$(grep -L '^Version: .' "$root"/var/lib/dpkg/status.d/* | tr '\n' ' ')" ""
expect_eq "passwd names 65532 nonroot" "$(awk -F: '$3 == 65532 {print $1 ":" $4}' "$root/etc/passwd")" "nonroot:65532"
expect_eq "group names 65532 nonroot" "$(awk -F: '$3 == 65532 {print $1}' "$root/etc/group")" "nonroot"

# Nothing to exec into: no shell, no package manager, no coreutils, in any bin directory.
for f in bin/sh usr/bin/sh bin/bash usr/bin/bash bin/dash usr/bin/dash bin/busybox usr/bin/busybox; do
  if [ -e "$root/$f" ] || [ -L "$root/$f" ]; then fail "the rootfs has /$f"; else pass "no /$f"; fi
done
tools=$(cd "$root" && find . \( -name 'apt*' -o -name 'dpkg*' -o -name ls -o -name cat -o -name env \
  -o -name id -o -name touch \) -not -path './usr/share/zoneinfo/*' -not -path ./var/lib/dpkg | sort | tr '\n' ' ')
# /var/lib/dpkg is data, the package records, and holds nothing else.
expect_eq "/var/lib/dpkg holds only status.d" "$(find "$root/var/lib/dpkg" -mindepth 1 -maxdepth 1 -printf '%f ')" "status.d "
expect_eq "no apt, dpkg or coreutils" "$tools" ""
executables=$(cd "$root" && find . -type f -perm -u+x -not -path './usr/lib/*' -not -path './usr/lib64/*' | sort | tr '\n' ' ')
expect_eq "the only executable outside the library directories is the binary" "$executables" "./usr/local/bin/outbox-operator "

finish
