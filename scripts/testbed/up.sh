#!/usr/bin/env bash
# up.sh [pg] [kafka] [kube]   (default: all three)
# Starts a local test bed on free loopback ports, state and logs under
# $TESTBED_STATE (default <repo>/.testbed/run), and writes $TESTBED_STATE/env
# with the OUTBOX_TEST_* variables the tests read. The env file's path is the
# last line on stdout:   source "$(scripts/testbed/up.sh | tail -n1)"
# A service that is already running in the state dir is kept as it is; one that
# is not is set up afresh (new data, new ports). On a failure everything this
# run started is stopped again and the failing service's log is shown.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
ctl="$TESTBED_DIR/ctl.sh"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

services=("$@")
[ ${#services[@]} -gt 0 ] || services=(pg kafka kube)
for s in "${services[@]}"; do
  case $s in pg|kafka|kube) ;; *) die "unknown service '$s' (pg, kafka, kube)" ;; esac
done
mkdir -p "$TESTBED_STATE"

started=()
abort() { # abort NAME [LOG [WHY]]: WHY given = the log's tail is not shown yet
  [ -z "${3:-}" ] || show_failure "$1" "$2" "$3"
  local s
  for s in "${started[@]}"; do "$ctl" "$s" stop || true; done
  die "test bed not started: $1 failed (log: ${2:-see above})"
}

