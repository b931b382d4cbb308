"""One kafka-python group member, started by groups_coordinator.py (see groups_common.py for
its configuration and output). It subscribes with the configured assignor (range,
roundrobin, sticky or cooperative-sticky) and optional group_instance_id, reports every
rebalance callback, and commits each poll's records synchronously before the next poll."""

import kafka
from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

import groups_common as gc

ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


class Listener(ConsumerRebalanceListener):
    def __init__(self, owned):
        self.owned = owned

    def on_partitions_revoked(self, revoked):
        self.owned.revoke(tp.partition for tp in revoked)

    def on_partitions_assigned(self, assigned):
        self.owned.assign(tp.partition for tp in assigned)

    def on_partitions_lost(self, lost):
        self.owned.revoke((tp.partition for tp in lost), ev="lost")


def main():
    cfg = gc.config()
    c = KafkaConsumer(**gc.kafka_python_style_settings(cfg, ASSIGNORS))
    owned = gc.Owned()
    topic = cfg["topic"]
    c.subscribe([topic], listener=Listener(owned))
    stop = gc.stop_event()
    while not stop.is_set():
        batches = c.poll(timeout_ms=gc.POLL_TIMEOUT_MS, max_records=gc.POLL_RECORDS_MAX)
        recs = gc.records_of(batches)
        if not recs:
            continue
        offsets = gc.report_records(recs)
        try:
            c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                      for p, o in offsets.items()})
            gc.emit("committed", offsets=offsets)
        except kafka.errors.KafkaError as e:
            gc.emit("commit_failed", error=f"{type(e).__name__}: {e}")
    c.close()
    gc.emit("closed")


if __name__ == "__main__":
    main()
