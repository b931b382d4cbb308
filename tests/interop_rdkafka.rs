//! librdkafka (the `rdkafka` crate, bundled librdkafka 2.12) against the real `samsa broker`
//! binary over TCP.
//!
//! | test | what it checks |
//! | --- | --- |
//! | `round_trip_{uncompressed,gzip,snappy,lz4,zstd}` | keyed records with headers per codec: produce acks=all, read back by assign, stored codec, lookups by timestamp |
//! | `producing_to_an_unknown_topic_creates_it` | auto-creation on the first Metadata request |
//! | `admin_creates_and_deletes_topics` | the admin API's create and delete, with their error codes |
//! | `group_members_share_partitions_and_take_over_from_a_killed_member` | three member processes (`BaseConsumer`, subscribe) share six partitions and read every record once; after a SIGKILL of one, the others take its partitions once its session expires and resume them at its committed offsets |
//! | `group_resumes_at_offsets_committed_before_a_broker_restart` | a sync OffsetCommit survives a broker SIGKILL and restart: OffsetFetch answers it and a new member resumes there |
//! | `two_groups_each_receive_every_record` | two groups (`StreamConsumer`) on one topic each read every record once |
//! | `librdkafka_and_samsa_members_share_a_group` | a librdkafka member process and a `samsa::client` `GroupConsumer` in one group, each leading once: they split six partitions (range) and read every record once, each from its own partitions |
//! | `group_member_process` (ignored) | the member process of the first group test; returns at once when run alone |
//!
//! The group tests use `session.timeout.ms=6000`, `heartbeat.interval.ms=1000` and a broker
//! with `group.initial.rebalance.delay.ms=100` (tests/support/rdkafka_groups.rs).
//!
//! The broker binary cannot run in a simulation build, so these tests exist only without
//! the `sim` feature.
#![cfg(not(feature = "sim"))]

#[path = "support/broker_process.rs"]
mod broker_process;
#[path = "support/rdkafka_groups.rs"]
mod rdkafka_groups;
#[path = "support/rdkafka_support.rs"]
mod rdkafka_support;
#[path = "support/segment_files.rs"]
mod segment_files;

use broker_process::BrokerProcess;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};
use rdkafka_groups::{
    all_read, assert_read_once, committed, group_consumer_config, poll_records, reads_by_position,
    stable_assignment, stream_records, wait_for, MemberProcess, GROUP_BROKER_OVERRIDES,
};
use rdkafka_support::*;
use segment_files::{codec_id, stored_batch_codecs};
use std::collections::{BTreeMap, BTreeSet};
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

/// Partitions of the topic the group tests share among their members.
const GROUP_PARTITIONS: i32 = 6;
/// Records per batch in the group tests.
const GROUP_BATCH_RECORDS: usize = 600;

/// A group member process (see tests/support/rdkafka_groups.rs): started by the group tests
/// with the member's environment; without it, it returns at once.
#[test]
#[ignore = "a group member process, started by the group tests; returns at once when run alone"]
fn group_member_process() {
    rdkafka_groups::member_main();
}

fn member_reports(members: &[MemberProcess]) -> Vec<(String, rdkafka_groups::MemberReport)> {
    members
        .iter()
        .map(|m| (m.name.clone(), m.report()))
        .collect()
}

fn assert_no_member_errors(members: &[MemberProcess]) {
    for (name, r) in member_reports(members) {
        assert!(
            r.errors.is_empty(),
            "member {name} reported errors: {:?}",
            r.errors
        );
    }
}

