#!/usr/bin/env bash
# bench/controller_fleet.sh [--namespaces N] [--per-namespace M] [--runs R] [--upgrade]
#                           [--roll-seconds S]
#
# A fleet of OutboxRelays (default 10 namespaces x 100) reconciled by one controller process
# started with the chart's default settings (workers, qps, burst: read from
# charts/outbox-operator/values.yaml), watching all namespaces, against the test bed's real
# kube-apiserver + etcd. Per run, on fresh namespaces:
#   reconciled   seconds from the controller's start until every resource has
#                status.observedGeneration == 1 and Degraded=False (its owned objects applied,
#                its status written); the Secrets and OutboxRelays exist before it starts
#   rss          the controller's peak RSS (VmHWM) at that point, and per resource
#   cache        what its informer caches hold then (outbox_controller_cache_bytes, all kinds)
#   idle resync  applies and status writes during one full resync period after that (the
#                controller runs with --resync-period=20s here), once every resource is past
#                the moment its relays stop counting as alive (2 minutes after its creation:
#                no relay pod ever reports here, so then each compensation CronJob turns to
#                its every-minute rescue schedule, a change that is due): must be 0
# With --upgrade, each run then upgrades the operator: the controller is restarted with another
# relay image (what a new release does to every relay that does not pin spec.relay.image) and
# the chart's maxRollingRelays, while bench/deployment_standin.py plays the Deployment
# controller (a relay Deployment is rolled out S seconds, default 2, after it changes):
#   upgrade      seconds until every relay Deployment runs the new image and is rolled out
#   peak rolling the most relay Deployments rolling at once (sampled every 0.2 s): at most
#                the budget
#   upgrade rss  the restarted controller's peak RSS
#   applies      the restarted controller's applies during the upgrade
# There is no kubelet in this test bed (no `node` service): relay pods never exist, which is
# what a first rollout of a fleet looks like to the controller. Each run gets a fresh control
# plane of its own ($TESTBED_STATE, default <repo>/.testbed/fleet, purged before each run):
# without a namespace controller, an earlier run's objects would stay in the caches.
# Results go to stdout and <build dir>/bench/fleet-last-run.txt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# The project's build dir and type (scripts/build.sh): the controller waits on the apiserver,
# not on its own CPU, and sharing the dir spares a second full build.
build=${OUTBOX_BUILD_DIR:-$repo/build}
export TESTBED_STATE=${TESTBED_STATE:-$repo/.testbed/fleet}
namespaces=10 per_ns=100 runs=3 upgrade=0 roll_seconds=2
while [ $# -gt 0 ]; do
  case $1 in
    --namespaces) namespaces=$2; shift ;;
    --per-namespace) per_ns=$2; shift ;;
    --runs) runs=$2; shift ;;
    --upgrade) upgrade=1 ;;
    --roll-seconds) roll_seconds=$2; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "controller_fleet.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
total=$((namespaces * per_ns))

echo "== build ($build)" >&2
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build "$build" --target outbox-operator -j2 >&2
bin=$build/src/outbox-operator

pid=
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  "$repo/scripts/testbed/down.sh" --purge >&2 || true
}
trap cleanup EXIT
fresh_control_plane() {
  "$repo/scripts/testbed/down.sh" --purge >&2
  if ! env_file=$("$repo/scripts/testbed/up.sh" kube | tail -n1) || [ ! -f "$env_file" ]; then
    echo "bench: the test bed did not start (see the messages above)" >&2
    exit 1
  fi
  # shellcheck disable=SC1090
  source "$env_file"
  export KUBECONFIG=$OUTBOX_TEST_KUBECONFIG PATH=$OUTBOX_TESTBED_BIN:$PATH
  kubectl apply --server-side --force-conflicts -f "$repo/crds/" >/dev/null
  kubectl wait --for=condition=Established crd/outboxrelays.outbox.dev --timeout=30s >/dev/null
}

value() { awk -v k="$1:" '$1 == k { print $2; exit }' "$repo/charts/outbox-operator/values.yaml"; }
workers=$(value workers) qps=$(value qps) burst=$(value burst) budget=$(value maxRollingRelays)

metric() { # metric <port> <series>: its value, 0 when absent
  curl -s "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { print $2; found=1 } END { if (!found) print 0 }'
}
reconciled_count() { # resources of this run at generation 1 with Degraded=False
  kubectl get obr -A -l "bench-run=$1" -o jsonpath='{range .items[?(@.status.observedGeneration==1)]}{.status.conditions[?(@.type=="Degraded")].status}{"\n"}{end}' |
    grep -c '^False$' || true
}

