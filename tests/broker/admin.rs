//! The broker's admin and config APIs and fetch sessions over real TCP, with requests built
//! by hand: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topic and broker
//! resources, what survives a restart, an altered config taking effect on produce),
//! CreatePartitions, DescribeCluster, DescribeLogDirs, and incremental fetch sessions
//! (KIP-227): only changed partitions answered, epoch and session id errors, a full cache,
//! a follower's session evicting a consumer's. Eviction by age is unit-tested in
//! `broker::fetch_session` (it needs two minutes of clock). Also `compression.type` and the
//! levels of KIP-390 on topics and as broker defaults: every value Kafka accepts, refusals
//! naming key and range, batches recompressed to the topic's codec and fetched back intact,
//! and batches of `producer` topics (or of the topic's own codec) stored byte for byte.

#![cfg(not(feature = "sim"))]

use bytes::Bytes;
use samsa::protocol::alter_configs::{
    AlterConfigsRequest, AlterConfigsResource, AlterConfigsResponse, AlterableConfig,
};
use samsa::protocol::create_partitions::{
    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsResponse,
    CreatePartitionsTopic,
};
use samsa::protocol::describe_cluster::{DescribeClusterRequest, DescribeClusterResponse};
use samsa::protocol::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResource, DescribeConfigsResourceResult,
    DescribeConfigsResponse, DescribeConfigsResult,
};
use samsa::protocol::describe_log_dirs::{
    DescribableLogDirTopic, DescribeLogDirsRequest, DescribeLogDirsResponse,
};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic,
};
use samsa::protocol::incremental_alter_configs as iac;
use samsa::protocol::metadata::{MetadataRequest, MetadataRequestTopic, MetadataResponse};
use samsa::protocol::record_batch::{self, BatchBuilder, Compression};
use samsa::protocol::types::{NodeId, Offset};

#[path = "../support/test_broker.rs"]
mod test_broker;

use test_broker::{create, produce, topic, Conn, TestBroker};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
// Kafka's ConfigSource codes.
const TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

fn code(e: ErrorCode) -> i16 {
    e.code()
}

fn batch(value_bytes: usize) -> Bytes {
    let mut builder = BatchBuilder::new(0);
    let value = vec![b'v'; value_bytes];
    builder.push(
        samsa_now_ms(),
        Some(b"k".as_slice()),
        Some(value.as_slice()),
        &[],
    );
    builder.build().freeze()
}

/// The wall clock, for record timestamps the broker accepts as recent.
#[allow(clippy::disallowed_methods)] // a test's record timestamps
fn samsa_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn describe(
    conn: &mut Conn,
    version: i16,
    resources: Vec<(i8, &str, Option<Vec<&str>>)>,
    include_synonyms: bool,
) -> Vec<DescribeConfigsResult> {
    let response: DescribeConfigsResponse = conn
        .call(
            version,
            &DescribeConfigsRequest {
                resources: resources
                    .into_iter()
                    .map(|(t, n, keys)| DescribeConfigsResource {
                        resource_type: t,
                        resource_name: n.to_string(),
                        configuration_keys: keys
                            .map(|k| k.into_iter().map(str::to_string).collect()),
                    })
                    .collect(),
                include_synonyms,
                include_documentation: version >= 3,
            },
        )
        .await;
    response.results
}

fn entry<'a>(result: &'a DescribeConfigsResult, name: &str) -> &'a DescribeConfigsResourceResult {
    result
        .configs
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{name} not described"))
}

async fn alter(
    conn: &mut Conn,
    resource_type: i8,
    name: &str,
    configs: &[(&str, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let response: AlterConfigsResponse = conn
        .call(
            2,
            &AlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource_type,
                    resource_name: name.to_string(),
                    configs: configs
                        .iter()
                        .map(|(k, v)| AlterableConfig {
                            name: k.to_string(),
                            value: v.map(str::to_string),
                        })
                        .collect(),
                }],
                validate_only,
            },
        )
        .await;
    let r = &response.responses[0];
    (r.error_code, r.error_message.clone())
}

async fn incremental(
    conn: &mut Conn,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let response: iac::IncrementalAlterConfigsResponse = conn
        .call(
            1,
            &iac::IncrementalAlterConfigsRequest {
                resources: vec![iac::AlterConfigsResource {
                    resource_type,
                    resource_name: name.to_string(),
                    configs: ops
                        .iter()
                        .map(|(k, op, v)| iac::AlterableConfig {
                            name: k.to_string(),
                            config_operation: *op,
                            value: v.map(str::to_string),
                        })
                        .collect(),
                }],
                validate_only,
            },
        )
        .await;
    let r = &response.responses[0];
    (r.error_code, r.error_message.clone())
}

/// The error code of an AlterConfigs that is not validate_only.
async fn alter_code(
    conn: &mut Conn,
    resource_type: i8,
    name: &str,
    configs: &[(&str, Option<&str>)],
) -> i16 {
    alter(conn, resource_type, name, configs, false).await.0
}