/// Three member processes of one group share a six-partition topic: once the group is
/// stable each holds a disjoint part, and together they read every record exactly once,
/// each from the member owning its partition. Then one is killed with SIGKILL (no
/// LeaveGroup): once its session expires the two others hold all six partitions, read every
/// record produced since, and resume its partitions at its committed offsets (nothing of the
/// first batch is read twice).
#[tokio::test]
async fn group_members_share_partitions_and_take_over_from_a_killed_member() {
    let broker = BrokerProcess::start_with(GROUP_BROKER_OVERRIDES);
    let bootstrap = broker.bootstrap();
    let topic = "group-shared";
    let group = "group-shared-members";
    create_topic(&bootstrap, topic, GROUP_PARTITIONS).await;
    let dir = broker.dir().to_path_buf();
    let mut members: Vec<MemberProcess> = (0..3)
        .map(|i| MemberProcess::spawn(&dir, &format!("member-{i}"), &bootstrap, group, topic))
        .collect();
    let owners = wait_for("three members share the six partitions", || {
        stable_assignment(&member_reports(&members), GROUP_PARTITIONS)
    });

    let base_ts = now_ms() - 60_000;
    let producer = producer(&bootstrap, "lz4");
    let batch: Vec<Sent> = (0..GROUP_BATCH_RECORDS)
        .map(|i| record("group", i, base_ts))
        .collect();
    let first = produce_all(&producer, topic, &batch).await;
    wait_for("the members read the first batch", || {
        all_read(&first, &reads_by_position(&member_reports(&members)))
    });
    let reads = reads_by_position(&member_reports(&members));
    assert_read_once("first batch", &first, &reads, |member, p| {
        owners.get(member).is_some_and(|ps| ps.contains(&p))
    });
    assert_eq!(
        owners,
        stable_assignment(&member_reports(&members), GROUP_PARTITIONS)
            .expect("still stable after the first batch"),
        "the assignment changed while nothing failed"
    );

    // Wait until the group committed everything read, so that the takeover has a committed
    // offset to resume from on every partition of the killed member.
    let first_end = acked_ranges(&first);
    let observer = consumer(&bootstrap, group);
    wait_for("the group commits the first batch", || {
        let c = committed(&observer, topic, GROUP_PARTITIONS);
        for (p, &(_, end)) in &first_end {
            if c.get(p).copied().flatten() != Some(end) {
                return Err(format!("committed {c:?}, read up to {first_end:?}"));
            }
        }
        Ok(())
    });

    let mut victim = members.remove(0);
    let victim_partitions = owners[&victim.name].clone();
    #[allow(clippy::disallowed_methods)] // a figure printed for the reader, not asserted
    let killed_at = samsa::rt::time::now();
    victim.kill9();
    let batch: Vec<Sent> = (GROUP_BATCH_RECORDS..2 * GROUP_BATCH_RECORDS)
        .map(|i| record("group", i, base_ts))
        .collect();
    let second = produce_all(&producer, topic, &batch).await;
    let survivors_owners = wait_for(
        "the survivors take the killed member's partitions and read the second batch",
        || {
            let reports = member_reports(&members);
            let owners = stable_assignment(&reports, GROUP_PARTITIONS)?;
            all_read(&second, &reads_by_position(&reports))?;
            Ok(owners)
        },
    );
    eprintln!(
        "group takeover: {} ms from SIGKILL of {} (partitions {victim_partitions:?}) to the survivors holding {survivors_owners:?} and reading every record",
        killed_at.elapsed().as_millis(),
        victim.name
    );
    let mut with_victim = member_reports(&members);
    with_victim.push((victim.name.clone(), victim.report()));
    assert!(
        !with_victim.last().is_some_and(|(_, r)| r.closing),
        "the killed member closed its consumer"
    );
    let reads = reads_by_position(&with_victim);
    // Every record once: the first batch was committed before the kill, so the survivors
    // resumed the victim's partitions where it stopped and read none of it again.
    assert_read_once("first batch", &first, &reads, |member, p| {
        owners.get(member).is_some_and(|ps| ps.contains(&p))
    });
    assert_read_once("second batch", &second, &reads, |member, _| {
        member != victim.name
    });
    for p in &victim_partitions {
        assert!(
            survivors_owners.values().any(|ps| ps.contains(p)),
            "partition {p} of the killed member has no new owner: {survivors_owners:?}"
        );
    }
    assert_no_member_errors(&members);
    for m in &mut members {
        m.stop();
    }
}

