#!/usr/bin/env bash
# The README's test command: on a fresh machine it installs what is missing,
# builds the test bed (cached) and the project, starts PostgreSQL, Kafka and
# kube-apiserver + etcd on loopback, runs every test (labels unit, integration,
# e2e), and stops the services whatever happens. Extra arguments go to ctest
# (e.g. scripts/test.sh -L unit).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
started=$(date +%s)
"$root/scripts/deps.sh"
"$root/scripts/build.sh"

export TESTBED_STATE="${TESTBED_STATE:-$root/.testbed/test}"
trap '"$root/scripts/testbed/down.sh" >/dev/null 2>&1 || true' EXIT
env_file=$("$root/scripts/testbed/up.sh" pg kafka kube | tail -n1)
# shellcheck source=/dev/null
source "$env_file"
export PATH="$OUTBOX_TESTBED_BIN:$PATH"  # the test bed's kubectl and helm, not older ones

cd "${OUTBOX_BUILD_DIR:-$root/build}"
# Serial on purpose: some tests stop Kafka or restart PostgreSQL under a relay.
set +e
ctest --output-on-failure --no-tests=error "$@"
rc=$?
set -e
echo "[test] finished in $(($(date +%s) - started)) s with exit code $rc; service logs under $TESTBED_STATE"
exit $rc
