#!/usr/bin/env bash
# The README's test command: on a fresh machine it installs what is missing,
# builds the test bed (cached) and the project, starts PostgreSQL, Kafka (one
# broker, and a 3-node cluster for the failover tests), kube-apiserver + etcd and an
# OCI registry on loopback, runs every test (labels unit, integration, e2e), then adds a real
# node and runs the cluster tests (label cluster), and stops the services
# whatever happens. Extra arguments go to ctest
# (e.g. scripts/test.sh -L unit, scripts/test.sh -L cluster).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
started=$(date +%s)
"$root/scripts/deps.sh"
"$root/scripts/build.sh"

export TESTBED_STATE="${TESTBED_STATE:-$root/.testbed/test}"
trap '"$root/scripts/testbed/down.sh" >/dev/null 2>&1 || true' EXIT
# Two phases on one test bed. First every test but the cluster ones, against PostgreSQL,
# Kafka and a bare control plane (fast; tests there stand in for the kubelet where they
# must). Then the node joins (kubelet, containerd, controller-manager, scheduler, the
# project's image) and the cluster tests and the demo run on real pods. Options naming
# `cluster` run only the second phase; other options only the first.
phases="fast cluster"
if [ $# -gt 0 ]; then
  if [[ " $* " == *cluster* ]]; then phases=cluster; else phases=fast; fi
fi
cd "${OUTBOX_BUILD_DIR:-$root/build}"
rc=0
images_pid=
if [ "$phases" = "fast cluster" ]; then
  # The node's images (the project's Dockerfile compiled by buildah: minutes of CPU) are built
  # while the first phase's tests run, which mostly wait on services; `up.sh node` then finds
  # them built (build-images.sh holds a lock, so it waits for a build still running).
  mkdir -p "$TESTBED_STATE"
  "$root/scripts/testbed/build-images.sh" >"$TESTBED_STATE/images.log" 2>&1 &
  images_pid=$!
  # cosign and actionlint (from the Go module proxy; minutes cold, cached after) likewise: the
  # release tests that need them wait for this build (a lock per tool), the others do not.
  "$root/scripts/testbed/build-release-tools.sh" cosign actionlint >"$TESTBED_STATE/release-tools.log" 2>&1 &
  tools_pid=$!
  # On any exit the background builds stop and the test bed goes down. Nothing here may fail:
  # under errexit a failing command in an EXIT trap becomes the script's exit code, and a build
  # that has ended cannot be killed (that turned green runs into exit code 1).
  # shellcheck disable=SC2317  # called by the trap below
  stop_background() {
    if [ -n "$images_pid" ]; then kill "$images_pid" 2>/dev/null || true; fi
    kill "$tools_pid" 2>/dev/null || true
    "$root/scripts/testbed/down.sh" >/dev/null 2>&1 || true
  }
  trap stop_background EXIT
fi
for phase in $phases; do
  # registry: the OCI registry the release tests publish to and the node pulls from.
  services=(pg pg2 kafka kafka3 kube registry)
  filter=(-LE cluster)
  if [ "$phase" = cluster ]; then services+=(node) filter=(-L cluster); fi
  if [ "$phase" = cluster ] && [ -n "$images_pid" ]; then
    # A failed background build is not the verdict: up.sh node builds again and says why.
    wait "$images_pid" || echo "[test] the images built beside the first phase failed (see $TESTBED_STATE/images.log)"
    images_pid=
  fi
  env_file=$("$root/scripts/testbed/up.sh" "${services[@]}" | tail -n1)
  # shellcheck source=/dev/null
  source "$env_file"
  export PATH="$OUTBOX_TESTBED_BIN:$PATH"  # the test bed's kubectl and helm, not older ones
  if [ "$phase" = cluster ] && [[ " $phases " == *" fast "* ]]; then
    # What the fast phase left (namespaces stuck Terminating without a namespace controller,
    # OutboxRelays of local controllers) goes before real pods could start for it.
    kubectl --kubeconfig "$OUTBOX_TEST_KUBECONFIG" get namespaces -o name |
      grep -vE '^namespace/(default|kube-system|kube-public|kube-node-lease)$' |
      xargs -r kubectl --kubeconfig "$OUTBOX_TEST_KUBECONFIG" delete --wait=true --timeout=120s >/dev/null || true
  fi
  # Tests run in parallel: OUTBOX_TEST_JOBS at once in the first phase (default 3: most of them
  # wait on a service, not on a core), OUTBOX_CLUSTER_TEST_JOBS on the one node (default 2). A
  # test that stops or restarts what the others share is marked RUN_SERIAL
  # (tests/*/CMakeLists.txt) and runs alone.
  jobs="${OUTBOX_TEST_JOBS:-3}"
  if [ "$phase" = cluster ]; then jobs="${OUTBOX_CLUSTER_TEST_JOBS:-2}"; fi
  set +e
  ctest --output-on-failure --no-tests=error -j"$jobs" "${filter[@]}" "$@"
  phase_rc=$?
  set -e
  echo "[test] $phase phase: exit code $phase_rc after $(($(date +%s) - started)) s"
  [ "$phase_rc" -eq 0 ] || rc=$phase_rc
done
# down.sh fails when the node leaves anything behind (processes, mounts, cgroups, the
# bridge, changed sysctls): that is part of the run's result.
if ! "$root/scripts/testbed/down.sh"; then
  echo "[test] the test bed did not stop cleanly (see above)"
  rc=1
fi
echo "[test] finished in $(($(date +%s) - started)) s with exit code $rc; service logs under $TESTBED_STATE"
exit $rc
