//! A data directory written by the previous release (the single-node format of steps 1-8:
//! `samsa-topics/*.properties`, the `producer-id-block` file, `samsa-dynamic-config`), kept
//! as a fixture under `tests/fixtures/previous-release/`, so that the move of topics, configs
//! and producer ids onto the metadata log (issue 14) is proven on a directory the old code
//! wrote, not one the new code imagines: every topic keeps its id, partition count, config
//! overrides and records, the dynamic broker config stays, committed group offsets are read
//! back, and producer ids continue above the old ones. The directory is opened as `samsa
//! broker` opens it (`broker::node`): the first start migrates it into the metadata log of
//! the node's quorum of one, and producer ids then come from the controller's blocks.
//!
//! `write_the_previous_release_fixture` (ignored) wrote the fixture with the release it
//! describes; `EXPECTED` beside it lists what the directory holds.
//!
//! Real files and sockets exist only without the `sim` feature.
#![cfg(not(feature = "sim"))]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use samsa::broker::producer_ids::{decode_block_end, PRODUCER_ID_BLOCK_FILE};
use samsa::protocol::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse};
use samsa::protocol::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use samsa::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use samsa::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use samsa::protocol::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse,
};
use samsa::protocol::record_batch::BatchBuilder;
use samsa::protocol::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};

#[path = "../support/test_broker.rs"]
mod test_broker;
use test_broker::{create, produce, topic, Conn, TestBroker};

/// A fixture topic: (name, partitions, overrides, records per partition).
type FixtureTopic = (
    &'static str,
    i32,
    &'static [(&'static str, &'static str)],
    i64,
);

/// The topics of the fixture.
const TOPICS: &[FixtureTopic] = &[
    ("orders", 3, &[("retention.ms", "86400000")], 4),
    ("compacted", 1, &[("cleanup.policy", "compact")], 2),
];
const GROUP: &str = "fixture-group";
/// The broker settings the fixture was written with (one `__consumer_offsets` partition keeps
/// the fixture small), and read back with.
const SETTINGS: &[(&str, &str)] = &[("node.id", "1"), ("offsets.topic.num.partitions", "1")];
/// The dynamic broker config the fixture sets (cluster-wide default).
const DYNAMIC: (&str, &str) = ("log.retention.ms", "172800000");

fn fixture_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/previous-release"
    ))
}

#[allow(clippy::disallowed_methods)] // a test's record timestamps
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn records(partition: i32, count: i64) -> Bytes {
    let mut builder = BatchBuilder::new(0);
    for i in 0..count {
        let key = format!("key-{partition}-{i}");
        let value = format!("value-{partition}-{i}");
        builder.push(now_ms(), Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    }
    builder.build().freeze()
}

async fn init_producer_id(conn: &mut Conn) -> i64 {
    let response: InitProducerIdResponse = conn
        .call(
            4,
            &InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: 60_000,
                producer_id: ProducerId::NONE,
                producer_epoch: ProducerEpoch::NONE,
            },
        )
        .await;
    assert_eq!(response.error_code, 0);
    response.producer_id.0
}

