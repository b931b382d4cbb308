"""confluent-kafka (Python, bundling librdkafka) against a running samsa broker.

Per codec (none, gzip, snappy, lz4, zstd): creates a 3-partition topic through the
AdminClient, produces keyed records with headers and explicit timestamps with acks=all,
then reads every partition back with a consumer that has a throwaway group.id but never
joins or commits (assign with explicit offsets), and compares everything with the delivery
reports. Also: metadata through list_topics, offsets_for_times, delete_topics.

Environment: SAMSA_BOOTSTRAP (host:port), SAMSA_INTEROP_RECORDS (records per codec).
Exits 0 when everything matched, 1 otherwise.
"""

import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic)

import interop_common as ic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(admin, topic):
    futures = admin.create_topics([NewTopic(topic, num_partitions=ic.PARTITIONS,
                                            replication_factor=1)],
                                  operation_timeout=ic.OPERATION_TIMEOUT_S)
    futures[topic].result(timeout=ic.OPERATION_TIMEOUT_S)


def produce(bootstrap, topic, codec, records):
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 5,
    })
    acks = {}
    errors = []

    def report(i):
        def on_delivery(err, msg):
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                acks[i] = (msg.partition(), msg.offset())
        return on_delivery

    for r in records:
        while True:
            try:
                producer.produce(topic, key=r.key, value=r.value, headers=r.headers,
                                 timestamp=r.timestamp_ms, on_delivery=report(r.i))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(ic.OPERATION_TIMEOUT_S)
    if left:
        errors.append(f"{left} records still unacknowledged after {ic.OPERATION_TIMEOUT_S}s")
    return acks, errors


def consumer(bootstrap, suffix):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"throwaway-{suffix}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })


def read_back(c, topic, end_offsets):
    c.assign([TopicPartition(topic, p, 0) for p in range(ic.PARTITIONS)])
    read = {p: [] for p in range(ic.PARTITIONS)}
    pending = {p for p in range(ic.PARTITIONS) if end_offsets[p] > 0}
    deadline = time.monotonic() + ic.READ_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(msg.error())
        p = msg.partition()
        ts_type, ts = msg.timestamp()
        if ts_type != confluent_kafka.TIMESTAMP_CREATE_TIME:
            raise AssertionError(f"partition {p} offset {msg.offset()}: timestamp type {ts_type}")
        read[p].append(ic.Read(p, msg.offset(), msg.key(), msg.value(), msg.headers(), ts))
        if msg.offset() + 1 >= end_offsets[p]:
            pending.discard(p)
    if pending:
        raise TimeoutError(f"partitions {sorted(pending)} not read to their end offsets "
                           f"{end_offsets} within {ic.READ_TIMEOUT_S}s")
    return read


def round_trip(bootstrap, admin, codec, suffix, result):
    topic = f"confluent-{codec}-{suffix}"
    create_topic(admin, topic)
    records = ic.make_records(codec, ic.record_count())
    acks, errors = produce(bootstrap, topic, codec, records)
    for e in errors:
        result.fail(f"delivery: {e}")
    c = consumer(bootstrap, f"{codec}-{suffix}")
    try:
        end_offsets = {}
        for p in range(ic.PARTITIONS):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p),
                                                timeout=ic.OPERATION_TIMEOUT_S)
            if low != 0:
                result.fail(f"partition {p}: log start offset {low}, expected 0")
            end_offsets[p] = high
        read = read_back(c, topic, end_offsets)
        ic.verify(result, records, acks, read, end_offsets)
        # ListOffsets by timestamp: the first record at or after each record's timestamp is
        # that record, since every record has its own timestamp.
        probes = records[:: max(1, len(records) // 7)]
        for r in probes:
            if r.i not in acks:
                continue
            p, o = acks[r.i]
            found = c.offsets_for_times([TopicPartition(topic, p, r.timestamp_ms)],
                                        timeout=ic.OPERATION_TIMEOUT_S)
            if found[0].offset != o:
                result.fail(f"offsets_for_times(partition {p}, {r.timestamp_ms}) = "
                            f"{found[0].offset}, record {r.i} is at offset {o}")
    finally:
        c.close()
    return topic


def main():
    bootstrap = ic.bootstrap()
    suffix = ic.unique_suffix()
    summary = ic.Summary(f"confluent-kafka {confluent_kafka.__version__} "
                         f"(librdkafka {confluent_kafka.libversion()[0]})")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = []
    for codec in CODECS:
        summary.codec(codec, lambda result, codec=codec:
                      topics.append(round_trip(bootstrap, admin, codec, suffix, result)))

    def metadata():
        md = admin.list_topics(timeout=ic.OPERATION_TIMEOUT_S)
        for t in topics:
            assert t in md.topics, f"{t} missing from metadata"
            assert len(md.topics[t].partitions) == ic.PARTITIONS, \
                f"{t}: {len(md.topics[t].partitions)} partitions"
        return f"{len(md.topics)} topics, {len(md.brokers)} broker(s)"

    def delete():
        if not topics:
            return "nothing to delete"
        futures = admin.delete_topics(topics, operation_timeout=ic.OPERATION_TIMEOUT_S)
        for t, f in futures.items():
            f.result(timeout=ic.OPERATION_TIMEOUT_S)
        md = admin.list_topics(timeout=ic.OPERATION_TIMEOUT_S)
        left = [t for t in topics if t in md.topics]
        assert not left, f"still in metadata after delete_topics: {left}"
        return f"deleted {len(topics)} topics"

    def configs():
        assert topics, "no topic was created"
        t = topics[0]
        res = ConfigResource("topic", t)
        entries = admin.describe_configs([res])[res].result(timeout=ic.OPERATION_TIMEOUT_S)
        missing = [k for k in ic.CONFIG_KEYS_EXPECTED if k not in entries]
        assert not missing, f"describe_configs({t}) lacks {missing}"
        alter = ConfigResource("topic", t, incremental_configs=[
            ConfigEntry("retention.ms", ic.RETENTION_MS_SET,
                        incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([alter]).values():
            f.result(timeout=ic.OPERATION_TIMEOUT_S)
        value = admin.describe_configs([res])[res].result(
            timeout=ic.OPERATION_TIMEOUT_S)["retention.ms"].value
        assert value == ic.RETENTION_MS_SET, f"retention.ms is {value} after the alter"
        admin.create_partitions([NewPartitions(t, ic.PARTITIONS_GROWN)])[t].result(
            timeout=ic.OPERATION_TIMEOUT_S)
        n = len(admin.list_topics(topic=t, timeout=ic.OPERATION_TIMEOUT_S).topics[t].partitions)
        assert n == ic.PARTITIONS_GROWN, f"{n} partitions after create_partitions"
        return f"{len(entries)} config entries"

    summary.check("list_topics", metadata)
    if ic.config_apis_enabled():
        summary.check("configs+partitions", configs)
    else:
        summary.not_run("configs+partitions", "set SAMSA_INTEROP_CONFIG_APIS=1")
    summary.check("delete_topics", delete)
    summary.exit()


if __name__ == "__main__":
    main()
