#!/usr/bin/env bash
# down.sh [--purge]: stops every service of the test bed in $TESTBED_STATE and
# waits until none of their processes is left. Safe to run twice, or with
# nothing started. Keeps the state dir (logs!) unless --purge is given.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
purge=0
case ${1:-} in --purge) purge=1 ;; "") ;; *) die "usage: $0 [--purge]" ;; esac
rc=0
for s in node registry kube kafka3 kafka pg2 pg; do
  [ -f "$TESTBED_STATE/$s/port" ] || continue
  "$TESTBED_DIR/ctl.sh" "$s" stop || rc=1
done
[ "$rc" -eq 0 ] || die "some service did not stop; see the messages above"
rm -f "$TESTBED_STATE/env"
if [ "$purge" -eq 1 ]; then
  # PostgreSQL's data may live in /tmp (see up.sh), outside the state dir.
  for s in pg pg2; do
    [ -f "$TESTBED_STATE/$s/pgroot" ] || continue
    case $(cat "$TESTBED_STATE/$s/pgroot") in /tmp/outbox-testbed-pg.*) rm -rf "$(cat "$TESTBED_STATE/$s/pgroot")" ;; esac
  done
  rm -rf "$TESTBED_STATE"
fi
log "test bed down ($TESTBED_STATE)"
