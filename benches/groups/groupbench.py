"""Shared by the group benchmarks: member processes (member.py) and their event streams, the
topic and DescribeGroups calls, and the min/median/max summary.

A `Members` object starts N `member.py` processes with pipes on stdin and stdout; one reader
thread per process parses its JSON lines into one shared, time-ordered list of events. The
benchmarks wait on predicates over that list (each wait bounded), kill a member with SIGKILL or
stop them all cleanly (stdin closed: each calls `close()`, which sends LeaveGroup). Event
times are `time.monotonic()` readings taken inside the member's rebalance callbacks, so they
are directly comparable with the orchestrator's own `time.monotonic()`.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
# The interop scripts' helpers: SAMSA_BOOTSTRAP and unique names.
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "interop"))
from interop_common import bootstrap, unique_suffix  # noqa: E402

MEMBER = os.path.join(HERE, "member.py")
# Bounds of every wait, so a broker that never settles fails the run instead of hanging it.
ADMIN_TIMEOUT_S = 30
EXIT_TIMEOUT_S = 30
WAIT_POLL_S = 0.01


def run_rounds(label, round_once, default_rounds, partitions, goal_s):
    """Creates one topic of `partitions` for the whole run, then runs `round_once(bootstrap,
    topic, r)` (which returns the round's time in seconds) SAMSA_BENCH_ROUNDS times (default
    `default_rounds`); a failed round is reported and the others still run. Prints the
    min/median/max summary and exits 1 if any round failed."""
    bootstrap_servers = bootstrap()
    rounds = int(os.environ.get("SAMSA_BENCH_ROUNDS", str(default_rounds)))
    topic = f"bench-{unique_suffix()}"
    create_topic(bootstrap_servers, topic, partitions)
    took = []
    failed = 0
    for r in range(rounds):
        try:
            took.append(round_once(bootstrap_servers, topic, r))
        except Exception as exc:  # noqa: BLE001 (every failure is reported, none hidden)
            failed += 1
            print(f"round {r}: FAILED: {exc}", flush=True)
    if took:
        summary(label, took, goal_s)
    sys.exit(1 if failed else 0)


def admin(bootstrap_servers):
    return AdminClient({"bootstrap.servers": bootstrap_servers, "broker.address.family": "v4"})


def create_topic(bootstrap_servers, topic, partitions):
    # The client must outlive the future: a destroyed handle fails what it has in flight.
    client = admin(bootstrap_servers)
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=ADMIN_TIMEOUT_S,
    )
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)


def describe_group(bootstrap_servers, group):
    """(state name, {member client id: sorted partitions}) from DescribeGroups."""
    client = admin(bootstrap_servers)
    futures = client.describe_consumer_groups([group], request_timeout=ADMIN_TIMEOUT_S)
    desc = futures[group].result(timeout=ADMIN_TIMEOUT_S)
    members = {
        m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in desc.members
    }
    state = desc.state.name if isinstance(desc.state, ConsumerGroupState) else str(desc.state)
    return state, members


class Members:
    """N member.py processes of one group, and every event they reported."""

    def __init__(self, bootstrap_servers, group, topic, names, extra_args=()):
        self.events = []
        self.lock = threading.Lock()
        self.procs = {}
        self.spawned_at = time.monotonic()
        for name in names:
            proc = subprocess.Popen(
                [sys.executable, MEMBER, "--bootstrap", bootstrap_servers, "--group", group,
                 "--topic", topic, "--name", name, *extra_args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
            )
            self.procs[name] = proc
            threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.stop()

    def _read(self, proc):
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def snapshot(self):
        with self.lock:
            return sorted(self.events, key=lambda e: e["t"])

    def wait(self, what, predicate, timeout_s):
        """Polls `predicate(events)` until it returns a non-None value, which is returned."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = predicate(self.snapshot())
            if found is not None:
                return found
            for name, proc in self.procs.items():
                if proc.poll() not in (None, -signal.SIGKILL):
                    raise RuntimeError(f"member {name} exited with {proc.returncode}")
            time.sleep(WAIT_POLL_S)
        raise TimeoutError(f"{what}: not within {timeout_s} s; events: {self.snapshot()}")

    def go(self):
        """Releases members waiting on stdin (member.py without --no-wait); returns when."""
        at = time.monotonic()
        for proc in self.procs.values():
            proc.stdin.write("\n")
            proc.stdin.flush()
        return at

    def kill(self, name):
        at = time.monotonic()
        os.kill(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(timeout=EXIT_TIMEOUT_S)
        return at

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def ownership(events, names, since=None):
    """Each member's partitions after `events` (eager protocol: an assign callback carries the
    member's whole assignment, revoke and lost drop it), and the time of the last event that
    changed it. With `since`, only members that had an assign at or after `since` count as
    owning anything (their earlier assignment is stale)."""
    owned = {n: set() for n in names}
    fresh = set()
    last_t = None
    for e in events:
        if e.get("name") not in owned:
            continue
        if e["event"] == "assign":
            owned[e["name"]] = set(e["partitions"])
            if since is None or e["t"] >= since:
                fresh.add(e["name"])
            last_t = e["t"]
        elif e["event"] in ("revoke", "lost"):
            owned[e["name"]] = set()
            last_t = e["t"]
    if since is not None:
        owned = {n: (p if n in fresh else set()) for n, p in owned.items()}
    return owned, last_t


def covers(owned, partitions):
    """Whether the members' partitions are exactly 0..partitions-1, none owned twice."""
    all_parts = [p for ps in owned.values() for p in ps]
    return sorted(all_parts) == list(range(partitions))


def summary(label, values_s, goal_s):
    values = sorted(values_s)
    line = (f"{label}: n={len(values)} min={values[0]:.3f} s median={statistics.median(values):.3f} s "
            f"max={values[-1]:.3f} s (goal <= {goal_s:.1f} s: "
            f"{'met' if values[-1] <= goal_s else 'MISSED'}) all={[round(v, 3) for v in values_s]}")
    print(line, flush=True)
    return line
