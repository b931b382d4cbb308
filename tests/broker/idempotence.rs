//! The idempotent producer, broker side, over real TCP: InitProducerId, duplicate detection
//! over the last five batches, sequence gaps, fenced epochs, what survives a clean restart, a
//! damaged snapshot and a SIGKILL, expiration after `producer.id.expiration.ms`, and a
//! librdkafka producer with `enable.idempotence=true` across a broker kill.
//!
//! Requests are built by hand with Samsa's codec (`BatchBuilder::producer` sets the producer
//! id, epoch and base sequence), so each test controls every field, as a client retrying a
//! batch whose answer was lost would send it.

#![cfg(not(feature = "sim"))]
// Tests damage and remove files behind the broker's back with std::fs.
#![allow(clippy::disallowed_methods)]

#[path = "../support/broker_process.rs"]
mod broker_process;
#[path = "../support/kafka_wire.rs"]
mod kafka_wire;
#[path = "../support/rdkafka_support.rs"]
mod rdkafka_support;
#[path = "../support/test_broker.rs"]
mod test_broker;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use samsa::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use samsa::protocol::create_topics::{CreateTopicsRequest, CreateTopicsResponse};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use samsa::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use samsa::protocol::record_batch::BatchBuilder;
use samsa::protocol::types::{ProducerEpoch, ProducerId};

use broker_process::BrokerProcess;
use rdkafka_support::now_ms;
use test_broker::{topic, Conn, TestBroker};

const OK: i16 = 0;
const OUT_OF_ORDER: i16 = ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER.code();
const INVALID_EPOCH: i16 = ErrorCode::INVALID_PRODUCER_EPOCH.code();

/// A batch of `count` records from producer `pid` at `epoch`, first sequence `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, count: usize) -> Bytes {
    let mut builder = BatchBuilder::new(0).producer(pid, epoch, seq);
    for i in 0..count {
        let value = format!("pid {pid} epoch {epoch} seq {}", seq as usize + i);
        builder.push(now_ms(), Some(b"k"), Some(value.as_bytes()), &[]);
    }
    builder.build().freeze()
}

fn produce_request(topic: &str, records: Bytes) -> ProduceRequest {
    ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(records),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn init_request(transactional_id: Option<&str>) -> InitProducerIdRequest {
    InitProducerIdRequest {
        transactional_id: transactional_id.map(str::to_string),
        transaction_timeout_ms: 60_000,
        producer_id: ProducerId::NONE,
        producer_epoch: ProducerEpoch::NONE,
    }
}

/// (error code, base offset) of a produce to partition 0.
async fn produce(conn: &mut Conn, topic: &str, records: Bytes) -> (i16, i64) {
    let response: ProduceResponse = conn.call(9, &produce_request(topic, records)).await;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset.0)
}

/// A new idempotent producer id (epoch 0).
async fn init(conn: &mut Conn) -> i64 {
    let response: InitProducerIdResponse = conn.call(4, &init_request(None)).await;
    assert_eq!(response.error_code, OK, "InitProducerId");
    assert_eq!(response.producer_epoch, ProducerEpoch(0));
    assert!(response.producer_id.0 >= 0);
    response.producer_id.0
}

async fn log_end(broker: &TestBroker, topic: &str) -> i64 {
    let t = broker
        .broker
        .topics
        .find(false, topic, Default::default())
        .await
        .expect("topic exists");
    t.partition(0).expect("partition 0").log_end_offset()
}

async fn start_with_topic(dir: &std::path::Path, name: &str) -> (TestBroker, Conn) {
    let broker = TestBroker::start(dir, &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        test_broker::create(&mut conn, topic(name, 1, &[])).await,
        OK
    );
    (broker, conn)
}

