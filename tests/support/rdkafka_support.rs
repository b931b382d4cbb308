//! Shared pieces of the tests that drive a broker with librdkafka (the `rdkafka` crate):
//! the records a test produces, what their delivery reports said, reading partitions back
//! with an assigned `BaseConsumer`, and comparing the two.
//!
//! Include it with `#[path = "support/rdkafka_support.rs"] mod rdkafka_support;`.
//!
//! Invariants:
//! - Every record is generated from its index alone ([`record`]), so what was sent can be
//!   recomputed and compared byte for byte with what is read back.
//! - Every loop that waits on the broker is bounded by a named limit.
#![allow(dead_code)]

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, Timestamp, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one client call (metadata, admin, offsets lookup) may take before it fails.
pub const CLIENT_TIMEOUT_MS: u64 = 15_000;
/// One consumer poll.
pub const POLL_MS: u64 = 100;
/// Consecutive polls without a new message before a read gives up (30 s).
pub const IDLE_POLLS_MAX: u32 = 300;
/// Polls in one read in all, whatever the progress.
pub const POLLS_MAX: u32 = 200_000;
/// Metadata refreshes while waiting for a topic to appear or disappear.
pub const METADATA_ATTEMPTS_MAX: u32 = 100;
pub const METADATA_POLL_MS: u64 = 100;

/// One record as the test produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub index: usize,
    pub key: Vec<u8>,
    /// `None` is a null value (a tombstone).
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: i64,
}

/// A record and where its delivery report said it landed.
#[derive(Clone, Debug)]
pub struct Acked {
    pub sent: Sent,
    pub partition: i32,
    pub offset: i64,
}

/// One record as a consumer read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Timestamp,
}

/// The wall clock in milliseconds, for record timestamps near "now" (retention by time must
/// not find them old).
#[allow(clippy::disallowed_methods)] // a test's record timestamps, not broker logic
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit in i64")
}

/// Record `index` of a run tagged `tag`: a key, a payload of varying size and content (some
/// empty, some null), headers (some null-valued, some repeated keys) and a timestamp that
/// grows with the index.
pub fn record(tag: &str, index: usize, base_timestamp_ms: i64) -> Sent {
    let key = format!("{tag}-key-{}", index % 997).into_bytes();
    let payload = if index % 211 == 7 {
        None
    } else if index % 101 == 3 {
        Some(Vec::new())
    } else {
        let text = format!("{tag} record {index} ");
        let mut p = text.repeat(1 + index % 13).into_bytes();
        // Bytes that are not text and do not compress away.
        let mut x = (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for _ in 0..(index % 29) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p.push(x as u8);
        }
        Some(p)
    };
    let mut headers = vec![
        (
            "seq".to_string(),
            Some((index as u64).to_be_bytes().to_vec()),
        ),
        ("tag".to_string(), Some(tag.as_bytes().to_vec())),
    ];
    if index % 5 == 0 {
        headers.push(("null-valued".to_string(), None));
    }
    if index % 3 == 0 {
        headers.push(("dup".to_string(), Some(b"first".to_vec())));
        headers.push(("dup".to_string(), Some(b"second".to_vec())));
    }
    Sent {
        index,
        key,
        payload,
        headers,
        timestamp_ms: base_timestamp_ms + index as i64,
    }
}

/// A client configuration with the broker as its only bootstrap server.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("socket.timeout.ms", "30000");
    c
}

/// A producer that waits for acks=all and compresses with `codec`. Idempotence stays off:
/// these tests check the plain produce path (librdkafka's own default).
pub fn producer(bootstrap: &str, codec: &str) -> FutureProducer {
    client_config(bootstrap)
        .set("acks", "all")
        .set("compression.type", codec)
        .set("enable.idempotence", "false")
        .set("linger.ms", "20")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("create the producer")
}

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap)
        .create()
        .expect("create the admin client")
}

/// An assign-only consumer: a throwaway group id (never joined), no commits, and CRC checks
/// on so a corrupted batch is an error rather than silently read.
pub fn consumer(bootstrap: &str, group: &str) -> BaseConsumer {
    client_config(bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("check.crcs", "true")
        .create()
        .expect("create the consumer")
}

pub fn admin_options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_millis(CLIENT_TIMEOUT_MS)))
}

