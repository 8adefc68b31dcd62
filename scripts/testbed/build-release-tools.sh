#!/usr/bin/env bash
# build-release-tools.sh [TOOL...]   (default: all of them)
# Builds what a release is published and checked with, from the Go module proxy, and prints
# one line per TOOL asked: the path of its binary.
#   registry   the CNCF Distribution registry (github.com/distribution/distribution/v3) with
#              its filesystem storage only, the test bed's OCI registry on loopback (up.sh
#              registry): what the node pulls from
#   crane      go-containerregistry's client: pushes a docker-archive by digest, reads
#              manifests and digests (the tests' tampering too)
#   cosign     signs and verifies the image and the chart, attaches the SBOM
#   actionlint lints .github/workflows (tests/crd/release_workflow_lint.sh)
# Each tool is a cache entry of its own (scripts/cache.sh: filled once under a lock into a
# temporary directory, renamed into place when whole, refilled when its binary is missing or
# truncated), keyed by its version, so the unit test that needs only actionlint never waits
# for cosign. Build output goes to $TESTBED_CACHE/release-tools/build.log.
# Why these and not others: the registry is the one most registries in production descend from
# (containerd pulls from it as from any), crane pushes an archive without a container engine,
# and cosign is what a user runs to verify the release. Cold, on 2 cores: see docs/testbed.md,
# "Measured times".
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
REGISTRY_VERSION="${REGISTRY_VERSION:-v3.1.2}"
CRANE_VERSION="${CRANE_VERSION:-v0.22.1}"
COSIGN_VERSION="${COSIGN_VERSION:-v2.6.5}"
ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
top="$TESTBED_CACHE/release-tools"
buildlog="$top/build.log"
mkdir -p "$top"

# tool_spec TOOL: "MODULE VERSION PACKAGE BINARY" for TOOL.
tool_spec() {
  case $1 in
    registry) echo "github.com/distribution/distribution/v3 $REGISTRY_VERSION github.com/distribution/distribution/v3/registry registry" ;;
    crane) echo "github.com/google/go-containerregistry $CRANE_VERSION github.com/google/go-containerregistry/cmd/crane crane" ;;
    cosign) echo "github.com/sigstore/cosign/v2 $COSIGN_VERSION github.com/sigstore/cosign/v2/cmd/cosign cosign" ;;
    actionlint) echo "github.com/rhysd/actionlint $ACTIONLINT_VERSION github.com/rhysd/actionlint/cmd/actionlint actionlint" ;;
    *) die "unknown tool '$1' (registry, crane, cosign, actionlint)" ;;
  esac
}

# build_tool DIR MODULE VERSION PACKAGE BINARY: a throw-away module requiring MODULE@VERSION
# (its own go.sum, resolved by go mod tidy as the other test-bed binaries are), built into DIR.
build_tool() {
  local dir=$1 module=$2 version=$3 pkg=$4 bin=$5 work="$1/src" ldflags="-s -w"
  mkdir -p "$work" && cd "$work"
  go mod init local.test/"$bin"bin >/dev/null 2>&1
  go mod edit -go=1.26.0 -require="$module@$version"
  if [ "$bin" = registry ]; then
    # The registry's own command links every storage driver (S3, GCS, Azure: their SDKs are
    # most of its build); the test bed stores on disk, so this main links the filesystem
    # driver only: about 2 min instead of 3.5 cold, half the binary.
    pkg=.
    cat >main.go <<'EOT'
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() { _ = registry.RootCmd.Execute() }
EOT
  else
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >tools.go
  fi
  go mod tidy
  # What `cosign version` and `crane version` print (a plain go build leaves them empty).
  case $bin in
    cosign) ldflags+=" -X sigs.k8s.io/release-utils/version.gitVersion=$version" ;;
    crane) ldflags+=" -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$version" ;;
    actionlint) ldflags+=" -X github.com/rhysd/actionlint.version=$version" ;;
  esac
  # nice: these build while tests run (scripts/test.sh); one package at a time per core.
  nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$dir/$bin" "$pkg"
  cd "$dir" && rm -rf "$work"
}

# fill DIR TOOL: cache_fill's fill for one tool, its output appended to the build log.
fill() {
  local dir=$1 tool=$2 t=$SECONDS rc spec
  read -r -a spec <<<"$(tool_spec "$tool")"
  set +e; ( set -e; build_tool "$dir" "${spec[@]}" ) >>"$buildlog" 2>&1; rc=$?; set -e
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$buildlog" >&2
    die "building $tool failed; log: $buildlog"
  fi
  log "built $tool in $((SECONDS - t)) s"
}

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(registry crane cosign actionlint)
for tool in "${tools[@]}"; do
  read -r module version _ bin <<<"$(tool_spec "$tool")"
  entry="$top/$tool-$version" key="$module@$version"
  # The registry's key names its one storage driver: an entry of the whole command is not it.
  [ "$tool" != registry ] || key+=" filesystem-only"
  if ! cache_sealed "$entry" "$key"; then
    log "building $tool ($module@$version) into $entry; log: $buildlog"
    cache_fill "$entry" "$key" fill "$tool"
  fi
  [ -x "$entry/$bin" ] || die "$entry/$bin is missing after its build"
  echo "$entry/$bin"
done
