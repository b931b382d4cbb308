"""kafka-python's default (idempotent) producer across a broker crash: every acknowledged
record is stored exactly once, in send order, with no gap and no duplicate.

The broker is killed with SIGKILL and restarted (same data directory and port) by whoever
started this script, through a file handshake in SAMSA_RESTART_DIR:
  1. the script produces the first third of the records and waits for their acks;
  2. it creates `restart-requested` and keeps sending records, ten every few milliseconds, so
     batches are in flight when the broker dies; the producer's retries (default settings:
     acks=all, idempotent, 5 in-flight requests, unbounded retries within a 120 s delivery
     timeout) carry them over the restart;
  3. once `restarted` exists, it sends the last third, flushes, and collects every ack;
  4. a group-less consumer reads every partition from offset 0 and the script compares.

A failed send fails the run: the restart takes seconds, far less than the delivery timeout.

Environment: SAMSA_BOOTSTRAP (host:port), SAMSA_RESTART_DIR (the handshake directory),
SAMSA_INTEROP_RECORDS (records in steps 1 and 3 together, default 3000).
Exits 0 when everything matched, 1 otherwise.
"""

import os
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

import interop_common as ic

REQUEST_FILE = "restart-requested"
DONE_FILE = "restarted"
# Step 2: at most this many records, SEND_BURST_RECORDS per SEND_INTERVAL_S, while waiting
# for the restart; after that the script waits without sending, up to RESTART_WAIT_S in all.
IN_FLIGHT_RECORDS_MAX = 20_000
SEND_INTERVAL_S = 0.002
SEND_BURST_RECORDS = 10
RESTART_WAIT_S = 120
# Bound on waiting for every ack: the producer's own delivery timeout (120 s) plus margin.
ACK_WAIT_S = 180


def main():
    bootstrap = ic.bootstrap()
    restart_dir = os.environ.get("SAMSA_RESTART_DIR")
    if not restart_dir:
        print("SAMSA_RESTART_DIR is not set (the restart handshake directory)", file=sys.stderr)
        sys.exit(2)
    n = int(os.environ.get("SAMSA_INTEROP_RECORDS", "3000"))
    suffix = ic.unique_suffix()
    topic = f"kafka-python-idempotent-{suffix}"
    summary = ic.Summary(f"kafka-python {kafka.__version__} idempotent producer across a restart")

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=ic.PARTITIONS, replication_factor=1)],
                        timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
    admin.close()

    records = ic.make_records("idem", n + IN_FLIGHT_RECORDS_MAX)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    if not producer.config["enable_idempotence"]:
        print("kafka-python's default producer should be idempotent", file=sys.stderr)
        sys.exit(1)
    futures = []
    sent = 0

    def send_next():
        nonlocal sent
        r = records[sent]
        futures.append((r.i, producer.send(topic, key=r.key, value=r.value, headers=r.headers,
                                           timestamp_ms=r.timestamp_ms)))
        sent += 1

    first = n // 3
    while sent < first:
        send_next()
    producer.flush(timeout=ic.OPERATION_TIMEOUT_S)
    step1 = ic.Failures()
    for i, f in futures:
        try:
            f.get(timeout=ic.OPERATION_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - reported below
            step1.add(i, e)
    if step1.by_message:
        print("step 1 (before any restart) failed:", file=sys.stderr)
        for line in step1.lines():
            print(f"    {line}", file=sys.stderr)
        producer.close(timeout=0)
        sys.exit(1)
    print(f"step 1: {sent} records acknowledged; asking for a restart", flush=True)

    with open(os.path.join(restart_dir, REQUEST_FILE), "w") as f:
        f.write(f"{sent}\n")
    done_path = os.path.join(restart_dir, DONE_FILE)
    deadline = time.monotonic() + RESTART_WAIT_S
    in_flight_start = sent
    while not os.path.exists(done_path):
        if time.monotonic() > deadline:
            print(f"no restart within {RESTART_WAIT_S}s ({done_path} never appeared)",
                  file=sys.stderr)
            sys.exit(1)
        for _ in range(SEND_BURST_RECORDS):
            if sent - in_flight_start < IN_FLIGHT_RECORDS_MAX:
                send_next()
        time.sleep(SEND_INTERVAL_S)
    print(f"step 2: {sent - in_flight_start} records sent while the broker was restarted",
          flush=True)

    last = n - first
    for _ in range(last):
        send_next()
    producer.flush(timeout=ACK_WAIT_S)
    acks = {}
    failures = ic.Failures()
    for i, f in futures:
        try:
            md = f.get(timeout=ACK_WAIT_S)
            acks[i] = (md.partition, md.offset)
        except Exception as e:  # noqa: BLE001 - a failed send is reported below
            failures.add(i, e)
    producer.close(timeout=ic.OPERATION_TIMEOUT_S)
    print(f"step 3: {sent} records sent, {len(acks)} acknowledged", flush=True)

    def check(result):
        for line in failures.lines():
            result.fail(f"send failed: {line}")
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                 enable_auto_commit=False, auto_offset_reset="none")
        try:
            tps = [TopicPartition(topic, p) for p in range(ic.PARTITIONS)]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            end = consumer.end_offsets(tps)
            end_offsets = {tp.partition: end[tp] for tp in tps}
            read = {p: [] for p in range(ic.PARTITIONS)}
            pending = {p for p, e in end_offsets.items() if e > 0}
            deadline = time.monotonic() + ic.READ_TIMEOUT_S
            while pending and time.monotonic() < deadline:
                for tp, msgs in consumer.poll(timeout_ms=1000).items():
                    for m in msgs:
                        read[tp.partition].append(ic.Read(tp.partition, m.offset, m.key,
                                                          m.value, m.headers, m.timestamp))
                        if m.offset + 1 >= end_offsets[tp.partition]:
                            pending.discard(tp.partition)
            if pending:
                result.fail(f"partitions {sorted(pending)} not read to their end offsets "
                            f"{end_offsets} within {ic.READ_TIMEOUT_S}s")
        finally:
            consumer.close()
        # Duplicates and gaps, named by record index, before the field-by-field comparison:
        # "record 1234 stored twice" says more than a shifted offset does.
        for p, got in read.items():
            seen = {}
            for g in got:
                seq = dict(g.headers).get("seq")
                if seq is not None:
                    seen.setdefault(int(seq), []).append(g.offset)
            dups = {i: offs for i, offs in seen.items() if len(offs) > 1}
            for i, offs in sorted(dups.items())[: ic.MISMATCHES_SHOWN_MAX]:
                result.fail(f"partition {p}: record {i} stored {len(offs)} times, at {offs}")
            expected = sorted(i for i, (q, _) in acks.items() if q == p)
            missing = [i for i in expected if i not in seen]
            if missing:
                result.fail(f"partition {p}: {len(missing)} acknowledged records missing, "
                            f"first {missing[:10]}")
        ic.verify(result, records[:sent], acks, read, end_offsets)

    summary.codec("none", check)
    summary.exit()


if __name__ == "__main__":
    main()