/// The error code of an IncrementalAlterConfigs that is not validate_only.
async fn incremental_code(
    conn: &mut Conn,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> i16 {
    incremental(conn, resource_type, name, ops, false).await.0
}

async fn create_partitions(
    conn: &mut Conn,
    name: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> (i16, Option<String>) {
    let response: CreatePartitionsResponse = conn
        .call(
            3,
            &CreatePartitionsRequest {
                topics: vec![CreatePartitionsTopic {
                    name: name.to_string(),
                    count,
                    assignments: assignments.map(|a| {
                        a.into_iter()
                            .map(|ids| CreatePartitionsAssignment {
                                broker_ids: ids.into_iter().map(NodeId).collect(),
                            })
                            .collect()
                    }),
                }],
                timeout_ms: 10_000,
                validate_only,
            },
        )
        .await;
    let r = &response.results[0];
    (r.error_code, r.error_message.clone())
}

async fn partition_count(conn: &mut Conn, name: &str) -> usize {
    let response: MetadataResponse = conn
        .call(
            12,
            &MetadataRequest {
                topics: Some(vec![MetadataRequestTopic {
                    name: Some(name.to_string()),
                    ..Default::default()
                }]),
                allow_auto_topic_creation: false,
                ..Default::default()
            },
        )
        .await;
    response.topics[0].partitions.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_reports_values_sources_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[("log.retention.hours", "48")]).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        create(
            &mut conn,
            topic("described", 1, &[("retention.bytes", "1000000")])
        )
        .await,
        0
    );
    let node = broker.broker.config.node_id.to_string();
    let results = describe(
        &mut conn,
        4,
        vec![
            (TOPIC, "described", None),
            (
                TOPIC,
                "described",
                Some(vec!["segment.bytes", "no.such.key"]),
            ),
            (TOPIC, "missing", None),
            (BROKER, &node, None),
            (BROKER, "77", None),
            (BROKER, "x", None),
            (BROKER, "", None),
            (9, "whatever", None),
        ],
        true,
    )
    .await;
    let all = &results[0];
    assert_eq!(all.error_code, 0);
    assert!(all.configs.len() >= 20, "every topic config is described");
    let e = entry(all, "retention.bytes");
    assert_eq!(e.value.as_deref(), Some("1000000"));
    assert_eq!(e.config_source, TOPIC_CONFIG);
    assert_eq!(e.synonyms[0].source, TOPIC_CONFIG);
    assert_eq!(e.synonyms.last().unwrap().source, DEFAULT_CONFIG);
    assert_eq!(e.config_type, 5, "LONG");
    assert!(e.documentation.as_deref().is_some_and(|d| !d.is_empty()));
    let e = entry(all, "retention.ms");
    assert_eq!(e.value.as_deref(), Some("172800000"));
    assert_eq!(e.config_source, STATIC_BROKER_CONFIG);
    assert_eq!(e.synonyms[0].name, "log.retention.hours");
    let e = entry(all, "max.message.bytes");
    assert_eq!(e.config_source, DEFAULT_CONFIG);
    assert_eq!(e.value.as_deref(), Some("1048588"));
    assert_eq!(entry(all, "cleanup.policy").config_type, 7, "LIST");
    assert!(!entry(all, "cleanup.policy").read_only);

    let filtered = &results[1];
    let names: Vec<&str> = filtered.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["segment.bytes"]);
    assert_eq!(
        results[2].error_code,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );

    let own = &results[3];
    assert_eq!(own.error_code, 0);
    let e = entry(own, "log.retention.hours");
    assert_eq!(
        (e.value.as_deref(), e.config_source, e.read_only),
        (Some("48"), STATIC_BROKER_CONFIG, false)
    );
    assert!(entry(own, "num.partitions").read_only);
    assert_eq!(
        entry(own, "max.incremental.fetch.session.cache.slots")
            .value
            .as_deref(),
        Some("1000")
    );
    assert_eq!(results[4].error_code, code(ErrorCode::INVALID_REQUEST));
    assert!(results[4].error_message.as_deref().unwrap().contains("77"));
    assert_eq!(results[5].error_code, code(ErrorCode::INVALID_REQUEST));
    assert_eq!(results[6].error_code, 0);
    assert!(results[6].configs.is_empty(), "no dynamic defaults set yet");
    assert_eq!(results[7].error_code, code(ErrorCode::INVALID_REQUEST));

    // v1 has neither types nor documentation; without synonyms asked, none are sent.
    let v1 = describe(&mut conn, 1, vec![(TOPIC, "described", None)], false).await;
    let e = entry(&v1[0], "retention.bytes");
    assert!(e.synonyms.is_empty());
    assert_eq!(e.config_source, TOPIC_CONFIG);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altered_topic_configs_take_effect_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(
        create(
            &mut conn,
            topic("altered", 1, &[("retention.ms", "3600000")])
        )
        .await,
        0
    );
    // A 5000-byte record is accepted under the default limit.
    assert_eq!(produce(&mut conn, "altered", 0, batch(5000)).await.0, 0);

    // Bad values are refused naming key and value; validate_only changes nothing.
    let (err, message) = alter(
        &mut conn,
        TOPIC,
        "altered",
        &[("max.message.bytes", Some("-5"))],
        false,
    )
    .await;
    assert_eq!(err, code(ErrorCode::INVALID_CONFIG));
    let message = message.unwrap();
    assert!(
        message.contains("max.message.bytes") && message.contains("-5"),
        "{message}"
    );
    let (err, message) = alter(
        &mut conn,
        TOPIC,
        "altered",
        &[("no.such", Some("1"))],
        false,
    )
    .await;
    assert_eq!(err, code(ErrorCode::INVALID_CONFIG));
    assert!(message.unwrap().contains("no.such"));
    assert_eq!(
        alter_code(&mut conn, TOPIC, "ghost", &[("retention.ms", Some("1"))]).await,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    assert_eq!(
        alter(
            &mut conn,
            TOPIC,
            "altered",
            &[("max.message.bytes", Some("1000"))],
            true
        )
        .await
        .0,
        0
    );
    assert_eq!(produce(&mut conn, "altered", 0, batch(5000)).await.0, 0);

    // AlterConfigs replaces the whole set: retention.ms goes back to its default.
    assert_eq!(
        alter_code(
            &mut conn,
            TOPIC,
            "altered",
            &[("max.message.bytes", Some("1000"))]
        )
        .await,
        0
    );
    assert_eq!(
        produce(&mut conn, "altered", 0, batch(5000)).await.0,
        code(ErrorCode::MESSAGE_TOO_LARGE),
        "the lowered max.message.bytes applies to the running partition"
    );
    assert_eq!(produce(&mut conn, "altered", 0, batch(100)).await.0, 0);

    // Incremental: SET, APPEND to a list, DELETE; APPEND to a non-list is refused.
    assert_eq!(
        incremental_code(
            &mut conn,
            TOPIC,
            "altered",
            &[
                ("segment.bytes", 0, Some("2000000")),
                ("cleanup.policy", 2, Some("compact")),
            ]
        )
        .await,
        0
    );
    assert_eq!(
        incremental_code(
            &mut conn,
            TOPIC,
            "altered",
            &[("retention.ms", 2, Some("5"))]
        )
        .await,
        code(ErrorCode::INVALID_CONFIG)
    );
    assert_eq!(
        incremental_code(
            &mut conn,
            TOPIC,
            "altered",
            &[("segment.bytes", 0, Some("7"))]
        )
        .await,
        code(ErrorCode::INVALID_CONFIG)
    );
    let results = describe(&mut conn, 4, vec![(TOPIC, "altered", None)], false).await;
    let r = &results[0];
    assert_eq!(
        entry(r, "cleanup.policy").value.as_deref(),
        Some("delete,compact")
    );
    assert_eq!(entry(r, "segment.bytes").value.as_deref(), Some("2000000"));
    assert_eq!(entry(r, "retention.ms").config_source, DEFAULT_CONFIG);
    assert_eq!(
        incremental_code(&mut conn, TOPIC, "altered", &[("cleanup.policy", 1, None)]).await,
        0
    );
    broker.stop().await;

    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let results = describe(&mut conn, 4, vec![(TOPIC, "altered", None)], false).await;
    let r = &results[0];
    assert_eq!(entry(r, "max.message.bytes").value.as_deref(), Some("1000"));
    assert_eq!(entry(r, "max.message.bytes").config_source, TOPIC_CONFIG);
    assert_eq!(entry(r, "segment.bytes").value.as_deref(), Some("2000000"));
    assert_eq!(entry(r, "cleanup.policy").config_source, DEFAULT_CONFIG);
    assert_eq!(
        produce(&mut conn, "altered", 0, batch(5000)).await.0,
        code(ErrorCode::MESSAGE_TOO_LARGE)
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_broker_configs_apply_and_persist() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(create(&mut conn, topic("dyn", 1, &[])).await, 0);
    let node = broker.broker.config.node_id.to_string();
    assert_eq!(produce(&mut conn, "dyn", 0, batch(5000)).await.0, 0);

    // Keys that cannot change dynamically, unknown keys and bad values are refused.
    let (err, message) = alter(
        &mut conn,
        BROKER,
        &node,
        &[("num.partitions", Some("3"))],
        false,
    )
    .await;
    assert_eq!(err, code(ErrorCode::INVALID_REQUEST));
    assert!(message.unwrap().contains("num.partitions"));
    let (err, message) = alter(&mut conn, BROKER, &node, &[("bogus.key", Some("3"))], false).await;
    assert_eq!(err, code(ErrorCode::INVALID_CONFIG));
    assert!(message.unwrap().contains("bogus.key"));
    assert_eq!(
        alter_code(
            &mut conn,
            BROKER,
            &node,
            &[("message.max.bytes", Some("-1"))]
        )
        .await,
        code(ErrorCode::INVALID_CONFIG)
    );
    assert_eq!(
        alter_code(
            &mut conn,
            BROKER,
            "42",
            &[("message.max.bytes", Some("100"))]
        )
        .await,
        code(ErrorCode::INVALID_REQUEST)
    );

    assert_eq!(
        incremental_code(&mut conn, BROKER, &node, &[("num.partitions", 1, None)]).await,
        code(ErrorCode::INVALID_REQUEST),
        "not even DELETE of a static-only key"
    );

    // A cluster-wide default and a per-node value; the node's wins.
    assert_eq!(
        incremental_code(
            &mut conn,
            BROKER,
            "",
            &[
                ("message.max.bytes", 0, Some("900000")),
                ("log.retention.ms", 0, Some("60000"))
            ]
        )
        .await,
        0
    );
    assert_eq!(
        incremental_code(
            &mut conn,
            BROKER,
            &node,
            &[("message.max.bytes", 0, Some("2000"))]
        )
        .await,
        0
    );
    assert_eq!(
        produce(&mut conn, "dyn", 0, batch(5000)).await.0,
        code(ErrorCode::MESSAGE_TOO_LARGE),
        "the topic's default max.message.bytes follows the dynamic broker config"
    );
    let check = |results: &[DescribeConfigsResult]| {
        let t = &results[0];
        let e = entry(t, "max.message.bytes");
        assert_eq!(
            (e.value.as_deref(), e.config_source),
            (Some("2000"), DYNAMIC_BROKER_CONFIG)
        );
        let e = entry(t, "retention.ms");
        assert_eq!(
            (e.value.as_deref(), e.config_source),
            (Some("60000"), DYNAMIC_DEFAULT_BROKER_CONFIG)
        );
        let b = &results[1];
        let e = entry(b, "message.max.bytes");
        assert_eq!(e.config_source, DYNAMIC_BROKER_CONFIG);
        let sources: Vec<i8> = e.synonyms.iter().map(|s| s.source).collect();
        assert_eq!(
            sources,
            vec![
                DYNAMIC_BROKER_CONFIG,
                DYNAMIC_DEFAULT_BROKER_CONFIG,
                DEFAULT_CONFIG
            ]
        );
        let defaults = &results[2];
        let names: Vec<&str> = defaults.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["log.retention.ms", "message.max.bytes"]);
    };
    let asked: Vec<(i8, &str, Option<Vec<&str>>)> = vec![
        (TOPIC, "dyn", None),
        (BROKER, node.as_str(), None),
        (BROKER, "", None),
    ];
    check(&describe(&mut conn, 4, asked.clone(), true).await);
    broker.stop().await;

    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    check(&describe(&mut conn, 4, asked, true).await);
    assert_eq!(
        produce(&mut conn, "dyn", 0, batch(5000)).await.0,
        code(ErrorCode::MESSAGE_TOO_LARGE)
    );
    // AlterConfigs replaces this node's whole layer: emptied, the cluster default applies.
    assert_eq!(alter_code(&mut conn, BROKER, &node, &[]).await, 0);
    assert_eq!(produce(&mut conn, "dyn", 0, batch(5000)).await.0, 0);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_grows_topics_durably() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(create(&mut conn, topic("grow", 1, &[])).await, 0);
    let node = broker.broker.config.node_id;

    assert_eq!(
        create_partitions(&mut conn, "grow", 1, None, false).await.0,
        code(ErrorCode::INVALID_PARTITIONS)
    );
    assert_eq!(
        create_partitions(&mut conn, "grow", 0, None, false).await.0,
        code(ErrorCode::INVALID_PARTITIONS)
    );
    assert_eq!(
        create_partitions(&mut conn, "ghost", 3, None, false)
            .await
            .0,
        code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    assert_eq!(
        create_partitions(&mut conn, "grow", 3, Some(vec![vec![node]]), false)
            .await
            .0,
        code(ErrorCode::INVALID_REPLICA_ASSIGNMENT),
        "one assignment for two new partitions"
    );
    assert_eq!(
        create_partitions(&mut conn, "grow", 2, Some(vec![vec![node + 1]]), false)
            .await
            .0,
        code(ErrorCode::INVALID_REPLICA_ASSIGNMENT)
    );
    assert_eq!(
        create_partitions(&mut conn, "grow", 3, None, true).await.0,
        0
    );
    assert_eq!(partition_count(&mut conn, "grow").await, 1, "validate_only");

    assert_eq!(
        create_partitions(
            &mut conn,
            "grow",
            3,
            Some(vec![vec![node], vec![node]]),
            false
        )
        .await
        .0,
        0
    );
    assert_eq!(partition_count(&mut conn, "grow").await, 3);
    assert_eq!(produce(&mut conn, "grow", 2, batch(10)).await, (0, 0));
    let (err, message) = create_partitions(&mut conn, "grow", 2, None, false).await;
    assert_eq!(err, code(ErrorCode::INVALID_PARTITIONS));
    assert!(message.unwrap().contains("currently has 3"));
    broker.stop().await;

    // What a crash between creating new partition directories and rewriting the topic file
    // leaves: directories beyond the committed count. They are removed at start.
    std::fs::create_dir(dir.path().join("grow-3")).unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    assert_eq!(partition_count(&mut conn, "grow").await, 3);
    assert!(!dir.path().join("grow-3").exists());
    assert_eq!(produce(&mut conn, "grow", 2, batch(10)).await, (0, 1));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_and_log_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let node = broker.broker.config.node_id;
    for version in 0..=2 {
        let response: DescribeClusterResponse =
            conn.call(version, &DescribeClusterRequest::default()).await;
        assert_eq!(response.error_code, 0);
        assert_eq!(response.cluster_id, broker.broker.cluster_id);
        assert_eq!(response.controller_id, NodeId(node));
        assert_eq!(response.brokers.len(), 1);
        assert_eq!(response.brokers[0].broker_id, NodeId(node));
        assert_eq!(response.brokers[0].port, i32::from(broker.addr.port()));
    }
    // Asked for, the cluster's authorized operations are all the cluster resource supports
    // (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    // IDEMPOTENT_WRITE: bits 5 and 7-12), as Kafka answers without an authorizer.
    for (include, operations) in [(true, 0b1_1111_1010_0000), (false, i32::MIN)] {
        let response: DescribeClusterResponse = conn
            .call(
                0,
                &DescribeClusterRequest {
                    include_cluster_authorized_operations: include,
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(response.cluster_authorized_operations, operations);
    }
    let response: DescribeClusterResponse = conn
        .call(
            1,
            &DescribeClusterRequest {
                endpoint_type: 2,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        response.error_code,
        code(ErrorCode::MISMATCHED_ENDPOINT_TYPE)
    );
    assert!(response.brokers.is_empty() && response.cluster_id.is_empty());
    let response: DescribeClusterResponse = conn
        .call(
            2,
            &DescribeClusterRequest {
                endpoint_type: 3,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        response.error_code,
        code(ErrorCode::UNSUPPORTED_ENDPOINT_TYPE)
    );

    assert_eq!(create(&mut conn, topic("sized", 2, &[])).await, 0);
    assert_eq!(create(&mut conn, topic("other", 1, &[])).await, 0);
    assert_eq!(produce(&mut conn, "sized", 1, batch(1000)).await.0, 0);
    let response: DescribeLogDirsResponse =
        conn.call(4, &DescribeLogDirsRequest { topics: None }).await;
    assert_eq!(response.results.len(), 1);
    let dir_result = &response.results[0];
    assert_eq!(dir_result.error_code, 0);
    assert!(dir_result.total_bytes > 0 && dir_result.usable_bytes > 0);
    assert!(dir_result.usable_bytes <= dir_result.total_bytes);
    assert_eq!(
        std::path::Path::new(&dir_result.log_dir)
            .canonicalize()
            .unwrap(),
        dir.path().canonicalize().unwrap()
    );
    let sized = dir_result
        .topics
        .iter()
        .find(|t| t.name == "sized")
        .unwrap();
    let sizes: Vec<(i32, i64)> = sized
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    assert_eq!(sizes.len(), 2);
    assert_eq!(sizes[0], (0, 0));
    assert!(sizes[1].1 > 1000, "{sizes:?}");
    assert!(dir_result.topics.iter().any(|t| t.name == "other"));

    let response: DescribeLogDirsResponse = conn
        .call(
            2,
            &DescribeLogDirsRequest {
                topics: Some(vec![DescribableLogDirTopic {
                    topic: "sized".to_string(),
                    partitions: vec![1, 9],
                }]),
            },
        )
        .await;
    let topics = &response.results[0].topics;
    assert_eq!(topics.len(), 1);
    assert_eq!(
        topics[0].partitions.len(),
        1,
        "a missing partition is left out"
    );
    assert_eq!(
        response.results[0].total_bytes, -1,
        "v2 has no volume sizes"
    );
    broker.stop().await;
}

fn session_fetch(
    session_id: i32,
    session_epoch: i32,
    partitions: &[(i32, i64)],
    forgotten: &[i32],
) -> FetchRequest {
    FetchRequest {
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1 << 20,
        session_id,
        session_epoch,
        topics: if partitions.is_empty() {
            Vec::new()
        } else {
            vec![FetchTopic {
                topic: "sessions".to_string(),
                partitions: partitions
                    .iter()
                    .map(|(partition, offset)| FetchPartition {
                        partition: *partition,
                        fetch_offset: Offset(*offset),
                        partition_max_bytes: 1 << 20,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }]
        },
        forgotten_topics_data: if forgotten.is_empty() {
            Vec::new()
        } else {
            vec![ForgottenTopic {
                topic: "sessions".to_string(),
                partitions: forgotten.to_vec(),
                ..Default::default()
            }]
        },
        ..Default::default()
    }
}

/// The partitions in a fetch answer, with whether each carried records.
fn answered(response: &FetchResponse) -> Vec<(i32, bool)> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.records.as_ref().is_some_and(|r| !r.is_empty()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_sessions_answer_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &[("max.incremental.fetch.session.cache.slots", "1")],
    )
    .await;
    let mut conn = broker.connect().await;
    assert_eq!(create(&mut conn, topic("sessions", 3, &[])).await, 0);
    assert_eq!(produce(&mut conn, "sessions", 0, batch(10)).await.0, 0);

    // A full fetch at epoch 0 makes a session and answers every partition.
    let full: FetchResponse = conn
        .call(12, &session_fetch(0, 0, &[(0, 0), (1, 0), (2, 0)], &[]))
        .await;
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert!(id > 0, "a session was made");
    assert_eq!(answered(&full), vec![(0, true), (1, false), (2, false)]);

    // Nothing new: an incremental fetch answers no partition at all.
    let inc: FetchResponse = conn.call(12, &session_fetch(id, 1, &[(0, 1)], &[])).await;
    assert_eq!((inc.error_code, inc.session_id), (0, id));
    assert_eq!(answered(&inc), vec![]);

    // New data in partition 1 only: only partition 1 is answered.
    assert_eq!(produce(&mut conn, "sessions", 1, batch(10)).await.0, 0);
    let inc: FetchResponse = conn.call(12, &session_fetch(id, 2, &[], &[])).await;
    assert_eq!(answered(&inc), vec![(1, true)]);

    // A repeated or skipped epoch, and an unknown session, are refused.
    let stale: FetchResponse = conn.call(12, &session_fetch(id, 2, &[], &[])).await;
    assert_eq!(
        stale.error_code,
        code(ErrorCode::INVALID_FETCH_SESSION_EPOCH)
    );
    assert_eq!(stale.session_id, 0);
    assert!(stale.responses.is_empty());
    let unknown: FetchResponse = conn.call(12, &session_fetch(id ^ 0x55, 1, &[], &[])).await;
    assert_eq!(
        unknown.error_code,
        code(ErrorCode::FETCH_SESSION_ID_NOT_FOUND)
    );

    // Forgetting partition 0 and moving partition 1 past its data: a new record in
    // partition 0 is not answered; partition 2's is.
    let inc: FetchResponse = conn.call(12, &session_fetch(id, 3, &[(1, 1)], &[0])).await;
    assert_eq!(answered(&inc), vec![]);
    assert_eq!(produce(&mut conn, "sessions", 0, batch(10)).await.0, 0);
    assert_eq!(produce(&mut conn, "sessions", 2, batch(10)).await.0, 0);
    let inc: FetchResponse = conn.call(12, &session_fetch(id, 4, &[], &[])).await;
    assert_eq!(answered(&inc), vec![(2, true)]);

    // The cache holds one session, which is young: a second client gets none.
    let mut other = broker.connect().await;
    let second: FetchResponse = other.call(12, &session_fetch(0, 0, &[(0, 0)], &[])).await;
    assert_eq!(second.error_code, 0);
    assert_eq!(
        second.session_id, 0,
        "cache full; the fetch is answered sessionless"
    );
    assert_eq!(answered(&second), vec![(0, true)]);

    // Epoch -1 closes the session; its slot is free again.
    let closing: FetchResponse = conn.call(12, &session_fetch(id, -1, &[(0, 0)], &[])).await;
    assert_eq!((closing.error_code, closing.session_id), (0, 0));
    assert_eq!(broker.broker.fetch_sessions.len(), 0);
    let third: FetchResponse = other.call(12, &session_fetch(0, 0, &[(0, 0)], &[])).await;
    assert!(third.session_id > 0);
    // Fetch v4-6 have no sessions.
    let old: FetchResponse = other.call(6, &session_fetch(0, 0, &[(0, 0)], &[])).await;
    assert_eq!(answered(&old), vec![(0, true)]);

    // A follower's (privileged) session evicts a consumer's from the full cache, young as
    // it is; the consumer then learns its session is gone.
    let follower = FetchRequest {
        replica_id: NodeId(7),
        ..session_fetch(0, 0, &[(1, 0)], &[])
    };
    let privileged: FetchResponse = conn.call(12, &follower).await;
    assert!(privileged.session_id > 0);
    assert_ne!(privileged.session_id, third.session_id);
    assert_eq!(broker.broker.fetch_sessions.evictions(), 1);
    let gone: FetchResponse = other
        .call(12, &session_fetch(third.session_id, 1, &[], &[]))
        .await;
    assert_eq!(gone.error_code, code(ErrorCode::FETCH_SESSION_ID_NOT_FOUND));
    broker.stop().await;
}

/// One Fetch at `version` of `partition` of `name` from offset 0: its partition answer.
async fn fetch_from_start(
    conn: &mut Conn,
    version: i16,
    name: &str,
    partition: i32,
) -> samsa::protocol::fetch::PartitionData {
    let response: FetchResponse = conn
        .call(
            version,
            &FetchRequest {
                max_wait_ms: 0,
                min_bytes: 0,
                max_bytes: 8 << 20,
                session_epoch: -1,
                topics: vec![FetchTopic {
                    topic: name.to_string(),
                    partitions: vec![FetchPartition {
                        partition,
                        fetch_offset: Offset(0),
                        partition_max_bytes: 8 << 20,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
        )
        .await;
    response.responses[0].partitions[0].clone()
}

/// Every record batch of `partition` of `name` from offset 0, as one Fetch (v12) returns it.
async fn fetch_batches(conn: &mut Conn, name: &str, partition: i32) -> Vec<Bytes> {
    let answer = fetch_from_start(conn, 12, name, partition).await;
    assert_eq!(answer.error_code, 0, "fetch {name}-{partition}");
    let records = answer.records.clone().unwrap_or_default();
    record_batch::batches(records)
        .map(|b| b.expect("a whole batch").1)
        .collect()
}

/// (key, value, headers, timestamp) of every record of `batch`, whatever its codec.
fn contents(batch: &Bytes) -> Vec<(Option<Bytes>, Option<Bytes>, usize, i64)> {
    record_batch::validate(batch).expect("a valid stored batch");
    record_batch::records(batch)
        .expect("records")
        .map(|r| {
            let r = r.expect("record");
            (r.key, r.value, r.headers.len(), r.timestamp)
        })
        .collect()
}

/// A batch of 50 compressible records with a header each, compressed with `codec`.
fn produced(codec: Compression) -> Bytes {
    let mut builder = BatchBuilder::new(0).compression(codec);
    let now = samsa_now_ms();
    for i in 0..50u32 {
        let value = format!("value {i}: the same words again and again, value {i}");
        builder.push(
            now + i64::from(i),
            Some(format!("key-{i}").as_bytes()),
            Some(value.as_bytes()),
            &[("h", Some(b"x".as_slice()))],
        );
    }
    builder.build().freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_type_takes_every_kafka_value_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    for value in ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"] {
        let name = format!("codec-{value}");
        assert_eq!(
            create(&mut conn, topic(&name, 1, &[("compression.type", value)])).await,
            0,
            "{value}"
        );
        let results = describe(
            &mut conn,
            4,
            vec![(TOPIC, &name, Some(vec!["compression.type"]))],
            true,
        )
        .await;
        let e = entry(&results[0], "compression.type");
        assert_eq!(
            (e.value.as_deref(), e.config_source),
            (Some(value), TOPIC_CONFIG)
        );
    }
    for (key, value) in [
        ("compression.type", "none"),
        ("compression.type", "ZSTD"),
        ("compression.gzip.level", "0"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
    ] {
        assert_eq!(
            create(&mut conn, topic("refused", 1, &[(key, value)])).await,
            code(ErrorCode::INVALID_CONFIG),
            "{key}={value}"
        );
    }
    for (key, value) in [
        ("compression.gzip.level", "-1"),
        ("compression.gzip.level", "9"),
        ("compression.lz4.level", "17"),
        ("compression.zstd.level", "-131072"),
        ("compression.zstd.level", "22"),
    ] {
        assert_eq!(
            alter_code(&mut conn, TOPIC, "codec-gzip", &[(key, Some(value))]).await,
            0,
            "{key}={value}"
        );
    }
    for (key, value, range) in [
        ("compression.gzip.level", "10", "[1, 9] or -1"),
        ("compression.gzip.level", "-2", "[1, 9] or -1"),
        ("compression.lz4.level", "0", "[1, 17]"),
        ("compression.zstd.level", "-131073", "[-131072, 22]"),
    ] {
        for (err, message) in [
            alter(&mut conn, TOPIC, "codec-gzip", &[(key, Some(value))], false).await,
            incremental(
                &mut conn,
                TOPIC,
                "codec-gzip",
                &[(key, 0, Some(value))],
                false,
            )
            .await,
        ] {
            assert_eq!(err, code(ErrorCode::INVALID_CONFIG), "{key}={value}");
            let message = message.unwrap_or_default();
            assert!(
                message.contains(key) && message.contains(range),
                "{key}={value}: {message}"
            );
        }
    }
    assert_eq!(
        incremental_code(
            &mut conn,
            TOPIC,
            "codec-producer",
            &[
                ("compression.type", 0, Some("gzip")),
                ("compression.gzip.level", 0, Some("1"))
            ]
        )
        .await,
        0
    );
    let results = describe(&mut conn, 4, vec![(TOPIC, "codec-producer", None)], true).await;
    let level = entry(&results[0], "compression.gzip.level");
    assert_eq!(
        (
            level.value.as_deref(),
            level.config_source,
            level.config_type
        ),
        (Some("1"), TOPIC_CONFIG, 3)
    );
    let zstd = entry(&results[0], "compression.zstd.level");
    assert_eq!(
        (zstd.value.as_deref(), zstd.config_source),
        (Some("3"), DEFAULT_CONFIG)
    );

    // The broker keys of the same names are dynamic topic defaults (Kafka's DynamicLogConfig).
    assert_eq!(create(&mut conn, topic("codec-default", 1, &[])).await, 0);
    let results = describe(&mut conn, 4, vec![(TOPIC, "codec-default", None)], true).await;
    let e = entry(&results[0], "compression.type");
    assert_eq!(
        (e.value.as_deref(), e.config_source),
        (Some("producer"), DEFAULT_CONFIG)
    );
    assert_eq!(
        incremental_code(
            &mut conn,
            BROKER,
            "",
            &[
                ("compression.type", 0, Some("lz4")),
                ("compression.lz4.level", 0, Some("12"))
            ]
        )
        .await,
        0
    );
    assert_eq!(
        alter_code(
            &mut conn,
            BROKER,
            "",
            &[("compression.zstd.level", Some("99"))]
        )
        .await,
        code(ErrorCode::INVALID_CONFIG)
    );
    let results = describe(&mut conn, 4, vec![(TOPIC, "codec-default", None)], true).await;
    let e = entry(&results[0], "compression.type");
    assert_eq!(
        (e.value.as_deref(), e.config_source),
        (Some("lz4"), DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(
        produce(&mut conn, "codec-default", 0, produced(Compression::None))
            .await
            .0,
        0
    );
    let stored = fetch_batches(&mut conn, "codec-default", 0).await;
    assert_eq!(
        record_batch::BatchHeader::parse(&stored[0])
            .unwrap()
            .compression(),
        Ok(Compression::Lz4),
        "the broker default applies to a topic without an override"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_recompressed_to_the_topics_codec_and_otherwise_stored_as_produced() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for (value, target) in [
        ("producer", None),
        ("uncompressed", Some(Compression::None)),
        ("gzip", Some(Compression::Gzip)),
        ("snappy", Some(Compression::Snappy)),
        ("lz4", Some(Compression::Lz4)),
        ("zstd", Some(Compression::Zstd)),
    ] {
        let name = format!("stored-{value}");
        assert_eq!(
            create(&mut conn, topic(&name, 1, &[("compression.type", value)])).await,
            0
        );
        let sent: Vec<Bytes> = codecs.iter().map(|&codec| produced(codec)).collect();
        for batch in &sent {
            assert_eq!(produce(&mut conn, &name, 0, batch.clone()).await.0, 0);
        }
        let stored = fetch_batches(&mut conn, &name, 0).await;
        assert_eq!(stored.len(), sent.len());
        for ((codec, sent), stored) in codecs.iter().zip(&sent).zip(&stored) {
            let header = record_batch::BatchHeader::parse(stored).unwrap();
            assert_eq!(
                header.compression(),
                Ok(target.unwrap_or(*codec)),
                "{codec} produced to {value}"
            );
            assert_eq!(
                contents(stored),
                contents(sent),
                "{codec} produced to {value}"
            );
            if target.is_none_or(|target| target == *codec) {
                // Not re-encoded: the bytes the producer sent, only the base offset and the
                // leader's epoch (bytes 12..16, outside the CRC) assigned.
                assert_eq!(
                    (&stored[8..12], &stored[16..]),
                    (&sent[8..12], &sent[16..]),
                    "{codec} produced to {value} is stored as received"
                );
                assert_eq!(header.partition_leader_epoch, 0, "the leader's epoch");
            }
        }
    }
    // Fetch versions before zstd (v10, KIP-110) are refused on a zstd topic, as Kafka does.
    let old = fetch_from_start(&mut conn, 9, "stored-zstd", 0).await;
    assert_eq!(
        old.error_code,
        code(ErrorCode::UNSUPPORTED_COMPRESSION_TYPE)
    );
    assert_eq!(
        fetch_from_start(&mut conn, 10, "stored-zstd", 0)
            .await
            .error_code,
        0
    );
    assert_eq!(
        fetch_from_start(&mut conn, 9, "stored-gzip", 0)
            .await
            .error_code,
        0
    );
    broker.stop().await;
}
