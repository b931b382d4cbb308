//! A broker killed with SIGKILL in the middle of a produce run loses nothing it acknowledged
//! (and, for comparison, one stopped with SIGTERM loses nothing at all):
//! a librdkafka producer (acks=all) writes numbered records, the broker is killed after some
//! thousands are acknowledged, restarted on the same data directory and port, the producer
//! goes on a little, and then every acknowledged record must be read back at the offset its
//! delivery report gave, in production order.
//!
//! A process kill keeps the OS page cache, so this checks the broker's own recovery (log
//! tails, indexes, checkpoints, topic metadata), not the disk's; power loss is the
//! simulation's job.
//!
//! The broker binary cannot run in a simulation build, so this test exists only without the
//! `sim` feature.
#![cfg(not(feature = "sim"))]

#[path = "../support/broker_process.rs"]
mod broker_process;
#[path = "../support/rdkafka_support.rs"]
mod rdkafka_support;

use broker_process::BrokerProcess;
use rdkafka::consumer::Consumer;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka_support::*;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Records produced in all.
const RECORDS: usize = 8_000;
/// The broker is killed once this many records are acknowledged.
const KILL_AFTER_ACKED: usize = 3_000;
/// Records enqueued but not yet awaited: what can be in flight when the kill lands.
const WINDOW: usize = 1_000;
const PARTITIONS: i32 = 3;
/// Records enqueued just before the kill.
const KILL_BURST: usize = 500;

/// One record in flight: what was sent and the future of its delivery report.
struct Pending {
    sent: Sent,
    delivery: DeliveryFuture,
    /// The report, once polled out of `delivery` (a completed future yields it only once).
    done: Option<OwnedDeliveryResult>,
}

/// How many of the pending deliveries have not completed yet (each polled once, without
/// waiting).
fn unconfirmed(pending: &mut VecDeque<Pending>) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut count = 0;
    for p in pending.iter_mut().filter(|p| p.done.is_none()) {
        match Pin::new(&mut p.delivery).poll(&mut cx) {
            Poll::Pending => count += 1,
            Poll::Ready(r) => p.done = Some(r.expect("the producer outlives its futures")),
        }
    }
    count
}

fn enqueue(producer: &FutureProducer, topic: &str, sent: &Sent) -> DeliveryFuture {
    let mut headers = OwnedHeaders::new();
    for (k, v) in &sent.headers {
        headers = headers.insert(Header {
            key: k.as_str(),
            value: v.as_deref(),
        });
    }
    let mut rec = FutureRecord::<[u8], [u8]>::to(topic)
        .key(&sent.key[..])
        .timestamp(sent.timestamp_ms)
        .headers(headers);
    if let Some(p) = &sent.payload {
        rec = rec.payload(&p[..]);
    }
    producer
        .send_result(rec)
        .map_err(|(e, _)| e)
        .unwrap_or_else(|e| panic!("enqueue record {}: {e}", sent.index))
}

