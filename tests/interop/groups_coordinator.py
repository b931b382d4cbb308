"""Consumer groups of one client library against a running samsa broker: starts members of
that client as separate OS processes (groups_member_<client>.py / .js, watched through the
line protocol of groups_common.py), produces records with confluent-kafka's producer
(explicit partitions, so every partition gets records) and checks what the members report.

Scenarios, in this order, each a named check (a failed one does not stop the next):
  share      three members of one group share a six-partition topic: once their assignments
             are disjoint and cover every partition, the records produced are received by
             the group, each exactly once (no rebalance happens while they flow);
  sigkill    one member is killed with SIGKILL (no LeaveGroup); once the other two cover
             every partition, records produced to every partition, the killed member's
             included, are received exactly once (every earlier record was committed);
  restart    the two members close; more records are produced; the broker is killed with
             SIGKILL and restarted (file handshake with the Rust test, as in
             kafka_python_idempotent_restart.py); a new member of the group starts exactly
             at the committed offsets (not at the earliest offset it is configured to reset
             to, nor at the latest) and receives every record produced after them;
  two-groups two groups of two members on a second topic each receive every record;
  cooperative (SAMSA_GROUPS_COOPERATIVE=1) two members with the cooperative-sticky assignor,
             then a third joins: the revoke callbacks of the first two list only the
             partitions that move to the third, they keep the rest, and neither loses all;
  static     (SAMSA_GROUPS_STATIC=1) two static members (group.instance.id); the leader
             is killed with SIGKILL and started again at once, within its session timeout:
             it gets its partitions back,
             the other member's callbacks never fire, and DescribeGroups shows the same
             group.instance.id with a new member id;
  admin      (SAMSA_GROUPS_ADMIN=1) the client's admin API: list groups, describe groups,
             list and alter a group's committed offsets, delete groups; deleting a group
             with members fails with NON_EMPTY_GROUP.

Environment: SAMSA_BOOTSTRAP (host:port), SAMSA_GROUPS_CLIENT (confluent-kafka,
kafka-python, aiokafka or kafkajs), SAMSA_RESTART_DIR (the restart handshake directory),
SAMSA_NODE (node, for kafkajs), SAMSA_GROUPS_RECORDS (records per phase, default 600).
Exits 0 when every check passed, 1 otherwise.
"""

import json
import os
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import interop_common as ic

PARTITIONS = 6
# The session timeout and heartbeat interval every member uses (Kafka's minimum session).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
# Bound of one wait for members to settle or for records to arrive: a member's session
# timeout, a rebalance and a slow start of a client on a loaded machine fit well inside it.
SETTLE_TIMEOUT_S = 60
RECORDS_TIMEOUT_S = 60
RESTART_TIMEOUT_S = 120
MEMBER_STOP_TIMEOUT_S = 30
WAIT_POLL_S = 0.1
# How long the static scenario watches for a rebalance after the restarted member is back:
# several heartbeat intervals, so a rebalance would reach the other member's callbacks.
STATIC_QUIET_S = 4
# Restart handshake (tests/interop_clients.rs).
RESTART_REQUEST_FILE = "restart-requested"
RESTART_DONE_FILE = "restarted"

CLIENTS = {
    "confluent-kafka": ("python", "groups_member_confluent_kafka.py"),
    "kafka-python": ("python", "groups_member_kafka_python.py"),
    "aiokafka": ("python", "groups_member_aiokafka.py"),
    "kafkajs": ("node", "groups_member_kafkajs.js"),
}


