#!/usr/bin/env bash
# ctl.sh <pg|pg2|kafka|kafka3|kafka3-1|kafka3-2|kafka3-3|kube|node|registry> <start|stop|restart|status|kill9>
# Controls one service of a test bed that up.sh initialised, on the ports that
# up.sh recorded in $TESTBED_STATE, so tests can take a broker or the database
# down and bring it back at the same address.
#   stop    clean shutdown; returns once every process of the service has exited
#   kill9   SIGKILL to every process of the service (a crash); returns once gone
#   start   returns once the service is ready again (for a Kafka node: registered
#           and unfenced, "Kafka Server started" in its log)
#   status  prints running/stopped; exit 0 when running, 3 when stopped
# kafka3 is the 3-node Kafka cluster: `kafka3 <action>` acts on all three nodes at
# once (status: running only when all three are), `kafka3-N <action>` on node N alone
# (node.id N), e.g. `ctl.sh kafka3-2 kill9` crashes one broker and `ctl.sh kafka3-2
# start` brings it back; the other two keep the controller quorum meanwhile.
# pg2 is the second PostgreSQL cluster (up.sh pg2), run exactly as pg.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
usage() { die "usage: $0 <pg|pg2|kafka|kafka3|kafka3-1|kafka3-2|kafka3-3|kube|node|registry> <start|stop|restart|status|kill9>"; }
[ $# -eq 2 ] || usage
svc=$1 action=$2
# kind: which functions below serve the service (the nodes of kafka3 share theirs).
kind=$svc d="$TESTBED_STATE/$svc"
case $svc in
  pg|kafka|kafka3|kube|node|registry) ;;
  pg2) kind=pg ;;
  kafka3-[123]) kind=kafka3node d="$TESTBED_STATE/kafka3/${svc#kafka3-}" ;;
  *) usage ;;
esac
[ -f "$d/port" ] || die "$svc is not set up in $TESTBED_STATE (run up.sh ${svc%-*} first)"
port=$(cat "$d/port")

# The whole 3-node cluster: the action on every node at once, each under its own lock.
# In parallel on purpose: a node starts only once a second one runs (a controller
# needs 2 of 3 votes). A clean stop needs a controller quorum too, to commit the node's
# controlled shutdown: the node that is left last when the other two have exited
# waits for one in vain (seen: until the SIGKILL after 60 s), so here a node gets 10 s
# from SIGTERM to exit, then SIGKILL. Its next start recovers its log, as after kill9.
if [ "$svc" = kafka3 ]; then
  case $action in start|stop|restart|kill9|status) ;; *) usage ;; esac
  pids=() rc=0
  for n in 1 2 3; do
    if [ "$action" = status ]; then "$0" "kafka3-$n" status || rc=3
    else KAFKA3_TERM_SECONDS=10 "$0" "kafka3-$n" "$action" & pids+=($!)
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  exit $rc
fi

# Processes of a service, first started first: pidfile:logfile:stop-signal:stop-timeout.
procs() {
  case $kind in
    pg)    echo "$d/pid:$d/postgres.log:INT:60" ;;  # SIGINT = fast shutdown
    kafka) echo "$d/pid:$d/kafka.log:TERM:60" ;;
    kafka3node) echo "$d/pid:$d/kafka.log:TERM:${KAFKA3_TERM_SECONDS:-60}" ;;
    registry) echo "$d/pid:$d/registry.log:TERM:30" ;;
    kube)  echo "$d/etcd.pid:$d/etcd.log:TERM:30"
           echo "$d/apiserver.pid:$d/apiserver.log:TERM:60" ;;
    node)  local c
           for c in containerd controller-manager scheduler kubelet; do echo "$d/$c.pid:$d/$c.log:TERM:30"; done
           while read -r c _; do echo "$d/forward-$c.pid:$d/forwards.log:TERM:10"; done <"$d/forwards" ;;
  esac
}

