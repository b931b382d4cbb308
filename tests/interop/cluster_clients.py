"""kafka-python and a group of three confluent-kafka members against a three-broker cluster.
tests/cluster/broker_processes.rs starts the three `samsa broker` processes and runs this.

1. confluent-kafka's admin creates a topic of PARTITIONS partitions; its metadata must show
   the leaders spread over every broker of the cluster.
2. Three confluent-kafka consumers of one group (range assignor, auto.offset.reset=earliest)
   subscribe; this thread polls them in turn until the group is stable: each owns
   PARTITIONS/3 partitions and together they own every partition once.
3. kafka-python's default producer (idempotent, acks=all) writes RECORDS to each partition;
   every acknowledgement's offset is kept. The offsets of one partition must rise by one.
4. A group-less kafka-python consumer (assign + seek to each partition's first acknowledged
   offset) reads every partition to its end offset: per partition, exactly the acknowledged
   values at the acknowledged offsets, in order.
5. The group's members read on, committing each poll's records synchronously, until they
   together have every acknowledged record: each partition read by its owner only, in
   order, once. The group stays as it was (no rebalance while reading).
6. The members close; a fresh consumer of the group sees each partition's committed offset at
   the partition's end.

Environment: SAMSA_BOOTSTRAP (every broker, comma-separated), SAMSA_CLUSTER_BROKERS (the
broker ids, comma-separated). Exits 0 when everything held, 1 with the reasons otherwise.
"""

import os
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

PARTITIONS = 6
MEMBERS = 3
RECORDS = 200
# Bounds of every wait, so a silent cluster fails the run instead of hanging it.
OPERATION_TIMEOUT_S = 60
SETTLE_TIMEOUT_S = 90
READ_TIMEOUT_S = 120
MEMBER_POLL_S = 0.1
# Problems printed; the rest are only counted.
PROBLEMS_SHOWN_MAX = 30


def log(msg):
    print(f"[cluster_clients {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Problems:
    def __init__(self):
        self.lines = []

    def add(self, line):
        self.lines.append(line)
        if len(self.lines) <= PROBLEMS_SHOWN_MAX:
            log(f"PROBLEM: {line}")

    def exit(self):
        if self.lines:
            log(f"FAILED: {len(self.lines)} problem(s)")
            sys.exit(1)
        log("PASSED")
        sys.exit(0)


def value_of(partition, i):
    return f"p{partition}-r{i:05}".encode()


def create_spread_topic(bootstrap, brokers, topic, problems):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                            replication_factor=1)],
                                  operation_timeout=OPERATION_TIMEOUT_S)
    futures[topic].result(timeout=OPERATION_TIMEOUT_S)
    deadline = time.monotonic() + OPERATION_TIMEOUT_S
    leaders = {}
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=OPERATION_TIMEOUT_S)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == PARTITIONS:
            leaders = {p: t.partitions[p].leader for p in t.partitions}
            if all(l >= 0 for l in leaders.values()):
                break
        time.sleep(0.2)
    log(f"topic {topic}: leaders {dict(sorted(leaders.items()))}")
    if set(leaders.values()) != set(brokers):
        problems.add(f"leaders {leaders} are not spread over every broker {sorted(brokers)}")


def start_group(bootstrap, topic, group):
    members = []
    for m in range(MEMBERS):
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"member-{m}",
            "partition.assignment.strategy": "range",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 30000,
            "heartbeat.interval.ms": 1000,
        })
        owned = set()

        def on_assign(consumer, parts, owned=owned):
            owned.clear()
            owned.update(p.partition for p in parts)

        def on_revoke(consumer, parts, owned=owned):
            owned.clear()

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        members.append((c, owned))
    return members


def poll_member(consumer, topic, read, problems, who):
    """One poll of one member; its records go into `read[partition]`; commits them."""
    msgs = consumer.consume(num_messages=500, timeout=MEMBER_POLL_S)
    offsets = {}
    for m in msgs:
        if m.error():
            problems.add(f"{who}: {m.error()}")
            continue
        read.setdefault(m.partition(), []).append((who, m.offset(), m.value()))
        offsets[m.partition()] = m.offset() + 1
    if offsets:
        consumer.commit(offsets=[CkTopicPartition(topic, p, o)
                                 for p, o in offsets.items()], asynchronous=False)
    return len(msgs)