def wait_until(what, pred, timeout_s, detail=lambda: "", members=()):
    """Polls pred() until it is true; raises TimeoutError naming `what` otherwise, or an
    AssertionError at once if one of `members` exited (it was not killed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        for m in members:
            if m.proc.poll() is not None:
                raise AssertionError(f"{what}: {m.name} exited with {m.proc.returncode}")
        time.sleep(WAIT_POLL_S)
    if pred():
        return
    raise TimeoutError(f"{what}: not within {timeout_s}s. {detail()}")


class Member:
    """One member process and everything it reported."""

    def __init__(self, client, name, group, topic, bootstrap, assignor=None, instance_id=None,
                 hold=False):
        kind, script = CLIENTS[client]
        interpreter = sys.executable if kind == "python" else os.environ.get("SAMSA_NODE", "node")
        cfg = {
            "bootstrap": bootstrap, "topic": topic, "group": group, "name": name,
            "assignor": assignor, "instance_id": instance_id, "hold": hold,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
        }
        env = dict(os.environ, SAMSA_GROUP_MEMBER=json.dumps(cfg))
        self.name = name
        self.lock = threading.Lock()
        self.owned = set()
        self.callbacks = []  # (ev, parts) in the order reported
        self.records = []  # (partition, offset, value)
        self.committed = {}  # partition -> next offset
        self.commit_failures = []
        self.held = False
        self.started = time.monotonic()
        self.proc = subprocess.Popen([interpreter, script], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                print(f"[{self.name}] {line.rstrip()}", flush=True)
                continue
            ev = msg.get("ev")
            with self.lock:
                if ev in ("assign", "revoke", "lost"):
                    self.callbacks.append((ev, tuple(msg["parts"])))
                    print(f"[{self.name}] {ev} {msg['parts']}", flush=True)
                elif ev == "owned":
                    self.owned = set(msg["parts"])
                elif ev == "records":
                    self.records.extend(tuple(r) for r in msg["recs"])
                elif ev == "committed":
                    for p, o in msg["offsets"].items():
                        self.committed[int(p)] = max(o, self.committed.get(int(p), 0))
                elif ev == "commit_failed":
                    self.commit_failures.append(msg["error"])
                    print(f"[{self.name}] commit failed: {msg['error']}", flush=True)
                elif ev == "held":
                    self.held = True

    def snapshot(self):
        with self.lock:
            return set(self.owned), list(self.callbacks)

    def release(self):
        """Lets a member started with hold=True create its consumer, once it is waiting."""
        wait_until(f"{self.name} waiting to start", lambda: self.held, SETTLE_TIMEOUT_S,
                   members=[self])
        self.started = time.monotonic()
        self.proc.stdin.write("start\n")
        self.proc.stdin.flush()

    def kill(self):
        """SIGKILL: no LeaveGroup, no commit, nothing flushed."""
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        """Asks for a clean close and waits for the process to exit."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=MEMBER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"{self.name} did not close within {MEMBER_STOP_TIMEOUT_S}s")
        if self.proc.returncode != 0:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}")


def owners_text(members):
    return "; ".join(f"{m.name} owns {sorted(m.snapshot()[0])}" for m in members)


def settled(members):
    """Whether the members' assignments are disjoint, each non-empty, and cover every
    partition: true only once all of them are in one generation."""
    owned = [m.snapshot()[0] for m in members]
    if any(not o for o in owned):
        return False
    union = set()
    for o in owned:
        if union & o:
            return False
        union |= o
    return union == set(range(PARTITIONS))


def wait_settled(what, members):
    started = time.monotonic()
    wait_until(f"{what}: assignments covering all {PARTITIONS} partitions", lambda: settled(members),
               SETTLE_TIMEOUT_S, lambda: owners_text(members), members)
    return time.monotonic() - started


class Produced:
    """Records produced to one topic, by partition: {partition: [(offset, value)]}."""

    def __init__(self):
        self.by_partition = {p: [] for p in range(PARTITIONS)}

    def end_offsets(self):
        return {p: (recs[-1][0] + 1 if recs else 0) for p, recs in self.by_partition.items()}


class Harness:
    def __init__(self, client, bootstrap, suffix):
        self.client = client
        self.bootstrap = bootstrap
        self.suffix = suffix
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.members = []
        self.n = int(os.environ.get("SAMSA_GROUPS_RECORDS", "600"))

    def topic(self, name):
        topic = f"groups-{self.client}-{name}-{self.suffix}"
        futures = self.admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                                     replication_factor=1)],
                                           operation_timeout=ic.OPERATION_TIMEOUT_S)
        futures[topic].result(timeout=ic.OPERATION_TIMEOUT_S)
        return topic

    def member(self, name, group, topic, **kw):
        m = Member(self.client, name, group, topic, self.bootstrap, **kw)
        self.members.append(m)
        return m

    def produce(self, topic, produced, tag):
        """Produces self.n records round-robin over the partitions; records what was acked."""
        acks = []
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                acks.append((msg.partition(), msg.offset(), msg.value().decode()))

        for i in range(self.n):
            value = f"{tag}-{i:05}"
            while True:
                try:
                    self.producer.produce(topic, value=value.encode(), partition=i % PARTITIONS,
                                          on_delivery=on_delivery)
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.producer.poll(0)
        left = self.producer.flush(ic.OPERATION_TIMEOUT_S)
        if errors or left:
            raise AssertionError(f"produce {tag}: {len(errors)} failed ({errors[:3]}), "
                                 f"{left} unacknowledged")
        batch = {p: [] for p in range(PARTITIONS)}
        for p, o, v in sorted(acks):
            batch[p].append((o, v))
            produced.by_partition[p].append((o, v))
        return batch

    def stop_all(self):
        for m in self.members:
            if m.proc.poll() is None:
                try:
                    m.stop()
                except AssertionError as e:
                    print(f"stopping {m.name}: {e}", flush=True)


