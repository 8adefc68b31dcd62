# Shared settings for the test-bed scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034  # the settings are read by the scripts that source this
# Binaries and jars are cached outside the work tree so that a fresh clone
# (CI runs one) reuses what an earlier run on the same machine built.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cache.sh"
TESTBED_CACHE="$OUTBOX_CACHE"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
KAFKA_VERSION="${KAFKA_VERSION:-4.3.0}"
LOG4J_VERSION="${LOG4J_VERSION:-2.25.3}"
SLF4J_VERSION="${SLF4J_VERSION:-2.0.17}"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
# The node's pod network (up.sh node): one bridge, no default route out of the pods, IP
# forwarding left off. The kubernetes Service's ClusterIP sits on the bridge too, so pods
# reach the apiserver at the address in-cluster clients are given (there is no kube-proxy).
POD_BRIDGE=obxbr0
POD_BRIDGE_IP=10.244.0.1
POD_SUBNET=10.244.0.0/24
SERVICE_SUBNET=10.0.0.0/24
KUBERNETES_SERVICE_IP=10.0.0.1
# Host sysctls the node must leave as it found them (the kubelet writes the first three).
NODE_SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward"
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$TESTBED_CACHE"

TESTBED_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$TESTBED_DIR/../.." && pwd)"
# Running services, their data, ports and logs (.testbed/ is git-ignored).
TESTBED_STATE="${TESTBED_STATE:-$REPO_ROOT/.testbed/run}"

log() { printf '[testbed %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A free TCP port on loopback, chosen by the kernel.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# wait_until SECONDS CMD...: polls CMD every 0.3 s; false on timeout.
wait_until() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.3
  done
}

# Each service process runs as the leader of its own session and process group,
# so a stop or a SIGKILL reaches its children too (postgres backends), and it
# outlives the script that started it.
# spawn PIDFILE LOGFILE CMD...: starts CMD in the background and records its pid
# with its start time, so that a pid reused after a crash is never taken for it.
spawn() {
  local pidfile=$1 logfile=$2; shift 2
  echo "=== testbed: $(date -Is) starting: $*" >>"$logfile"
  setsid "$@" >>"$logfile" 2>&1 </dev/null 9>&- &  # fd 9: ctl.sh's lock
  echo "$! $(proc_start $!)" >"$pidfile"
}
# proc_start PID: the process's start time in clock ticks (field 22 of stat;
# the command name in field 2 may hold spaces, hence the cut after ") ").
proc_start() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# group_alive PIDFILE: true while the recorded process, or any process left in
# its group, exists; zombies included: postgres refuses to start while the pid
# in its stale postmaster.pid still exists. (This machine's init reaps only
# every 1-2 s.) Checks the pid itself first: setsid may not have run yet.
group_alive() {
  local pid st
  [ -s "$1" ] || return 1
  read -r pid st <"$1"
  # (A pidfile without a start time is from an older version of these scripts.)
  if [ -e "/proc/$pid" ] && [ -n "$st" ]; then [ "$(proc_start "$pid")" = "$st" ]; return; fi
  # Leader gone; the kernel does not reuse a pid while its group has members.
  kill -0 -- "-$pid" 2>/dev/null
}
group_gone() { ! group_alive "$1"; }

# stop_group PIDFILE SIGNAL SECONDS: sends SIGNAL to the group leader, waits for
# the whole group to exit, SIGKILLs the group after SECONDS. SIGNAL=KILL kills
# the whole group at once (a crash, not a shutdown).
stop_group() {
  local pidfile=$1 sig=$2 secs=$3 pid
  group_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  read -r pid _ <"$pidfile"
  # The pid too, in case setsid has not made it a group leader yet.
  if [ "$sig" = KILL ]; then kill -KILL -- "-$pid" "$pid" 2>/dev/null || true
  else kill "-$sig" "$pid" 2>/dev/null || true
  fi
  if ! wait_until "$secs" group_gone "$pidfile"; then
    log "pid $pid did not exit within ${secs}s of SIG$sig; sending SIGKILL"
    kill -KILL -- "-$pid" "$pid" 2>/dev/null || true
    wait_until 10 group_gone "$pidfile" || die "pid $pid survives SIGKILL"
  fi
  rm -f "$pidfile"
}

# show_failure NAME LOGFILE WHY: the message every start failure ends with.
show_failure() {
  log "ERROR: $1 failed: $3"
  log "$1 log: $2 (last 40 lines below)"
  tail -n 40 "$2" >&2 2>/dev/null || true
  log "$1 failed; full log: $2"
}

# kafka_format LIBDIR CLUSTER-ID CONFIG LOG [ARG...]: formats a KRaft node's storage;
# further arguments go to the tool. The id is passed as one --cluster-id=ID argument:
# URL-safe base64 may start with '-', which the tool's parser would read as a flag if the
# id were a separate argument.
kafka_format() {
  local lib=$1 cid=$2 config=$3 out=$4
  shift 4
  java -Xmx256m -Dlog4j2.configurationFile="$TESTBED_DIR/kafka/log4j2.xml" -Dtestbed.log.level=WARN \
    -cp "$lib/*" kafka.tools.StorageTool format "--cluster-id=$cid" -c "$config" "$@" >"$out" 2>&1
}

# maven_lib DEST POM WHAT VERSIONS JAR... -- MVN_ARG...: the jars POM's `package` copies into
# DEST/lib, from Maven Central; prints DEST/lib. DEST is a cache entry (scripts/cache.sh):
# quick when sealed for POM and VERSIONS (a line naming every version the MVN_ARGs set) and
# whole; filled under its lock otherwise, so callers at once share one fetch, and a jar gone
# or truncated since is fetched again. Dies with maven's log (DEST.mvn.log) when it fails or
# a JAR (a name in DEST/lib) is missing.
maven_lib() {
  local dest=$1 pom=$2 what=$3 versions=$4
  shift 4
  local jars=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    jars+=("$1")
    shift
  done
  shift
  local want
  want="$(cat "$pom" <(echo "$versions") | sha256sum | cut -d' ' -f1)"
  if ! cache_sealed "$dest" "$want"; then
    command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
    log "fetching $what jars from Maven Central into $dest/lib"
    cache_fill "$dest" "$want" maven_fill "$pom" "$dest.mvn.log" "${jars[@]}" -- "$@"
  fi
  echo "$dest/lib"
}
# maven_fill DIR POM LOG JAR... -- MVN_ARG...: maven_lib's fill (built in DIR/build, so no
# target/ appears in the work tree; the build directory goes once the jars are copied).
maven_fill() {
  local dir=$1 pom=$2 mvnlog=$3 jar
  shift 3
  local jars=()
  while [ "$1" != "--" ]; do
    jars+=("$1")
    shift
  done
  shift
  mkdir -p "$dir/build"
  cp "$pom" "$dir/build/pom.xml"
  if ! mvn -B -Dstyle.color=never -f "$dir/build/pom.xml" package "$@" -Dlib.dir="$dir/lib" >"$mvnlog" 2>&1; then
    tail -n 30 "$mvnlog" >&2
    die "maven failed; log: $mvnlog"
  fi
  for jar in "${jars[@]}"; do
    [ -f "$dir/lib/$jar" ] || die "$jar missing in $dir/lib; log: $mvnlog"
  done
  rm -rf "$dir/build"
}