#[tokio::test]
async fn retries_of_the_last_five_batches_get_their_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut conn) = start_with_topic(dir.path(), "dedup").await;
    let pid = init(&mut conn).await;
    // Six batches of two records: sequences 0,2,..,10 at offsets 0,2,..,10.
    for i in 0..6 {
        let (code, offset) = produce(&mut conn, "dedup", batch(pid, 0, i * 2, 2)).await;
        assert_eq!((code, offset), (OK, i64::from(i) * 2), "batch {i}");
    }
    assert_eq!(log_end(&broker, "dedup").await, 12);
    // Each of the last five, retried: NONE and the original offset, nothing appended.
    for i in 1..6 {
        let (code, offset) = produce(&mut conn, "dedup", batch(pid, 0, i * 2, 2)).await;
        assert_eq!((code, offset), (OK, i64::from(i) * 2), "retry of batch {i}");
    }
    assert_eq!(
        log_end(&broker, "dedup").await,
        12,
        "retries appended records"
    );
    // The sixth-oldest is no longer cached: Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER.
    let (code, _) = produce(&mut conn, "dedup", batch(pid, 0, 0, 2)).await;
    assert_eq!(code, OUT_OF_ORDER);
    // A retry with the right first sequence but another length is not a duplicate either.
    let (code, _) = produce(&mut conn, "dedup", batch(pid, 0, 10, 1)).await;
    assert_eq!(code, OUT_OF_ORDER);
    // The producer goes on where it was.
    let (code, offset) = produce(&mut conn, "dedup", batch(pid, 0, 12, 1)).await;
    assert_eq!((code, offset), (OK, 12));
    // Another producer's sequences are its own.
    let other = init(&mut conn).await;
    assert_ne!(other, pid);
    let (code, offset) = produce(&mut conn, "dedup", batch(other, 0, 0, 1)).await;
    assert_eq!((code, offset), (OK, 13));
    broker.stop().await;
}

#[tokio::test]
async fn a_pipelined_retry_is_answered_with_the_original_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut conn) = start_with_topic(dir.path(), "pipelined").await;
    let pid = init(&mut conn).await;
    // The original and its retry are on the wire together: the retry is checked while the
    // original may still wait for its sync, and must not be answered before it.
    let records = batch(pid, 0, 0, 3);
    let first = conn.request(9, &produce_request("pipelined", records.clone()));
    let second = conn.request(9, &produce_request("pipelined", records));
    conn.send_frame(&first).await;
    conn.send_frame(&second).await;
    for _ in 0..2 {
        let frame = conn.read_frame().await.expect("an answer");
        let (_, body) = kafka_wire::split_response(frame, 0, 9);
        let response: ProduceResponse =
            samsa::protocol::message::Message::decode_exact(body, 9).unwrap();
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset.0), (OK, 0));
    }
    assert_eq!(log_end(&broker, "pipelined").await, 3);
    broker.stop().await;
}

#[tokio::test]
async fn gaps_old_epochs_and_transactions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut conn) = start_with_topic(dir.path(), "checks").await;
    let pid = init(&mut conn).await;
    assert_eq!(
        produce(&mut conn, "checks", batch(pid, 0, 0, 2)).await,
        (OK, 0)
    );
    // A gap.
    let (code, _) = produce(&mut conn, "checks", batch(pid, 0, 3, 1)).await;
    assert_eq!(code, OUT_OF_ORDER);
    // A new epoch must start at 0 (the client's own epoch bump, KIP-360).
    let (code, _) = produce(&mut conn, "checks", batch(pid, 1, 2, 1)).await;
    assert_eq!(code, OUT_OF_ORDER);
    assert_eq!(
        produce(&mut conn, "checks", batch(pid, 1, 0, 1)).await,
        (OK, 2)
    );
    // The old epoch is fenced, retries of its batches included.
    let (code, _) = produce(&mut conn, "checks", batch(pid, 0, 2, 1)).await;
    assert_eq!(code, INVALID_EPOCH);
    let (code, _) = produce(&mut conn, "checks", batch(pid, 0, 0, 2)).await;
    assert_eq!(code, INVALID_EPOCH);
    // An unknown producer id is accepted at any sequence (Kafka 4; no UNKNOWN_PRODUCER_ID).
    assert_eq!(
        produce(&mut conn, "checks", batch(777, 0, 41, 1)).await,
        (OK, 3)
    );
    // Transactional batches are refused with an error clients do not retry.
    let mut txn = BatchBuilder::new(0).producer(pid, 1, 1).transactional(true);
    txn.push(now_ms(), None, Some(b"t"), &[]);
    let (code, _) = produce(&mut conn, "checks", txn.build().freeze()).await;
    assert_eq!(
        code,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code()
    );
    assert_eq!(log_end(&broker, "checks").await, 4);
    broker.stop().await;
}

