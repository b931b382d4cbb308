//! Retention and DeleteRecords over real TCP: the broker's background retention check deletes
//! old segments by size and by time, the log start offset moves, fetches below it get
//! OFFSET_OUT_OF_RANGE with the start in the answer, ListOffsets EARLIEST names it,
//! DeleteRecords moves it explicitly (and it survives a restart), and librdkafka with
//! `auto.offset.reset=earliest` resets to the first retained record.
//!
//! The background scrubber lives here too: it finds a byte flipped at rest below the recovery
//! point, after which fetches at and beyond the corrupt batch answer KAFKA_STORAGE_ERROR while
//! reads below it and produce go on.
//!
//! Waits are bounded poll loops ([`POLLS_MAX`] × [`POLL_MS`]); nothing asserts on timing.
#![cfg(not(feature = "sim"))]

use std::time::Duration;

use bytes::Bytes;
use samsa::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use samsa::protocol::delete_records::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsResponse, DeleteRecordsTopic,
};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use samsa::protocol::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use samsa::protocol::record_batch::{self, BatchBuilder};
use samsa::protocol::types::{NodeId, Offset};

#[path = "../support/test_broker.rs"]
mod test_broker;

#[path = "../support/rdkafka_support.rs"]
mod rdkafka_support;

use test_broker::{create, produce, topic, Conn, TestBroker};

/// One poll of the broker's state while waiting for the retention check.
const POLL_MS: u64 = 50;
/// Polls before a wait gives up (10 s): the check runs every 100 ms.
const POLLS_MAX: u32 = 200;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// A batch of `n` records of 100 bytes each, stamped `timestamp`: about 1.3 KiB for 10.
fn batch(n: usize, tag: usize, timestamp: i64) -> Bytes {
    let mut builder = BatchBuilder::new(0);
    for i in 0..n {
        let value = format!("{tag:05}-{i:03}-{}", "v".repeat(90));
        builder.push(timestamp, Some(b"k"), Some(value.as_bytes()), &[]);
    }
    builder.build().freeze()
}

fn now_ms() -> i64 {
    rdkafka_support::now_ms()
}

/// (error code, log start offset, first offset returned) of one fetch at `offset`.
async fn fetch(conn: &mut Conn, topic: &str, offset: i64) -> (i16, i64, Option<i64>) {
    let request = FetchRequest {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: topic.to_string(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: Offset(offset),
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: FetchResponse = conn.call(12, &request).await;
    let p = &response.responses[0].partitions[0];
    let first = record_batch::batches(p.records.clone().unwrap_or_default())
        .flatten()
        .flat_map(|(_, b)| {
            record_batch::records(&b)
                .map(|r| r.flatten().map(|r| r.offset).collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .find(|o| *o >= offset);
    (p.error_code, p.log_start_offset.0, first)
}

async fn list_offset(conn: &mut Conn, topic: &str, timestamp: i64) -> (i16, i64) {
    let request = ListOffsetsRequest {
        replica_id: NodeId(-1),
        topics: vec![ListOffsetsTopic {
            name: topic.to_string(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                timestamp,
                ..Default::default()
            }],
        }],
        ..Default::default()
    };
    let response: ListOffsetsResponse = conn.call(7, &request).await;
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset.0)
}

/// (error code, low watermark) for each (partition, offset) asked of `topic`.
async fn delete_records(conn: &mut Conn, topic: &str, wanted: &[(i32, i64)]) -> Vec<(i16, i64)> {
    let request = DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: topic.to_string(),
            partitions: wanted
                .iter()
                .map(|&(partition_index, offset)| DeleteRecordsPartition {
                    partition_index,
                    offset: Offset(offset),
                })
                .collect(),
        }],
        timeout_ms: 10_000,
    };
    let response: DeleteRecordsResponse = conn.call(2, &request).await;
    response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.low_watermark.0))
        .collect()
}

