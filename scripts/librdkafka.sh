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
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# build PREFIX: fetches, checks, builds and installs into PREFIX.
build() {
  local prefix=$1 work tarball="librdkafka_$version.orig.tar.gz"
  work=$(mktemp -d)
  # shellcheck disable=SC2064  # the directory is this call's, known now
  trap "rm -rf '$work'" EXIT
  echo "[librdkafka] building $version into $prefix (~1 min)" >&2
  curl -fsSL --retry 3 -o "$work/$tarball" "$mirror/pool/main/libr/librdkafka/$tarball"
  echo "$sha256  $work/$tarball" | sha256sum -c --quiet -
  tar -xzf "$work/$tarball" -C "$work"
  cd "$work/librdkafka-$version"
  {
    # The rpath: librdkafka++ finds this librdkafka, not an older one the system may have.
    LDFLAGS="-Wl,-rpath,$prefix/lib" ./configure --prefix="$prefix" --enable-ssl --enable-gssapi \
      --enable-zlib --enable-zstd --enable-lz4-ext --disable-curl &&
      make -j"$(nproc)" libs &&
      make install-subdirs
  } >"$work/build.log" 2>&1 || {
    tail -n 40 "$work/build.log" >&2
    echo "[librdkafka] build failed" >&2
    exit 1
  }
}

if [ -n "${1:-}" ]; then
  # An explicit prefix (the Dockerfile's /usr/local) is built into, not managed as a cache.
  build "$1"
  echo "$1"
  exit 0
fi
# The cache entry: built in place (the rpath names its path, so it cannot be built elsewhere
# and moved), under its lock, sealed last (scripts/cache.sh); the key names this script's
# content too, so a changed build recipe builds again.
# shellcheck source-path=SCRIPTDIR source=cache.sh
source "$(dirname "$0")/cache.sh"
prefix="$OUTBOX_CACHE/librdkafka-$version"
cache_fill_in_place "$prefix" "$version-$(sha256sum "$0" | cut -c1-12)" build
echo "$prefix"