#[tokio::test]
async fn init_producer_id_never_repeats_an_id_and_refuses_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut conn) = start_with_topic(dir.path(), "ids").await;
    let versions: ApiVersionsResponse = conn
        .call(
            3,
            &ApiVersionsRequest {
                client_software_name: "t".into(),
                client_software_version: "1".into(),
            },
        )
        .await;
    let advertised = versions.api_keys.iter().find(|k| k.api_key == 22);
    assert!(
        advertised.is_some_and(|k| k.min_version == 0 && k.max_version >= 4),
        "ApiVersions advertises InitProducerId: {advertised:?}"
    );
    let mut seen = Vec::new();
    for version in [0, 2, 3, 4, 5] {
        let response: InitProducerIdResponse = conn.call(version, &init_request(None)).await;
        assert_eq!(response.error_code, OK);
        seen.push(response.producer_id.0);
    }
    // v3+ with the current id and epoch (the KIP-360 form) gets a fresh id, as from Kafka.
    let bump = InitProducerIdRequest {
        producer_id: ProducerId(seen[0]),
        producer_epoch: ProducerEpoch(0),
        ..init_request(None)
    };
    let response: InitProducerIdResponse = conn.call(4, &bump).await;
    assert_eq!(response.error_code, OK);
    assert_eq!(response.producer_epoch, ProducerEpoch(0));
    seen.push(response.producer_id.0);
    let tx: InitProducerIdResponse = conn.call(4, &init_request(Some("tx-1"))).await;
    assert_eq!(
        tx.error_code,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code()
    );
    let empty: InitProducerIdResponse = conn.call(4, &init_request(Some(""))).await;
    assert_eq!(empty.error_code, ErrorCode::INVALID_REQUEST.code());
    broker.stop().await;
    // After a restart the ids go on above every id handed out before.
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    for _ in 0..3 {
        seen.push(init(&mut conn).await);
    }
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        seen.len(),
        "an id was handed out twice: {seen:?}"
    );
    assert!(seen[6..].iter().all(|id| *id > seen[5]), "{seen:?}");
    broker.stop().await;
}

/// The partition directory of `topic`-0 under the broker's data directory.
fn partition_dir(data: &std::path::Path, topic: &str) -> std::path::PathBuf {
    data.join(format!("{topic}-0"))
}

fn snapshots(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".snapshot"))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn producer_state_survives_a_clean_restart_and_a_damaged_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut conn) = start_with_topic(dir.path(), "restart").await;
    let pid = init(&mut conn).await;
    for i in 0..3 {
        assert_eq!(
            produce(&mut conn, "restart", batch(pid, 0, i * 4, 4)).await,
            (OK, i64::from(i) * 4)
        );
    }
    broker.stop().await;
    // A clean close leaves the snapshot at the log end.
    let pdir = partition_dir(dir.path(), "restart");
    assert_eq!(snapshots(&pdir), vec!["00000000000000000012.snapshot"]);

    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        produce(&mut conn, "restart", batch(pid, 0, 4, 4)).await,
        (OK, 4),
        "a retry after a clean restart is a duplicate"
    );
    let (code, _) = produce(&mut conn, "restart", batch(pid, 0, 13, 1)).await;
    assert_eq!(code, OUT_OF_ORDER, "the sequence is remembered");
    assert_eq!(log_end(&broker, "restart").await, 12);
    broker.stop().await;

    // Damage the snapshot: the state is rebuilt from the log, with a warning.
    let path = pdir.join("00000000000000000012.snapshot");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        produce(&mut conn, "restart", batch(pid, 0, 8, 4)).await,
        (OK, 8),
        "a retry after rebuilding from the log is a duplicate"
    );
    assert_eq!(
        produce(&mut conn, "restart", batch(pid, 0, 12, 1)).await,
        (OK, 12)
    );
    broker.stop().await;
}

