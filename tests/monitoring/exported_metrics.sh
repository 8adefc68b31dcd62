#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# unit: every metric the alerts and the dashboard query is one that exists, and the
# relay's exposition passes `promtool check metrics`.
# Where the exported names come from:
#  - the relay's: a live scrape. The binary runs `relay` against a database and a
#    Kafka that are not there (closed loopback ports): the relay registers all its
#    metrics before connecting and serves /metrics while it retries, so the scrape is
#    exactly what a real relay exports, without services (a unit test);
#  - the controller's: grepped from src/ (`.counter("name"`, `.gauge(`, `.histogram(`),
#    because the controller needs an apiserver before it serves /metrics. The same grep
#    is checked against the relay's scrape, so the method is known to agree;
#  - `up`: Prometheus' own per target; kube_outboxrelay_*: the kube-state-metrics
#    config the chart ships (files/kube-state-metrics-outboxrelay.yaml), read here.
# Usage: exported_metrics.sh <outbox-operator binary>. Needs OUTBOX_TESTBED_BIN (helm).
source "$(dirname "$0")/lib.sh"
use_helm
use_promtool
binary=${1:-}
[ -x "$binary" ] || die "usage: $0 <path to the outbox-operator binary>"
tmp=$(mktemp -d)
relay_pid=
cleanup() {
  if [ -n "$relay_pid" ]; then
    kill "$relay_pid" 2>/dev/null || true
    wait "$relay_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- the relay's exposition, scraped -------------------------------------------------
# Port 1 on loopback: nothing listens there, so connections are refused at once. The
# OUTBOX_LOG_* variables are what the operator sets in a relay pod (downward API). The log
# exists before the relay starts: the background job opens it only once it runs, and a sed of a
# missing file below would end the script (pipefail).
: >"$tmp/relay.log"
OUTBOX_LOG_NAMESPACE=shop OUTBOX_LOG_OUTBOXRELAY=orders OUTBOX_LOG_REPLICA=orders-relay-0 \
  "$binary" relay --dsn 'postgresql://outbox@127.0.0.1:1/outbox?connect_timeout=1' --table public.outbox_event \
  --brokers 127.0.0.1:1 --topic outbox.events --listen 127.0.0.1:0 >"$tmp/relay.log" 2>&1 &
relay_pid=$!
port=
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*serving \/healthz, .*\/metrics.* on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/relay.log" | head -n1)
  [ -n "$port" ] && break
  kill -0 "$relay_pid" 2>/dev/null || die "the relay exited: $(cat "$tmp/relay.log")"
  sleep 0.1
done
[ -n "$port" ] || die "the relay did not say where it serves /metrics: $(cat "$tmp/relay.log")"
python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
  "http://127.0.0.1:$port/metrics" >"$tmp/relay.prom" || die "scraping the relay's /metrics failed"
out=$(promtool check metrics <"$tmp/relay.prom" 2>&1) && pass "the relay's exposition passes promtool check metrics" ||
  fail "promtool check metrics on the relay's exposition: $out"
unlabelled=$(grep '^outbox_' "$tmp/relay.prom" | grep -v 'namespace="shop",outboxrelay="orders"' || true)
expect_eq "every relay series says its namespace and outboxrelay" "$unlabelled" ""
expect_eq "no relay series carries the pod's name (Prometheus adds it as pod)" \
  "$(grep -c 'orders-relay-0' "$tmp/relay.prom" || true)" "0"
# Sample names (histograms export _bucket, _sum and _count), and counter families whose
# series appear only later (by topic: registered when the first event reaches a topic).
{
  sed -n 's/^\([a-zA-Z_:][a-zA-Z0-9_:]*\)[{ ].*/\1/p' "$tmp/relay.prom"
  sed -n 's/^# TYPE \([a-zA-Z_:][a-zA-Z0-9_:]*\) counter$/\1/p' "$tmp/relay.prom"
} | sort -u >"$tmp/relay.names"
expect_eq "the relay describes its by-topic counters before any event" \
  "$(grep -c '^outbox_topic_events_\(published\|failed\)_total$' "$tmp/relay.names")" "2"
expect_eq "the relay exports outbox_pending_events" "$(grep -cx outbox_pending_events "$tmp/relay.names")" "1"
for name in process_resident_memory_bytes process_cpu_seconds_total process_open_fds \
  process_start_time_seconds outbox_build_info; do
  expect_eq "the relay exports $name" "$(grep -cx "$name" "$tmp/relay.names")" "1"
done
[ "$(wc -l <"$tmp/relay.names")" -ge 20 ] && pass "the relay's scrape has $(wc -l <"$tmp/relay.names") series names" ||
  fail "the relay's scrape has only $(wc -l <"$tmp/relay.names") series names: $(cat "$tmp/relay.prom")"

# --- names registered in src/ --------------------------------------------------------
# registered KIND...: name<TAB>file for every registration in src/, with _bucket, _sum and
# _count added for histograms (the registry renders those).
python3 - "$REPO_ROOT/src" >"$tmp/src.names" <<'PY'
import pathlib, re, sys
pat = re.compile(r'\.(counter|gauge|histogram)\(\s*"([A-Za-z_:][\w:]*)"')
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.[ch]pp")):
    for kind, name in pat.findall(f.read_text()):
        suffixes = ["_bucket", "_sum", "_count"] if kind == "histogram" else [""]
        for s in suffixes:
            print(f"{name}{s}\t{f.relative_to(sys.argv[1])}")
PY
missing=$(awk -F'\t' '$2 ~ /^relay\// { print $1 }' "$tmp/src.names" | sort -u | comm -23 - "$tmp/relay.names")
expect_eq "every name src/relay registers is in the relay's scrape (the grep agrees with the scrape)" "$missing" ""
expect_contains "the grep finds the controller's metrics" "$(cut -f1 "$tmp/src.names")" "outbox_controller_reconcile_total"

# --- names from kube-state-metrics' config ----------------------------------------------
python3 - "$KSM_CONFIG" >"$tmp/ksm.names" <<'PY'
import sys, yaml
for r in yaml.safe_load(open(sys.argv[1]))["spec"]["resources"]:
    prefix = r.get("metricNamePrefix", "kube_customresource")
    for m in r["metrics"]:
        print(f"{prefix}_{m['name']}" if prefix else m["name"])
PY
expect_contains "the kube-state-metrics config produces kube_outboxrelay_status_condition" "$(cat "$tmp/ksm.names")" \
  "kube_outboxrelay_status_condition"

{ cat "$tmp/relay.names"; cut -f1 "$tmp/src.names"; cat "$tmp/ksm.names"; echo up; } | sort -u >"$tmp/exported.names"

# --- what the alerts and the dashboard use ---------------------------------------------
render_rules "$tmp/rules.yaml" || die "helm template of the PrometheusRule failed"
python3 "$MON_TEST_DIR/promql_names.py" rules "$tmp/rules.yaml" >"$tmp/rules.uses"
python3 "$MON_TEST_DIR/promql_names.py" dashboard "$DASHBOARD" >"$tmp/dashboard.uses"
for what in rules dashboard; do
  n=$(cut -f1 "$tmp/$what.uses" | sort -u | wc -l)
  [ "$n" -ge 8 ] && pass "$n metric names in the $what" || fail "only $n metric names found in the $what: the name finder is broken"
  unknown=$(awk -F'\t' 'NR == FNR { known[$1] = 1; next } !($1 in known) { print "  " $1 " (" $2 ")" }' \
    "$tmp/exported.names" "$tmp/$what.uses")
  expect_eq "every metric the $what query is exported" "$unknown" ""
done
# The relay's families the alerts and the dashboard need come from the scrape itself,
# not only from the grep.
relay_uses=$(cut -f1 "$tmp/rules.uses" "$tmp/dashboard.uses" | grep -E '^outbox_' | grep -v '^outbox_controller_' | sort -u |
  comm -23 - "$tmp/relay.names")
expect_eq "every outbox_ name queried (but the controller's) is in the relay's live scrape" "$relay_uses" ""
finish
