#!/usr/bin/env bash
# build-k8s.sh [node]
# Builds kube-apiserver, kubectl (same module), etcd and helm from the Go module
# proxy into $TESTBED_CACHE/k8s-$K8S_VERSION/bin and prints that directory. With
# `node`, builds kubelet, kube-scheduler and kube-controller-manager from the same
# k8s.io/kubernetes module into $TESTBED_CACHE/k8s-$K8S_VERSION/node-bin and prints that
# one instead (the test bed's node; fast tests do without them). Each directory is a cache
# entry (scripts/cache.sh): filled once under a lock, sealed, and refilled when a binary
# is missing or truncated. Build output goes to build.log beside them.
# shellcheck disable=SC2031  # BIN and work are set by fill, in cache_fill's subshell, and read in subshells of it
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../cache.sh
source "$TESTBED_DIR/../cache.sh"
top="$TESTBED_CACHE/k8s-$K8S_VERSION"
versions="kubernetes $K8S_VERSION etcd $ETCD_VERSION helm $HELM_VERSION"
case ${1:-} in
  node) entry="$top/node-bin" steps=(node) ;;
  "") entry="$top/bin" steps=(etcd helm kube) ;;
  *) die "usage: $0 [node]" ;;
esac
cache_sealed "$entry" "$versions" && { echo "$entry"; exit 0; }
mkdir -p "$top"
buildlog="$top/build.log"

# What `kubectl version` and the components report (a plain go build leaves it empty).
version_ldflags() {
  local ldf="-s -w" p minor
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  echo "$ldf"
}

# kube_module DIR: a Go module in DIR requiring k8s.io/kubernetes with its staging modules
# pointed at their published versions; the kube and node builds share its recipe.
kube_module() {
  local stg="v0.${K8S_VERSION#v1.}"
  mkdir -p "$1" && cd "$1"
  go mod init local.test/k8sbin >/dev/null 2>&1
  go mod edit -go=1.26.0
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": *"\([^"]*\)".*/\1/p')
  [ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION go.mod"
  # k8s.io/kubernetes replaces its staging modules with local paths; point them at the published versions.
  sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod" |
    while read -r m; do go mod edit -replace="$m=$m@$stg"; done
  go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
}

build_kube() {
  kube_module "$work/kube"
  cat > tools.go <<'EOT'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOT
  go mod tidy
  go build -trimpath -ldflags "$(version_ldflags)" -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
}

# The node's binaries, from the same module recipe (same replaces, same version).
build_node() {
  kube_module "$work/node"
  cat > tools_node.go <<'EOT'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOT
  go mod tidy
  nice -n 10 go build -trimpath -ldflags "$(version_ldflags)" -o "$BIN/" k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet
}

build_etcd() {
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init local.test/etcdbin >/dev/null 2>&1
  go mod edit -go=1.26.0
  go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  cat > tools.go <<'EOT'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
EOT
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

build_helm() {
  mkdir -p "$work/helm" && cd "$work/helm"
  go mod init local.test/helmbin >/dev/null 2>&1
  go mod edit -go=1.26.0
  local major="${HELM_VERSION%%.*}"
  go mod edit -require="helm.sh/helm/$major@$HELM_VERSION"
  cat > tools.go <<EOT
//go:build tools

package tools

import _ "helm.sh/helm/$major/cmd/helm"
EOT
  go mod tidy
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM_VERSION" -o "$BIN/helm" "helm.sh/helm/$major/cmd/helm"
}

# fill DIR: every step into DIR, each step's Go module in DIR.src (removed with the fill's
# debris if the fill is killed: cache.sh removes ENTRY.fill-*).
fill() {
  BIN=$1 work="$1.src"
  local step t rc
  for step in "${steps[@]}"; do
    t=$SECONDS
    # Not in an if/||: there bash would ignore set -e inside the subshell too.
    set +e; ( set -e; "build_$step" ) >>"$buildlog" 2>&1; rc=$?; set -e
    if [ "$rc" -ne 0 ]; then
      tail -n 30 "$buildlog" >&2
      die "building $step failed; log: $buildlog"
    fi
    log "built $step in $((SECONDS - t)) s"
  done
  rm -rf "$work"
}
log "building ${steps[*]} ($K8S_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION) into $entry (cold: ~7 min on 2 cores, the node ~6 min more); log: $buildlog"
cache_fill "$entry" "$versions" fill
echo "$entry"
