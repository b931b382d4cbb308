"""Shared by the group member scripts (groups_member_*.py): their configuration and the line
protocol through which groups_coordinator.py, which starts them, watches them.

A member reads its configuration from SAMSA_GROUP_MEMBER (JSON: bootstrap, topic, group,
name, assignor, instance_id, session_timeout_ms, heartbeat_interval_ms), subscribes, and
writes one JSON object per line to stdout:
  {"ev": "assign" | "revoke" | "lost", "parts": [...]}   from the client's rebalance callback
      (the partitions that callback was given: all of them in the eager protocol, only the
      ones that move in the cooperative one)
  {"ev": "owned", "parts": [...]}                        the member's assignment after it
  {"ev": "records", "recs": [[partition, offset, value], ...]}  one poll's records, in order
  {"ev": "committed", "offsets": {partition: next offset}}      after a synchronous commit
  {"ev": "commit_failed", "error": ...}                  a commit the client refused
  {"ev": "closed"}                                       after a clean close
  {"ev": "held"}                                         waiting for "start" (see below)
With "hold": true in its configuration a member waits for a line "start" on stdin before it
creates its consumer, so a restart can be timed without the interpreter's start-up. A line
"stop" on stdin makes the member close its consumer (LeaveGroup, unless static) and
exit 0. Anything else a client logs goes to stderr.
"""

import json
import os
import sys
import threading

# How long one poll waits for records, so a "stop" is seen within this bound.
POLL_TIMEOUT_MS = 200
# Records one poll returns at most.
POLL_RECORDS_MAX = 500

_out_lock = threading.Lock()


def config():
    raw = os.environ.get("SAMSA_GROUP_MEMBER")
    if not raw:
        print("SAMSA_GROUP_MEMBER is not set (the member's JSON configuration)", file=sys.stderr)
        sys.exit(2)
    cfg = json.loads(raw)
    if cfg.get("hold"):
        emit("held")
        for line in sys.stdin:
            if line.strip() == "start":
                break
    return cfg


def emit(ev, **fields):
    fields["ev"] = ev
    line = json.dumps(fields, separators=(",", ":"))
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def decode(value):
    return None if value is None else value.decode("utf-8", "replace")


class Owned:
    """The member's assignment, kept from its callbacks: a revoke or a loss removes the
    partitions it lists, an assign adds them (the same rule serves both protocols)."""

    def __init__(self):
        self.parts = set()

    def revoke(self, parts, ev="revoke"):
        parts = sorted(parts)
        emit(ev, parts=parts)
        self.parts -= set(parts)
        emit("owned", parts=sorted(self.parts))

    def assign(self, parts):
        parts = sorted(parts)
        emit("assign", parts=parts)
        self.parts |= set(parts)
        emit("owned", parts=sorted(self.parts))


def stop_event():
    """An Event set once "stop" (or end of input) arrives on stdin."""
    event = threading.Event()

    def watch():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        event.set()

    threading.Thread(target=watch, daemon=True).start()
    return event


def records_of(batches):
    """One kafka-python or aiokafka poll ({TopicPartition: [ConsumerRecord]}) as
    [[partition, offset, value]], partition by partition, each in offset order."""
    recs = []
    for tp, ms in sorted(batches.items(), key=lambda kv: kv[0].partition):
        recs.extend([tp.partition, m.offset, decode(m.value)] for m in ms)
    return recs


def report_records(recs):
    """Emits one poll's records; returns what to commit for them: {partition: next offset}."""
    emit("records", recs=recs)
    return {p: o + 1 for p, o, _ in recs}


def kafka_python_style_settings(cfg, assignors):
    """The consumer settings of a member under kafka-python's names, which aiokafka shares;
    `assignors` maps the configured assignor's name to the client's class."""
    return dict(
        bootstrap_servers=cfg["bootstrap"],
        group_id=cfg["group"],
        client_id=cfg["name"],
        group_instance_id=cfg.get("instance_id"),
        session_timeout_ms=cfg["session_timeout_ms"],
        heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
        partition_assignment_strategy=[assignors[cfg.get("assignor") or "range"]],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