#[tokio::test]
async fn snapshots_are_written_at_segment_rolls_and_reloaded_with_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    // Small segments: a roll every few batches.
    assert_eq!(
        test_broker::create(&mut conn, topic("rolls", 1, &[("segment.bytes", "1024")])).await,
        OK
    );
    let pid = init(&mut conn).await;
    for i in 0..40 {
        assert_eq!(
            produce(&mut conn, "rolls", batch(pid, 0, i * 2, 2)).await,
            (OK, i64::from(i) * 2)
        );
    }
    let pdir = partition_dir(dir.path(), "rolls");
    let names = snapshots(&pdir);
    assert!(names.len() > 3, "a snapshot per roll: {names:?}");
    // Remove the newest: the next open loads an older one and replays the segments after it.
    std::fs::remove_file(pdir.join(names.last().unwrap())).unwrap();
    drop(conn);
    broker.stop().await;
    std::fs::remove_file(pdir.join("00000000000000000080.snapshot")).unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    for i in 35..40 {
        assert_eq!(
            produce(&mut conn, "rolls", batch(pid, 0, i * 2, 2)).await,
            (OK, i64::from(i) * 2),
            "retry of batch {i}"
        );
    }
    assert_eq!(log_end(&broker, "rolls").await, 80);
    // The retention hook: snapshots below a new log start go, except the newest.
    let partition = broker
        .broker
        .topics
        .find(false, "rolls", Default::default())
        .await
        .unwrap()
        .partition(0)
        .unwrap();
    let before = snapshots(&pdir);
    let removed = partition
        .log()
        .remove_producer_snapshots_below(60)
        .await
        .unwrap();
    let after = snapshots(&pdir);
    assert!(removed > 0, "{before:?}");
    assert_eq!(after.len(), before.len() - removed);
    let offset = |n: &String| samsa::log::producer_snapshot::parse_snapshot_name(n).unwrap();
    let newest = before.last().unwrap().clone();
    let expected: Vec<String> = before
        .iter()
        .filter(|n| offset(n) >= 60 || **n == newest)
        .cloned()
        .collect();
    assert_eq!(after, expected, "before: {before:?}");
    // Everything below the newest snapshot is gone when the log start passes it: it stays.
    partition
        .log()
        .remove_producer_snapshots_below(i64::MAX)
        .await
        .unwrap();
    assert_eq!(snapshots(&pdir).len(), 1);
    broker.stop().await;
}

// ---- a broker process: SIGKILL and expiration ----

fn wire_create_topic(addr: std::net::SocketAddr, name: &str) {
    let mut s = kafka_wire::connect(addr);
    let response: CreateTopicsResponse = kafka_wire::call(
        &mut s,
        &CreateTopicsRequest {
            topics: vec![topic(name, 1, &[])],
            timeout_ms: 10_000,
            validate_only: false,
        },
        7,
        1,
    );
    assert_eq!(response.topics[0].error_code, OK);
}

fn wire_init(s: &mut std::net::TcpStream, cid: i32) -> i64 {
    let response: InitProducerIdResponse = kafka_wire::call(s, &init_request(None), 4, cid);
    assert_eq!(response.error_code, OK);
    response.producer_id.0
}

fn wire_produce(s: &mut std::net::TcpStream, topic: &str, records: Bytes, cid: i32) -> (i16, i64) {
    let response: ProduceResponse = kafka_wire::call(s, &produce_request(topic, records), 9, cid);
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset.0)
}