# --- readiness checks ---------------------------------------------------------
pg_ready() {
  "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" &&
    "$PG_BIN/psql" -X -q -h "$(cat "$d/pgroot")" -p "$port" -U postgres -d postgres \
      -tAc 'select 1' >/dev/null 2>&1
}
# A port that accepts is not enough: the broker binds before it serves. It
# logs "Kafka Server started" once it is registered, unfenced and accepting
# (up.sh then also creates a topic, the full proof; a JVM costs 2-5 s here).
kafka_ready() {
  port_open "$port" &&
    awk '/^=== testbed/ { s = 0 } /Kafka Server started/ { s = 1 } END { exit !s }' "$d/kafka.log"
}
etcd_ready() { [[ $(curl -sf "http://127.0.0.1:$(cat "$d/etcd_port")/health" 2>/dev/null) == *'"health":"true"'* ]]; }
apiserver_ready() {
  [ "$(curl -s --max-time 5 --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" \
        "https://127.0.0.1:$port/readyz" 2>/dev/null)" = ok ]
}

# The registry answers the API's base endpoint over TLS verified against its own CA.
registry_ready() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$d/pki/ca.crt" \
        "https://127.0.0.1:$port/v2/" 2>/dev/null)" = 200 ]
}

# wait_ready NAME PIDFILE LOGFILE SECONDS CHECK: waits for CHECK, failing early when
# the process dies. On failure stops the process and shows its log.
wait_ready() {
  local name=$1 pidfile=$2 logfile=$3 deadline=$((SECONDS + $4)) check=$5
  until $check; do
    if ! group_alive "$pidfile"; then
      show_failure "$name" "$logfile" "process exited during start-up"; return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      stop_group "$pidfile" KILL 10
      show_failure "$name" "$logfile" "not ready after $4 s"; return 1
    fi
    sleep 0.5
  done
}