/// The base offsets and sizes of the partition's segment files, from the directory.
fn segments(dir: &std::path::Path, topic: &str) -> Vec<(i64, u64)> {
    let mut out: Vec<(i64, u64)> = std::fs::read_dir(dir.join(format!("{topic}-0")))
        .expect("partition directory")
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let base = name.strip_suffix(".log")?.parse().ok()?;
            Some((base, entry.metadata().ok()?.len()))
        })
        .collect();
    out.sort_unstable();
    out
}

/// Starts the broker's background tasks (flusher and retention check), which the shared
/// test harness does not run.
fn run_background(broker: &TestBroker) -> std::sync::Arc<samsa::rt::latch::Latch> {
    let stop = std::sync::Arc::new(samsa::rt::latch::Latch::new());
    samsa::rt::task::spawn(broker.broker.clone().run_background(stop.clone()));
    stop
}

/// Polls ListOffsets EARLIEST until it passes `above`; returns it.
async fn wait_for_start_above(conn: &mut Conn, topic: &str, above: i64) -> i64 {
    for _ in 0..POLLS_MAX {
        let (code, start) = list_offset(conn, topic, EARLIEST).await;
        assert_eq!(code, 0);
        if start > above {
            return start;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    panic!("the log start offset of {topic} never passed {above}");
}

const BROKER_OVERRIDES: &[(&str, &str)] = &[("log.retention.check.interval.ms", "100")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_size_deletes_old_segments_and_fetch_below_is_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), BROKER_OVERRIDES).await;
    let mut conn = broker.connect().await;
    let name = "by-size";
    let configs = [("segment.bytes", "4096"), ("retention.bytes", "8192")];
    assert_eq!(create(&mut conn, topic(name, 1, &configs)).await, 0);
    for i in 0..30 {
        let (code, _) = produce(&mut conn, name, 0, batch(10, i, now_ms())).await;
        assert_eq!(code, 0);
    }
    // The check starts once everything is written, so one pass deletes all it may.
    let stop = run_background(&broker);
    let start = wait_for_start_above(&mut conn, name, 0).await;
    // The start moves before the files are unlinked: wait for the directory to catch up.
    let mut files = segments(dir.path(), name);
    for _ in 0..POLLS_MAX {
        if files[0].0 == start {
            break;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        files = segments(dir.path(), name);
    }
    let bytes: u64 = files.iter().map(|(_, len)| len).sum();
    assert_eq!(
        files[0].0, start,
        "the first segment begins at the log start"
    );
    assert!(bytes >= 8192, "{bytes} bytes kept, retention.bytes is 8192");
    assert!(
        bytes - files[0].1 < 8192,
        "one more segment would have been deletable: {files:?}"
    );
    let (code, log_start, first) = fetch(&mut conn, name, 0).await;
    assert_eq!(code, ErrorCode::OFFSET_OUT_OF_RANGE.code());
    assert_eq!(log_start, start);
    assert_eq!(first, None);
    let (code, log_start, first) = fetch(&mut conn, name, start).await;
    assert_eq!((code, log_start, first), (0, start, Some(start)));
    assert_eq!(list_offset(&mut conn, name, LATEST).await, (0, 300));
    stop.set();
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_time_deletes_segments_older_than_retention_ms() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), BROKER_OVERRIDES).await;
    let stop = run_background(&broker);
    let mut conn = broker.connect().await;
    let name = "by-time";
    let configs = [("segment.bytes", "4096"), ("retention.ms", "60000")];
    assert_eq!(create(&mut conn, topic(name, 1, &configs)).await, 0);
    // An hour-old first half, then a fresh second half: only the old segments may go.
    let hour_ago = now_ms() - 3_600_000;
    for i in 0..10 {
        assert_eq!(
            produce(&mut conn, name, 0, batch(10, i, hour_ago)).await.0,
            0
        );
    }
    for i in 10..20 {
        assert_eq!(
            produce(&mut conn, name, 0, batch(10, i, now_ms())).await.0,
            0
        );
    }
    let start = wait_for_start_above(&mut conn, name, 0).await;
    // Batches 0..10 (offsets 0..100) are old; the segment holding offset 100 has fresh
    // records and stays, so the start is at most 100 and every fresh record is kept.
    assert!(start <= 100, "start {start} passed the first fresh record");
    let (code, _, first) = fetch(&mut conn, name, 100).await;
    assert_eq!((code, first), (0, Some(100)));
    stop.set();
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_start_durably() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let versions: ApiVersionsResponse = conn.call(3, &ApiVersionsRequest::default()).await;
    assert!(
        versions
            .api_keys
            .iter()
            .any(|k| k.api_key == 21 && k.min_version == 0 && k.max_version == 2),
        "DeleteRecords v0-2 advertised"
    );
    let name = "deleted";
    assert_eq!(
        create(&mut conn, topic(name, 1, &[("segment.bytes", "4096")])).await,
        0
    );
    for i in 0..20 {
        assert_eq!(
            produce(&mut conn, name, 0, batch(10, i, now_ms())).await.0,
            0
        );
    }
    let before = segments(dir.path(), name).len();
    // Above the high watermark, an unknown partition, then a valid offset mid-segment.
    assert_eq!(
        delete_records(&mut conn, name, &[(0, 201), (7, 10), (0, 125)]).await,
        vec![
            (ErrorCode::OFFSET_OUT_OF_RANGE.code(), -1),
            (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(), -1),
            (0, 125),
        ]
    );
    assert!(segments(dir.path(), name).len() < before);
    assert_eq!(list_offset(&mut conn, name, EARLIEST).await, (0, 125));
    let (code, log_start, _) = fetch(&mut conn, name, 124).await;
    assert_eq!(
        (code, log_start),
        (ErrorCode::OFFSET_OUT_OF_RANGE.code(), 125)
    );
    let (code, _, first) = fetch(&mut conn, name, 125).await;
    assert_eq!((code, first), (0, Some(125)));
    // Backwards changes nothing.
    assert_eq!(
        delete_records(&mut conn, name, &[(0, 3)]).await,
        vec![(0, 125)]
    );
    drop(conn);
    broker.stop().await;

    // After a restart the start is where it was; -1 means the high watermark.
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(list_offset(&mut conn, name, EARLIEST).await, (0, 125));
    assert_eq!(
        delete_records(&mut conn, name, &[(0, -1)]).await,
        vec![(0, 200)]
    );
    assert_eq!(segments(dir.path(), name).len(), 1);
    let (code, log_start, _) = fetch(&mut conn, name, 199).await;
    assert_eq!(
        (code, log_start),
        (ErrorCode::OFFSET_OUT_OF_RANGE.code(), 200)
    );
    assert_eq!(
        produce(&mut conn, name, 0, batch(1, 99, now_ms())).await,
        (0, 200)
    );
    broker.stop().await;
}