def received_from(members, batch):
    """Waits until `members` together received every record of `batch` ({partition:
    [(offset, value)]}); checks the values, and that none was received twice: every
    scenario waits for the commits of what was received before anything moves. Returns a
    summary."""
    wanted = {(p, o): v for p, recs in batch.items() for o, v in recs}

    def got():
        seen = {}
        for m in members:
            with m.lock:
                for p, o, v in m.records:
                    if (p, o) in wanted:
                        seen.setdefault((p, o), []).append((m.name, v))
        return seen

    wait_until(f"{len(wanted)} records received by {[m.name for m in members]}",
               lambda: len(got()) == len(wanted), RECORDS_TIMEOUT_S,
               lambda: f"{len(got())} received; missing e.g. "
                       f"{sorted(set(wanted) - set(got()))[:5]}; {owners_text(members)}",
               members)
    seen = got()
    wrong = [(k, wanted[k], vs) for k, vs in seen.items() if any(v != wanted[k] for _, v in vs)]
    assert not wrong, f"records with other values than produced: {wrong[:5]}"
    dups = {k: vs for k, vs in seen.items() if len(vs) > 1}
    if dups:
        raise AssertionError(f"{len(dups)} records received more than once, e.g. "
                             f"{sorted(dups.items())[:5]}")
    by_member = {m.name: sum(1 for p, o, _ in m.records if (p, o) in wanted) for m in members}
    return f"{len(wanted)} records, by member {by_member}"


def wait_committed(members, offsets):
    """Waits until the members together committed at least `offsets` ({partition: next})."""
    def done():
        best = {}
        for m in members:
            with m.lock:
                for p, o in m.committed.items():
                    best[p] = max(best.get(p, 0), o)
        return all(best.get(p, 0) >= o for p, o in offsets.items() if o > 0)

    wait_until(f"commits up to {offsets}", done, RECORDS_TIMEOUT_S,
               lambda: f"{[(m.name, m.committed) for m in members]}")


def restart_broker():
    restart_dir = os.environ.get("SAMSA_RESTART_DIR")
    if not restart_dir:
        raise AssertionError("SAMSA_RESTART_DIR is not set (the restart handshake directory)")
    done = os.path.join(restart_dir, RESTART_DONE_FILE)
    with open(os.path.join(restart_dir, RESTART_REQUEST_FILE), "w") as f:
        f.write("1\n")
    wait_until("the broker restart", lambda: os.path.exists(done), RESTART_TIMEOUT_S)
    os.remove(done)