/// Creates `topic` with `partitions` partitions and replication factor 1, and fails the test
/// if the broker refuses.
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let admin = admin(bootstrap);
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &admin_options(),
        )
        .await
        .expect("CreateTopics request");
    assert_eq!(results, vec![Ok(topic.to_string())], "create topic {topic}");
}

/// The number of partitions the broker's metadata gives `topic`, waiting (bounded) for the
/// topic to appear.
pub fn partition_count(client: &BaseConsumer, topic: &str) -> usize {
    for _ in 0..METADATA_ATTEMPTS_MAX {
        let md = client
            .fetch_metadata(Some(topic), Duration::from_millis(CLIENT_TIMEOUT_MS))
            .expect("metadata request");
        if let Some(t) = md.topics().iter().find(|t| t.name() == topic) {
            if t.error().is_none() && !t.partitions().is_empty() {
                return t.partitions().len();
            }
        }
        std::thread::sleep(Duration::from_millis(METADATA_POLL_MS));
    }
    panic!("topic {topic} did not appear in metadata after {METADATA_ATTEMPTS_MAX} attempts");
}

/// Produces `records` to `topic` (partition chosen by librdkafka's partitioner from the key)
/// and returns each with its delivery report, in the order given. Fails the test on the
/// first failed delivery.
pub async fn produce_all(producer: &FutureProducer, topic: &str, records: &[Sent]) -> Vec<Acked> {
    let mut futures = Vec::with_capacity(records.len());
    for r in records {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (k, v) in &r.headers {
            headers = headers.insert(Header {
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
        let fut = producer
            .send_result(rec)
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("enqueue record {}: {e}", r.index));
        futures.push(fut);
    }
    let mut acked = Vec::with_capacity(records.len());
    for (r, fut) in records.iter().zip(futures) {
        let delivery = fut
            .await
            .expect("the producer outlives its delivery futures")
            .unwrap_or_else(|(e, _)| panic!("delivery of record {} failed: {e}", r.index));
        acked.push(Acked {
            sent: r.clone(),
            partition: delivery.partition,
            offset: delivery.offset,
        });
    }
    acked
}

fn headers_of(m: &impl Message) -> Vec<(String, Option<Vec<u8>>)> {
    match m.headers() {
        None => Vec::new(),
        Some(h) => h
            .iter()
            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
            .collect(),
    }
}

/// Reads each partition of `topic` from its start offset up to (not including) its end
/// offset with one assigned consumer, and returns the records per partition in the order
/// read. Fails the test on a consumer error or when nothing new arrives for
/// `IDLE_POLLS_MAX` polls.
pub fn consume_ranges(
    consumer: &BaseConsumer,
    topic: &str,
    ranges: &BTreeMap<i32, (i64, i64)>,
) -> BTreeMap<i32, Vec<Consumed>> {
    let mut tpl = TopicPartitionList::new();
    for (&p, &(start, _)) in ranges {
        tpl.add_partition_offset(topic, p, Offset::Offset(start))
            .expect("add a partition to the assignment");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out: BTreeMap<i32, Vec<Consumed>> = ranges.keys().map(|&p| (p, Vec::new())).collect();
    let done = |out: &BTreeMap<i32, Vec<Consumed>>| {
        ranges.iter().all(|(p, &(start, end))| {
            end <= start
                || out
                    .get(p)
                    .and_then(|v| v.last())
                    .is_some_and(|c| c.offset + 1 >= end)
        })
    };
    let mut idle = 0;
    for _ in 0..POLLS_MAX {
        if done(&out) {
            return out;
        }
        match consumer.poll(Duration::from_millis(POLL_MS)) {
            None => {
                idle += 1;
                if idle >= IDLE_POLLS_MAX {
                    break;
                }
            }
            Some(Err(e)) => panic!("consumer error while reading {topic}: {e}"),
            Some(Ok(m)) => {
                idle = 0;
                let c = Consumed {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    payload: m.payload().map(<[u8]>::to_vec),
                    headers: headers_of(&m),
                    timestamp: m.timestamp(),
                };
                let Some(&(_, end)) = ranges.get(&c.partition) else {
                    panic!("read partition {} which was not assigned", c.partition);
                };
                if c.offset < end {
                    out.entry(c.partition).or_default().push(c);
                }
            }
        }
    }
    let progress: Vec<String> = ranges
        .iter()
        .map(|(p, (s, e))| {
            let got = out.get(p).map_or(0, Vec::len);
            format!("partition {p}: read {got} of offsets {s}..{e}")
        })
        .collect();
    panic!("reading {topic} stalled: {}", progress.join("; "));
}

/// The range of offsets per partition that the delivery reports cover: from 0 (these tests
/// write to fresh topics) to one past the highest acknowledged offset.
pub fn acked_ranges(acked: &[Acked]) -> BTreeMap<i32, (i64, i64)> {
    let mut ranges = BTreeMap::new();
    for a in acked {
        let e = ranges.entry(a.partition).or_insert((0, 0));
        e.1 = e.1.max(a.offset + 1);
    }
    ranges
}

/// Checks what was read against the delivery reports: every acknowledged record is at the
/// offset its report gave, with the same key, value, headers and timestamp; offsets in each
/// partition are dense from the start (nothing extra, nothing missing); and each partition
/// holds its records in the order they were produced.
pub fn assert_matches(
    topic: &str,
    acked: &[Acked],
    read: &BTreeMap<i32, Vec<Consumed>>,
    allow_unacked: bool,
) {
    let mut by_pos: BTreeMap<(i32, i64), &Acked> = BTreeMap::new();
    for a in acked {
        if let Some(prev) = by_pos.insert((a.partition, a.offset), a) {
            panic!(
                "{topic}: records {} and {} were both reported at partition {} offset {}",
                prev.sent.index, a.sent.index, a.partition, a.offset
            );
        }
    }
    for (p, records) in read {
        for (i, c) in records.iter().enumerate() {
            let expected_offset = records[0].offset + i as i64;
            assert_eq!(
                c.offset, expected_offset,
                "{topic} partition {p}: offsets are not dense (gap or reorder) at read #{i}"
            );
        }
    }
    let mut read_at: BTreeMap<(i32, i64), &Consumed> = BTreeMap::new();
    for records in read.values() {
        for c in records {
            read_at.insert((c.partition, c.offset), c);
        }
    }
    for a in acked {
        let Some(c) = read_at.get(&(a.partition, a.offset)) else {
            panic!(
                "{topic}: record {} acknowledged at partition {} offset {} was not read back",
                a.sent.index, a.partition, a.offset
            );
        };
        let s = &a.sent;
        let at = format!(
            "{topic}: record {} at partition {} offset {}",
            s.index, a.partition, a.offset
        );
        assert_eq!(c.key.as_deref(), Some(&s.key[..]), "{at}: key");
        assert_eq!(c.payload, s.payload, "{at}: value");
        assert_eq!(c.headers, s.headers, "{at}: headers");
        assert_eq!(
            c.timestamp,
            Timestamp::CreateTime(s.timestamp_ms),
            "{at}: timestamp"
        );
    }
    if !allow_unacked {
        assert_eq!(
            read_at.len(),
            acked.len(),
            "{topic}: read {} records but {} were acknowledged",
            read_at.len(),
            acked.len()
        );
    }
    // Per-partition order: within a partition, a record produced later has a higher offset.
    let mut last: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
    let mut sorted: Vec<&Acked> = acked.iter().collect();
    sorted.sort_by_key(|a| a.sent.index);
    for a in sorted {
        if let Some(&(prev_index, prev_offset)) = last.get(&a.partition) {
            assert!(
                a.offset > prev_offset,
                "{topic} partition {}: record {} (offset {}) landed before record {prev_index} (offset {prev_offset}) which was produced earlier",
                a.partition, a.sent.index, a.offset
            );
        }
        last.insert(a.partition, (a.sent.index, a.offset));
    }
}