/// librdkafka assigned below the start with `auto.offset.reset=earliest` gets
/// OFFSET_OUT_OF_RANGE, asks ListOffsets for the earliest offset and reads from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_resets_to_the_first_retained_record() {
    use rdkafka::consumer::Consumer;
    use rdkafka::Message;
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let name = "reset";
    assert_eq!(
        create(&mut conn, topic(name, 1, &[("segment.bytes", "4096")])).await,
        0
    );
    for i in 0..10 {
        assert_eq!(
            produce(&mut conn, name, 0, batch(10, i, now_ms())).await.0,
            0
        );
    }
    assert_eq!(
        delete_records(&mut conn, name, &[(0, 42)]).await,
        vec![(0, 42)]
    );
    let bootstrap = broker.addr.to_string();
    let first = samsa::rt::task::spawn_blocking(move || {
        let consumer: rdkafka::consumer::BaseConsumer = rdkafka_support::client_config(&bootstrap)
            .set("group.id", "retention-reset")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()
            .expect("consumer");
        let mut assignment = rdkafka::TopicPartitionList::new();
        assignment
            .add_partition_offset(name, 0, rdkafka::Offset::Offset(3))
            .expect("assignment");
        consumer.assign(&assignment).expect("assign");
        for _ in 0..rdkafka_support::IDLE_POLLS_MAX {
            match consumer.poll(Duration::from_millis(rdkafka_support::POLL_MS)) {
                Some(Ok(message)) => {
                    return Some((message.offset(), message.payload().map(<[u8]>::to_vec)))
                }
                Some(Err(e)) => panic!("consumer error: {e}"),
                None => {}
            }
        }
        None
    })
    .await
    .expect("consumer thread");
    let (offset, payload) = first.expect("a record after the reset");
    assert_eq!(offset, 42);
    let expected = format!("{:05}-{:03}-{}", 4, 2, "v".repeat(90));
    assert_eq!(payload.as_deref(), Some(expected.as_bytes()));
    broker.stop().await;
}