/// Copies the fixture (or any directory) file by file.
#[allow(clippy::disallowed_methods)] // the test's own copy of its fixture
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[allow(clippy::disallowed_methods)]
fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes the fixture: run with the release it describes, then commit the directory.
/// `cargo test --test broker -- previous_release::write --ignored`
#[tokio::test]
#[ignore = "writes tests/fixtures/previous-release; run once with the release it describes"]
async fn write_the_previous_release_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start_with_background(dir.path(), SETTINGS).await;
    let mut conn = broker.connect().await;
    let mut expected = String::new();
    for (name, partitions, overrides, count) in TOPICS {
        assert_eq!(
            create(&mut conn, topic(name, *partitions, overrides)).await,
            0
        );
        for p in 0..*partitions {
            assert_eq!(produce(&mut conn, name, p, records(p, *count)).await.0, 0);
        }
        let id = broker.broker.topics.get(name).await.unwrap().id;
        expected.push_str(&format!("topic {name} {} {partitions}\n", id.to_base64()));
    }
    let altered: IncrementalAlterConfigsResponse = conn
        .call(
            1,
            &IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource_type: 4,
                    resource_name: String::new(),
                    configs: vec![AlterableConfig {
                        name: DYNAMIC.0.into(),
                        config_operation: 0,
                        value: Some(DYNAMIC.1.into()),
                    }],
                }],
                validate_only: false,
            },
        )
        .await;
    assert_eq!(altered.responses[0].error_code, 0);
    // FindCoordinator creates `__consumer_offsets`; COORDINATOR_NOT_AVAILABLE or
    // COORDINATOR_LOAD_IN_PROGRESS until its groups are served.
    let found: FindCoordinatorResponse = conn
        .call(
            0,
            &FindCoordinatorRequest {
                key: GROUP.into(),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(found.error_code, 0, "{found:?}");
    let mut attempts = 0;
    loop {
        let committed: OffsetCommitResponse = conn
            .call(
                8,
                &OffsetCommitRequest {
                    group_id: GROUP.into(),
                    generation_id_or_member_epoch: -1,
                    member_id: String::new(),
                    topics: vec![OffsetCommitRequestTopic {
                        name: "orders".into(),
                        partitions: vec![OffsetCommitRequestPartition {
                            partition_index: 1,
                            committed_offset: Offset(3),
                            committed_leader_epoch: LeaderEpoch(-1),
                            committed_metadata: Some("fixture".into()),
                        }],
                    }],
                    ..Default::default()
                },
            )
            .await;
        let code = committed.topics[0].partitions[0].error_code;
        if code == 0 {
            break;
        }
        attempts += 1;
        assert!(
            attempts < 100 && (code == 14 || code == 15),
            "commit: error {code}"
        );
        samsa::rt::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut last_id = -1;
    for _ in 0..3 {
        last_id = init_producer_id(&mut conn).await;
    }
    expected.push_str(&format!("last-producer-id {last_id}\n"));
    drop(conn);
    broker.stop().await;
    let target = fixture_dir();
    copy_dir(dir.path(), &target);
    #[allow(clippy::disallowed_methods)]
    std::fs::write(target.join("EXPECTED"), expected).unwrap();
}

#[tokio::test]
async fn the_previous_release_data_directory_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), dir.path());
    let expected = String::from_utf8(read(&dir.path().join("EXPECTED"))).unwrap();
    let old_block_end = decode_block_end(&read(&dir.path().join(PRODUCER_ID_BLOCK_FILE)))
        .expect("the fixture's producer-id-block reads");
    let broker = TestBroker::start_with_background(dir.path(), SETTINGS).await;

    for line in expected.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[..] {
            ["topic", name, id, partitions] => {
                let topic = broker
                    .broker
                    .topics
                    .get(name)
                    .await
                    .unwrap_or_else(|| panic!("topic {name} is kept"));
                assert_eq!(topic.id.to_base64(), id, "{name} keeps its id");
                // It is the committed metadata that holds it now (migrated on first start).
                let image = broker.node.controller.published().image;
                let committed = image
                    .topic(name)
                    .unwrap_or_else(|| panic!("topic {name} is in the metadata log"));
                assert_eq!(committed.id, topic.id);
                assert_eq!(committed.partitions.len(), topic.partitions.len());
                assert_eq!(topic.partitions.len().to_string(), partitions);
                let (_, _, overrides, count) = TOPICS
                    .iter()
                    .find(|(n, ..)| *n == name)
                    .expect("a fixture topic");
                for (key, value) in *overrides {
                    assert_eq!(topic.overrides.get(*key).map(String::as_str), Some(*value));
                }
                for partition in &topic.partitions {
                    assert_eq!(
                        partition.high_watermark(),
                        *count,
                        "{name}'s records are kept"
                    );
                }
            }
            ["last-producer-id", id] => {
                let old: i64 = id.parse().unwrap();
                assert!(old < old_block_end);
                let mut conn = broker.connect().await;
                let next = init_producer_id(&mut conn).await;
                assert!(
                    next >= old_block_end,
                    "producer ids continue above the old block's end {old_block_end}: {next}"
                );
            }
            _ => panic!("EXPECTED: a line it does not know: {line}"),
        }
    }
    let layers = broker.broker.dynamic.layers().await;
    assert_eq!(
        layers.cluster_default.get(DYNAMIC.0).map(String::as_str),
        Some(DYNAMIC.1),
        "the dynamic broker config is kept"
    );
    let mut conn = broker.connect().await;
    let request = OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "orders".into(),
            partition_indexes: vec![1],
        }]),
        ..Default::default()
    };
    // COORDINATOR_LOAD_IN_PROGRESS until the groups are loaded: ask once more.
    let mut fetched: OffsetFetchResponse = conn.call(7, &request).await;
    if fetched.topics[0].partitions[0].error_code == 14 {
        samsa::rt::time::sleep(std::time::Duration::from_millis(500)).await;
        fetched = conn.call(7, &request).await;
    }
    let partition = &fetched.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(
        partition.committed_offset,
        Offset(3),
        "the committed offset is kept"
    );
    assert_eq!(partition.metadata.as_deref(), Some("fixture"));
    drop(conn);
    broker.stop().await;
}

/// The fixture, read by the previous release's code, written as metadata records
/// (`controller::migration`): replayed into an empty image they give every topic with its id,
/// partitions and overrides, the dynamic config, and a next producer id at the old block's end.
#[tokio::test]
async fn the_previous_release_directory_becomes_metadata_records() {
    use samsa::controller::image::{ConfigResource, MetadataImage};
    use samsa::controller::migration::LegacyDirectory;
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), dir.path());
    let old_block_end = decode_block_end(&read(&dir.path().join(PRODUCER_ID_BLOCK_FILE)))
        .expect("the fixture's producer-id-block reads");
    let broker = TestBroker::start(dir.path(), SETTINGS).await;
    let legacy = LegacyDirectory {
        // The block's end as the old file says, not as the node reads it now.
        producer_id_block_end: Some(old_block_end),
        ..samsa::broker::node::legacy_directory(&broker.broker).await
    };
    let records = legacy.records(1).expect("the fixture migrates");
    let mut image = MetadataImage::empty();
    for (offset, record) in records.iter().enumerate() {
        image.replay(offset as i64, 0, record).expect("applies");
    }
    for topic in &legacy.topics {
        let migrated = image.topic(&topic.name).expect("every topic");
        assert_eq!(migrated.id, topic.id);
        assert_eq!(migrated.partitions.len() as i32, topic.partitions);
        assert_eq!(
            image.configs_of(&ConfigResource::topic(&topic.name)),
            topic.overrides
        );
    }
    assert!(image.topic("__consumer_offsets").is_some());
    assert_eq!(
        image
            .configs_of(&ConfigResource::broker(None))
            .get(DYNAMIC.0)
            .map(String::as_str),
        Some(DYNAMIC.1)
    );
    assert_eq!(image.next_producer_id, old_block_end);
    broker.stop().await;
}