def main():
    bootstrap = ic.bootstrap()
    client = os.environ.get("SAMSA_GROUPS_CLIENT", "")
    if client not in CLIENTS:
        print(f"SAMSA_GROUPS_CLIENT must be one of {sorted(CLIENTS)}", file=sys.stderr)
        sys.exit(2)
    suffix = ic.unique_suffix()
    h = Harness(client, bootstrap, suffix)
    summary = ic.Summary(f"{client} consumer groups")
    state = {}

    topic1 = h.topic("shared")
    produced1 = Produced()
    group1 = f"g-shared-{suffix}"

    def share():
        ms = [h.member(f"m{i}", group1, topic1) for i in (1, 2, 3)]
        state["members"] = ms
        took = wait_settled("three members", ms)
        batch = h.produce(topic1, produced1, "share")
        got = received_from(ms, batch)
        wait_committed(ms, produced1.end_offsets())
        return f"settled in {took:.1f}s; {got}; {owners_text(ms)}"

    def sigkill():
        m1, m2, m3 = state["members"]
        lost = sorted(m3.snapshot()[0])
        m3.kill()
        took = wait_settled("the two survivors", [m1, m2])
        batch = h.produce(topic1, produced1, "sigkill")
        got = received_from([m1, m2], batch)
        taken = [p for p in lost if p in m1.snapshot()[0] | m2.snapshot()[0]]
        assert taken == lost, f"the killed member's partitions {lost}, taken over {taken}"
        wait_committed([m1, m2], produced1.end_offsets())
        return (f"partitions {lost} reassigned {took:.1f}s after the SIGKILL "
                f"(session timeout {SESSION_TIMEOUT_MS} ms); {got}")

    def restart():
        m1, m2, _ = state["members"]
        committed = produced1.end_offsets()
        m1.stop()
        m2.stop()
        batch = h.produce(topic1, produced1, "restart")
        restart_broker()
        m4 = h.member("m4", group1, topic1)
        got = received_from([m4], batch)
        with m4.lock:
            first = {}
            for p, o, _ in m4.records:
                first.setdefault(p, o)
        assert first == committed, \
            f"the new member started at {first}, the group had committed {committed}"
        wait_committed([m4], produced1.end_offsets())
        m4.stop()
        return f"resumed at the committed offsets {committed}; {got}"

    topic2 = h.topic("second")
    produced2 = Produced()

    def two_groups():
        ga = [h.member(f"a{i}", f"g-a-{suffix}", topic2) for i in (1, 2)]
        gb = [h.member(f"b{i}", f"g-b-{suffix}", topic2) for i in (1, 2)]
        state["group_a"] = ga
        wait_settled("group a", ga)
        wait_settled("group b", gb)
        batch = h.produce(topic2, produced2, "two-groups")
        got_a = received_from(ga, batch)
        got_b = received_from(gb, batch)
        for m in gb:
            m.stop()
        return f"group a: {got_a}; group b: {got_b}"

    def cooperative():
        group = f"g-coop-{suffix}"
        c1 = h.member("c1", group, topic2, assignor="cooperative-sticky")
        c2 = h.member("c2", group, topic2, assignor="cooperative-sticky")
        wait_settled("two cooperative members", [c1, c2])
        before = {m.name: m.snapshot() for m in (c1, c2)}
        c3 = h.member("c3", group, topic2, assignor="cooperative-sticky")
        wait_settled("three cooperative members", [c1, c2, c3])
        moved_to_c3 = c3.snapshot()[0]
        notes = []
        for m in (c1, c2):
            owned_before, calls_before = before[m.name]
            owned_after, calls = m.snapshot()
            new_calls = calls[len(calls_before):]
            revoked = set()
            for ev, parts in new_calls:
                if ev == "revoke":
                    revoked |= set(parts)
                elif ev == "lost":
                    raise AssertionError(f"{m.name} lost partitions {parts}")
                elif parts:
                    raise AssertionError(f"{m.name} was assigned {parts} when c3 joined")
            assert owned_after <= owned_before, \
                f"{m.name} owned {sorted(owned_before)}, then {sorted(owned_after)}"
            assert revoked == owned_before - owned_after, \
                f"{m.name} revoked {sorted(revoked)}, but moved {sorted(owned_before - owned_after)}"
            assert revoked != owned_before, f"{m.name} revoked everything it owned: {sorted(revoked)}"
            notes.append(f"{m.name} kept {sorted(owned_after)}, revoked {sorted(revoked)}")
        revoked_all = set(range(PARTITIONS)) - c1.snapshot()[0] - c2.snapshot()[0]
        assert revoked_all == moved_to_c3, f"c3 owns {sorted(moved_to_c3)}"
        for m in (c1, c2, c3):
            m.stop()
        return "; ".join(notes) + f"; c3 got {sorted(moved_to_c3)}"

    def static():
        group = f"g-static-{suffix}"
        ids = {name: f"{name}-{suffix}" for name in ("s1", "s2")}
        # s1 joins alone first, so it is the leader; then s2 follows.
        s1 = h.member("s1", group, topic2, instance_id=ids["s1"])
        wait_until("s1 alone", lambda: s1.snapshot()[0] == set(range(PARTITIONS)),
                   SETTLE_TIMEOUT_S, lambda: owners_text([s1]), [s1])
        s2 = h.member("s2", group, topic2, instance_id=ids["s2"])
        wait_settled("two static members", [s1, s2])
        # The leader is restarted, the harder case: a client without KIP-814 (JoinGroup
        # below v9, as every client here) is answered as Kafka answers it, with no members
        # and the leader id from before its restart, so it acts as a follower and gets the
        # assignment in force without computing one.
        victim, other = s1, s2
        ids_before = static_members(client, h, group)
        parts = victim.snapshot()[0]
        other_calls = len(other.snapshot()[1])
        # The new process is started first and held before it creates its consumer, so the
        # time between the kill and its JoinGroup is not the interpreter's start-up.
        back = h.member(f"{victim.name}-restarted", group, topic2,
                        instance_id=ids[victim.name], hold=True)
        victim.kill()
        back.release()
        wait_until("the restarted static member's assignment", lambda: back.snapshot()[0] == parts,
                   SESSION_TIMEOUT_MS / 1000 + SETTLE_TIMEOUT_S, lambda: owners_text([back, other]))
        took = time.monotonic() - back.started
        time.sleep(STATIC_QUIET_S)
        extra = other.snapshot()[1][other_calls:]
        assert not extra, f"the other static member's callbacks fired: {extra}"
        ids_after = static_members(client, h, group)
        assert set(ids_after) == set(ids_before), f"instances {ids_before} then {ids_after}"
        iv, io = ids[victim.name], ids[other.name]
        assert ids_after[iv] != ids_before[iv], f"{iv} kept member id {ids_before[iv]}"
        assert ids_after[io] == ids_before[io], f"{io}: {ids_before[io]} -> {ids_after[io]}"
        back.stop()
        other.stop()
        role = "leader" if victim is s1 else "follower"
        return (f"{victim.name} ({role}) back with {sorted(parts)} {took:.1f}s after its restart, "
                f"no callback on {other.name}; member id {ids_before[iv]} -> {ids_after[iv]}")

    def admin():
        ga = state["group_a"]
        group_a = f"g-a-{suffix}"
        return admin_checks(client, h, group1, group_a, [m.name for m in ga], topic1,
                            produced1.end_offsets())

    if summary.check("share", share):
        # The next two go on with the members of `share`.
        if summary.check("sigkill", sigkill):
            summary.check("restart", restart)
        else:
            summary.not_run("restart", "sigkill failed")
    else:
        summary.not_run("sigkill", "share failed")
        summary.not_run("restart", "share failed")
    summary.check("two-groups", two_groups)
    if os.environ.get("SAMSA_GROUPS_COOPERATIVE") == "1":
        summary.check("cooperative", cooperative)
    if os.environ.get("SAMSA_GROUPS_STATIC") == "1":
        summary.check("static", static)
    if os.environ.get("SAMSA_GROUPS_ADMIN") == "1":
        summary.check("admin", admin)
    h.stop_all()
    summary.exit()


