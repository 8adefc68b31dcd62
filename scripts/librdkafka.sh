#!/usr/bin/env bash
# librdkafka.sh [PREFIX]: builds librdkafka from Debian trixie's source package and
# installs it under PREFIX (default: a cache directory); prints PREFIX. A second call
# with the same version installed returns at once.
#
# Why not bookworm's librdkafka (2.0.2): before 2.6.1 librdkafka repeats the client's
# nonce in SCRAM's final message, which Kafka 4 brokers refuse, so SASL/SCRAM (Strimzi's
# scram-sha-512 KafkaUser) cannot work with current Kafka. Trixie ships 2.8.0; its
# original tarball is fetched from the Debian mirror and checked against the SHA-256 in
# trixie's Sources index. The features match bookworm's package (TLS, SASL incl.
# GSSAPI, zlib, zstd, lz4; no libcurl, so no OIDC token fetching), so the packages it links
# are bookworm's. The Dockerfile runs this same script with PREFIX=/usr/local.
set -euo pipefail
version=2.8.0
sha256=5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25
cache="${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator-testbed"
prefix=${1:-$cache/librdkafka-$version}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# The stamp names this script's content too: a changed build recipe builds again.
stamp="$prefix/lib/pkgconfig/.librdkafka-$version-$(sha256sum "$0" | cut -c1-12)"
if [ -f "$stamp" ]; then
  echo "$prefix"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball="librdkafka_$version.orig.tar.gz"
echo "[librdkafka] building $version into $prefix (~1 min)" >&2
curl -fsSL --retry 3 -o "$work/$tarball" "$mirror/pool/main/libr/librdkafka/$tarball"
echo "$sha256  $work/$tarball" | sha256sum -c --quiet -
tar -xzf "$work/$tarball" -C "$work"
cd "$work/librdkafka-$version"
{
  # The rpath: librdkafka++ finds this librdkafka, not an older one the system may have.
  LDFLAGS="-Wl,-rpath,$prefix/lib" ./configure --prefix="$prefix" --enable-ssl --enable-gssapi \
    --enable-zlib --enable-zstd --enable-lz4-ext --disable-curl
  make -j"$(nproc)" libs
  make install-subdirs
  rm -f "$prefix"/lib/pkgconfig/.librdkafka-*
} >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  echo "[librdkafka] build failed" >&2
  exit 1
}
touch "$stamp"
echo "$prefix"