#[tokio::test]
async fn acknowledged_records_survive_sigkill_and_restart() {
    let mut broker = BrokerProcess::start();
    let bootstrap = broker.bootstrap();
    let topic = "sigkill";
    create_topic(&bootstrap, topic, PARTITIONS).await;

    // One request in flight per connection keeps the order of the acknowledged records
    // without idempotence; the long timeouts let librdkafka retry across the restart.
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("max.in.flight.requests.per.connection", "1")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .set("retry.backoff.ms", "100")
        .set("reconnect.backoff.ms", "100")
        .set("reconnect.backoff.max.ms", "1000")
        .create()
        .expect("create the producer");

    let base_ts = now_ms() - 60_000;
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut acked: Vec<Acked> = Vec::new();
    let mut failed: Vec<(usize, String)> = Vec::new();
    let mut in_flight_at_kill = None;
    let mut next = 0usize;
    while next < RECORDS || !pending.is_empty() {
        while next < RECORDS && pending.len() < WINDOW {
            let sent = record("sigkill", next, base_ts);
            let delivery = enqueue(&producer, topic, &sent);
            pending.push_back(Pending {
                sent,
                delivery,
                done: None,
            });
            next += 1;
        }
        let Some(p) = pending.pop_front() else { break };
        let report = match p.done {
            Some(r) => r,
            None => p.delivery.await.expect("the producer outlives its futures"),
        };
        match report {
            Ok(d) => acked.push(Acked {
                sent: p.sent,
                partition: d.partition,
                offset: d.offset,
            }),
            Err((e, _)) => failed.push((p.sent.index, e.to_string())),
        }
        if in_flight_at_kill.is_none() && acked.len() >= KILL_AFTER_ACKED {
            // A fresh burst right before the kill: with linger.ms it cannot all be
            // acknowledged yet, so the kill lands with records on the wire or in the broker.
            for _ in 0..KILL_BURST {
                if next < RECORDS {
                    let sent = record("sigkill", next, base_ts);
                    let delivery = enqueue(&producer, topic, &sent);
                    pending.push_back(Pending {
                        sent,
                        delivery,
                        done: None,
                    });
                    next += 1;
                }
            }
            broker.kill9();
            in_flight_at_kill = Some(unconfirmed(&mut pending));
            broker.restart();
        }
    }
    eprintln!(
        "sigkill: {} acknowledged, {} failed, {:?} unconfirmed at the kill",
        acked.len(),
        failed.len(),
        in_flight_at_kill
    );
    let Some(unconfirmed_at_kill) = in_flight_at_kill else {
        panic!("the broker was never killed");
    };
    assert!(
        unconfirmed_at_kill > 0,
        "every record was confirmed before the kill: the kill did not land mid-run"
    );
    assert!(
        acked.len() > KILL_AFTER_ACKED,
        "nothing was acknowledged after the restart; failures: {:?}",
        &failed[..failed.len().min(5)]
    );

    let consumer = consumer(&bootstrap, "throwaway-sigkill");
    let mut ranges = BTreeMap::new();
    for p in 0..PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_millis(CLIENT_TIMEOUT_MS))
            .unwrap_or_else(|e| panic!("watermarks of partition {p} after the restart: {e}"));
        assert_eq!(low, 0, "partition {p}: log start offset");
        ranges.insert(p, (low, high));
    }
    for a in &acked {
        let (_, high) = ranges[&a.partition];
        assert!(
            a.offset < high,
            "record {} acknowledged at partition {} offset {} is above the high watermark {high} after the restart",
            a.sent.index,
            a.partition,
            a.offset
        );
    }
    let read = consume_ranges(&consumer, topic, &ranges);
    // Records written but not acknowledged (in flight at the kill, or retried after a lost
    // response without idempotence) may also be in the log: only the acknowledged are checked.
    assert_matches(topic, &acked, &read, true);
    broker.stop();
}

/// The graceful path for comparison: SIGTERM exits with status 0, and after a restart on the
/// same data directory every record is still there, at the same offsets, and the log end is
/// where it was (nothing lost, nothing duplicated by recovery).
#[tokio::test]
async fn records_survive_sigterm_and_restart() {
    let mut broker = BrokerProcess::start();
    let bootstrap = broker.bootstrap();
    let topic = "sigterm";
    create_topic(&bootstrap, topic, PARTITIONS).await;
    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..2_000).map(|i| record("sigterm", i, base_ts)).collect();
    let acked = produce_all(&producer(&bootstrap, "snappy"), topic, &records).await;
    let before = acked_ranges(&acked);

    let status = broker.stop();
    assert!(
        status.success(),
        "SIGTERM should exit cleanly, got {status}"
    );
    broker.restart();

    let consumer = consumer(&bootstrap, "throwaway-sigterm");
    for (&p, &(_, end)) in &before {
        let watermarks = consumer
            .fetch_watermarks(topic, p, Duration::from_millis(CLIENT_TIMEOUT_MS))
            .unwrap_or_else(|e| panic!("watermarks of partition {p} after the restart: {e}"));
        assert_eq!(watermarks, (0, end), "partition {p} after a clean restart");
    }
    let read = consume_ranges(&consumer, topic, &before);
    assert_matches(topic, &acked, &read, false);
    broker.stop();
}