def settle(members, topic, problems):
    """Polls every member in turn until each owns PARTITIONS/MEMBERS partitions, disjoint."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    early = {}
    while time.monotonic() < deadline:
        for i, (c, _) in enumerate(members):
            poll_member(c, topic, early, problems, f"member-{i}")
        sets = [frozenset(owned) for _, owned in members]
        union = set().union(*sets)
        if (all(len(s) == PARTITIONS // MEMBERS for s in sets)
                and union == set(range(PARTITIONS))):
            log(f"group stable: {[sorted(s) for s in sets]}")
            if early:
                problems.add(f"records read before anything was produced: {early}")
            return sets
    problems.add(f"the group did not settle in {SETTLE_TIMEOUT_S}s: "
                 f"{[sorted(o) for _, o in members]}")
    return None


def produce(bootstrap, topic, problems):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    if not producer.config["enable_idempotence"]:
        problems.add("kafka-python's default producer is not idempotent")
    futures = [(p, i, producer.send(topic, value=value_of(p, i), partition=p))
               for i in range(RECORDS) for p in range(PARTITIONS)]
    producer.flush(timeout=OPERATION_TIMEOUT_S)
    acked = {p: [] for p in range(PARTITIONS)}
    for p, i, f in futures:
        try:
            md = f.get(timeout=OPERATION_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - a failed send is a problem to report
            problems.add(f"send p{p} r{i}: {e!r}")
            continue
        if md.partition != p:
            problems.add(f"send p{p} r{i} acknowledged on partition {md.partition}")
        acked[p].append((md.offset, value_of(p, i)))
    producer.close(timeout=OPERATION_TIMEOUT_S)
    for p, acks in acked.items():
        offsets = [o for o, _ in acks]
        if not offsets:
            problems.add(f"partition {p}: nothing acknowledged")
        elif offsets != list(range(offsets[0], offsets[0] + len(offsets))):
            problems.add(f"partition {p}: acknowledged offsets not consecutive: "
                         f"{offsets[:10]}...")
    log(f"kafka-python produced {sum(len(a) for a in acked.values())} records")
    return acked


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def read_back(bootstrap, topic, acked, problems):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, acked[tp.partition][0][0] if acked[tp.partition] else 0)
    ends = consumer.end_offsets(tps)
    read = {p: [] for p in range(PARTITIONS)}
    pending = {tp.partition for tp in tps if ends[tp] > consumer.position(tp)}
    deadline = time.monotonic() + READ_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=500).items():
            for m in msgs:
                read[tp.partition].append((m.offset, m.value))
                if m.offset + 1 >= ends[tp]:
                    pending.discard(tp.partition)
    consumer.close()
    if pending:
        problems.add(f"kafka-python: partitions {sorted(pending)} not read to their ends "
                     f"{ {tp.partition: e for tp, e in ends.items()} }")
    for p in range(PARTITIONS):
        if read[p] != acked[p]:
            problems.add(f"kafka-python read partition {p}: {len(read[p])} records, "
                         f"{len(acked[p])} acknowledged; first difference at index "
                         f"{first_difference(read[p], acked[p])}")
    log(f"kafka-python read back {sum(len(r) for r in read.values())} records")


def group_reads(members, topic, owners, acked, problems):
    read = {}
    want = sum(len(a) for a in acked.values())
    deadline = time.monotonic() + READ_TIMEOUT_S
    while sum(len(r) for r in read.values()) < want and time.monotonic() < deadline:
        for i, (c, _) in enumerate(members):
            poll_member(c, topic, read, problems, f"member-{i}")
    for i, (_, owned) in enumerate(members):
        if frozenset(owned) != owners[i]:
            problems.add(f"member-{i} owns {sorted(owned)} after reading, "
                         f"{sorted(owners[i])} before: the group rebalanced")
    for p in range(PARTITIONS):
        got = read.get(p, [])
        owner = next(f"member-{i}" for i, s in enumerate(owners) if p in s)
        readers = {who for who, _, _ in got}
        if readers - {owner}:
            problems.add(f"partition {p} owned by {owner} was read by {sorted(readers)}")
        if [(o, v) for _, o, v in got] != acked[p]:
            problems.add(f"the group read partition {p}: {len(got)} records, "
                         f"{len(acked[p])} acknowledged, or not the same")
    log(f"the group read {sum(len(r) for r in read.values())} records")


def check_commits(bootstrap, topic, group, acked, problems):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    committed = c.committed([CkTopicPartition(topic, p) for p in range(PARTITIONS)],
                            timeout=OPERATION_TIMEOUT_S)
    c.close()
    for tp in committed:
        want = acked[tp.partition][-1][0] + 1 if acked[tp.partition] else None
        if tp.error is not None or tp.offset != want:
            problems.add(f"partition {tp.partition}: committed {tp.offset} ({tp.error}), "
                         f"want {want}")
    log(f"committed offsets: {sorted((tp.partition, tp.offset) for tp in committed)}")


def main():
    bootstrap = os.environ.get("SAMSA_BOOTSTRAP")
    brokers = os.environ.get("SAMSA_CLUSTER_BROKERS")
    if not bootstrap or not brokers:
        print("SAMSA_BOOTSTRAP and SAMSA_CLUSTER_BROKERS must be set", file=sys.stderr)
        sys.exit(2)
    brokers = {int(b) for b in brokers.split(",")}
    suffix = uuid.uuid4().hex[:8]
    topic = f"cluster-clients-{suffix}"
    group = f"cluster-group-{suffix}"
    problems = Problems()
    create_spread_topic(bootstrap, brokers, topic, problems)
    members = start_group(bootstrap, topic, group)
    try:
        owners = settle(members, topic, problems)
        if owners is None:
            problems.exit()
        acked = produce(bootstrap, topic, problems)
        read_back(bootstrap, topic, acked, problems)
        group_reads(members, topic, owners, acked, problems)
    finally:
        for c, _ in members:
            try:
                c.close()
            except KafkaException as e:
                problems.add(f"close: {e}")
    check_commits(bootstrap, topic, group, acked, problems)
    problems.exit()


if __name__ == "__main__":
    main()
