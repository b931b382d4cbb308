//! librdkafka (the `rdkafka` crate, bundled librdkafka 2.12) against the real `samsa broker`
//! binary over TCP: a keyed round trip with headers for every compression codec, topics
//! created by CreateTopics and by auto-creation, lookups by timestamp, and the admin API's
//! create and delete with their error codes.
//!
//! The broker binary cannot run in a simulation build, so these tests exist only without
//! the `sim` feature.
#![cfg(not(feature = "sim"))]

#[path = "support/broker_process.rs"]
mod broker_process;
#[path = "support/rdkafka_support.rs"]
mod rdkafka_support;
#[path = "support/segment_files.rs"]
mod segment_files;

use broker_process::BrokerProcess;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};
use rdkafka_support::*;
use segment_files::{codec_id, stored_batch_codecs};
use std::collections::BTreeMap;
use std::time::Duration;

/// Records per codec in the round trip.
const ROUND_TRIP_RECORDS: usize = 10_000;
const ROUND_TRIP_PARTITIONS: i32 = 3;

/// Produces `ROUND_TRIP_RECORDS` records with `codec` to a topic created with three
/// partitions, reads them back from explicit offsets and compares everything; then looks up
/// offsets by timestamp.
async fn round_trip(codec: &str) {
    let broker = BrokerProcess::start();
    let bootstrap = broker.bootstrap();
    let topic = format!("round-trip-{codec}");
    create_topic(&bootstrap, &topic, ROUND_TRIP_PARTITIONS).await;

    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..ROUND_TRIP_RECORDS)
        .map(|i| record(codec, i, base_ts))
        .collect();
    let producer = producer(&bootstrap, codec);
    let acked = produce_all(&producer, &topic, &records).await;
    let partitions_used: std::collections::BTreeSet<i32> =
        acked.iter().map(|a| a.partition).collect();
    assert_eq!(
        partitions_used.len(),
        ROUND_TRIP_PARTITIONS as usize,
        "{topic}: the keys should spread over every partition"
    );

    let consumer = consumer(&bootstrap, &format!("throwaway-{codec}"));
    assert_eq!(
        partition_count(&consumer, &topic),
        ROUND_TRIP_PARTITIONS as usize
    );
    let ranges = acked_ranges(&acked);
    let read = consume_ranges(&consumer, &topic, &ranges);
    assert_matches(&topic, &acked, &read, false);

    // The batches are stored as the producer compressed them.
    let codecs = stored_batch_codecs(broker.data_dir(), &topic);
    assert!(
        !codecs.is_empty(),
        "{topic}: no record batch found under {}",
        broker.data_dir().display()
    );
    // librdkafka sends a batch uncompressed when compressing would not shrink it, so plain
    // batches are allowed beside the codec's; the broker never re-encodes for a topic with
    // the default compression.type (producer).
    assert!(
        codecs.iter().any(|&c| c == codec_id(codec)),
        "{topic}: no stored batch uses codec {} ({codec})",
        codec_id(codec)
    );
    assert!(
        codecs.iter().all(|&c| c == codec_id(codec) || c == 0),
        "{topic}: stored batches have codecs {:?}, expected {} ({codec}) or none",
        codecs.iter().collect::<std::collections::BTreeSet<_>>(),
        codec_id(codec)
    );

    offsets_for_times_land_on_the_right_offset(&consumer, &topic, &acked, base_ts);
}

/// ListOffsets by timestamp: for a timestamp in the middle, each partition answers the first
/// offset whose record has a timestamp at or after it; for a timestamp after every record,
/// the end (-1). Reading from the answered offset starts with that record.
fn offsets_for_times_land_on_the_right_offset(
    consumer: &rdkafka::consumer::BaseConsumer,
    topic: &str,
    acked: &[Acked],
    base_ts: i64,
) {
    let probes = [
        base_ts,
        base_ts + ROUND_TRIP_RECORDS as i64 / 2,
        base_ts + ROUND_TRIP_RECORDS as i64 - 1,
        base_ts + ROUND_TRIP_RECORDS as i64 + 1_000,
    ];
    for target in probes {
        let mut expected: BTreeMap<i32, Option<&Acked>> = BTreeMap::new();
        for p in 0..ROUND_TRIP_PARTITIONS {
            let first = acked
                .iter()
                .filter(|a| a.partition == p && a.sent.timestamp_ms >= target)
                .min_by_key(|a| a.offset);
            expected.insert(p, first);
        }
        let mut tpl = TopicPartitionList::new();
        for p in 0..ROUND_TRIP_PARTITIONS {
            tpl.add_partition_offset(topic, p, Offset::Offset(target))
                .expect("add partition");
        }
        let answer = consumer
            .offsets_for_times(tpl, Duration::from_millis(CLIENT_TIMEOUT_MS))
            .unwrap_or_else(|e| panic!("{topic}: offsets_for_times({target}): {e}"));
        for el in answer.elements() {
            let p = el.partition();
            el.error()
                .unwrap_or_else(|e| panic!("{topic} partition {p}: lookup of {target}: {e}"));
            let want = expected.get(&p).copied().flatten();
            match want {
                Some(a) => {
                    assert_eq!(
                        el.offset(),
                        Offset::Offset(a.offset),
                        "{topic} partition {p}: offset for timestamp {target} (record {} has timestamp {})",
                        a.sent.index,
                        a.sent.timestamp_ms
                    );
                    let one: BTreeMap<i32, (i64, i64)> =
                        [(p, (a.offset, a.offset + 1))].into_iter().collect();
                    let read = consume_ranges(consumer, topic, &one);
                    let first = read
                        .get(&p)
                        .and_then(|v| v.first())
                        .expect("one record read");
                    assert_eq!(first.offset, a.offset);
                    assert_eq!(first.timestamp, Timestamp::CreateTime(a.sent.timestamp_ms));
                }
                None => assert_eq!(
                    el.offset(),
                    Offset::End,
                    "{topic} partition {p}: timestamp {target} is after every record"
                ),
            }
        }
    }
}

