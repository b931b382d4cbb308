"""One confluent-kafka group member, started by groups_coordinator.py (see groups_common.py
for its configuration and output). It subscribes with the configured assignor (range,
roundrobin or cooperative-sticky) and optional group.instance.id, reports every rebalance
callback, and commits each poll's records synchronously before the next poll."""

from confluent_kafka import Consumer, KafkaException, TopicPartition

import groups_common as gc


def main():
    cfg = gc.config()
    settings = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg["name"],
        "session.timeout.ms": cfg["session_timeout_ms"],
        "heartbeat.interval.ms": cfg["heartbeat_interval_ms"],
        "partition.assignment.strategy": cfg.get("assignor") or "range",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if cfg.get("instance_id"):
        settings["group.instance.id"] = cfg["instance_id"]
    c = Consumer(settings)
    owned = gc.Owned()
    topic = cfg["topic"]

    def on_assign(consumer, parts):
        owned.assign(p.partition for p in parts)

    def on_revoke(consumer, parts):
        owned.revoke(p.partition for p in parts)

    def on_lost(consumer, parts):
        owned.revoke((p.partition for p in parts), ev="lost")

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    stop = gc.stop_event()
    while not stop.is_set():
        msgs = c.consume(num_messages=gc.POLL_RECORDS_MAX, timeout=gc.POLL_TIMEOUT_MS / 1000)
        recs = []
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            recs.append([m.partition(), m.offset(), gc.decode(m.value())])
        if not recs:
            continue
        offsets = gc.report_records(recs)
        try:
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                     asynchronous=False)
            gc.emit("committed", offsets=offsets)
        except KafkaException as e:
            gc.emit("commit_failed", error=str(e))
    c.close()
    gc.emit("closed")


if __name__ == "__main__":
    main()
