#!/usr/bin/env bash
# up.sh [pg] [pg2] [kafka] [kafka3] [kube] [node] [registry]   (default: pg kafka kube)
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
  case $s in pg|pg2|kafka|kafka3|kube|node|registry) ;; *) die "unknown service '$s' (pg, pg2, kafka, kafka3, kube, node, registry)" ;; esac
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
# pg is the database of every test. pg2 is a second cluster set up the same way but
# initdb'ed on its own: another system identifier, and transaction ids that start low, as
# a cluster a database is moved to by pg_dump/pg_restore (tests/relay/cluster_move_test).
init_pg() { init_postgres pg; }
# pg2 also serves TLS, with a server certificate for the name "localhost" only, signed by a CA
# the test bed makes (pki/ca.crt; pki/other-ca.crt signs nothing it serves): the tests of
# spec.database.tls connect with verify-full to host=localhost, and are refused under a wrong CA
# or the host name 127.0.0.1. pg's clients keep plain connections, as before.
init_pg2() { init_postgres pg2 && init_pg_tls pg2; }
init_pg_tls() {
  local d=$TESTBED_STATE/$1 data
  data=$(cat "$d/pgroot")/data
  mkdir -p "$d/pki"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=outbox-testbed-pg-ca" \
      -keyout "$d/pki/ca.key" -out "$d/pki/ca.crt" &&
      openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=outbox-testbed-other-ca" \
        -keyout "$d/pki/other-ca.key" -out "$d/pki/other-ca.crt" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$data/server.key" -out "$d/pki/server.csr" &&
      printf 'subjectAltName=DNS:localhost\n' >"$d/pki/server.ext" &&
      openssl x509 -req -in "$d/pki/server.csr" -CA "$d/pki/ca.crt" -CAkey "$d/pki/ca.key" \
        -CAcreateserial -days 30 -extfile "$d/pki/server.ext" -out "$data/server.crt"
  } >"$d/pki.log" 2>&1 || abort "$1" "$d/pki.log" "making the TLS certificates failed"
  chown postgres:postgres "$data/server.key" "$data/server.crt" && chmod 600 "$data/server.key"
  printf "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n" >>"$data/postgresql.conf"
}
# init_postgres NAME: a fresh cluster in $TESTBED_STATE/NAME on a free port.
init_postgres() {
  local name=$1 d=$TESTBED_STATE/$1 pgroot port pw
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
    abort "$name" "$d/initdb.log" "initdb failed"
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
  # Benchmarks count each relayer's statements with pg_stat_statements (bench/lib.sh asks).
  if [ "${TESTBED_PG_STATEMENTS:-0}" = 1 ]; then
    echo "shared_preload_libraries = 'pg_stat_statements'" >>"$pgroot/data/postgresql.conf"
  fi
  # Trust only the unix socket (root's admin work); TCP needs the password.
  cat >"$pgroot/data/pg_hba.conf" <<'EOC'
local all         all                 trust
host  all         all  127.0.0.1/32   scram-sha-256
host  replication all  127.0.0.1/32   scram-sha-256
EOC
  chown postgres:postgres "$pgroot/data/postgresql.conf" "$pgroot/data/pg_hba.conf"
}
# setup_pg_role NAME: the role and database the tests use, on the cluster NAME.
setup_pg_role() {
  local name=$1 d=$TESTBED_STATE/$1 port pw
  port=$(cat "$d/port") pw=$(cat "$d/password")
  # Superuser so that tests can create tables, schemas and databases freely.
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$(cat "$d/pgroot")" -p "$port" -U postgres -d postgres \
    -c "CREATE ROLE outbox LOGIN SUPERUSER PASSWORD '$pw'" -c "CREATE DATABASE outbox OWNER outbox" \
    >>"$d/setup.log" 2>&1 || abort "$name" "$d/setup.log" "creating role/database failed"
  "$PG_BIN/psql" -X -q "postgresql://outbox:$pw@127.0.0.1:$port/outbox" -tAc 'select 1' >>"$d/setup.log" 2>&1 ||
    abort "$name" "$d/setup.log" "password login over TCP failed"
}