/// Offsets committed before a broker crash are where the group resumes: a member reads
/// half of a batch, commits exactly what it read (OffsetCommit answered once durable) and
/// leaves; the broker is killed with SIGKILL and restarted; OffsetFetch answers the same
/// offsets, and a new member of the group starts each partition at its committed offset
/// (the start for a partition with none) and reads every later record once.
#[tokio::test]
async fn group_resumes_at_offsets_committed_before_a_broker_restart() {
    let mut broker = BrokerProcess::start_with(GROUP_BROKER_OVERRIDES);
    let bootstrap = broker.bootstrap();
    let topic = "group-restart";
    let group = "group-restart-members";
    let partitions = 3;
    create_topic(&bootstrap, topic, partitions).await;
    let base_ts = now_ms() - 60_000;
    let batch: Vec<Sent> = (0..GROUP_BATCH_RECORDS)
        .map(|i| record("restart", i, base_ts))
        .collect();
    let first = produce_all(&producer(&bootstrap, "zstd"), topic, &batch).await;

    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    {
        let member: rdkafka::consumer::BaseConsumer = group_consumer_config(&bootstrap, group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("create the group consumer");
        member.subscribe(&[topic]).expect("subscribe");
        let read = poll_records(&member, GROUP_BATCH_RECORDS / 2);
        for r in &read {
            let n = next.entry(r.partition).or_insert(0);
            assert_eq!(r.offset, *n, "partition {}: read out of order", r.partition);
            *n = r.offset + 1;
        }
        let mut tpl = TopicPartitionList::new();
        for (&p, &o) in &next {
            tpl.add_partition_offset(topic, p, Offset::Offset(o))
                .expect("add a partition");
        }
        member
            .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
            .expect("OffsetCommit");
        // Dropping the consumer closes it: it leaves the group.
    }
    let committed_before = committed(&consumer(&bootstrap, "unused"), topic, partitions);
    let expected: BTreeMap<i32, Option<i64>> = (0..partitions)
        .map(|p| (p, next.get(&p).copied()))
        .collect();
    let observer = consumer(&bootstrap, group);
    assert_eq!(committed(&observer, topic, partitions), expected);
    assert!(
        committed_before.values().all(Option::is_none),
        "another group sees this group's offsets: {committed_before:?}"
    );
    drop(observer);

    broker.kill9();
    broker.restart();
    let observer = consumer(&bootstrap, group);
    assert_eq!(
        committed(&observer, topic, partitions),
        expected,
        "OffsetFetch after the restart"
    );
    let batch: Vec<Sent> = (GROUP_BATCH_RECORDS..2 * GROUP_BATCH_RECORDS)
        .map(|i| record("restart", i, base_ts))
        .collect();
    let second = produce_all(&producer(&bootstrap, "zstd"), topic, &batch).await;
    let want: Vec<&Acked> = first
        .iter()
        .chain(&second)
        .filter(|a| a.offset >= next.get(&a.partition).copied().unwrap_or(0))
        .collect();

    let member: rdkafka::consumer::BaseConsumer = group_consumer_config(&bootstrap, group)
        .create()
        .expect("create the group consumer");
    member.subscribe(&[topic]).expect("subscribe");
    let read = poll_records(&member, want.len());
    let mut first_read: BTreeMap<i32, i64> = BTreeMap::new();
    for r in &read {
        first_read.entry(r.partition).or_insert(r.offset);
    }
    for (&p, &o) in &first_read {
        assert_eq!(
            o,
            next.get(&p).copied().unwrap_or(0),
            "partition {p}: the new member started at offset {o}, committed {:?}",
            next.get(&p)
        );
    }
    let got: BTreeSet<(i32, i64, i64)> = read
        .iter()
        .map(|r| (r.partition, r.offset, r.index))
        .collect();
    assert_eq!(
        got.len(),
        read.len(),
        "a record was read twice after the restart"
    );
    let wanted: BTreeSet<(i32, i64, i64)> = want
        .iter()
        .map(|a| (a.partition, a.offset, a.sent.index as i64))
        .collect();
    assert_eq!(got, wanted, "the records read after the restart");
}

/// Two groups subscribed to one topic each read every record once (StreamConsumer).
#[tokio::test]
async fn two_groups_each_receive_every_record() {
    let broker = BrokerProcess::start_with(GROUP_BROKER_OVERRIDES);
    let bootstrap = broker.bootstrap();
    let topic = "group-two";
    create_topic(&bootstrap, topic, 4).await;
    let base_ts = now_ms() - 60_000;
    let batch: Vec<Sent> = (0..GROUP_BATCH_RECORDS)
        .map(|i| record("two", i, base_ts))
        .collect();
    let acked = produce_all(&producer(&bootstrap, "gzip"), topic, &batch).await;
    let member = |group: &str| -> rdkafka::consumer::StreamConsumer {
        let c: rdkafka::consumer::StreamConsumer = group_consumer_config(&bootstrap, group)
            .create()
            .expect("create the group consumer");
        c.subscribe(&[topic]).expect("subscribe");
        c
    };
    let (a, b) = (member("group-two-a"), member("group-two-b"));
    let (read_a, read_b) = tokio::join!(
        stream_records(&a, acked.len()),
        stream_records(&b, acked.len())
    );
    let wanted: BTreeSet<(i32, i64, i64)> = acked
        .iter()
        .map(|a| (a.partition, a.offset, a.sent.index as i64))
        .collect();
    for (group, read) in [("group-two-a", read_a), ("group-two-b", read_b)] {
        let got: BTreeSet<(i32, i64, i64)> = read
            .iter()
            .map(|r| (r.partition, r.offset, r.index))
            .collect();
        assert_eq!(got.len(), read.len(), "{group} read a record twice");
        assert_eq!(got, wanted, "{group}: the records read");
    }
}

/// What the Samsa member of [`librdkafka_and_samsa_members_share_a_group`] reports.
#[derive(Default)]
struct SamsaMember {
    /// Its partitions while stable.
    owned: BTreeSet<i32>,
    /// (partition, offset, seq index) of each record read.
    reads: Vec<(i32, i64, i64)>,
    stop: bool,
}

/// A librdkafka member process (range, roundrobin offered) and a member of Samsa's own
/// client (`GroupConsumer`, range) in one group: whichever joins first leads and assigns
/// with its own range assignor, and the other follows that assignment. Once both hold a part
/// of the six partitions, records produced are each read once, by the member owning their
/// partition. Run twice, each member leading once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_and_samsa_members_share_a_group() {
    use samsa::client::group::consumer::{GroupConsumer, GroupConsumerConfig, OffsetReset};
    use samsa::client::group::member::MemberConfig;
    use std::sync::{Arc, Mutex};

    for samsa_leads in [false, true] {
        let broker = BrokerProcess::start_with(GROUP_BROKER_OVERRIDES);
        let bootstrap = broker.bootstrap();
        let topic = "group-mixed";
        let group = "group-mixed-members";
        create_topic(&bootstrap, topic, GROUP_PARTITIONS).await;
        let shared = Arc::new(Mutex::new(SamsaMember::default()));
        let config = GroupConsumerConfig {
            client: samsa::client::ClientConfig {
                bootstrap: vec![bootstrap.clone()],
                client_id: "samsa-member".into(),
                ..Default::default()
            },
            member: MemberConfig {
                group_id: group.into(),
                session_timeout_ms: i32::try_from(rdkafka_groups::SESSION_TIMEOUT_MS).unwrap(),
                heartbeat_interval_ms: i64::try_from(rdkafka_groups::HEARTBEAT_INTERVAL_MS)
                    .unwrap(),
                rebalance_timeout_ms: 20_000,
                ..MemberConfig::default()
            },
            auto_commit_interval_ms: 500,
            auto_offset_reset: OffsetReset::Earliest,
            ..GroupConsumerConfig::default()
        };
        let run_samsa = |shared: Arc<Mutex<SamsaMember>>| {
            let mut consumer = GroupConsumer::new(config.clone(), &[topic]).expect("member");
            samsa::rt::task::spawn(async move {
                while !shared.lock().expect("state").stop {
                    let records = consumer.poll().await.expect("the samsa member polls");
                    let mut state = shared.lock().expect("state");
                    for r in records {
                        let seq = r.record.headers.iter().find(|(k, _)| k == "seq");
                        let index = seq
                            .and_then(|(_, v)| v.as_deref())
                            .and_then(|v| <[u8; 8]>::try_from(v).ok())
                            .map_or(-1, |b| i64::try_from(u64::from_be_bytes(b)).unwrap_or(-1));
                        state.reads.push((r.partition, r.record.offset, index));
                    }
                    state.owned = if consumer.is_stable() {
                        consumer.assignment().into_iter().map(|(_, p)| p).collect()
                    } else {
                        BTreeSet::new()
                    };
                }
                consumer.close().await.expect("the samsa member leaves");
            })
        };
        let dir = broker.dir().to_path_buf();
        let (mut librdkafka, samsa_task);
        if samsa_leads {
            samsa_task = run_samsa(shared.clone());
            wait_for("the samsa member holds every partition", || {
                let n = shared.lock().expect("state").owned.len();
                if n == usize::try_from(GROUP_PARTITIONS).unwrap() {
                    Ok(())
                } else {
                    Err(format!("it holds {n}"))
                }
            });
            librdkafka = MemberProcess::spawn(&dir, "librdkafka", &bootstrap, group, topic);
        } else {
            librdkafka = MemberProcess::spawn(&dir, "librdkafka", &bootstrap, group, topic);
            wait_for("the librdkafka member holds every partition", || {
                let n = librdkafka.report().current.len();
                if n == usize::try_from(GROUP_PARTITIONS).unwrap() {
                    Ok(())
                } else {
                    Err(format!("it holds {n}"))
                }
            });
            samsa_task = run_samsa(shared.clone());
        }
        let reports = || {
            let state = shared.lock().expect("state");
            let samsa = rdkafka_groups::MemberReport {
                current: state.owned.clone(),
                records: state
                    .reads
                    .iter()
                    .map(|&(partition, offset, index)| rdkafka_groups::GroupRead {
                        partition,
                        offset,
                        index,
                    })
                    .collect(),
                ..Default::default()
            };
            vec![
                ("librdkafka".to_string(), librdkafka.report()),
                ("samsa".to_string(), samsa),
            ]
        };
        let owners = wait_for("the two members share the partitions", || {
            stable_assignment(&reports(), GROUP_PARTITIONS)
        });
        let base_ts = now_ms() - 60_000;
        let batch: Vec<Sent> = (0..GROUP_BATCH_RECORDS)
            .map(|i| record("mixed", i, base_ts))
            .collect();
        let acked = produce_all(&producer(&bootstrap, "none"), topic, &batch).await;
        wait_for("the members read every record", || {
            all_read(&acked, &reads_by_position(&reports()))
        });
        assert_read_once(
            "mixed group",
            &acked,
            &reads_by_position(&reports()),
            |m, p| owners.get(m).is_some_and(|ps| ps.contains(&p)),
        );
        assert!(
            librdkafka.report().errors.is_empty(),
            "samsa leads: {samsa_leads}; librdkafka errors: {:?}",
            librdkafka.report().errors
        );
        shared.lock().expect("state").stop = true;
        samsa_task.await.expect("the samsa member's task");
        librdkafka.stop();
    }
}