start_controller() { # start_controller IMAGE: the controller with the chart's defaults
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  log=$(mktemp)
  MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-} "$bin" --log-level warn controller --relay-image "$1" \
    --workers "$workers" --qps "$qps" --burst "$burst" --max-rolling-relays "$budget" \
    --resync-period 20s --listen "127.0.0.1:$port" >"$log" 2>&1 &
  pid=$!
}

out=$build/bench/fleet-last-run.txt
mkdir -p "$(dirname "$out")"
{
  echo "controller fleet: $namespaces namespaces x $per_ns = $total OutboxRelays; chart defaults workers=$workers qps=$qps burst=$burst maxRollingRelays=$budget; $(nproc) cores"
  printf '%-4s %14s %14s %16s %10s %22s' run reconciled_s peak_rss_MiB KiB_per_resource \
    cache_MiB idle_applies/status
  [ "$upgrade" = 0 ] || printf ' %11s %13s %17s %9s' upgrade_s peak_rolling upgrade_rss_MiB applies
  echo
} | tee "$out"
for run in $(seq 1 "$runs"); do
  fresh_control_plane
  tag=fleet-$run
  manifest=$(mktemp)
  for n in $(seq 1 "$namespaces"); do
    ns=$tag-$n
    printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\n' "$ns" >>"$manifest"
    for i in $(seq 1 "$per_ns"); do
      cat >>"$manifest" <<YAML
apiVersion: v1
kind: Secret
metadata: {name: db-$i, namespace: $ns}
stringData: {dsn: "postgresql://u:p@db-$i/orders"}
---
apiVersion: outbox.dev/v1alpha1
kind: OutboxRelay
metadata: {name: relay-$i, namespace: $ns, labels: {bench-run: "$tag"}}
spec:
  database: {dsnSecretRef: {name: db-$i, key: dsn}}
  kafka: {bootstrapServers: "kafka:9092"}
---
YAML
    done
  done
  kubectl apply --server-side -f "$manifest" >/dev/null
  created=$(date +%s)
  rm -f "$manifest"

  start=$(date +%s.%N)
  start_controller bench:1
  while [ "$(reconciled_count "$tag")" -lt "$total" ]; do
    kill -0 "$pid" || { cat "$log" >&2; exit 1; }
    sleep 1
  done
  t=$(echo "$(date +%s.%N) - $start" | bc)
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  cache=$(curl -s "http://127.0.0.1:$port/metrics" |
    awk '$1 ~ /^outbox_controller_cache_bytes/ { s += $2 } END { printf "%.1f", s / 1048576 }')
  # One whole resync period (plus margin) once everything is applied and every rescue
  # schedule has switched (120 s after creation, plus the pass that applies it): nothing may
  # be written.
  rescue_wait=$((created + 130 - $(date +%s)))
  [ "$rescue_wait" -le 0 ] || sleep "$rescue_wait"
  a0=$(metric "$port" outbox_controller_applies_total) s0=$(metric "$port" outbox_controller_status_writes_total)
  sleep 25
  a1=$(metric "$port" outbox_controller_applies_total) s1=$(metric "$port" outbox_controller_status_writes_total)
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  rm -f "$log"
  line=$(printf '%-4s %14.1f %14.1f %16.1f %10s %22s' "$run" "$t" "$(echo "$hwm / 1024" | bc -l)" \
    "$(echo "$hwm / $total" | bc -l)" "$cache" "$((${a1%.*} - ${a0%.*}))/$((${s1%.*} - ${s0%.*}))")
  if [ "$upgrade" = 1 ]; then
    python3 "$repo/bench/deployment_standin.py" settle >/dev/null
    start_controller bench:2
    read -r up_s peak _ < <(python3 "$repo/bench/deployment_standin.py" roll --image bench:2 \
      --roll-seconds "$roll_seconds")
    up_hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    applies=$(metric "$port" outbox_controller_applies_total)
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    rm -f "$log"
    line+=$(printf ' %11.1f %13s %17.1f %9s' "$up_s" "$peak" "$(echo "$up_hwm / 1024" | bc -l)" "${applies%.*}")
  fi
  echo "$line" | tee -a "$out"
done
