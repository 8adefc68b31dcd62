#!/usr/bin/env bash
# The README's main job: a local demo on embedded defaults. It brings up
# PostgreSQL and Kafka on loopback, creates the outbox table, starts a relay,
# commits orders with their outbox events (some transactions rolled back on
# purpose), and shows what reached Kafka. Everything stops on exit.
#   scripts/demo.sh [--short]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
orders=200
[ "${1:-}" = "--short" ] && orders=40
"$root/scripts/deps.sh"
"$root/scripts/build.sh" >/dev/null
bin="${OUTBOX_BUILD_DIR:-$root/build}/src/outbox-operator"

export TESTBED_STATE="${TESTBED_STATE:-$root/.testbed/demo}"
relay_pid=""
cleanup() {
  [ -n "$relay_pid" ] && kill -TERM "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
  "$root/scripts/testbed/down.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# shellcheck source=/dev/null
source "$("$root/scripts/testbed/up.sh" pg kafka | tail -n1)"
export OUTBOX_DSN="$OUTBOX_TEST_PG_DSN"  # in Kubernetes this comes from a Secret
psql() { /usr/lib/postgresql/15/bin/psql -X -q -tA "$OUTBOX_DSN" "$@"; }

echo "== migrate"
"$bin" migrate --table public.outbox_event
psql -c "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount int, status text)"

echo "== relay (log: $TESTBED_STATE/relay.log)"
"$bin" relay --table public.outbox_event --brokers "$OUTBOX_TEST_KAFKA_BOOTSTRAP" \
  --topic 'demo.{biz_type}' --listen 127.0.0.1:18080 >"$TESTBED_STATE/relay.log" 2>&1 &
relay_pid=$!

echo "== order service: $orders orders, every 5th transaction rolled back"
committed=0 rolled_back=0
for i in $(seq 1 "$orders"); do
  end="COMMIT"; if [ $((i % 5)) -eq 0 ]; then end="ROLLBACK"; fi
  psql -c "BEGIN" -c "INSERT INTO orders VALUES ('o-$i', $((i * 10)), 'PAID')" \
    -c "SELECT public.outbox_event_enqueue('ORDER_PAID', 'o-$i', '{\"order\": \"o-$i\", \"amount\": $((i * 10))}')" \
    -c "$end" >/dev/null
  if [ "$end" = COMMIT ]; then committed=$((committed + 1)); else rolled_back=$((rolled_back + 1)); fi
done

for _ in $(seq 1 100); do
  [ "$(psql -c "SELECT count(*) FROM outbox_event WHERE status = 0")" = 0 ] && break
  sleep 0.2
done
published=$(psql -c "SELECT count(*) FROM outbox_event WHERE status = 1")
leaked=$(psql -c "SELECT count(*) FROM outbox_event e WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = e.biz_id)")
echo "== summary"
echo "committed orders:    $committed"
echo "rolled back orders:  $rolled_back"
echo "events published:    $published"
echo "rolled-back events published: $leaked"
curl -s http://127.0.0.1:18080/metrics | grep -E '^outbox_(events_published_total|pending_events|shards_owned)' || true
[ "$published" = "$committed" ] && [ "$leaked" = 0 ] && echo "demo OK" || { echo "demo FAILED"; exit 1; }