/// Keys and records of the compacted-topic test.
const COMPACTED_KEYS: usize = 50;
const COMPACTED_RECORDS: usize = 3_000;
/// How long the test waits for the log cleaner to pass over the topic.
const CLEANER_WAIT_MS_MAX: u64 = 30_000;

/// One record read back: offset, key, payload.
type ReadBack = (i64, Vec<u8>, Option<Vec<u8>>);

/// Every record of partition 0 of `topic` from the beginning to the high watermark, read
/// with librdkafka in assign mode.
fn read_compacted(bootstrap: &str, topic: &str) -> Vec<ReadBack> {
    let consumer = consumer(bootstrap, "throwaway-compacted");
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("watermarks");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("add the partition");
    consumer.assign(&tpl).expect("assign");
    let mut out: Vec<ReadBack> = Vec::new();
    let deadline = samsa::rt::time::now() + Duration::from_secs(30);
    while out.last().is_none_or(|(o, _, _)| *o < high - 1) {
        assert!(
            samsa::rt::time::now() < deadline,
            "{topic}: read {} records, none at {} yet",
            out.len(),
            high - 1
        );
        use rdkafka::Message;
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => out.push((
                m.offset(),
                m.key().unwrap_or_default().to_vec(),
                m.payload().map(<[u8]>::to_vec),
            )),
            Some(Err(e)) => panic!("{topic}: consume failed: {e}"),
            None => {}
        }
    }
    out
}