# --- PostgreSQL 15 ----------------------------------------------------------------
init_pg() {
  local d=$TESTBED_STATE/pg pgroot port pw
  # A data dir left in /tmp by an earlier run of this state dir goes first.
  if [ -f "$d/pgroot" ]; then
    pgroot=$(cat "$d/pgroot"); case $pgroot in /tmp/outbox-testbed-pg.*) rm -rf "$pgroot" ;; esac
  fi
  rm -rf "$d" && mkdir -p "$d"
  # postgres refuses to run as root. Its data and socket need a directory it
  # owns and can reach; the state dir's parents may be closed to it (/root), and
  # a unix socket path must stay under 108 bytes. Fall back to /tmp then.
  pgroot=$d/own
  if as_postgres test -x "$d" && [ ${#pgroot} -lt 80 ]; then mkdir "$pgroot"
  else pgroot=$(mktemp -d /tmp/outbox-testbed-pg.XXXXXX)
  fi
  chown postgres:postgres "$pgroot" && chmod 700 "$pgroot"
  echo "$pgroot" >"$d/pgroot"
  port=$(free_port) && echo "$port" >"$d/port"
  pw=$(openssl rand -hex 16) && echo "$pw" >"$d/password" && chmod 600 "$d/password"
  as_postgres "$PG_BIN/initdb" -D "$pgroot/data" -U postgres -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 >"$d/initdb.log" 2>&1 ||
    abort pg "$d/initdb.log" "initdb failed"
  # Durability settings stay at their defaults: tests exercise real commits.
  # wal_level=logical lets a Debezium peer (benchmarks) read the same server.
  cat >>"$pgroot/data/postgresql.conf" <<EOC

# --- outbox-operator test bed ---
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$pgroot'
max_connections = 200
password_encryption = scram-sha-256
wal_level = logical
EOC
  # Trust only the unix socket (root's admin work); TCP needs the password.
  cat >"$pgroot/data/pg_hba.conf" <<'EOC'
local all         all                 trust
host  all         all  127.0.0.1/32   scram-sha-256
host  replication all  127.0.0.1/32   scram-sha-256
EOC
  chown postgres:postgres "$pgroot/data/postgresql.conf" "$pgroot/data/pg_hba.conf"
}
setup_pg_role() {
  local d=$TESTBED_STATE/pg port pw
  port=$(cat "$d/port") pw=$(cat "$d/password")
  # Superuser so that tests can create tables, schemas and databases freely.
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$(cat "$d/pgroot")" -p "$port" -U postgres -d postgres \
    -c "CREATE ROLE outbox LOGIN SUPERUSER PASSWORD '$pw'" -c "CREATE DATABASE outbox OWNER outbox" \
    >>"$d/setup.log" 2>&1 || abort pg "$d/setup.log" "creating role/database failed"
  "$PG_BIN/psql" -X -q "postgresql://outbox:$pw@127.0.0.1:$port/outbox" -tAc 'select 1' >>"$d/setup.log" 2>&1 ||
    abort pg "$d/setup.log" "password login over TCP failed"
}

# --- Kafka (KRaft, one combined broker+controller node) ----------------------------
init_kafka() {
  local d=$TESTBED_STATE/kafka lib port cport cid
  rm -rf "$d" && mkdir -p "$d/data"
  lib=$("$TESTBED_DIR/fetch-kafka.sh") || abort kafka "$TESTBED_CACHE/kafka-$KAFKA_VERSION/mvn.log"
  echo "$lib" >"$d/lib"
  cp "$TESTBED_DIR/kafka/log4j2.xml" "$d/"
  port=$(free_port) && echo "$port" >"$d/port"
  cport=$(free_port) && echo "$cport" >"$d/controller_port"
  cat >"$d/server.properties" <<EOC
process.roles=broker,controller
node.id=1
# Static voter set: 'format' then needs no --standalone/--initial-controllers.
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$d/data
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.network.threads=2
num.io.threads=4
# After a SIGKILL the restarted node may register only once its old session has
# expired (DuplicateBrokerRegistrationException until then): 9 s by default.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=5000
EOC
  # A cluster id is 16 random bytes in unpadded URL-safe base64 (what
  # 'StorageTool random-uuid' prints, without a JVM start).
  cid=$(python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')
  echo "$cid" >"$d/cluster_id"
  java -Xmx256m -Dlog4j2.configurationFile="$d/log4j2.xml" -Dtestbed.log.level=WARN -cp "$lib/*" kafka.tools.StorageTool \
    format -t "$cid" -c "$d/server.properties" >"$d/format.log" 2>&1 ||
    abort kafka "$d/format.log" "formatting the storage failed"
}

# Proof that the broker serves: create a topic through the admin API.
check_kafka_topic() {
  local d=$TESTBED_STATE/kafka
  timeout 60 "$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "127.0.0.1:$(cat "$d/port")" --create --if-not-exists \
    --topic testbed-ready --partitions 1 --replication-factor 1 >"$d/ready-check.log" 2>&1 ||
    abort kafka "$d/ready-check.log" "creating a topic failed (broker log: $d/kafka.log)"
}

# --- kube-apiserver + etcd -------------------------------------------------------------
init_kube() {
  local d=$TESTBED_STATE/kube bin port token p
  rm -rf "$d" && mkdir -p "$d/pki" "$d/etcd-data" "$d/apiserver-certs"
  bin=$("$TESTBED_DIR/build-k8s.sh") || abort kube "$TESTBED_CACHE/k8s-$K8S_VERSION/build.log"
  echo "$bin" >"$d/bin"
  port=$(free_port) && echo "$port" >"$d/port"
  free_port >"$d/etcd_port" && free_port >"$d/etcd_peer_port"
  p=$d/pki
  # CA; apiserver serving cert; admin client cert (O = group system:masters);
  # a key pair that signs and verifies service-account tokens.
  {
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj /CN=outbox-testbed-ca \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
      -keyout "$p/ca.key" -out "$p/ca.crt"
    openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$p/apiserver.key" -out "$p/apiserver.csr"
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc' \
      'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' >"$p/server.ext"
    openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -sha256 \
      -days 3650 -extfile "$p/server.ext" -out "$p/apiserver.crt"
    openssl req -newkey rsa:2048 -nodes -subj /O=system:masters/CN=admin -keyout "$p/admin.key" -out "$p/admin.csr"
    printf '%s\n' 'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' >"$p/client.ext"
    openssl x509 -req -in "$p/admin.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -sha256 \
      -days 3650 -extfile "$p/client.ext" -out "$p/admin.crt"
    openssl genrsa -out "$p/sa.key" 2048
  } >"$d/pki.log" 2>&1 || abort kube "$d/pki.log" "generating the PKI with openssl failed"
  # Bearer token user in system:masters (token,user,uid,"groups").
  token=$(openssl rand -hex 24)
  echo "$token,token-admin,token-admin-uid,\"system:masters\"" >"$d/tokens.csv"
  chmod 600 "$d/tokens.csv" "$p"/*.key
  write_kubeconfig "$d/admin.kubeconfig" admin \
    "    client-certificate: $p/admin.crt" "    client-key: $p/admin.key"
  write_kubeconfig "$d/token.kubeconfig" token-admin "    token: $token"
}
# write_kubeconfig FILE USER USER-LINES...
write_kubeconfig() {
  local f=$1 user=$2 d=$TESTBED_STATE/kube; shift 2
  {
    cat <<EOC
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: https://127.0.0.1:$(cat "$d/port")
    certificate-authority: $d/pki/ca.crt
contexts:
- name: testbed
  context: {cluster: testbed, user: $user}
current-context: testbed
users:
- name: $user
  user:
EOC
    printf '%s\n' "$@"
  } >"$f"
  chmod 600 "$f"
}

# --- env file ------------------------------------------------------------------------
# Lists the services that run now (those asked for, and any others left running).
write_env() {
  local s=$TESTBED_STATE f="$TESTBED_STATE/env.tmp"
  q() { printf 'export %s=%q\n' "$1" "$2"; }
  up() { "$ctl" "$1" status >/dev/null 2>&1; }
  {
    echo "# Written by scripts/testbed/up.sh; source it."
    q TESTBED_STATE "$s"
    q OUTBOX_TESTBED_CTL "$ctl"
    if up pg; then
      q OUTBOX_TEST_PG_PORT "$(cat "$s/pg/port")"
      q OUTBOX_TEST_PG_DSN "postgresql://outbox:$(cat "$s/pg/password")@127.0.0.1:$(cat "$s/pg/port")/outbox"
    fi
    ! up kafka || q OUTBOX_TEST_KAFKA_BOOTSTRAP "127.0.0.1:$(cat "$s/kafka/port")"
    if up kube; then
      q OUTBOX_TEST_KUBE_SERVER "https://127.0.0.1:$(cat "$s/kube/port")"
      q OUTBOX_TEST_KUBE_CA "$s/kube/pki/ca.crt"
      q OUTBOX_TEST_KUBECONFIG "$s/kube/admin.kubeconfig"
      q OUTBOX_TEST_KUBE_TOKEN_KUBECONFIG "$s/kube/token.kubeconfig"
      q OUTBOX_TESTBED_BIN "$(cat "$s/kube/bin")"
    fi
  } >"$f"
  chmod 600 "$f"  # holds the database password
  mv "$f" "$s/env"
}

t0=$SECONDS
for s in "${services[@]}"; do
  if "$ctl" "$s" status >/dev/null 2>&1; then log "$s already running; kept"; continue; fi
  ts=$SECONDS
  # Whatever is left of an earlier run (say, kube with only etcd up) stops first.
  [ ! -f "$TESTBED_STATE/$s/port" ] || "$ctl" "$s" stop
  "init_$s"
  started+=("$s")
  "$ctl" "$s" start || abort "$s" "$TESTBED_STATE/$s/*.log"
  [ "$s" != pg ] || setup_pg_role
  [ "$s" != kafka ] || check_kafka_topic
  log "$s up in $((SECONDS - ts)) s"
done
write_env
log "test bed up in $((SECONDS - t0)) s; env: $TESTBED_STATE/env"
echo "$TESTBED_STATE/env"