# ---- the client's own admin API (confluent-kafka or kafka-python) ----

def static_members(client, h, group):
    """{group.instance.id: member id} of `group`, from DescribeGroups by the client's admin."""
    if client == "kafka-python":
        from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=h.bootstrap)
        try:
            desc = admin.describe_groups([group])[group]
        finally:
            admin.close()
        assert desc["error"] is None, f"describe {group}: {desc['error']}"
        return {m["group_instance_id"]: m["member_id"] for m in desc["members"]}
    desc = h.admin.describe_consumer_groups([group])[group].result(timeout=ic.OPERATION_TIMEOUT_S)
    return {m.group_instance_id: m.member_id for m in desc.members}


def admin_checks(client, h, empty_group, busy_group, busy_members, topic, committed):
    if client == "kafka-python":
        return admin_kafka_python(h, empty_group, busy_group, busy_members, topic, committed)
    return admin_confluent(h, empty_group, busy_group, busy_members, topic, committed)


# The offset alter_group_offsets sets on every partition.
ALTERED_OFFSET = 7


def admin_confluent(h, empty_group, busy_group, busy_members, topic, committed):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
    from confluent_kafka import TopicPartition
    admin = h.admin
    t = ic.OPERATION_TIMEOUT_S
    listed = admin.list_consumer_groups(request_timeout=t).result(timeout=t)
    assert not listed.errors, f"list_consumer_groups errors: {listed.errors}"
    states = {g.group_id: g.state.name for g in listed.valid}
    assert states.get(empty_group) == "EMPTY", f"{empty_group}: {states.get(empty_group)}"
    assert states.get(busy_group) == "STABLE", f"{busy_group}: {states.get(busy_group)}"
    descs = admin.describe_consumer_groups([empty_group, busy_group], request_timeout=t)
    empty = descs[empty_group].result(timeout=t)
    busy = descs[busy_group].result(timeout=t)
    assert empty.state.name == "EMPTY" and not empty.members, f"{empty_group}: {empty}"
    assert busy.state.name == "STABLE", f"{busy_group}: {busy.state}"
    assert sorted(m.client_id for m in busy.members) == sorted(busy_members), \
        f"{busy_group} members {[m.client_id for m in busy.members]}"
    parts = sorted(tp.partition for m in busy.members for tp in m.assignment.topic_partitions)
    assert parts == list(range(PARTITIONS)), f"{busy_group} assignment {parts}"

    def offsets():
        f = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(empty_group)],
                                              request_timeout=t)[empty_group]
        return {tp.partition: tp.offset for tp in f.result(timeout=t).topic_partitions
                if tp.topic == topic}

    got = offsets()
    assert got == committed, f"list_consumer_group_offsets {got}, committed {committed}"
    altered = [TopicPartition(topic, p, ALTERED_OFFSET) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(empty_group, altered)],
                                       request_timeout=t)[empty_group].result(timeout=t)
    got = offsets()
    assert got == {p: ALTERED_OFFSET for p in range(PARTITIONS)}, f"after the alter: {got}"
    try:
        admin.delete_consumer_groups([busy_group], request_timeout=t)[busy_group].result(timeout=t)
        raise AssertionError(f"deleting {busy_group}, which has members, succeeded")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.NON_EMPTY_GROUP, f"delete {busy_group}: {e}"
    admin.delete_consumer_groups([empty_group], request_timeout=t)[empty_group].result(timeout=t)
    listed = admin.list_consumer_groups(request_timeout=t).result(timeout=t)
    left = {g.group_id for g in listed.valid}
    assert empty_group not in left and busy_group in left, f"groups after the delete: {left}"
    return (f"listed {len(states)} groups; described; offsets {committed[0]}.. then "
            f"{ALTERED_OFFSET}; NON_EMPTY_GROUP for {busy_group}; deleted {empty_group}")