/// A compacted topic keeps the latest value of every key through the log cleaner and a
/// SIGKILL restart: librdkafka reads every key's last value back, each record at the offset
/// it was acknowledged at, with the superseded ones gone.
#[tokio::test]
async fn compacted_topic_keeps_the_latest_value_per_key_through_cleaning_and_a_restart() {
    let mut broker = BrokerProcess::start_with(&[("log.cleaner.backoff.ms", "100")]);
    let bootstrap = broker.bootstrap();
    let topic = "compacted";
    let created = admin(&bootstrap)
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))
                .set("cleanup.policy", "compact")
                .set("segment.bytes", "16384")
                .set("min.cleanable.dirty.ratio", "0.01")],
            &admin_options(),
        )
        .await
        .expect("CreateTopics request");
    assert_eq!(created, vec![Ok(topic.to_string())]);
    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..COMPACTED_RECORDS)
        .map(|i| Sent {
            index: i,
            key: format!("key-{}", i % COMPACTED_KEYS).into_bytes(),
            payload: Some(format!("value {i} {}", "v".repeat(i % 200)).into_bytes()),
            headers: Vec::new(),
            timestamp_ms: base_ts + i as i64,
        })
        .collect();
    // Batches well under the topic's 16 KiB segments.
    let small_batches: rdkafka::producer::FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("compression.type", "lz4")
        .set("enable.idempotence", "false")
        .set("batch.size", "4096")
        .set("linger.ms", "5")
        .create()
        .expect("create the producer");
    let acked = produce_all(&small_batches, topic, &records).await;
    let at: BTreeMap<i64, &Sent> = acked.iter().map(|a| (a.offset, &a.sent)).collect();
    let mut latest: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for a in &acked {
        latest.insert(
            a.sent.key.clone(),
            a.sent.payload.clone().unwrap_or_default(),
        );
    }
    let check = |read: &[ReadBack], when: &str| {
        let mut previous = -1;
        let mut replayed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (offset, key, payload) in read {
            assert!(*offset > previous, "{when}: offsets go back at {offset}");
            previous = *offset;
            let sent = at
                .get(offset)
                .unwrap_or_else(|| panic!("{when}: offset {offset} was never acknowledged"));
            assert_eq!(
                (key, payload),
                (&sent.key, &sent.payload),
                "{when}: offset {offset}"
            );
            replayed.insert(key.clone(), payload.clone().unwrap_or_default());
        }
        assert_eq!(replayed, latest, "{when}: the latest value of every key");
    };
    // Wait for the cleaner: the read from the beginning comes back shorter.
    let began = samsa::rt::time::now();
    let cleaned = loop {
        let read = read_compacted(&bootstrap, topic);
        check(&read, "before the restart");
        if read.len() < COMPACTED_RECORDS / 2 {
            break read;
        }
        assert!(
            began.elapsed() < Duration::from_millis(CLEANER_WAIT_MS_MAX),
            "the cleaner removed only {} of {COMPACTED_RECORDS} records in {CLEANER_WAIT_MS_MAX} ms",
            COMPACTED_RECORDS - read.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    broker.kill9();
    broker.restart();
    let after = read_compacted(&bootstrap, topic);
    check(&after, "after the restart");
    assert!(
        after.len() <= cleaned.len(),
        "the restart brought records back"
    );
}
