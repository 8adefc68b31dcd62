#!/usr/bin/env bash
# image-rootfs.sh <binary> <outdir>: lays out in <outdir> everything the runtime image
# holds, and nothing else: the binary as /usr/local/bin/outbox-operator, the shared
# libraries it loads (its ldd closure) and the dynamic loader, the CA bundle, the time zone
# database, and /etc/passwd, /etc/group and /etc/nsswitch.conf naming the non-root user
# 65532 (nonroot). No shell, no package manager, no coreutils: the Dockerfile's runtime
# stage is `FROM scratch` plus this directory, so `kubectl exec` can run only the binary.
# tests/crd/dockerfile_runtime_libs.sh runs this same script against the built binary and
# then runs the binary chrooted into the result.
#
# What ldd does not list because it is loaded with dlopen, and why none of it is needed:
#  - glibc (2.36 in bookworm) has the NSS "files" and "dns" services built in, so host
#    names (brokers, the database) resolve with no libnss_* module;
#  - OpenSSL 3's default provider is built into libcrypto; the legacy provider module is
#    loaded only when a configuration asks for it, and none does;
#  - libsasl2 loads mechanism plugins, but librdkafka uses Cyrus SASL only for GSSAPI
#    (Kerberos), which the project does not support; PLAIN and SCRAM are librdkafka's own;
#  - libkrb5 plugins and gconv modules serve Kerberos and iconv charset conversions,
#    which nothing here uses.
# Host prerequisites: ldd and the files copied (ca-certificates and tzdata installed), and
# dpkg-query, for the package records below.
set -euo pipefail
die() { printf 'image-rootfs: %s\n' "$*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 <binary> <outdir>"
binary=$1
out=$2
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then die "$binary is not an executable file"; fi
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  die "$out is not empty (a leftover file would end up in the image)"
fi
command -v ldd >/dev/null || die "ldd is needed"
command -v dpkg-query >/dev/null || die "dpkg-query is needed (the package records)"
certs=/etc/ssl/certs/ca-certificates.crt
zoneinfo=/usr/share/zoneinfo
[ -s "$certs" ] || die "$certs is missing (install ca-certificates)"
[ -f "$zoneinfo/UTC" ] || die "$zoneinfo is missing (install tzdata)"

ldd_out=$(ldd "$binary") || die "ldd $binary failed (a static binary?)"
if grep -q 'not found' <<<"$ldd_out"; then
  die "libraries of $binary do not resolve:
$(grep 'not found' <<<"$ldd_out")"
fi
# "soname => /path (0x...)" for each library, "/path (0x...)" for the loader; the vDSO
# ("linux-vdso.so.1 (0x...)") is the kernel's and has no file.
interp=$(awk '$1 ~ /^\// && $2 ~ /^\(0x/ {print $1}' <<<"$ldd_out")
[ -n "$interp" ] || die "no dynamic loader in the ldd output of $binary"
libc=$(awk '$1 == "libc.so.6" && $2 == "=>" {print $3}' <<<"$ldd_out")
[ -n "$libc" ] || die "$binary does not load libc.so.6"

# Merged /usr, as in the build stage: /lib and /lib64 are links into /usr, so the loader
# finds a library under either spelling. Every library goes into libc's directory, one the
# loader searches by default: there is no ld.so.cache in the image (nothing runs ldconfig),
# and the build's RUNPATH (librdkafka's build directory) does not exist there.
usr() { local p=$1; echo "/usr${p#/usr}"; }
libdir=$(usr "$(dirname "$libc")")
mkdir -p "$out/usr/lib" "$out/usr/lib64" "$out$libdir" "$out/usr/local/bin"
ln -s usr/lib "$out/lib"
ln -s usr/lib64 "$out/lib64"

install -m 0755 "$binary" "$out/usr/local/bin/outbox-operator"
# The loader at the path the binary names (PT_INTERP, /lib64/ld-linux-x86-64.so.2 on amd64).
mkdir -p "$out$(usr "$(dirname "$interp")")"
install -m 0755 "$(readlink -f "$interp")" "$out$(usr "$interp")"
# Each library under the soname the loader looks up, with the content of the file that
# name resolves to on this host (cp -L: a link chain such as libfmt.so.9 ->
# libfmt.so.9.1.0 becomes one file).
while read -r soname arrow path _; do
  if [ "$arrow" != "=>" ] || [[ $path != /* ]]; then continue; fi
  install -m 0644 "$(readlink -f "$path")" "$out$libdir/$soname"
done <<<"$ldd_out"

# Package records, where distroless images keep them: /var/lib/dpkg/status.d/<package>, one
# dpkg status paragraph per Debian package a copied file comes from. The image has no dpkg
# database (nothing could run dpkg in it), so without these a vulnerability scanner finds no
# package at all in it; the release's SBOM (scripts/release-sbom.py) is read from them too.
# librdkafka, built from source into /usr/local, belongs to no Debian package: the SBOM names
# it from scripts/librdkafka.sh. dpkg may know a file under /lib or under /usr/lib (merged /usr).
owner() {
  local p=$1 q
  for q in "$p" "${p#/usr}"; do
    dpkg-query -S "$q" 2>/dev/null | sed -n '1s/: .*//p' && return 0
  done
  return 0  # no package (librdkafka): nothing printed
}
packages=()
while read -r _ arrow path _; do
  if [ "$arrow" != "=>" ] || [[ $path != /* ]]; then continue; fi
  packages+=("$(owner "$(readlink -f "$path")")")
done <<<"$ldd_out"
packages+=("$(owner "$(readlink -f "$interp")")")
# The CA bundle is made by update-ca-certificates from this package's certificates; the time
# zone files are tzdata's.
packages+=(ca-certificates tzdata)
mkdir -p "$out/var/lib/dpkg/status.d"
for pkg in $(printf '%s\n' "${packages[@]}" | sed '/^$/d' | sort -u); do
  dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nSource: ${source:Package} (${source:Version})\nStatus: install ok installed\n' \
    "$pkg" >"$out/var/lib/dpkg/status.d/${pkg%%:*}" || die "dpkg-query knows no package $pkg"
done

# CA bundle, where libpq, librdkafka and OpenSSL look for it: the file itself, and
# OpenSSL's default file (OPENSSLDIR/cert.pem) as a link to it, as Debian lays them out.
install -D -m 0644 "$certs" "$out$certs"
openssldir=/usr/lib/ssl
if command -v openssl >/dev/null; then
  openssldir=$(openssl version -d | sed -n 's/^OPENSSLDIR: "\(.*\)"$/\1/p')
fi
mkdir -p "$out$openssldir"
ln -s "$certs" "$out$openssldir/cert.pem"

# Time zone database (the links inside it stay links).
mkdir -p "$out/usr/share"
cp -a "$zoneinfo" "$out/usr/share/"

# The user the image runs as (USER 65532:65532) and the pods' securityContext names; a
# name for getpwuid (libpq asks for the user's name and home) and no login shell (none).
mkdir -p "$out/etc"
cat >"$out/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin
EOF
cat >"$out/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
# Without this file glibc asks DNS before /etc/hosts; Debian's order (files first) keeps
# the pod's /etc/hosts entries (hostAliases, its own name) ahead of DNS, as in a Debian image.
cat >"$out/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
chmod 0644 "$out/etc/passwd" "$out/etc/group" "$out/etc/nsswitch.conf"