def admin_kafka_python(h, empty_group, busy_group, busy_members, topic, committed):
    import kafka.errors
    from kafka import OffsetAndMetadata, TopicPartition
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=h.bootstrap)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert empty_group in listed and busy_group in listed, f"list_groups: {sorted(listed)}"
        for state, g in (("Empty", empty_group), ("Stable", busy_group)):
            in_state = {x["group_id"] for x in admin.list_groups(states_filter=[state])}
            assert g in in_state, f"list_groups(states_filter=[{state}]) lacks {g}: {in_state}"
        descs = admin.describe_groups([empty_group, busy_group])
        empty, busy = descs[empty_group], descs[busy_group]
        assert empty["error"] is None and empty["group_state"] == "Empty" \
            and not empty["members"], f"{empty_group}: {empty}"
        assert busy["error"] is None and busy["group_state"] == "Stable", f"{busy_group}: {busy}"
        assert sorted(m["client_id"] for m in busy["members"]) == sorted(busy_members), \
            f"{busy_group} members {[m['client_id'] for m in busy['members']]}"
        parts = sorted(p for m in busy["members"]
                       for t in m["member_assignment"]["assigned_partitions"]
                       for p in t["partitions"])
        assert parts == list(range(PARTITIONS)), f"{busy_group} assignment {parts}"

        def offsets():
            res = admin.list_group_offsets({empty_group: None})[empty_group]
            return {tp.partition: om.offset for tp, om in res.items() if tp.topic == topic}

        got = offsets()
        assert got == committed, f"list_group_offsets {got}, committed {committed}"
        res = admin.alter_group_offsets(empty_group, {
            TopicPartition(topic, p): OffsetAndMetadata(ALTERED_OFFSET, "", -1)
            for p in range(PARTITIONS)})
        bad = {tp: e for tp, e in res.items() if e is not kafka.errors.NoError}
        assert not bad, f"alter_group_offsets: {bad}"
        got = offsets()
        assert got == {p: ALTERED_OFFSET for p in range(PARTITIONS)}, f"after the alter: {got}"
        res = admin.delete_groups([busy_group])
        assert res == {busy_group: "NonEmptyGroupError"}, f"delete {busy_group}: {res}"
        res = admin.delete_groups([empty_group])
        assert res == {empty_group: "OK"}, f"delete {empty_group}: {res}"
        left = {g["group_id"] for g in admin.list_groups()}
        assert empty_group not in left and busy_group in left, f"groups after the delete: {left}"
    finally:
        admin.close()
    return (f"listed {len(listed)} groups; described; offsets {committed[0]}.. then "
            f"{ALTERED_OFFSET}; NON_EMPTY_GROUP for {busy_group}; deleted {empty_group}")


if __name__ == "__main__":
    main()
