//! The broker's handlers over real TCP, spoken to with Samsa's own codec (requests built by
//! hand, so each test controls every field): topic creation rules, auto-creation, produce
//! with each acks value and with bad batches, fetch long polling, ListOffsets, deletion, and
//! what survives a restart, and Metadata's authorized operations (KIP-430). Real clients are
//! exercised by the interop tests.

#![cfg(not(feature = "sim"))]

use std::collections::BTreeMap;

use bytes::{Buf, Bytes, BytesMut};
use samsa::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use samsa::protocol::create_topics::{CreatableTopic, CreateTopicsRequest, CreateTopicsResponse};
use samsa::protocol::delete_topics::{DeleteTopicsRequest, DeleteTopicsResponse};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use samsa::protocol::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use samsa::protocol::metadata::{MetadataRequest, MetadataRequestTopic, MetadataResponse};
use samsa::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use samsa::protocol::record_batch::{self, BatchBuilder};
use samsa::protocol::types::{NodeId, Offset};

#[path = "../support/test_broker.rs"]
mod test_broker;

mod groups;

use test_broker::{topic, Conn, TestBroker};

async fn create(
    conn: &mut Conn,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> Vec<(String, i16)> {
    let response: CreateTopicsResponse = conn
        .call(
            7,
            &CreateTopicsRequest {
                topics,
                timeout_ms: 10_000,
                validate_only,
            },
        )
        .await;
    response
        .topics
        .into_iter()
        .map(|t| (t.name, t.error_code))
        .collect()
}

fn batch(values: &[&str], timestamp: i64) -> Bytes {
    let mut builder = BatchBuilder::new(0);
    for v in values {
        builder.push(
            timestamp,
            Some(b"k"),
            Some(v.as_bytes()),
            &[("h", Some(b"x"))],
        );
    }
    builder.build().freeze()
}

fn produce_request(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest {
        acks,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// (error code, base offset) of the single partition of a produce.
async fn produce(conn: &mut Conn, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let response: ProduceResponse = conn
        .call(9, &produce_request(topic, partition, -1, records))
        .await;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset.0)
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest {
        max_wait_ms,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: topic.to_string(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: Offset(offset),
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Values fetched from `offset` (one fetch), with the partition's error code.
async fn fetch(
    conn: &mut Conn,
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
) -> (i16, Vec<(i64, String)>) {
    let response: FetchResponse = conn
        .call(12, &fetch_request(topic, partition, offset, max_wait_ms))
        .await;
    let p = &response.responses[0].partitions[0];
    let mut out = Vec::new();
    for item in record_batch::batches(p.records.clone().unwrap_or_default()) {
        let (_, batch) = item.unwrap();
        for record in record_batch::records(&batch).unwrap() {
            let record = record.unwrap();
            if record.offset >= offset {
                out.push((
                    record.offset,
                    String::from_utf8(record.value.unwrap().to_vec()).unwrap(),
                ));
            }
        }
    }
    (p.error_code, out)
}

async fn list_offset(conn: &mut Conn, topic: &str, timestamp: i64) -> (i16, i64) {
    let response: ListOffsetsResponse = conn
        .call(
            7,
            &ListOffsetsRequest {
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
            },
        )
        .await;
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset.0)
}

/// Metadata (v12) of every topic.
async fn all_topics(conn: &mut Conn) -> MetadataResponse {
    conn.call(
        12,
        &MetadataRequest {
            topics: None,
            ..Default::default()
        },
    )
    .await
}

fn code(name: ErrorCode) -> i16 {
    name.code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_creation_follows_kafkas_rules() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let results = create(
        &mut conn,
        vec![
            topic("orders", 3, &[]),
            topic("bad name", 1, &[]),
            topic(&"x".repeat(250), 1, &[]),
            topic("zero", 0, &[]),
            topic("dup", 1, &[]),
            topic("dup", 1, &[]),
            topic("unknown-config", 1, &[("no.such.config", "1")]),
            topic("compacted", 1, &[("cleanup.policy", "compact")]),
            CreatableTopic {
                replication_factor: 3,
                ..topic("rf3", 1, &[])
            },
        ],
        false,
    )
    .await;
    let expected = [
        ("orders", ErrorCode::NONE),
        ("bad name", ErrorCode::INVALID_TOPIC_EXCEPTION),
        (&"x".repeat(250), ErrorCode::INVALID_TOPIC_EXCEPTION),
        ("zero", ErrorCode::INVALID_PARTITIONS),
        ("dup", ErrorCode::INVALID_REQUEST),
        ("dup", ErrorCode::INVALID_REQUEST),
        ("unknown-config", ErrorCode::INVALID_CONFIG),
        ("compacted", ErrorCode::NONE),
        ("rf3", ErrorCode::INVALID_REPLICATION_FACTOR),
    ];
    for ((name, got), (want_name, want)) in results.iter().zip(expected.iter()) {
        assert_eq!(name, want_name);
        assert_eq!(*got, want.code(), "{name}: got {}", ErrorCode(*got));
    }
    // Existing names, and names that collide once '.' reads as '_'.
    let again = create(
        &mut conn,
        vec![topic("orders", 1, &[]), topic("a.b", 1, &[])],
        false,
    )
    .await;
    assert_eq!(again[0].1, code(ErrorCode::TOPIC_ALREADY_EXISTS));
    assert_eq!(again[1].1, code(ErrorCode::NONE));
    let collide = create(&mut conn, vec![topic("a_b", 1, &[])], false).await;
    assert_eq!(collide[0].1, code(ErrorCode::INVALID_TOPIC_EXCEPTION));
    // validate_only checks without creating.
    let validated = create(&mut conn, vec![topic("later", 2, &[])], true).await;
    assert_eq!(validated[0].1, code(ErrorCode::NONE));
    let metadata = all_topics(&mut conn).await;
    let names: Vec<_> = metadata
        .topics
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["a.b", "compacted", "orders"]);
    let orders = metadata
        .topics
        .iter()
        .find(|t| t.name.as_deref() == Some("orders"))
        .unwrap();
    assert_eq!(orders.partitions.len(), 3);
    assert!(orders
        .partitions
        .iter()
        .all(|p| p.leader_id == NodeId(1) && p.isr_nodes == [NodeId(1)]));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creates_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[("num.partitions", "2")]).await;
    let mut conn = broker.connect().await;
    let ask = |name: &str, allow: bool| MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(name.to_string()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: allow,
        ..Default::default()
    };
    let refused: MetadataResponse = conn.call(12, &ask("auto", false)).await;
    assert_eq!(
        refused.topics[0].error_code,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    let created: MetadataResponse = conn.call(12, &ask("auto", true)).await;
    assert_eq!(created.topics[0].error_code, 0);
    assert_eq!(created.topics[0].partitions.len(), 2);
    assert_ne!(
        created.topics[0].topic_id,
        samsa::protocol::wire::Uuid::ZERO
    );
    let invalid: MetadataResponse = conn.call(12, &ask("no/slash", true)).await;
    assert_eq!(
        invalid.topics[0].error_code,
        code(ErrorCode::INVALID_TOPIC_EXCEPTION)
    );
    broker.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[("auto.create.topics.enable", "false")]).await;
    let mut conn = broker.connect().await;
    let off: MetadataResponse = conn.call(12, &ask("auto", true)).await;
    assert_eq!(
        off.topics[0].error_code,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    broker.stop().await;

    // The controller decides auto-creations too: a default replication factor above the
    // one live broker is refused with Kafka's error, and nothing is created.
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[("default.replication.factor", "3")]).await;
    let mut conn = broker.connect().await;
    let refused: MetadataResponse = conn.call(12, &ask("auto", true)).await;
    assert_eq!(
        refused.topics[0].error_code,
        code(ErrorCode::INVALID_REPLICATION_FACTOR)
    );
    assert!(broker.broker.topics.get("auto").await.is_none());
    assert!(broker
        .node
        .controller
        .published()
        .image
        .topic("auto")
        .is_none());
    broker.stop().await;
}

/// Kafka's topic operations without an authorizer: READ (3), WRITE, CREATE, DELETE, ALTER,
/// DESCRIBE (8), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11), one bit per code.
const TOPIC_OPERATIONS: i32 = 0b1101_1111_1000;
/// The cluster's: CREATE (5), ALTER (7), DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
/// ALTER_CONFIGS, IDEMPOTENT_WRITE (12).
const CLUSTER_OPERATIONS: i32 = 0b1_1111_1010_0000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_answers_authorized_operations_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[("auto.create.topics.enable", "false")]).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        create(&mut conn, vec![topic("ops", 1, &[])], false).await[0].1,
        0
    );
    let known_id = all_topics(&mut conn).await.topics[0].topic_id;
    let ask = |include_cluster: bool, include_topics: bool| MetadataRequest {
        topics: Some(vec![
            MetadataRequestTopic {
                name: Some("ops".to_string()),
                ..Default::default()
            },
            MetadataRequestTopic {
                name: Some("absent".to_string()),
                ..Default::default()
            },
        ]),
        allow_auto_topic_creation: false,
        include_cluster_authorized_operations: include_cluster,
        include_topic_authorized_operations: include_topics,
    };
    for version in 8..=13 {
        let asked: MetadataResponse = conn.call(version, &ask(version <= 10, true)).await;
        let ops: Vec<i32> = asked
            .topics
            .iter()
            .map(|t| t.topic_authorized_operations)
            .collect();
        // Kafka sets them on every topic answered by name, the unknown one too.
        assert_eq!(ops, vec![TOPIC_OPERATIONS; 2], "v{version}");
        let cluster = if version <= 10 {
            CLUSTER_OPERATIONS
        } else {
            i32::MIN
        };
        assert_eq!(asked.cluster_authorized_operations, cluster, "v{version}");
        let not_asked: MetadataResponse = conn.call(version, &ask(false, false)).await;
        assert!(not_asked
            .topics
            .iter()
            .all(|t| t.topic_authorized_operations == i32::MIN));
        assert_eq!(not_asked.cluster_authorized_operations, i32::MIN);
    }
    // By id (v12+): a known id gets them, an unknown one keeps "not requested", as in Kafka.
    let by_id: MetadataResponse = conn
        .call(
            12,
            &MetadataRequest {
                topics: Some(vec![
                    MetadataRequestTopic {
                        topic_id: known_id,
                        name: None,
                    },
                    MetadataRequestTopic {
                        topic_id: samsa::protocol::wire::Uuid([7; 16]),
                        name: None,
                    },
                ]),
                allow_auto_topic_creation: false,
                include_topic_authorized_operations: true,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        by_id.topics[0].topic_authorized_operations,
        TOPIC_OPERATIONS
    );
    assert_eq!(
        by_id.topics[1].error_code,
        code(ErrorCode::UNKNOWN_TOPIC_ID)
    );
    assert_eq!(by_id.topics[1].topic_authorized_operations, i32::MIN);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_validates_and_fetch_returns_records_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[("message.max.bytes", "2000")]).await;
    let mut conn = broker.connect().await;
    create(&mut conn, vec![topic("t", 1, &[])], false).await;
    assert_eq!(
        produce(&mut conn, "t", 0, batch(&["a", "b"], 1_000)).await,
        (0, 0)
    );
    assert_eq!(
        produce(&mut conn, "t", 0, batch(&["c"], 2_000)).await,
        (0, 2)
    );
    // A bad CRC, a batch over max.message.bytes, an unknown partition and topic.
    let mut corrupt = BytesMut::from(&batch(&["x"], 3_000)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        produce(&mut conn, "t", 0, corrupt.freeze()).await.0,
        code(ErrorCode::CORRUPT_MESSAGE)
    );
    let big = "v".repeat(3000);
    assert_eq!(
        produce(&mut conn, "t", 0, batch(&[&big], 3_000)).await.0,
        code(ErrorCode::MESSAGE_TOO_LARGE)
    );
    assert_eq!(
        produce(&mut conn, "t", 7, batch(&["x"], 3_000)).await.0,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    assert_eq!(
        produce(&mut conn, "nope", 0, batch(&["x"], 3_000)).await.0,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    // acks=2 is invalid; acks=0 gets no answer, so the next answer is for the next request.
    let response: ProduceResponse = conn
        .call(9, &produce_request("t", 0, 2, batch(&["x"], 1)))
        .await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        code(ErrorCode::INVALID_REQUIRED_ACKS)
    );
    let silent = conn.request(9, &produce_request("t", 0, 0, batch(&["d"], 4_000)));
    conn.send_frame(&silent).await;
    assert_eq!(
        produce(&mut conn, "t", 0, batch(&["e"], 5_000)).await,
        (0, 4)
    );
    let (error, records) = fetch(&mut conn, "t", 0, 0, 0).await;
    assert_eq!(error, 0);
    let values: Vec<_> = records.iter().map(|(o, v)| (*o, v.as_str())).collect();
    assert_eq!(values, [(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e")]);
    // From the middle of a batch, and past the end.
    let (_, from_one) = fetch(&mut conn, "t", 0, 1, 0).await;
    assert_eq!(from_one[0], (1, "b".to_string()));
    let (error, _) = fetch(&mut conn, "t", 0, 99, 0).await;
    assert_eq!(error, code(ErrorCode::OFFSET_OUT_OF_RANGE));
    // ListOffsets: earliest, latest, by time (the first record at or after it), none after.
    assert_eq!(list_offset(&mut conn, "t", -2).await, (0, 0));
    assert_eq!(list_offset(&mut conn, "t", -1).await, (0, 5));
    assert_eq!(list_offset(&mut conn, "t", 1_500).await, (0, 2));
    assert_eq!(list_offset(&mut conn, "t", 4_000).await, (0, 3));
    assert_eq!(list_offset(&mut conn, "t", 9_999).await, (0, -1));
    assert_eq!(list_offset(&mut conn, "t", -3).await, (0, 4));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_fetch_wakes_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut setup = broker.connect().await;
    create(&mut setup, vec![topic("t", 1, &[])], false).await;
    let mut consumer = broker.connect().await;
    // A minute of max_wait: if the append did not wake it, the fetch would end empty.
    let waiting =
        samsa::rt::task::spawn(async move { fetch(&mut consumer, "t", 0, 0, 60_000).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        produce(&mut setup, "t", 0, batch(&["late"], 1)).await,
        (0, 0)
    );
    let (error, records) = waiting.await.unwrap();
    assert_eq!(error, 0);
    assert_eq!(records, [(0, "late".to_string())]);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_records_and_configs_survive_a_restart_and_deletion_is_final() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    create(
        &mut conn,
        vec![
            topic("keep", 2, &[("cleanup.policy", "compact")]),
            topic("drop", 1, &[]),
        ],
        false,
    )
    .await;
    assert_eq!(
        produce(&mut conn, "keep", 1, batch(&["a", "b"], 1)).await,
        (0, 0)
    );
    assert_eq!(
        produce(&mut conn, "drop", 0, batch(&["x"], 1)).await,
        (0, 0)
    );
    let deleted: DeleteTopicsResponse = conn
        .call(
            5,
            &DeleteTopicsRequest {
                topic_names: vec!["drop".into(), "never".into()],
                timeout_ms: 10_000,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(deleted.responses[0].error_code, 0);
    assert_eq!(
        deleted.responses[1].error_code,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    let (error, _) = fetch(&mut conn, "drop", 0, 0, 0).await;
    assert_eq!(error, code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
    let keep_id = broker.broker.topics.get("keep").await.unwrap().id;
    broker.stop().await;

    let broker = TestBroker::start(dir.path(), &[]).await;
    let topics = broker.broker.topics.list().await;
    assert_eq!(
        topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["keep"]
    );
    assert_eq!(topics[0].id, keep_id);
    assert_eq!(
        topics[0].overrides,
        BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())])
    );
    assert!(!dir.path().join("drop-0").exists());
    let mut conn = broker.connect().await;
    let (_, records) = fetch(&mut conn, "keep", 1, 0, 0).await;
    assert_eq!(records, [(0, "a".to_string()), (1, "b".to_string())]);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_falls_back_and_old_produce_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let current: ApiVersionsResponse = conn.call(3, &ApiVersionsRequest::default()).await;
    assert_eq!(current.error_code, 0);
    let produce = current.api_keys.iter().find(|k| k.api_key == 0).unwrap();
    assert_eq!((produce.min_version, produce.max_version), (0, 13));
    // A version from the future: answered in v0 format with UNSUPPORTED_VERSION (KIP-511).
    let mut frame = conn.request(3, &ApiVersionsRequest::default());
    frame[2..4].copy_from_slice(&99i16.to_be_bytes());
    conn.send_frame(&frame).await;
    let mut reply = conn.read_frame().await.unwrap();
    reply.advance(4); // the v0 response header: the correlation id
    let fallback = ApiVersionsResponse::decode_exact(reply, 0).unwrap();
    assert_eq!(fallback.error_code, code(ErrorCode::UNSUPPORTED_VERSION));
    assert_eq!(fallback.api_keys, current.api_keys);
    // Produce v2 is gone in Kafka 4: the connection is closed without an answer.
    let mut old = conn.request(3, &produce_request("t", 0, 1, batch(&["x"], 1)));
    old[2..4].copy_from_slice(&2i16.to_be_bytes());
    conn.send_frame(&old).await;
    assert_eq!(conn.read_frame().await, None);
    broker.stop().await;
}
