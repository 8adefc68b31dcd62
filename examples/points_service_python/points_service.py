"""points-service in Python: adds points for each ORDER_PAID event exactly once, and
never applies an event older than one of its key already applied (docs/consuming.md).

The inbox comes from `outbox-operator migrate --inbox public.points_inbox`; its
_apply function records the event and checks its outbox.seq header in the same
transaction as the points, and the Kafka offset is committed only after that.
"""
import argparse
import json
import re
import sys

import psycopg
from confluent_kafka import Consumer
from psycopg import sql


def headers(msg):
    return {k: (v or b"").decode() for k, v in (msg.headers() or [])}


def handle(conn, apply_fn, consumer, msg):
    """Returns new, duplicate, stale or ignored; raises ValueError for a bad message."""
    h = headers(msg)
    if h.get("biz_type") != "ORDER_PAID":
        return "ignored"
    try:
        body = json.loads(msg.value())
        user, amount, seq = body["user"], body["amount"], int(h["outbox.seq"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"event {h.get('event_id')}: malformed: {e!r}") from e
    if not isinstance(user, str) or type(amount) is not int:
        raise ValueError(f"event {h.get('event_id')}: needs user (string), amount (integer)")
    try:
        with conn.transaction():
            outcome = conn.execute(
                sql.SQL("SELECT {}(%s, %s, %s, %s)").format(apply_fn),
                (consumer, h.get("event_id"), (msg.key() or b"").decode(), seq),
            ).fetchone()[0]
            if outcome == "new":
                conn.execute(
                    "INSERT INTO user_points (user_id, points) VALUES (%s, %s) ON CONFLICT "
                    "(user_id) DO UPDATE SET points = user_points.points + EXCLUDED.points",
                    (user, amount // 10),
                )
    except psycopg.DataError as e:  # a bad event_id, an empty consumer: refused by _apply
        raise ValueError(f"event {h.get('event_id')}: {e}") from e
    return outcome


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", required=True)
    p.add_argument("--brokers", required=True)
    p.add_argument("--topic", default="outbox.ORDER_PAID")
    p.add_argument("--group", default="points-service")
    p.add_argument("--inbox", default="public.points_inbox")
    p.add_argument("--max-messages", type=int, default=0, help="exit after this many (0: never)")
    p.add_argument("--idle-exit", type=float, default=0, help="exit after this many idle seconds")
    args = p.parse_args()
    if not re.fullmatch(r"[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*", args.inbox):
        sys.exit(f"--inbox {args.inbox!r}: expected schema.table")
    schema, table = args.inbox.split(".")
    apply_fn = sql.Identifier(schema, table + "_apply")
    conn = psycopg.connect(args.dsn, autocommit=True)
    # Replicas starting at once would race on CREATE TABLE IF NOT EXISTS (PostgreSQL refuses
    # the second with a duplicate key): one at a time, under a lock held to the commit.
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('points-service-schema'))")
        conn.execute("CREATE TABLE IF NOT EXISTS user_points (user_id text PRIMARY KEY, "
                     "points bigint NOT NULL)")
    kafka = Consumer({"bootstrap.servers": args.brokers, "group.id": args.group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
    kafka.subscribe([args.topic])
    counts = {"new": 0, "duplicate": 0, "stale": 0, "ignored": 0, "rejected": 0}
    seen, idle = 0, 0.0
    while not args.max_messages or seen < args.max_messages:
        msg = kafka.poll(0.5)
        if msg is None or msg.error():
            idle += 0.5
            if args.idle_exit and idle >= args.idle_exit:
                break
            continue
        seen, idle = seen + 1, 0.0
        try:
            counts[handle(conn, apply_fn, args.group, msg)] += 1
        except ValueError as e:  # a poison message is reported and skipped, never retried
            counts["rejected"] += 1
            print(f"skipped: {e}", file=sys.stderr)
        kafka.commit(message=msg, asynchronous=False)
    kafka.close()
    print(f"points-service: applied {counts['new']}, duplicates skipped {counts['duplicate']}, "
          f"stale skipped {counts['stale']}, rejected {counts['rejected']}", flush=True)


if __name__ == "__main__":
    main()
