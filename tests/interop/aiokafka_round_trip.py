"""aiokafka (asyncio, pure Python; every codec through cramjam) against a running samsa broker.

Per codec (none, gzip, snappy, lz4, zstd): creates a 3-partition topic through
AIOKafkaAdminClient, produces keyed records with headers and explicit timestamps with
acks=all (aiokafka's default producer is not idempotent), then reads every partition back
with a group-less consumer (assign + seek to offset 0, no commits) and compares everything
with the acknowledgements. Also: end offsets, offsets_for_times, list_topics, delete_topics.

Environment: SAMSA_BOOTSTRAP (host:port), SAMSA_INTEROP_RECORDS (records per codec).
Exits 0 when everything matched, 1 otherwise.
"""

import asyncio
import time

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

import interop_common as ic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


async def produce(bootstrap, topic, codec, records):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                compression_type=None if codec == "none" else codec,
                                request_timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
    await producer.start()
    acks = {}
    failures = ic.Failures()
    try:
        futures = []
        for r in records:
            futures.append((r.i, await producer.send(topic, key=r.key, value=r.value,
                                                     headers=r.headers,
                                                     timestamp_ms=r.timestamp_ms)))
        # One bounded wait for all acks (a wait_for per future costs a loop iteration each).
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(f for _, f in futures), return_exceptions=True),
            ic.OPERATION_TIMEOUT_S)
        for (i, _), md in zip(futures, outcomes):
            if isinstance(md, BaseException):
                failures.add(i, md)
            else:
                acks[i] = (md.partition, md.offset)
    finally:
        await producer.stop()
    return acks, failures.lines()


async def read_back(consumer, topic):
    tps = [TopicPartition(topic, p) for p in range(ic.PARTITIONS)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    end = await consumer.end_offsets(tps)
    end_offsets = {tp.partition: end[tp] for tp in tps}
    read = {p: [] for p in range(ic.PARTITIONS)}
    pending = {p for p, e in end_offsets.items() if e > 0}
    deadline = time.monotonic() + ic.READ_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=1000)
        for tp, msgs in batches.items():
            for m in msgs:
                ic.take_read(read, pending, end_offsets, tp.partition, m)
    if pending:
        raise TimeoutError(f"partitions {sorted(pending)} not read to their end offsets "
                           f"{end_offsets} within {ic.READ_TIMEOUT_S}s")
    return read, end_offsets


async def round_trip(bootstrap, admin, codec, suffix, result):
    topic = f"aiokafka-{codec}-{suffix}"
    await admin.create_topics([NewTopic(topic, num_partitions=ic.PARTITIONS,
                                        replication_factor=1)],
                              timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
    records = ic.make_records(codec, ic.record_count())
    acks, errors = await produce(bootstrap, topic, codec, records)
    for e in errors:
        result.fail(f"send: {e}")
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="none")
    await consumer.start()
    try:
        read, end_offsets = await read_back(consumer, topic)
        ic.verify(result, records, acks, read, end_offsets)
        probes = records[:: max(1, len(records) // 7)]
        for r in probes:
            if r.i not in acks:
                continue
            p, o = acks[r.i]
            tp = TopicPartition(topic, p)
            found = (await consumer.offsets_for_times({tp: r.timestamp_ms}))[tp]
            if found is None or found.offset != o:
                result.fail(f"offsets_for_times(partition {p}, {r.timestamp_ms}) = {found}, "
                            f"record {r.i} is at offset {o}")
    finally:
        await consumer.stop()
    return topic


async def main():
    bootstrap = ic.bootstrap()
    suffix = ic.unique_suffix()
    summary = ic.Summary(f"aiokafka {aiokafka.__version__}")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap,
                                request_timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
    await admin.start()
    topics = []

    for codec in CODECS:
        async def one(result, codec=codec):
            topics.append(await round_trip(bootstrap, admin, codec, suffix, result))
        await summary.codec_async(codec, one)

    async def metadata():
        listed = set(await admin.list_topics())
        missing = [t for t in topics if t not in listed]
        assert not missing, f"missing from list_topics: {missing}"
        return f"{len(listed)} topics"

    async def delete():
        if not topics:
            return "nothing to delete"
        await admin.delete_topics(topics, timeout_ms=ic.OPERATION_TIMEOUT_S * 1000)
        listed = set(await admin.list_topics())
        left = [t for t in topics if t in listed]
        assert not left, f"still listed after delete_topics: {left}"
        return f"deleted {len(topics)} topics"

    async def configs():
        assert topics, "no topic was created"
        t = topics[0]
        res = ConfigResource(ConfigResourceType.TOPIC, t)

        async def describe():
            # Each answer's resources are (error_code, error_message, type, name, entries),
            # each entry (name, value, ...).
            answer = (await admin.describe_configs([res]))[0].resources[0]
            assert answer[0] == 0, f"describe_configs({t}) answered {answer[:2]}"
            return {e[0]: e[1] for e in answer[4]}
        entries = await describe()
        missing = [k for k in ic.CONFIG_KEYS_EXPECTED if k not in entries]
        assert not missing, f"describe_configs({t}) lacks {missing}"
        altered = await admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, t, configs={"retention.ms": ic.RETENTION_MS_SET})])
        errors = [r[0] for a in altered for r in a.resources]
        assert errors == [0], f"alter_configs answered {altered}"
        value = (await describe())["retention.ms"]
        assert value == ic.RETENTION_MS_SET, f"retention.ms is {value} after the alter"
        grown = await admin.create_partitions({t: NewPartitions(ic.PARTITIONS_GROWN)})
        errors = [e[1] for e in grown.topic_errors]
        assert errors == [0], f"create_partitions answered {grown}"
        described = await admin.describe_topics([t])
        n = len(described[0]["partitions"])
        assert n == ic.PARTITIONS_GROWN, f"{n} partitions after create_partitions"
        return f"{len(entries)} config entries"

    await summary.check_async("list_topics", metadata)
    if ic.config_apis_enabled():
        await summary.check_async("configs+partitions", configs)
    else:
        summary.not_run("configs+partitions", "set SAMSA_INTEROP_CONFIG_APIS=1")
    await summary.check_async("delete_topics", delete)
    await admin.close()
    return summary


if __name__ == "__main__":
    asyncio.run(main()).exit()