# --- start ----------------------------------------------------------------------
start_pg() {
  # postgres refuses to run as root; setpriv execs it as the postgres user.
  spawn "$d/pid" "$d/postgres.log" \
    setpriv --reuid=postgres --regid=postgres --init-groups "$PG_BIN/postgres" -D "$(cat "$d/pgroot")/data"
  wait_ready "$svc" "$d/pid" "$d/postgres.log" 60 pg_ready
}
start_kafka() {
  # Quote the classpath wildcard: the JVM expands it, not the shell.
  spawn "$d/pid" "$d/kafka.log" java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$d/log4j2.xml" \
    -cp "$(cat "$d/lib")/*" kafka.Kafka "$d/server.properties"
  wait_ready kafka "$d/pid" "$d/kafka.log" 120 kafka_ready
}
start_kafka3node() {
  # Three of these run beside everything else: a smaller heap than the single broker's.
  spawn "$d/pid" "$d/kafka.log" java -Xms128m -Xmx384m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$d/../log4j2.xml" \
    -cp "$(cat "$d/../lib")/*" kafka.Kafka "$d/server.properties"
  # Longer than the single broker's: three JVMs may start at once on 2 cores.
  wait_ready "$svc" "$d/pid" "$d/kafka.log" 180 kafka_ready
}
start_registry() {
  local bin
  bin=$(grep '/registry$' "$d/tools")
  spawn "$d/pid" "$d/registry.log" "$bin" serve "$d/config.yml"
  wait_ready registry "$d/pid" "$d/registry.log" 30 registry_ready
}
start_kube() {
  local bin ep pp
  bin=$(cat "$d/bin") ep=$(cat "$d/etcd_port") pp=$(cat "$d/etcd_peer_port")
  spawn "$d/etcd.pid" "$d/etcd.log" "$bin/etcd" --name=testbed --data-dir="$d/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$ep" --advertise-client-urls="http://127.0.0.1:$ep" \
    --listen-peer-urls="http://127.0.0.1:$pp" --initial-advertise-peer-urls="http://127.0.0.1:$pp" \
    --initial-cluster="testbed=http://127.0.0.1:$pp" --unsafe-no-fsync=true --log-level=warn
  wait_ready etcd "$d/etcd.pid" "$d/etcd.log" 30 etcd_ready || return 1
  local pki=$d/pki
  spawn "$d/apiserver.pid" "$d/apiserver.log" "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ep" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
    --cert-dir="$d/apiserver-certs" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --token-auth-file="$d/tokens.csv" \
    --service-account-issuer="https://127.0.0.1:$port" \
    --service-account-key-file="$pki/sa.key" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$SERVICE_SUBNET" --allow-privileged=true \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
    --endpoint-reconciler-type=none
  if ! wait_ready kube-apiserver "$d/apiserver.pid" "$d/apiserver.log" 120 apiserver_ready; then
    stop_group "$d/etcd.pid" TERM 30; return 1
  fi
}

# --- node -------------------------------------------------------------------------
node_kubectl() { "$(cat "$TESTBED_STATE/kube/bin")/kubectl" --kubeconfig "$TESTBED_STATE/kube/admin.kubeconfig" "$@"; }
ctr_node() { ctr --address "$d/containerd/containerd.sock" --namespace k8s.io "$@"; }
containerd_ready() { ctr_node version >/dev/null 2>&1; }
node_ready() {
  [ "$(node_kubectl get node 127.0.0.1 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
start_node() {
  local bin kp name addr lport tport
  bin=$(cat "$d/bin") kp="$TESTBED_STATE/kube/pki"
  # The pod bridge, with the kubernetes Service IP beside its own address.
  ip link show "$POD_BRIDGE" >/dev/null 2>&1 || ip link add "$POD_BRIDGE" type bridge
  ip addr replace "$POD_BRIDGE_IP/24" dev "$POD_BRIDGE"
  ip addr replace "$KUBERNETES_SERVICE_IP/32" dev "$POD_BRIDGE"
  ip link set "$POD_BRIDGE" up
  # A dead proxy: an image that was not imported fails to pull at once, and no registry
  # is ever resolved or contacted.
  spawn "$d/containerd.pid" "$d/containerd.log" env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    NO_PROXY= containerd --config "$d/containerd.toml"
  wait_ready containerd "$d/containerd.pid" "$d/containerd.log" 30 containerd_ready || return 1
  for f in "$(cat "$d/images")"/*.tar; do
    ctr_node images import "$f" >>"$d/import.log" 2>&1 || {
      show_failure images "$d/import.log" "importing $f into containerd failed"; return 1; }
  done
  spawn "$d/controller-manager.pid" "$d/controller-manager.log" "$bin/kube-controller-manager" \
    --kubeconfig="$d/controller-manager.kubeconfig" --authentication-kubeconfig="$d/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$d/controller-manager.kubeconfig" \
    --service-account-private-key-file="$kp/sa.key" --root-ca-file="$kp/ca.crt" --use-service-account-credentials=true \
    --cluster-signing-cert-file="$kp/ca.crt" --cluster-signing-key-file="$kp/ca.key" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$(cat "$d/cm_port")" --allocate-node-cidrs=false
  spawn "$d/scheduler.pid" "$d/scheduler.log" "$bin/kube-scheduler" \
    --kubeconfig="$d/scheduler.kubeconfig" --authentication-kubeconfig="$d/scheduler.kubeconfig" \
    --authorization-kubeconfig="$d/scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$(cat "$d/scheduler_port")"
  spawn "$d/kubelet.pid" "$d/kubelet.log" "$bin/kubelet" --config="$d/kubelet.yaml" \
    --kubeconfig="$d/kubelet-client.kubeconfig" --hostname-override=127.0.0.1 --root-dir="$d/kubelet"
  wait_ready kubelet "$d/kubelet.pid" "$d/kubelet.log" 120 node_ready || return 1
  while read -r name addr lport tport; do
    spawn "$d/forward-$name.pid" "$d/forwards.log" \
      socat "TCP-LISTEN:$lport,bind=$addr,fork,reuseaddr" "TCP:127.0.0.1:$tport"
  done <"$d/forwards"
}
# After the node's processes stopped: whatever they leave behind goes too (containers
# and their shims, mounts, cgroups, the bridge), and the sysctls are put back.
node_teardown() {
  local f pid
  for f in /sys/fs/cgroup/*/kubepods; do
    [ -d "$f" ] || continue
    # shellcheck disable=SC2038  # cgroup.procs holds pids: no odd names
    find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $d/containerd/containerd.sock" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  { grep -o " $d/[^ ]*" /proc/mounts || true; } | sort -r | while read -r f; do umount -l "$f" 2>/dev/null || true; done
  for f in /sys/fs/cgroup/*/kubepods; do
    # shellcheck disable=SC2015  # either failing is fine: best-effort cleanup
    [ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  ip link del "$POD_BRIDGE" 2>/dev/null || true
  if [ -s "$d/sysctl.saved" ]; then
    local overcommit panic oops
    read -r overcommit panic oops _ <"$d/sysctl.saved"
    sysctl -q -w vm.overcommit_memory="$overcommit" kernel.panic="$panic" kernel.panic_on_oops="$oops" || true
  fi
  rmdir /run/containerd/s 2>/dev/null || true
  local left
  left=$(node_leftovers)
  [ -z "$left" ] || die "node stopped, but this is left behind: $left"
}
# What a stopped node must not leave: processes, mounts, cgroups, the bridge, sysctls.
node_leftovers() {
  local f want
  pgrep -af -- "$d/" | grep -v -e ctl.sh -e pgrep | sed 's/^/process: /' || true
  grep " $d/" /proc/mounts | sed 's/^/mount: /' || true
  for f in /sys/fs/cgroup/*/kubepods; do [ ! -d "$f" ] || echo "cgroup: $f"; done
  ! ip link show "$POD_BRIDGE" >/dev/null 2>&1 || echo "bridge: $POD_BRIDGE"
  if [ -s "$d/sysctl.saved" ]; then
    want=$(cat "$d/sysctl.saved")
    # shellcheck disable=SC2086
    f=$(sysctl -n $NODE_SYSCTLS | paste -sd' ')
    [ "$f" = "$want" ] || echo "sysctls: $NODE_SYSCTLS = $f, were $want"
  fi
}

