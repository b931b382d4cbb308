"""kafka-python (pure Python) against a running samsa broker.

Per codec (none, gzip built in; snappy through python-snappy, lz4 through lz4, zstd through
zstandard): creates a 3-partition topic through KafkaAdminClient, produces keyed records with
headers and explicit timestamps with the producer's DEFAULT settings (kafka-python 3.0 is
idempotent by default: acks=all and an InitProducerId before the first batch; the script
does not turn that off, so a broker without InitProducerId fails it), then reads every
partition back with a group-less consumer (assign + seek to offset 0, no commits) and
compares everything with the acknowledgements. Also: end offsets, offsets_for_times,
list_topics and delete_topics.

Environment: SAMSA_BOOTSTRAP (host:port), SAMSA_INTEROP_RECORDS (records per codec).
Exits 0 when everything matched, 1 otherwise.
"""

import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions,
                         NewTopic)

import interop_common as ic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce(bootstrap, topic, codec, records):
    config = {"bootstrap_servers": bootstrap}
    if codec != "none":
        config["compression_type"] = codec
    producer = KafkaProducer(**config)
    assert producer.config["enable_idempotence"], "kafka-python's default should be idempotent"
    acks = {}
    failures = ic.Failures()
    try:
        futures = [(r.i, producer.send(topic, key=r.key, value=r.value, headers=r.headers,
                                       timestamp_ms=r.timestamp_ms)) for r in records]
        producer.flush(timeout=ic.OPERATION_TIMEOUT_S)
        for i, f in futures:
            try:
                md = f.get(timeout=ic.OPERATION_TIMEOUT_S)
                acks[i] = (md.partition, md.offset)
            except Exception as e:  # noqa: BLE001 - a failed send is a mismatch to report
                failures.add(i, e)
    finally:
        producer.close(timeout=ic.OPERATION_TIMEOUT_S)
    return acks, failures.lines()


def read_back(consumer, topic):
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
                ic.take_read(read, pending, end_offsets, tp.partition, m)
    if pending:
        raise TimeoutError(f"partitions {sorted(pending)} not read to their end offsets "
                           f"{end_offsets} within {ic.READ_TIMEOUT_S}s")
    return read, end_offsets


def round_trip(bootstrap, admin, codec, suffix, result):
    topic = f"kafka-python-{codec}-{suffix}"
    admin.create_topics([NewTopic(topic, num_partitions=ic.PARTITIONS, replication_factor=1)],
                        timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
    records = ic.make_records(codec, ic.record_count())
    acks, errors = produce(bootstrap, topic, codec, records)
    for e in errors:
        result.fail(f"send: {e}")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none")
    try:
        read, end_offsets = read_back(consumer, topic)
        ic.verify(result, records, acks, read, end_offsets)
        probes = records[:: max(1, len(records) // 7)]
        for r in probes:
            if r.i not in acks:
                continue
            p, o = acks[r.i]
            tp = TopicPartition(topic, p)
            found = consumer.offsets_for_times({tp: r.timestamp_ms})[tp]
            if found is None or found.offset != o:
                result.fail(f"offsets_for_times(partition {p}, {r.timestamp_ms}) = {found}, "
                            f"record {r.i} is at offset {o}")
    finally:
        consumer.close()
    return topic


def main():
    bootstrap = ic.bootstrap()
    suffix = ic.unique_suffix()
    summary = ic.Summary(f"kafka-python {kafka.__version__}")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topics = []
    for codec in CODECS:
        summary.codec(codec, lambda result, codec=codec:
                      topics.append(round_trip(bootstrap, admin, codec, suffix, result)))

    def metadata():
        listed = set(admin.list_topics())
        missing = [t for t in topics if t not in listed]
        assert not missing, f"missing from list_topics: {missing}"
        return f"{len(listed)} topics"

    def delete():
        if not topics:
            return "nothing to delete"
        admin.delete_topics(topics, timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
        left = [t for t in topics if t in set(admin.list_topics())]
        assert not left, f"still listed after delete_topics: {left}"
        return f"deleted {len(topics)} topics"

    def configs():
        assert topics, "no topic was created"
        t = topics[0]

        def describe():
            return admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)],
                                          config_filter="all")["topic"][t]
        entries = describe()
        missing = [k for k in ic.CONFIG_KEYS_EXPECTED if k not in entries]
        assert not missing, f"describe_configs({t}) lacks {missing}"
        altered = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                                      configs={"retention.ms": ic.RETENTION_MS_SET})])
        assert altered == {"topic": {t: "OK"}}, f"alter_configs answered {altered}"
        value = describe()["retention.ms"]["value"]
        assert value == ic.RETENTION_MS_SET, f"retention.ms is {value} after the alter"
        grown = admin.create_partitions({t: NewPartitions(ic.PARTITIONS_GROWN)})
        errors = [r.error_code for r in grown.results]
        assert errors == [0], f"create_partitions answered {grown}"
        n = len(admin.describe_topics([t])[0]["partitions"])
        assert n == ic.PARTITIONS_GROWN, f"{n} partitions after create_partitions"
        return f"{len(entries)} config entries"

    summary.check("list_topics", metadata)
    if ic.config_apis_enabled():
        summary.check("configs+partitions", configs)
    else:
        summary.not_run("configs+partitions", "set SAMSA_INTEROP_CONFIG_APIS=1")
    summary.check("delete_topics", delete)
    admin.close()
    summary.exit()


if __name__ == "__main__":
    main()
