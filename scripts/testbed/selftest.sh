#!/usr/bin/env bash
# selftest.sh [pg] [kafka] [kafka3] [kube] [registry]   (default: all five)
# End-to-end check of the test bed itself: up.sh, then each service is used
# with its real client, stopped, killed and restarted through ctl.sh, then
# down.sh, and finally no process of the test bed may be left. For kafka3 one
# node is also killed alone: the other two must keep serving acks=all writes. For the
# registry, an image pushed before the restarts must still be there after them.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
services=("$@")
[ ${#services[@]} -gt 0 ] || services=(pg kafka kafka3 kube registry)
has() { [[ " ${services[*]} " == *" $1 "* ]]; }
ok() { log "ok: $*"; }
fail() { log "FAIL: $*"; "$TESTBED_DIR/down.sh" || true; exit 1; }

env_file=$("$TESTBED_DIR/up.sh" "${services[@]}" | tail -n1)
# shellcheck source=/dev/null
source "$env_file"
ctl=$OUTBOX_TESTBED_CTL
export PGOPTIONS="-c client_min_messages=warning"

check_pg() {
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$OUTBOX_TEST_PG_DSN" \
    -c 'CREATE TABLE IF NOT EXISTS selftest (n int)' -c 'INSERT INTO selftest VALUES (1)' >/dev/null
}
pg_rows() { "$PG_BIN/psql" -X -tA "$OUTBOX_TEST_PG_DSN" -c 'SELECT count(*) FROM selftest'; }
check_kafka() {
  local topic="selftest-$RANDOM" out
  printf 'k1:v1\nk2:v2\n' | "$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.ConsoleProducer \
    --bootstrap-server "$OUTBOX_TEST_KAFKA_BOOTSTRAP" --topic "$topic" \
    --reader-property parse.key=true --reader-property key.separator=: >/dev/null 2>&1 || return 1
  out=$("$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server "$OUTBOX_TEST_KAFKA_BOOTSTRAP" --topic "$topic" --from-beginning \
    --max-messages 2 --timeout-ms 30000 --formatter-property print.key=true 2>/dev/null) || return 1
  [ "$(sort <<<"$out" | tr '\t\n' ':,')" = "k1:v1,k2:v2," ]
}
# check_kafka3 [TOPIC]: without TOPIC, two messages through a new topic (replicated
# on all three nodes); with it, one more message to TOPIC, which must be read back:
# a new topic with replication factor 3 cannot be created while a node is down.
kafka3_topic=""
check_kafka3() {
  local topic=${1:-selftest-$RANDOM} in='k1:v1\nk2:v2\n' n=2 out
  [ -z "${1:-}" ] || { in='k3:v3\n' n=3; }
  printf %b "$in" | "$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.ConsoleProducer \
    --bootstrap-server "$OUTBOX_TEST_KAFKA3_BOOTSTRAP" --topic "$topic" --producer-property acks=all \
    --reader-property parse.key=true --reader-property key.separator=: >/dev/null 2>&1 || return 1
  out=$("$TESTBED_DIR/kafka-run.sh" org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server "$OUTBOX_TEST_KAFKA3_BOOTSTRAP" --topic "$topic" --from-beginning \
    --max-messages "$n" --timeout-ms 60000 --formatter-property print.key=true 2>/dev/null) || return 1
  kafka3_topic=$topic
  if [ -n "${1:-}" ]; then [[ $out == *"k3	v3"* ]]; else [ "$(sort <<<"$out" | tr '\t\n' ':,')" = "k1:v1,k2:v2," ]; fi
}
check_kube() {
  local k=$OUTBOX_TESTBED_BIN/kubectl v
  "$k" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" get ns default >/dev/null || return 1
  "$k" --kubeconfig "$OUTBOX_TEST_KUBE_TOKEN_KUBECONFIG" get ns default >/dev/null || return 1
  [ "$("$k" --kubeconfig "$OUTBOX_TEST_KUBE_TOKEN_KUBECONFIG" auth can-i '*' '*')" = yes ] || return 1
  v=$("$k" --kubeconfig "$OUTBOX_TEST_KUBECONFIG" version -o json | python3 -c \
    'import json,sys; d=json.load(sys.stdin); print(d["clientVersion"]["gitVersion"], d["serverVersion"]["gitVersion"])')
  [ "$v" = "$K8S_VERSION $K8S_VERSION" ] || { log "kubectl version says: $v"; return 1; }
  # Outputs captured first: 'cmd | grep -q' can fail on SIGPIPE under pipefail.
  v=$("$OUTBOX_TESTBED_BIN/helm" version --short)
  [[ $v == "$HELM_VERSION"* ]] || { log "helm version says: $v"; return 1; }
  v=$("$OUTBOX_TESTBED_BIN/etcd" --version)
  [[ $v == *"etcd Version: ${ETCD_VERSION#v}"* ]] || { log "etcd version says: $v"; return 1; }
}
# check_registry: an image pushed over TLS verified against the registry's CA reads back by
# digest; the one pushed first (before any restart) still does.
registry_first=""
check_registry() {
  local d tar=$TESTBED_STATE/selftest-image.tar ref
  d=$(mktemp -d) && echo "selftest $RANDOM" >"$d/hello" && tar -C "$d" -cf "$d.tar" hello && rm -rf "$d"
  ref=$OUTBOX_TEST_REGISTRY/selftest/hello:$RANDOM
  SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$OUTBOX_TESTBED_CRANE" append -f "$d.tar" -t "$ref" -o "$tar" >/dev/null 2>&1 &&
    rm -f "$d.tar" || return 1
  ref=$(SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$OUTBOX_TESTBED_CRANE" push "$tar" "$ref" 2>/dev/null) || return 1
  rm -f "$tar"
  [ -n "$registry_first" ] || registry_first=$ref
  SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$OUTBOX_TESTBED_CRANE" manifest "$ref" >/dev/null 2>&1 &&
    SSL_CERT_FILE=$OUTBOX_TEST_REGISTRY_CA "$OUTBOX_TESTBED_CRANE" manifest "$registry_first" >/dev/null 2>&1
}
port_of() {
  case $1 in
    pg) echo "$OUTBOX_TEST_PG_PORT" ;;
    kafka) echo "${OUTBOX_TEST_KAFKA_BOOTSTRAP##*:}" ;;
    kafka3) echo "${OUTBOX_TEST_KAFKA3_BOOTSTRAP##*:}" ;;  # node 3's
    kube) s=${OUTBOX_TEST_KUBE_SERVER##*:}; echo "${s%/}" ;;
    registry) echo "${OUTBOX_TEST_REGISTRY##*:}" ;;
  esac
}