# --- actions --------------------------------------------------------------------
running() { local p; for p in $(procs); do group_alive "${p%%:*}" || return 1; done; }
do_stop() { # do_stop TERM|KILL: TERM = each its own clean stop, in reverse start order
  local p f sig secs pid
  for p in $(procs | tac); do
    IFS=: read -r f _ sig secs <<<"$p"
    if [ "$1" = KILL ]; then
      # All at once, as a crash would; the waiting is done afterwards.
      ! group_alive "$f" || { read -r pid _ <"$f"; kill -KILL -- "-$pid" "$pid" 2>/dev/null || true; }
    else
      stop_group "$f" "$sig" "$secs"
    fi
  done
  [ "$1" != KILL ] || for p in $(procs); do stop_group "${p%%:*}" KILL 10; done
  [ "$kind" != node ] || node_teardown
}
# The ports a service listens on: all must be free before it starts.
ports() {
  case $kind in
    pg|registry) echo "$port" ;;
    kafka) echo "$port $(cat "$d/controller_port") $(cat "$d/pod_port" 2>/dev/null)" ;;
    kafka3node) echo "$port $(cat "$d/controller_port")" ;;
    kube) echo "$port $(cat "$d/etcd_port") $(cat "$d/etcd_peer_port")" ;;
    node) echo "$port $(cat "$d/healthz_port") $(cat "$d/cm_port") $(cat "$d/scheduler_port")" ;;
  esac
}
do_start() {
  local p
  if running; then log "$svc already running"; return 0; fi
  do_stop TERM  # a half-running service (one of kube's two processes) starts clean
  for p in $(ports); do
    ! port_open "$p" || die "$svc: port $p is taken by a process that is not this test bed's $svc"
  done
  log "starting $svc on 127.0.0.1:$port"
  "start_$kind" || exit 1
  log "$svc ready on 127.0.0.1:$port"
}

# One action per service at a time (tests may run in parallel). spawn closes
# fd 9 so that the services do not inherit the lock.
if [ "$action" != status ]; then exec 9>"$d/.ctl.lock"; flock 9; fi
case $action in
  start)   do_start ;;
  stop)    do_stop TERM; ! port_open "$port" || die "$svc: port $port still accepts after stop"
           log "$svc stopped" ;;
  kill9)   do_stop KILL; ! port_open "$port" || die "$svc: port $port still accepts after kill9"
           log "$svc killed" ;;
  restart) do_stop TERM; do_start ;;
  status)  if running; then echo "$svc running on 127.0.0.1:$port"; else echo "$svc stopped"; exit 3; fi ;;
  *) usage ;;
esac