/// The scrubber, with a high rate so the test is quick, finds a byte flipped in a closed
/// segment below the recovery point (behind the broker's back, while it was stopped). Then a
/// fetch at or beyond the corrupt batch answers KAFKA_STORAGE_ERROR, ListOffsets that would
/// read there answers it too, a fetch below still reads (ending before the corrupt batch),
/// produce still works and the log directory is not failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrubber_finds_corruption_at_rest_and_reads_from_it_on_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let name = "scrubbed";
    let off = [("log.scrubber.bytes.per.second", "0")];
    let broker = TestBroker::start(dir.path(), &off).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        create(&mut conn, topic(name, 1, &[("segment.bytes", "4096")])).await,
        0
    );
    for i in 0..30 {
        let (code, _) = produce(&mut conn, name, 0, batch(10, i, now_ms())).await;
        assert_eq!(code, 0);
    }
    drop(conn);
    // A clean stop checkpoints the log end: every closed segment is below the recovery point.
    broker.stop().await;

    let files = segments(dir.path(), name);
    assert!(files.len() >= 5, "{files:?}");
    let (base, _) = files[3];
    let path = dir
        .path()
        .join(format!("{name}-0"))
        .join(samsa::log::segment::file_name(base, ".log"));
    let mut bytes = std::fs::read(&path).unwrap();
    let first = record_batch::BatchHeader::parse(&bytes).unwrap();
    let second = record_batch::BatchHeader::parse(&bytes[first.total_len()..]).unwrap();
    let corrupt_offset = second.base_offset;
    // A byte in the second batch's records: its CRC fails, its header still parses.
    let at = first.total_len() + second.total_len() - 3;
    bytes[at] ^= 0xff;
    #[allow(clippy::disallowed_methods)] // damaging the file behind the broker's back
    std::fs::write(&path, &bytes).unwrap();

    let broker = TestBroker::start(
        dir.path(),
        &[("log.scrubber.bytes.per.second", "104857600")],
    )
    .await;
    let stop = run_background(&broker);
    let partition = broker
        .broker
        .topics
        .get_partition(name, 0)
        .await
        .expect("partition");
    let mut found = None;
    for _ in 0..POLLS_MAX {
        found = partition.corrupt_from();
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    assert_eq!(found, Some(corrupt_offset));

    let mut conn = broker.connect().await;
    let storage_error = ErrorCode::KAFKA_STORAGE_ERROR.code();
    let last = partition.high_watermark() - 1;
    for offset in [corrupt_offset, corrupt_offset + 5, last] {
        let (code, _, first) = fetch(&mut conn, name, offset).await;
        assert_eq!((code, first), (storage_error, None), "fetch at {offset}");
    }
    // Below the corrupt batch reads still work, and stop before it.
    assert_eq!(fetch(&mut conn, name, 0).await, (0, 0, Some(0)));
    let (code, _, first) = fetch(&mut conn, name, corrupt_offset - 1).await;
    assert_eq!((code, first), (0, Some(corrupt_offset - 1)));
    // ListOffsets MAX_TIMESTAMP (-3) reads every record, so it meets the corrupt batch and is
    // refused; LATEST reads nothing and still answers.
    let (code, _) = list_offset(&mut conn, name, -3).await;
    assert_eq!(code, storage_error);
    assert_eq!(
        list_offset(&mut conn, name, LATEST).await,
        (0, partition.high_watermark())
    );
    // Appends go on; the log directory is healthy.
    let (code, _) = produce(&mut conn, name, 0, batch(10, 99, now_ms())).await;
    assert_eq!(code, 0);
    assert!(!broker.broker.health.has_failed());
    drop(conn);
    stop.set();
    broker.stop().await;
}