for s in pg kafka kafka3 kube registry; do
  has "$s" || continue
  "check_$s" || fail "$s does not work after up.sh"
  ok "$s works"
  for how in stop kill9; do
    t=$SECONDS; "$ctl" "$s" "$how" || fail "ctl.sh $s $how"
    ! "$ctl" "$s" status >/dev/null || fail "$s still running after $how"
    ! port_open "$(port_of "$s")" || fail "$s port still accepts after $how"
    ok "$s $how took $((SECONDS - t)) s; port closed"
    t=$SECONDS; "$ctl" "$s" start || fail "ctl.sh $s start after $how"
    "check_$s" || fail "$s does not work after $how + start"
    ok "$s start after $how took $((SECONDS - t)) s (incl. check); same port"
  done
done
if has pg; then [ "$(pg_rows)" -ge 3 ] || fail "pg lost committed rows across restarts"; ok "pg kept its rows"; fi
if has kafka3; then
  t=$SECONDS; "$ctl" kafka3-2 kill9 || fail "ctl.sh kafka3-2 kill9"
  ! "$ctl" kafka3 status >/dev/null || fail "kafka3 reported running with node 2 killed"
  ok "kafka3-2 kill9 took $((SECONDS - t)) s"
  check_kafka3 "$kafka3_topic" || fail "kafka3 does not take acks=all writes with one node down"
  ok "kafka3 serves acks=all with node 2 down"
  t=$SECONDS; "$ctl" kafka3-2 start || fail "ctl.sh kafka3-2 start after kill9"
  "$ctl" kafka3 status >/dev/null || fail "kafka3 not running after kafka3-2 start"
  ok "kafka3-2 start after kill9 took $((SECONDS - t)) s"
fi

pgroot=$(cat "$TESTBED_STATE/pg/pgroot" 2>/dev/null || echo "$TESTBED_STATE")
"$TESTBED_DIR/down.sh"
"$TESTBED_DIR/down.sh"  # twice: must be harmless
left=$(pgrep -af -- "$TESTBED_STATE|$pgroot" || true)
[ -z "$left" ] || fail "processes left after down.sh: $left"
ok "down.sh left no process"
echo "selftest passed: ${services[*]}"