# --- Kafka (KRaft, one combined broker+controller node) ----------------------------
init_kafka() {
  local d=$TESTBED_STATE/kafka lib port cport bport tport sport psport cid
  rm -rf "$d" && mkdir -p "$d/data"
  lib=$("$TESTBED_DIR/fetch-kafka.sh") || abort kafka "$TESTBED_CACHE/kafka-$KAFKA_VERSION.mvn.log"
  echo "$lib" >"$d/lib"
  cp "$TESTBED_DIR/kafka/log4j2.xml" "$d/"
  port=$(free_port) && echo "$port" >"$d/port"
  cport=$(free_port) && echo "$cport" >"$d/controller_port"
  # A second listener for pods: they reach it through the node's forwarder on the pod
  # bridge (up.sh node), so the broker must advertise the bridge address there.
  bport=$(free_port) && echo "$bport" >"$d/pod_port"
  # Two authenticated listeners in the shapes Strimzi gives its users: mutual TLS (a
  # KafkaUser of type tls: ca.crt, user.crt, user.key) and SCRAM-SHA-512 over TLS.
  tport=$(free_port) && echo "$tport" >"$d/tls_port"
  sport=$(free_port) && echo "$sport" >"$d/scram_port"
  # SCRAM over TLS for pods too (advertised on the bridge; the broker's certificate names it).
  psport=$(free_port) && echo "$psport" >"$d/pod_scram_port"
  kafka_pki "$d/pki" >"$d/pki.log" 2>&1 || abort kafka "$d/pki.log" "creating the test CA and certificates failed"
  cat >"$d/server.properties" <<EOC
process.roles=broker,controller
node.id=1
# Static voter set: 'format' then needs no --standalone/--initial-controllers.
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport,PODS://127.0.0.1:$bport,TLS://127.0.0.1:$tport,SCRAM://127.0.0.1:$sport,PODSCRAM://127.0.0.1:$psport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,PODS://$POD_BRIDGE_IP:$bport,TLS://127.0.0.1:$tport,SCRAM://127.0.0.1:$sport,PODSCRAM://$POD_BRIDGE_IP:$psport
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PODS:PLAINTEXT,TLS:SSL,SCRAM:SASL_SSL,PODSCRAM:SASL_SSL
ssl.keystore.type=PEM
ssl.keystore.location=$d/pki/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$d/pki/ca.crt
listener.name.tls.ssl.client.auth=required
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.scram.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.podscram.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
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
  # One id in 64 starts with '-': kafka_format passes it as --cluster-id=ID.
  cid=$(python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')
  echo "$cid" >"$d/cluster_id"
  # The SCRAM user is a bootstrap record of the formatted storage (no running broker needed).
  kafka_format "$lib" "$cid" "$d/server.properties" "$d/format.log" \
    --add-scram "SCRAM-SHA-512=[name=outbox-relay,password=$(cat "$d/pki/scram/password")]" ||
    abort kafka "$d/format.log" "formatting the storage failed"
}

# kafka_pki DIR: a test CA, the broker's certificate for 127.0.0.1 and the pod bridge, and
# the client credentials laid out as Strimzi's Secrets hold them: DIR/ca.crt (the cluster
# CA Secret's key), DIR/user/{ca.crt,user.crt,user.key} (a tls KafkaUser's Secret) and
# DIR/scram/password (a scram-sha-512 KafkaUser's Secret). Keys are unencrypted PKCS#8.
kafka_pki() {
  local d=$1
  rm -rf "$d" && mkdir -p "$d/user" "$d/scram"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=outbox-testbed-kafka-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kafka" -keyout "$d/broker.key" -out "$d/broker.csr"
  openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1,IP:%s\nextendedKeyUsage=serverAuth\n' "$POD_BRIDGE_IP") \
    -out "$d/broker.crt"
  cat "$d/broker.key" "$d/broker.crt" >"$d/broker.pem"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=outbox-relay" -keyout "$d/user/user.key" -out "$d/user.csr"
  openssl x509 -req -in "$d/user.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
    -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$d/user/user.crt"
  cp "$d/ca.crt" "$d/user/ca.crt"
  python3 -c 'import secrets; print(secrets.token_hex(16), end="")' >"$d/scram/password"
  chmod 600 "$d/ca.key" "$d/broker.key" "$d/broker.pem" "$d/user/user.key" "$d/scram/password"
}

# Proof that the broker serves: create a topic through the admin API.
check_kafka_topic() {
  local d=$TESTBED_STATE/kafka
  timeout 60 "$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "127.0.0.1:$(cat "$d/port")" --create --if-not-exists \
    --topic testbed-ready --partitions 1 --replication-factor 1 >"$d/ready-check.log" 2>&1 ||
    abort kafka "$d/ready-check.log" "creating a topic failed (broker log: $d/kafka.log)"
}

# --- Kafka, three nodes (KRaft, each a combined broker+controller) ------------------
# For failover tests: a partition leader's broker can be killed while the other two keep
# the controller quorum and the ISR (ctl.sh kafka3-N). Node N lives in kafka3/N.
init_kafka3() {
  local d=$TESTBED_STATE/kafka3 lib cid n voters="" bootstrap=""
  rm -rf "$d" && mkdir -p "$d"
  lib=$("$TESTBED_DIR/fetch-kafka.sh") || abort kafka3 "$TESTBED_CACHE/kafka-$KAFKA_VERSION.mvn.log"
  echo "$lib" >"$d/lib"
  cp "$TESTBED_DIR/kafka/log4j2.xml" "$d/"
  for n in 1 2 3; do
    mkdir -p "$d/$n/data"
    free_port >"$d/$n/port" && free_port >"$d/$n/controller_port"
    voters+="${voters:+,}$n@127.0.0.1:$(cat "$d/$n/controller_port")"
    bootstrap+="${bootstrap:+,}127.0.0.1:$(cat "$d/$n/port")"
  done
  echo "$bootstrap" >"$d/bootstrap"
  for n in 1 2 3; do
    cat >"$d/$n/server.properties" <<EOC
process.roles=broker,controller
node.id=$n
# A static 3-voter quorum: any two nodes elect a controller, so one node may be down.
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(cat "$d/$n/port"),CONTROLLER://127.0.0.1:$(cat "$d/$n/controller_port")
advertised.listeners=PLAINTEXT://127.0.0.1:$(cat "$d/$n/port")
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$d/$n/data
num.partitions=3
# What a production cluster runs: an acks=all write survives one node, and with two
# nodes down it is refused (NOT_ENOUGH_REPLICAS) instead of kept on one disk only.
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
# Consumer offsets in 6 partitions, not 50: 150 replicas would slow every test's
# first consumer group on 2 cores for nothing.
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.network.threads=2
num.io.threads=2
# A SIGKILLed node is fenced (and dropped from every ISR) after the session timeout,
# and its restart may register only then: 5 s instead of 9 s (see the single broker).
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=5000
# Leadership goes back to the preferred replica 10 s after a node returns (default
# 300 s), so a failover test sees leadership move twice: away and back.
leader.imbalance.check.interval.seconds=10
EOC
  done
  # One cluster id for all three; kafka_format passes it as --cluster-id=ID (it may
  # start with '-'). The three formats run at once: a JVM start each.
  cid=$(python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')
  echo "$cid" >"$d/cluster_id"
  local pids=()
  for n in 1 2 3; do
    kafka_format "$lib" "$cid" "$d/$n/server.properties" "$d/$n/format.log" & pids+=($!)
  done
  for n in 1 2 3; do
    wait "${pids[$((n - 1))]}" || abort kafka3 "$d/$n/format.log" "formatting node $n's storage failed"
  done
  # ctl.sh and down.sh know a set-up service by its port file: node 1's port.
  cp "$d/1/port" "$d/port"
}

# Proof that the cluster serves with all three nodes: a topic replicated on each.
check_kafka3_topic() {
  local d=$TESTBED_STATE/kafka3
  timeout 90 "$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$(cat "$d/bootstrap")" --create --if-not-exists \
    --topic testbed-ready --partitions 3 --replication-factor 3 >"$d/ready-check.log" 2>&1 ||
    abort kafka3 "$d/ready-check.log" "creating a topic with replication factor 3 failed (node logs: $d/*/kafka.log)"
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
    printf '%s\n' 'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' >"$p/client.ext"
    sign_client_cert "$p" admin /O=system:masters/CN=admin
    openssl genrsa -out "$p/sa.key" 2048
    # The apiserver's client certificate towards kubelets (logs, exec, port-forward).
    sign_client_cert "$p" apiserver-kubelet-client /O=system:masters/CN=kube-apiserver-kubelet-client
  } >"$d/pki.log" 2>&1 || abort kube "$d/pki.log" "generating the PKI with openssl failed"
  # Bearer token user in system:masters (token,user,uid,"groups").
  token=$(openssl rand -hex 24)
  echo "$token,token-admin,token-admin-uid,\"system:masters\"" >"$d/tokens.csv"
  chmod 600 "$d/tokens.csv" "$p"/*.key
  write_kubeconfig "$d/admin.kubeconfig" admin \
    "    client-certificate: $p/admin.crt" "    client-key: $p/admin.key"
  write_kubeconfig "$d/token.kubeconfig" token-admin "    token: $token"
}
# sign_client_cert PKI-DIR NAME SUBJECT [CA-DIR]: NAME.key and NAME.crt, a client
# certificate signed by the test bed's CA.
sign_client_cert() {
  local ca=${4:-$1}
  openssl req -newkey rsa:2048 -nodes -subj "$3" -keyout "$1/$2.key" -out "$1/$2.csr" &&
    openssl x509 -req -in "$1/$2.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial -sha256 \
      -days 3650 -extfile "$1/client.ext" -out "$1/$2.crt"
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

# --- node: containerd + runc, kubelet, controller-manager, scheduler ----------------------
# Joins the running control plane as node "127.0.0.1" (the kubelet refuses a loopback
# --node-ip, not a host name that parses as one). Pods get the bridge network, with no
# route but to the bridge's own subnet and the kubernetes Service IP; forwarders on the
# bridge (see ctl.sh) let them reach the apiserver, PostgreSQL and Kafka on loopback.
init_node() {
  local d=$TESTBED_STATE/node k=$TESTBED_STATE/kube bin images p
  "$ctl" kube status >/dev/null 2>&1 || die "the node needs the control plane: up.sh kube node"
  rm -rf "$d" && mkdir -p "$d/pki" "$d/cni/net.d" "$d/containerd" "$d/kubelet" "$d/pod-logs"
  bin=$("$TESTBED_DIR/build-k8s.sh" node) || abort node "$TESTBED_CACHE/k8s-$K8S_VERSION/build.log"
  images=$("$TESTBED_DIR/build-images.sh") || abort node "$TESTBED_CACHE/images/build.log"
  echo "$bin" >"$d/bin" && echo "$images" >"$d/images"
  local f
  for f in port healthz_port cm_port scheduler_port stream_port; do free_port >"$d/$f"; done
  p=$d/pki
  cp "$k/pki/ca.crt" "$k/pki/client.ext" "$p/"
  {
    sign_client_cert "$p" controller-manager /CN=system:kube-controller-manager "$k/pki"
    sign_client_cert "$p" scheduler /CN=system:kube-scheduler "$k/pki"
    sign_client_cert "$p" kubelet-client /O=system:nodes/CN=system:node:127.0.0.1 "$k/pki"
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'extendedKeyUsage=serverAuth' \
      'keyUsage=critical,digitalSignature,keyEncipherment' >"$p/kubelet-serving.ext"
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$p/kubelet-serving.key" -out "$p/kubelet-serving.csr"
    openssl x509 -req -in "$p/kubelet-serving.csr" -CA "$k/pki/ca.crt" -CAkey "$k/pki/ca.key" -CAcreateserial \
      -sha256 -days 3650 -extfile "$p/kubelet-serving.ext" -out "$p/kubelet-serving.crt"
  } >"$d/pki.log" 2>&1 || abort node "$d/pki.log" "generating the node's certificates failed"
  chmod 600 "$p"/*.key
  for f in controller-manager scheduler kubelet-client; do
    write_kubeconfig "$d/$f.kubeconfig" "$f" "    client-certificate: $p/$f.crt" "    client-key: $p/$f.key"
  done
  write_node_configs
  # Forwarders: NAME LISTEN-ADDRESS LISTEN-PORT TARGET-PORT (target on 127.0.0.1).
  {
    echo "apiserver $KUBERNETES_SERVICE_IP 443 $(cat "$k/port")"
    [ ! -f "$TESTBED_STATE/pg/port" ] || echo "pg $POD_BRIDGE_IP $(cat "$TESTBED_STATE/pg/port") $(cat "$TESTBED_STATE/pg/port")"
    [ ! -f "$TESTBED_STATE/kafka/pod_port" ] ||
      echo "kafka $POD_BRIDGE_IP $(cat "$TESTBED_STATE/kafka/pod_port") $(cat "$TESTBED_STATE/kafka/pod_port")"
    [ ! -f "$TESTBED_STATE/kafka/pod_scram_port" ] ||
      echo "kafka-scram $POD_BRIDGE_IP $(cat "$TESTBED_STATE/kafka/pod_scram_port") $(cat "$TESTBED_STATE/kafka/pod_scram_port")"
  } >"$d/forwards"
  # The kubelet rewrites some kernel sysctls (protectKernelDefaults: false); ctl.sh puts
  # these values back when the node stops, and checks that IP forwarding never changed.
  # shellcheck disable=SC2086  # a list of sysctl names, split on purpose
  sysctl -n $NODE_SYSCTLS | paste -sd' ' >"$d/sysctl.saved"
}
write_node_configs() {
  local d=$TESTBED_STATE/node c=$TESTBED_STATE/node/containerd
  cat >"$d/containerd.toml" <<EOC
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$c/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:local"
  disable_apparmor = true
  # Processes on this VM lack CAP_SYS_RESOURCE: runc cannot lower oom_score_adj, so
  # every value is clamped to containerd's own (no QoS-based OOM ordering here).
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "$(cat "$d/stream_port")"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$c/runc"
  # Registries by host: only the test bed's own (up.sh registry), with its CA; any other
  # name still meets the dead proxy (ctl.sh) and fails at once.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$TESTBED_STATE/registry/hosts"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni/net.d"
EOC
  # No gateway on the pods' side and no masquerading: pods reach the bridge's subnet and,
  # through the bridge address, the kubernetes Service IP that sits on the host; nothing else.
  cat >"$d/cni/net.d/10-testbed.conflist" <<EOC
{"cniVersion": "0.4.0", "name": "testbed", "plugins": [
  {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$d/cni/ipam",
            "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$POD_BRIDGE_IP"}]],
            "routes": [{"dst": "$KUBERNETES_SERVICE_IP/32", "gw": "$POD_BRIDGE_IP"}]}}]}
EOC
  cat >"$d/kubelet.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This VM has cgroup v1 only; kubelet 1.35+ refuses it unless told otherwise.
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$d/containerd/containerd.sock
address: 127.0.0.1
port: $(cat "$d/port")
healthzBindAddress: 127.0.0.1
healthzPort: $(cat "$d/healthz_port")
readOnlyPort: 0
tlsCertFile: $d/pki/kubelet-serving.crt
tlsPrivateKeyFile: $d/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $d/pki/ca.crt}
authorization: {mode: Webhook}
makeIPTablesUtilChains: false
podLogsDir: $d/pod-logs
# Images come from ctl.sh's imports, which could never be pulled again, and from the test
# bed's registry (the release tests): never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# Faster status and pod updates than the defaults, for tests that wait on them.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
EOC
}

# --- OCI registry (CNCF Distribution) ---------------------------------------------------
# Where scripts/release.sh publishes in the tests (image by digest, chart as an OCI artifact,
# signatures and SBOM beside them) and what the node's containerd pulls the released image
# from. TLS with a certificate for 127.0.0.1 and localhost signed by a CA of its own
# (registry/pki/ca.crt): clients verify it, as they would a public registry's; none is told to
# skip verification or to speak plain HTTP. No authentication: it listens on loopback only.
# The node's containerd finds the CA through registry/hosts/<host:port>/hosts.toml, which it
# reads at each pull (write_node_configs points it there), so the registry and the node may
# start in either order.
init_registry() {
  local d=$TESTBED_STATE/registry p tools port
  rm -rf "$d" && mkdir -p "$d/pki" "$d/data"
  # cosign is not needed to serve: the tests that sign take it from build-release-tools.sh
  # (scripts/test.sh builds it beside the first phase), so a cold machine does not wait for
  # its build here.
  tools=$("$TESTBED_DIR/build-release-tools.sh" registry crane) ||
    abort registry "$TESTBED_CACHE/release-tools/build.log"
  printf '%s\n' "$tools" >"$d/tools"
  port=$(free_port) && echo "$port" >"$d/port"
  p=$d/pki
  {
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj /CN=outbox-testbed-registry-ca \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
      -keyout "$p/ca.key" -out "$p/ca.crt"
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$p/registry.key" -out "$p/registry.csr"
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'extendedKeyUsage=serverAuth' \
      'keyUsage=critical,digitalSignature,keyEncipherment' >"$p/server.ext"
    openssl x509 -req -in "$p/registry.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -sha256 \
      -days 30 -extfile "$p/server.ext" -out "$p/registry.crt"
  } >"$d/pki.log" 2>&1 || abort registry "$d/pki.log" "making the registry's certificates failed"
  chmod 600 "$p"/*.key
  cat >"$d/config.yml" <<EOC
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $d/data
  # A test may replace what a tag points at (a tampered image), never delete by hand.
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$port
  tls:
    certificate: $p/registry.crt
    key: $p/registry.key
EOC
  mkdir -p "$d/hosts/127.0.0.1:$port"
  cat >"$d/hosts/127.0.0.1:$port/hosts.toml" <<EOC
server = "https://127.0.0.1:$port"
[host."https://127.0.0.1:$port"]
  capabilities = ["pull", "resolve"]
  ca = "$p/ca.crt"
EOC
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
    if up pg2; then
      q OUTBOX_TEST_PG2_PORT "$(cat "$s/pg2/port")"
      q OUTBOX_TEST_PG2_DSN "postgresql://outbox:$(cat "$s/pg2/password")@127.0.0.1:$(cat "$s/pg2/port")/outbox"
      q OUTBOX_TEST_PG2_CA "$s/pg2/pki/ca.crt"
      q OUTBOX_TEST_PG2_OTHER_CA "$s/pg2/pki/other-ca.crt"
    fi
    # The client tools of the servers' version (pg_dump, pg_restore, psql), for tests that
    # move a database from one cluster to the other.
    if up pg || up pg2; then q OUTBOX_TEST_PG_BIN "$PG_BIN"; fi
    if up kafka; then
      q OUTBOX_TEST_KAFKA_BOOTSTRAP "127.0.0.1:$(cat "$s/kafka/port")"
      q OUTBOX_TEST_KAFKA_TLS_BOOTSTRAP "127.0.0.1:$(cat "$s/kafka/tls_port")"
      q OUTBOX_TEST_KAFKA_SCRAM_BOOTSTRAP "127.0.0.1:$(cat "$s/kafka/scram_port")"
      q OUTBOX_TEST_KAFKA_PKI "$s/kafka/pki"
    fi
    ! up kafka3 || q OUTBOX_TEST_KAFKA3_BOOTSTRAP "$(cat "$s/kafka3/bootstrap")"
    if up kube; then
      q OUTBOX_TEST_KUBE_SERVER "https://127.0.0.1:$(cat "$s/kube/port")"
      q OUTBOX_TEST_KUBE_CA "$s/kube/pki/ca.crt"
      q OUTBOX_TEST_KUBECONFIG "$s/kube/admin.kubeconfig"
      q OUTBOX_TEST_KUBE_TOKEN_KUBECONFIG "$s/kube/token.kubeconfig"
      q OUTBOX_TESTBED_BIN "$(cat "$s/kube/bin")"
    fi
    if up node; then
      q OUTBOX_TEST_NODE 127.0.0.1
      q OUTBOX_TEST_IMAGE "$(cat "$(cat "$s/node/images")/outbox-operator.ref")"
      q OUTBOX_TEST_TOOLS_IMAGE localhost/testbed-tools:local
      # What pods use: the same services, through the forwarders on the pod bridge.
      [ ! -f "$s/pg/port" ] ||
        q OUTBOX_TEST_POD_PG_DSN "postgresql://outbox:$(cat "$s/pg/password")@$POD_BRIDGE_IP:$(cat "$s/pg/port")/outbox"
      [ ! -f "$s/kafka/pod_port" ] || q OUTBOX_TEST_POD_KAFKA_BOOTSTRAP "$POD_BRIDGE_IP:$(cat "$s/kafka/pod_port")"
      [ ! -f "$s/kafka/pod_scram_port" ] ||
        q OUTBOX_TEST_POD_KAFKA_SCRAM_BOOTSTRAP "$POD_BRIDGE_IP:$(cat "$s/kafka/pod_scram_port")"
    fi
    if up registry; then
      q OUTBOX_TEST_REGISTRY "127.0.0.1:$(cat "$s/registry/port")"
      q OUTBOX_TEST_REGISTRY_CA "$s/registry/pki/ca.crt"
      q OUTBOX_TESTBED_CRANE "$(grep '/crane$' "$s/registry/tools")"
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
  logs="$TESTBED_STATE/$s/*.log"
  [ "$s" != kafka3 ] || logs="$TESTBED_STATE/kafka3/*/kafka.log"  # one log per node
  "$ctl" "$s" start || abort "$s" "$logs"
  case $s in pg|pg2) setup_pg_role "$s" ;; esac
  [ "$s" != kafka ] || check_kafka_topic
  [ "$s" != kafka3 ] || check_kafka3_topic
  log "$s up in $((SECONDS - ts)) s"
done
write_env
log "test bed up in $((SECONDS - t0)) s; env: $TESTBED_STATE/env"
echo "$TESTBED_STATE/env"