#[test]
fn producer_state_survives_sigkill() {
    let mut broker = BrokerProcess::start();
    wire_create_topic(broker.addr(), "killed");
    let mut s = kafka_wire::connect(broker.addr());
    let pid = wire_init(&mut s, 1);
    for i in 0..4 {
        assert_eq!(
            wire_produce(&mut s, "killed", batch(pid, 0, i * 3, 3), 10 + i),
            (OK, i64::from(i) * 3)
        );
    }
    broker.kill9();
    broker.restart();
    let mut s = kafka_wire::connect(broker.addr());
    // Every cached batch is still recognised after the crash recovery rebuilt the state.
    for i in 0..4 {
        assert_eq!(
            wire_produce(&mut s, "killed", batch(pid, 0, i * 3, 3), 20 + i),
            (OK, i64::from(i) * 3),
            "retry of batch {i} after SIGKILL"
        );
    }
    assert_eq!(
        wire_produce(&mut s, "killed", batch(pid, 0, 12, 1), 30),
        (OK, 12),
        "nothing was appended by the retries"
    );
    let other = wire_init(&mut s, 31);
    assert!(other > pid, "ids after a crash go on above the old ones");
    broker.stop();
}

/// Polls of the expiration test, one per `EXPIRATION_POLL_MS` (30 s in all).
const EXPIRATION_POLLS_MAX: u32 = 300;
const EXPIRATION_POLL_MS: u64 = 100;

#[test]
fn idle_producers_expire() {
    let mut broker = BrokerProcess::start_with(&[
        ("producer.id.expiration.ms", "3000"),
        ("producer.id.expiration.check.interval.ms", "100"),
    ]);
    wire_create_topic(broker.addr(), "expiring");
    let mut s = kafka_wire::connect(broker.addr());
    let pid = wire_init(&mut s, 1);
    assert_eq!(
        wire_produce(&mut s, "expiring", batch(pid, 0, 0, 2), 2),
        (OK, 0)
    );
    // Still known: a retry is a duplicate, a gap is refused.
    assert_eq!(
        wire_produce(&mut s, "expiring", batch(pid, 0, 0, 2), 3),
        (OK, 0)
    );
    let mut cid = 4;
    let mut outcome = wire_produce(&mut s, "expiring", batch(pid, 0, 9, 1), cid);
    assert_eq!(outcome.0, OUT_OF_ORDER, "a gap while the producer is known");
    // Once expired the producer is unknown: any sequence is accepted.
    for _ in 0..EXPIRATION_POLLS_MAX {
        if outcome.0 == OK {
            break;
        }
        assert_eq!(outcome.0, OUT_OF_ORDER);
        std::thread::sleep(Duration::from_millis(EXPIRATION_POLL_MS));
        cid += 1;
        outcome = wire_produce(&mut s, "expiring", batch(pid, 0, 9, 1), cid);
    }
    assert_eq!(outcome, (OK, 2), "the producer never expired");
    broker.stop();
}

// ---- librdkafka with enable.idempotence=true across a broker kill ----

const RDKAFKA_RECORDS: usize = 6_000;
const RDKAFKA_KILL_AFTER: usize = 2_000;

