"""One aiokafka group member, started by groups_coordinator.py (see groups_common.py for its
configuration and output). It subscribes with the configured assignor (range or
roundrobin), reports every rebalance callback, and commits each poll's records
synchronously before the next poll."""

import asyncio

import aiokafka
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

import groups_common as gc

ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


class Listener(ConsumerRebalanceListener):
    def __init__(self, owned):
        self.owned = owned

    async def on_partitions_revoked(self, revoked):
        self.owned.revoke(tp.partition for tp in revoked)

    async def on_partitions_assigned(self, assigned):
        self.owned.assign(tp.partition for tp in assigned)


async def run():
    cfg = gc.config()
    c = AIOKafkaConsumer(**gc.kafka_python_style_settings(cfg, ASSIGNORS))
    owned = gc.Owned()
    topic = cfg["topic"]
    c.subscribe([topic], listener=Listener(owned))
    stop = gc.stop_event()
    await c.start()
    try:
        while not stop.is_set():
            batches = await c.getmany(timeout_ms=gc.POLL_TIMEOUT_MS,
                                      max_records=gc.POLL_RECORDS_MAX)
            recs = gc.records_of(batches)
            if not recs:
                continue
            offsets = gc.report_records(recs)
            try:
                await c.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
                gc.emit("committed", offsets=offsets)
            except aiokafka.errors.KafkaError as e:
                gc.emit("commit_failed", error=f"{type(e).__name__}: {e}")
    finally:
        await c.stop()
    gc.emit("closed")


if __name__ == "__main__":
    asyncio.run(run())