#[tokio::test]
async fn round_trip_uncompressed() {
    round_trip("none").await;
}

#[tokio::test]
async fn round_trip_gzip() {
    round_trip("gzip").await;
}

#[tokio::test]
async fn round_trip_snappy() {
    round_trip("snappy").await;
}

#[tokio::test]
async fn round_trip_lz4() {
    round_trip("lz4").await;
}

#[tokio::test]
async fn round_trip_zstd() {
    round_trip("zstd").await;
}

/// A producer writing to a topic nobody created: the broker creates it on the first
/// Metadata request (auto.create.topics.enable) with num.partitions partitions.
#[tokio::test]
async fn producing_to_an_unknown_topic_creates_it() {
    let broker = BrokerProcess::start_with(&[
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "3"),
    ]);
    let bootstrap = broker.bootstrap();
    let topic = "auto-created";
    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..600).map(|i| record("auto", i, base_ts)).collect();
    let producer = producer(&bootstrap, "lz4");
    let acked = produce_all(&producer, topic, &records).await;
    let consumer = consumer(&bootstrap, "throwaway-auto");
    assert_eq!(partition_count(&consumer, topic), 3);
    let read = consume_ranges(&consumer, topic, &acked_ranges(&acked));
    assert_matches(topic, &acked, &read, false);
}

fn listed_topics(consumer: &rdkafka::consumer::BaseConsumer) -> Vec<String> {
    let md = consumer
        .fetch_metadata(None, Duration::from_millis(CLIENT_TIMEOUT_MS))
        .expect("metadata for all topics");
    md.topics().iter().map(|t| t.name().to_string()).collect()
}

/// CreateTopics and DeleteTopics through the admin client, with the error code of each
/// refusal.
#[tokio::test]
async fn admin_creates_and_deletes_topics() {
    let broker = BrokerProcess::start_with(&[("auto.create.topics.enable", "false")]);
    let bootstrap = broker.bootstrap();
    let admin = admin(&bootstrap);
    let consumer = consumer(&bootstrap, "throwaway-admin");
    let opts = admin_options();

    let created = admin
        .create_topics(
            &[
                NewTopic::new("admin-a", 2, TopicReplication::Fixed(1)),
                NewTopic::new("admin-b", 1, TopicReplication::Fixed(1))
                    .set("retention.ms", "3600000"),
            ],
            &opts,
        )
        .await
        .expect("CreateTopics request");
    assert_eq!(
        created,
        vec![Ok("admin-a".to_string()), Ok("admin-b".to_string())]
    );
    assert_eq!(partition_count(&consumer, "admin-a"), 2);
    assert_eq!(partition_count(&consumer, "admin-b"), 1);

    let long_name = "x".repeat(250);
    let refused = admin
        .create_topics(
            &[
                NewTopic::new("admin-a", 2, TopicReplication::Fixed(1)),
                NewTopic::new("bad name!", 1, TopicReplication::Fixed(1)),
                NewTopic::new("..", 1, TopicReplication::Fixed(1)),
                NewTopic::new(&long_name, 1, TopicReplication::Fixed(1)),
                NewTopic::new("zero-partitions", 0, TopicReplication::Fixed(1)),
                NewTopic::new("three-replicas", 1, TopicReplication::Fixed(3)),
            ],
            &opts,
        )
        .await
        .expect("CreateTopics request");
    let expected = vec![
        Err(("admin-a".to_string(), RDKafkaErrorCode::TopicAlreadyExists)),
        Err(("bad name!".to_string(), RDKafkaErrorCode::InvalidTopic)),
        Err(("..".to_string(), RDKafkaErrorCode::InvalidTopic)),
        Err((long_name.clone(), RDKafkaErrorCode::InvalidTopic)),
        Err((
            "zero-partitions".to_string(),
            RDKafkaErrorCode::InvalidPartitions,
        )),
        Err((
            "three-replicas".to_string(),
            RDKafkaErrorCode::InvalidReplicationFactor,
        )),
    ];
    assert_eq!(refused, expected);
    let listed = listed_topics(&consumer);
    for name in [
        "bad name!",
        "..",
        long_name.as_str(),
        "zero-partitions",
        "three-replicas",
    ] {
        assert!(
            !listed.iter().any(|t| t == name),
            "refused topic {name} is listed: {listed:?}"
        );
    }

    let deleted = admin
        .delete_topics(&["admin-a", "no-such-topic"], &opts)
        .await
        .expect("DeleteTopics request");
    assert_eq!(
        deleted,
        vec![
            Ok("admin-a".to_string()),
            Err((
                "no-such-topic".to_string(),
                RDKafkaErrorCode::UnknownTopicOrPartition
            )),
        ]
    );
    let mut gone = false;
    for _ in 0..METADATA_ATTEMPTS_MAX {
        let listed = listed_topics(&consumer);
        assert!(
            listed.iter().any(|t| t == "admin-b"),
            "admin-b vanished: {listed:?}"
        );
        if !listed.iter().any(|t| t == "admin-a") {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(METADATA_POLL_MS));
    }
    assert!(gone, "admin-a is still listed after its deletion");

    // The name can be used again, and the new topic starts empty.
    create_topic(&bootstrap, "admin-a", 1).await;
    let (low, high) = consumer
        .fetch_watermarks("admin-a", 0, Duration::from_millis(CLIENT_TIMEOUT_MS))
        .expect("watermarks of the re-created topic");
    assert_eq!((low, high), (0, 0));
}
