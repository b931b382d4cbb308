"""One confluent-kafka group member for the group benchmarks, run as its own process.

It creates a `Consumer` (classic protocol, eager range/roundrobin assignor, the session
timeout and heartbeat interval given on the command line, auto commit off), then, unless
`--no-wait` is given, waits for a line on stdin so that several members can be created first
and subscribed together; then it subscribes to the topic and polls until its stdin closes or
it is killed. Every group event goes to stdout as one JSON line with `time.monotonic()`
(CLOCK_MONOTONIC, the same clock in every process of the machine, so the orchestrator can
compare it with its own): `ready` once the consumer exists, `subscribed`, and `assign` /
`revoke` / `lost` with the partitions from librdkafka's rebalance callbacks, which run inside
`poll` exactly when the member takes or gives up its partitions.
"""

import argparse
import json
import sys
import threading
import time

from confluent_kafka import Consumer

# How long one poll may block: also how late a callback can be seen after the rebalance.
POLL_S = 0.05


def emit(event, **fields):
    fields.update(event=event, t=time.monotonic())
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    ap.add_argument("--no-wait", action="store_true")
    args = ap.parse_args()

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "broker.address.family": "v4",
            "group.id": args.group,
            "client.id": args.name,
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": args.heartbeat_interval_ms,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    emit("ready", name=args.name)
    if not args.no_wait:
        sys.stdin.readline()

    def parts(partitions):
        return sorted(p.partition for p in partitions)

    def on_assign(_consumer, partitions):
        emit("assign", name=args.name, partitions=parts(partitions))

    def on_revoke(_consumer, partitions):
        emit("revoke", name=args.name, partitions=parts(partitions))

    def on_lost(_consumer, partitions):
        emit("lost", name=args.name, partitions=parts(partitions))

    consumer.subscribe(
        [args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
    )
    emit("subscribed", name=args.name)

    # The orchestrator closes stdin to ask for a clean exit (LeaveGroup via close()).
    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.is_set():
        msg = consumer.poll(POLL_S)
        if msg is not None and msg.error():
            emit("error", name=args.name, error=str(msg.error()))
    consumer.close()
    emit("closed", name=args.name)


if __name__ == "__main__":
    main()