#[tokio::test]
async fn rdkafka_idempotent_producer_leaves_no_duplicates_across_a_kill() {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use rdkafka_support::*;

    let mut broker = BrokerProcess::start();
    let bootstrap = broker.bootstrap();
    let topic = "idempotent";
    create_topic(&bootstrap, topic, 2).await;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .set("retry.backoff.ms", "100")
        .set("reconnect.backoff.ms", "100")
        .set("reconnect.backoff.max.ms", "1000")
        .create()
        .expect("create the producer");
    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..RDKAFKA_RECORDS)
        .map(|i| record("idem", i, base_ts))
        .collect();
    let mut futures = Vec::with_capacity(records.len());
    let mut acked = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let mut headers = rdkafka::message::OwnedHeaders::new();
        for (k, v) in &r.headers {
            headers = headers.insert(rdkafka::message::Header {
                key: k.as_str(),
                value: v.as_deref(),
            });
        }
        let mut rec = FutureRecord::<[u8], [u8]>::to(topic)
            .key(&r.key[..])
            .timestamp(r.timestamp_ms)
            .headers(headers);
        if let Some(p) = &r.payload {
            rec = rec.payload(&p[..]);
        }
        futures.push(
            producer
                .send_result(rec)
                .map_err(|(e, _)| e)
                .unwrap_or_else(|e| panic!("enqueue record {i}: {e}")),
        );
        if i == RDKAFKA_KILL_AFTER {
            // Wait for the first records so the producer has its id, then kill the broker
            // with a burst in flight; librdkafka retries the burst with the same sequences.
            for (r, fut) in records.iter().zip(futures.drain(..RDKAFKA_KILL_AFTER / 2)) {
                let d = fut
                    .await
                    .expect("future")
                    .expect("delivered before the kill");
                acked.push(Acked {
                    sent: r.clone(),
                    partition: d.partition,
                    offset: d.offset,
                });
            }
            broker.kill9();
            broker.restart();
        }
    }
    let remaining = &records[acked.len()..];
    for (r, fut) in remaining.iter().zip(futures) {
        let d = fut
            .await
            .expect("future")
            .unwrap_or_else(|(e, _)| panic!("delivery of record {} failed: {e}", r.index));
        acked.push(Acked {
            sent: r.clone(),
            partition: d.partition,
            offset: d.offset,
        });
    }
    let consumer = consumer(&bootstrap, "throwaway-idempotent");
    let mut ranges = BTreeMap::new();
    for p in 0..2 {
        let (low, high) = rdkafka::consumer::Consumer::fetch_watermarks(
            &consumer,
            topic,
            p,
            Duration::from_millis(CLIENT_TIMEOUT_MS),
        )
        .expect("watermarks");
        ranges.insert(p, (low, high));
    }
    let read = consume_ranges(&consumer, topic, &ranges);
    // Every record acknowledged at its offset, nothing else in the log: no duplicate, no gap.
    assert_matches(topic, &acked, &read, false);
    broker.stop();
}

// ---- the log itself: truncation ----

#[tokio::test]
async fn truncation_forgets_the_batches_it_removes() {
    use samsa::log::{Log, LogConfig};
    use samsa::rt::clock::Clock;
    use samsa::rt::disk::Disk;
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::real(dir.path()).unwrap();
    let config = LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    };
    let (log, _) = Log::open(disk.clone(), "t-0", config.clone(), Clock::new())
        .await
        .unwrap();
    for i in 0..30 {
        let pending = log
            .append_unacknowledged(batch(5, 0, i * 2, 2))
            .await
            .unwrap();
        assert!(!pending.duplicate);
        log.acknowledge(pending).await.unwrap();
    }
    // Cut in the middle of the log, below several roll snapshots.
    assert_eq!(log.truncate_to(21).await.unwrap(), 20);
    let state = log.producer_state().await;
    assert_eq!(state.end_offset(), 20);
    let entry = state.get(5).expect("producer 5 is known");
    assert!(
        entry.batches.iter().all(|b| b.last_offset < 20),
        "{entry:?}"
    );
    assert_eq!(entry.batches.back().map(|b| b.last_seq), Some(19));
    // A retry of a cut batch is appended anew, not answered from the cut one.
    let pending = log.append_unacknowledged(batch(5, 0, 20, 2)).await.unwrap();
    assert!(!pending.duplicate);
    assert_eq!(pending.info.base_offset, 20);
    log.acknowledge(pending).await.unwrap();
    log.close().await.unwrap();
    // No snapshot above the new end survives the cut.
    let (log, _) = Log::open(disk, "t-0", config, Clock::new()).await.unwrap();
    let names = snapshots(&dir.path().join("t-0"));
    assert!(
        names
            .iter()
            .all(|n| samsa::log::producer_snapshot::parse_snapshot_name(n) <= Some(22)),
        "{names:?}"
    );
    let retry = log.append_unacknowledged(batch(5, 0, 20, 2)).await.unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.info.base_offset, 20);
}
