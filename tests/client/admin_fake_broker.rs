//! The client's admin methods (src/client/admin.rs) against a scripted fake broker over real
//! TCP: the fake decodes each request with Samsa's codec at the version the client chose, so
//! the tests check what the client sends (resources, operations, versions, routing) as well as
//! how it reads the answers (per-resource errors, omissions, fallbacks). The last test runs
//! `samsa topics alter` in-process against a broker without IncrementalAlterConfigs.
#![cfg(not(feature = "sim"))]

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use samsa::client::{
    AlterConfigOp, Client, ClientConfig, ConfigResource, ConfigSource, DescribeConfigsOptions,
};
use samsa::protocol::alter_configs::{
    AlterConfigsRequest, AlterConfigsResourceResponse, AlterConfigsResponse,
};
use samsa::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use samsa::protocol::describe_cluster::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use samsa::protocol::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResourceResult, DescribeConfigsResponse,
    DescribeConfigsResult, DescribeConfigsSynonym,
};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::incremental_alter_configs::{
    AlterConfigsResourceResponse as IncrementalResourceResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use samsa::protocol::message::Message;
use samsa::protocol::metadata::{MetadataRequest, MetadataResponse, MetadataResponseTopic};
use samsa::protocol::types::NodeId;
use samsa::protocol::wire::Uuid;

#[path = "../support/fake_broker.rs"]
mod fake_broker;

use fake_broker::encode;

const API_VERSIONS: i16 = 18;
const METADATA: i16 = 3;

/// One request as the fake received it.
#[derive(Clone, Debug)]
struct Seen {
    api_key: i16,
    version: i16,
    body: Bytes,
}

/// Answers a request with an encoded body, or `None` to close the connection.
type Handler = Box<dyn FnMut(&Seen, i32) -> Option<Bytes> + Send>;

struct Fake {
    addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    /// Serves ApiVersions with `ranges` and everything else with `handler(seen, port)`.
    async fn start(ranges: Vec<(i16, i16, i16)>, handler: Handler) -> Fake {
        let (listener, port) = fake_broker::bind().await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let handler = Arc::new(Mutex::new(handler));
        fake_broker::accept_all(listener, move |stream, _| {
            serve(stream, port, ranges.clone(), handler.clone(), log.clone())
        });
        Fake {
            addr: format!("127.0.0.1:{port}"),
            seen,
        }
    }

    fn seen(&self, api_key: i16) -> Vec<Seen> {
        self.seen
            .lock()
            .expect("log lock")
            .iter()
            .filter(|s| s.api_key == api_key)
            .cloned()
            .collect()
    }

    fn client(&self) -> Client {
        Client::new(ClientConfig {
            bootstrap: vec![self.addr.clone()],
            retries_max: 1,
            retry_backoff_ms: 1,
            ..ClientConfig::default()
        })
    }
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    port: i32,
    ranges: Vec<(i16, i16, i16)>,
    handler: Arc<Mutex<Handler>>,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    while let Some(request) = fake_broker::read_request(&mut stream).await {
        let seen = Seen {
            api_key: request.api_key,
            version: request.version,
            body: request.body,
        };
        log.lock().expect("log lock").push(seen.clone());
        let body = if seen.api_key == API_VERSIONS {
            fake_broker::api_versions(&ranges, ErrorCode::NONE, seen.version)
        } else {
            match (handler.lock().expect("handler lock"))(&seen, port) {
                Some(body) => body,
                None => return,
            }
        };
        if !fake_broker::write_response(
            &mut stream,
            seen.api_key,
            seen.version,
            request.correlation_id,
            &body,
        )
        .await
        {
            return;
        }
    }
}

fn decode<M: Message>(seen: &Seen) -> M {
    M::decode_exact(seen.body.clone(), seen.version).expect("the client's request decodes")
}

/// Every admin API at its full range, plus Metadata.
fn ranges(with_describe_cluster: bool) -> Vec<(i16, i16, i16)> {
    let mut ranges = vec![
        (API_VERSIONS, 0, 4),
        (METADATA, 0, 12),
        (32, 1, 4),
        (33, 0, 2),
        (37, 0, 3),
        (44, 0, 1),
    ];
    if with_describe_cluster {
        ranges.push((60, 0, 2));
    }
    ranges
}

/// Metadata naming this fake as node `node`, with topic `t` (id 1..16, one partition).
fn metadata(seen: &Seen, port: i32, node: i32) -> Bytes {
    let response = fake_broker::metadata(seen.body.clone(), seen.version, port, node, |name| {
        let known = name.as_deref() == Some("t");
        MetadataResponseTopic {
            error_code: if known {
                0
            } else {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
            },
            name,
            topic_id: if known {
                Uuid(core::array::from_fn(|i| i as u8 + 1))
            } else {
                Uuid::ZERO
            },
            partitions: if known {
                vec![fake_broker::led_partition(node)]
            } else {
                Vec::new()
            },
            ..MetadataResponseTopic::default()
        }
    });
    encode(
        &MetadataResponse {
            cluster_id: Some("fake-cluster".into()),
            ..response
        },
        seen.version,
    )
}

#[tokio::test]
async fn admin_describe_configs_reads_sources_synonyms_and_per_resource_errors() {
    let fake = Fake::start(
        ranges(false),
        Box::new(|seen, port| match seen.api_key {
            METADATA => Some(metadata(seen, port, 7)),
            32 => {
                let request: DescribeConfigsRequest = decode(seen);
                let results = request
                    .resources
                    .iter()
                    .filter(|r| r.resource_name != "omitted")
                    .map(|r| match r.resource_name.as_str() {
                        "t" => DescribeConfigsResult {
                            resource_type: r.resource_type,
                            resource_name: r.resource_name.clone(),
                            configs: vec![
                                DescribeConfigsResourceResult {
                                    name: "retention.ms".into(),
                                    value: Some("1000".into()),
                                    config_source: 1,
                                    synonyms: vec![DescribeConfigsSynonym {
                                        name: "log.retention.ms".into(),
                                        value: Some("604800000".into()),
                                        source: 5,
                                    }],
                                    config_type: 5,
                                    ..DescribeConfigsResourceResult::default()
                                },
                                DescribeConfigsResourceResult {
                                    name: "cleanup.policy".into(),
                                    value: Some("delete".into()),
                                    config_source: 5,
                                    ..DescribeConfigsResourceResult::default()
                                },
                            ],
                            ..DescribeConfigsResult::default()
                        },
                        _ => DescribeConfigsResult {
                            error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
                            error_message: Some("no such topic".into()),
                            resource_type: r.resource_type,
                            resource_name: r.resource_name.clone(),
                            ..DescribeConfigsResult::default()
                        },
                    })
                    .collect();
                Some(encode(
                    &DescribeConfigsResponse {
                        results,
                        ..DescribeConfigsResponse::default()
                    },
                    seen.version,
                ))
            }
            _ => None,
        }),
    )
    .await;
    let mut client = fake.client();
    let resources = [
        ConfigResource::Topic("t".into()),
        ConfigResource::Topic("gone".into()),
        ConfigResource::Topic("omitted".into()),
    ];
    let results = client.describe_configs(&resources).await.expect("describe");
    let sent = fake.seen(32);
    assert_eq!(sent.len(), 1, "topic resources share one request");
    assert_eq!(sent[0].version, 4, "the newest version both speak");
    let request: DescribeConfigsRequest = decode(&sent[0]);
    assert!(request.include_synonyms);
    assert!(!request.include_documentation);
    let names: Vec<(i8, &str)> = request
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.as_str()))
        .collect();
    assert_eq!(names, vec![(2, "t"), (2, "gone"), (2, "omitted")]);

    assert_eq!(results.len(), 3);
    let (resource, entries) = &results[0];
    assert_eq!(resource, &resources[0]);
    let entries = entries.as_ref().expect("t described");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].name, "retention.ms");
    assert_eq!(entries[0].value.as_deref(), Some("1000"));
    assert_eq!(entries[0].source, ConfigSource::DYNAMIC_TOPIC_CONFIG);
    assert!(entries[0].is_override());
    assert_eq!(entries[0].config_type, 5);
    assert_eq!(entries[0].synonyms.len(), 1);
    assert_eq!(entries[0].synonyms[0].source, ConfigSource::DEFAULT_CONFIG);
    assert!(!entries[1].is_override());
    let gone = results[1].1.as_ref().expect_err("gone is an error");
    assert_eq!(
        gone.to_string(),
        "topic gone: UNKNOWN_TOPIC_OR_PARTITION (3): no such topic"
    );
    let omitted = results[2].1.as_ref().expect_err("omitted is an error");
    assert_eq!(omitted.code, ErrorCode::UNKNOWN_SERVER_ERROR);

    // Options reach the wire; a broker resource goes to that broker, found through Metadata.
    let options = DescribeConfigsOptions {
        keys: Some(vec!["retention.ms".into()]),
        include_synonyms: false,
        include_documentation: true,
    };
    let broker = [ConfigResource::Broker(Some(7))];
    let results = client
        .describe_configs_with(&broker, &options)
        .await
        .expect("describe broker");
    assert_eq!(results.len(), 1);
    let sent = fake.seen(32);
    let request: DescribeConfigsRequest = decode(&sent[1]);
    assert_eq!(request.resources[0].resource_type, 4);
    assert_eq!(request.resources[0].resource_name, "7");
    assert_eq!(
        request.resources[0].configuration_keys,
        Some(vec!["retention.ms".to_owned()])
    );
    assert!(request.include_documentation && !request.include_synonyms);
    assert!(
        !fake.seen(METADATA).is_empty(),
        "the client learned broker 7's address from Metadata"
    );
    assert_eq!(
        client.brokers().get(&7).map(String::as_str),
        Some(fake.addr.as_str())
    );
}

#[tokio::test]
async fn admin_alter_configs_send_operations_and_report_each_resource() {
    let fake = Fake::start(
        ranges(false),
        Box::new(|seen, _port| match seen.api_key {
            44 => {
                let request: IncrementalAlterConfigsRequest = decode(seen);
                let responses = request
                    .resources
                    .iter()
                    .map(|r| IncrementalResourceResponse {
                        error_code: if r.resource_name == "bad" {
                            ErrorCode::INVALID_CONFIG.0
                        } else {
                            0
                        },
                        error_message: (r.resource_name == "bad")
                            .then(|| "unknown config no.such".to_owned()),
                        resource_type: r.resource_type,
                        resource_name: r.resource_name.clone(),
                    })
                    .collect();
                Some(encode(
                    &IncrementalAlterConfigsResponse {
                        responses,
                        ..IncrementalAlterConfigsResponse::default()
                    },
                    seen.version,
                ))
            }
            33 => {
                let request: AlterConfigsRequest = decode(seen);
                let responses = request
                    .resources
                    .iter()
                    .map(|r| AlterConfigsResourceResponse {
                        resource_type: r.resource_type,
                        resource_name: r.resource_name.clone(),
                        ..AlterConfigsResourceResponse::default()
                    })
                    .collect();
                Some(encode(
                    &AlterConfigsResponse {
                        responses,
                        ..AlterConfigsResponse::default()
                    },
                    seen.version,
                ))
            }
            _ => None,
        }),
    )
    .await;
    let mut client = fake.client();
    let changes = vec![
        (
            ConfigResource::Topic("t".into()),
            vec![
                AlterConfigOp::Set {
                    name: "retention.ms".into(),
                    value: "1000".into(),
                },
                AlterConfigOp::Delete {
                    name: "segment.bytes".into(),
                },
            ],
        ),
        (
            ConfigResource::Topic("bad".into()),
            vec![AlterConfigOp::Set {
                name: "no.such".into(),
                value: "1".into(),
            }],
        ),
    ];
    let results = client
        .incremental_alter_configs(&changes, true)
        .await
        .expect("alter");
    assert!(results[0].1.is_ok());
    let bad = results[1].1.as_ref().expect_err("bad is refused");
    assert_eq!(bad.code, ErrorCode::INVALID_CONFIG);
    assert_eq!(bad.message.as_deref(), Some("unknown config no.such"));
    let sent = fake.seen(44);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].version, 1);
    let request: IncrementalAlterConfigsRequest = decode(&sent[0]);
    assert!(request.validate_only);
    let ops: Vec<(String, i8, Option<String>)> = request.resources[0]
        .configs
        .iter()
        .map(|c| (c.name.clone(), c.config_operation, c.value.clone()))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("retention.ms".into(), 0, Some("1000".into())),
            ("segment.bytes".into(), 1, None)
        ]
    );

    let whole = vec![(
        ConfigResource::Topic("t".into()),
        vec![("retention.ms".to_owned(), "5".to_owned())],
    )];
    let results = client
        .alter_configs(&whole, false)
        .await
        .expect("alter whole");
    assert!(results[0].1.is_ok());
    let request: AlterConfigsRequest = decode(&fake.seen(33)[0]);
    assert!(!request.validate_only);
    assert_eq!(request.resources[0].configs[0].name, "retention.ms");
    assert_eq!(request.resources[0].configs[0].value.as_deref(), Some("5"));
    assert!(client.alter_configs(&[], false).await.is_err());
}

#[tokio::test]
async fn admin_create_partitions_and_describe_topics() {
    let fake = Fake::start(
        ranges(false),
        Box::new(|seen, port| match seen.api_key {
            METADATA => Some(metadata(seen, port, 1)),
            37 => {
                let request: CreatePartitionsRequest = decode(seen);
                let results = request
                    .topics
                    .iter()
                    .map(|t| CreatePartitionsTopicResult {
                        name: t.name.clone(),
                        error_code: if t.count < 2 {
                            ErrorCode::INVALID_PARTITIONS.0
                        } else {
                            0
                        },
                        error_message: (t.count < 2)
                            .then(|| format!("topic has 1 partition, asked for {}", t.count)),
                    })
                    .collect();
                Some(encode(
                    &CreatePartitionsResponse {
                        results,
                        ..CreatePartitionsResponse::default()
                    },
                    seen.version,
                ))
            }
            _ => None,
        }),
    )
    .await;
    let mut client = fake.client();
    let results = client
        .create_partitions(&[("t", 4), ("u", 1)], false)
        .await
        .expect("create partitions");
    assert_eq!(results.len(), 2);
    assert!(results[0].1.is_ok());
    let err = results[1].1.as_ref().expect_err("u refused");
    assert_eq!(err.code(), Some(ErrorCode::INVALID_PARTITIONS));
    let request: CreatePartitionsRequest = decode(&fake.seen(37)[0]);
    assert_eq!(request.topics[0].count, 4);
    assert_eq!(request.topics[0].assignments, None);

    let topics = client
        .describe_topics(&["t", "nope"])
        .await
        .expect("describe");
    let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["nope", "t"]);
    assert_eq!(topics[0].error, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(topics[1].error, ErrorCode::NONE);
    assert_eq!(
        topics[1].topic_id,
        Uuid(core::array::from_fn(|i| i as u8 + 1))
    );
    assert_eq!(topics[1].partitions.len(), 1);
    assert_eq!(topics[1].partitions[0].leader_id, 1);
    let metadata_sent = fake.seen(METADATA);
    let request: MetadataRequest = decode(metadata_sent.last().expect("a metadata request"));
    assert!(
        !request.allow_auto_topic_creation,
        "describing must never create a topic"
    );
    assert!(client.create_partitions(&[], false).await.is_err());
}

#[tokio::test]
async fn admin_describe_cluster_uses_describe_cluster_or_falls_back_to_metadata() {
    let fake = Fake::start(
        ranges(true),
        Box::new(|seen, port| match seen.api_key {
            60 => {
                let _: DescribeClusterRequest = decode(seen);
                Some(encode(
                    &DescribeClusterResponse {
                        cluster_id: "from-describe-cluster".into(),
                        controller_id: NodeId(3),
                        brokers: vec![DescribeClusterBroker {
                            broker_id: NodeId(3),
                            host: "h".into(),
                            port,
                            rack: Some("r1".into()),
                            is_fenced: false,
                        }],
                        ..DescribeClusterResponse::default()
                    },
                    seen.version,
                ))
            }
            _ => None,
        }),
    )
    .await;
    let cluster = fake
        .client()
        .describe_cluster()
        .await
        .expect("describe cluster");
    assert_eq!(cluster.cluster_id.as_deref(), Some("from-describe-cluster"));
    assert_eq!(cluster.controller_id, 3);
    assert_eq!(cluster.brokers.len(), 1);
    assert_eq!(cluster.brokers[0].rack.as_deref(), Some("r1"));

    let old = Fake::start(
        ranges(false),
        Box::new(|seen, port| match seen.api_key {
            METADATA => Some(metadata(seen, port, 5)),
            _ => None,
        }),
    )
    .await;
    let cluster = old.client().describe_cluster().await.expect("fallback");
    assert_eq!(cluster.cluster_id.as_deref(), Some("fake-cluster"));
    assert_eq!(cluster.controller_id, 5);
    assert_eq!(cluster.brokers[0].node_id, 5);
    assert!(
        old.seen(60).is_empty(),
        "DescribeCluster is not sent to a broker without it"
    );
    let request: MetadataRequest = decode(&old.seen(METADATA)[0]);
    assert_eq!(request.topics, Some(Vec::new()), "no topics asked for");
}

#[tokio::test]
async fn cli_topics_alter_rewrites_the_whole_set_on_a_broker_without_incremental_alter() {
    // DescribeConfigs reports overrides a=1 and b=2 (and a default); AlterConfigs must then
    // carry the merged set: a deleted, b changed, c added, the default left out.
    let fake = Fake::start(
        ranges(false)
            .into_iter()
            .filter(|(api, ..)| *api != 44)
            .collect(),
        Box::new(|seen, port| match seen.api_key {
            METADATA => Some(metadata(seen, port, 1)),
            32 => {
                let request: DescribeConfigsRequest = decode(seen);
                let config = |name: &str, value: &str, source| DescribeConfigsResourceResult {
                    name: name.into(),
                    value: Some(value.into()),
                    config_source: source,
                    ..DescribeConfigsResourceResult::default()
                };
                Some(encode(
                    &DescribeConfigsResponse {
                        results: vec![DescribeConfigsResult {
                            resource_type: 2,
                            resource_name: request.resources[0].resource_name.clone(),
                            configs: vec![
                                config("a", "1", 1),
                                config("b", "2", 1),
                                config("cleanup.policy", "delete", 5),
                            ],
                            ..DescribeConfigsResult::default()
                        }],
                        ..DescribeConfigsResponse::default()
                    },
                    seen.version,
                ))
            }
            33 => {
                let request: AlterConfigsRequest = decode(seen);
                Some(encode(
                    &AlterConfigsResponse {
                        responses: vec![AlterConfigsResourceResponse {
                            resource_type: 2,
                            resource_name: request.resources[0].resource_name.clone(),
                            ..AlterConfigsResourceResponse::default()
                        }],
                        ..AlterConfigsResponse::default()
                    },
                    seen.version,
                ))
            }
            _ => None,
        }),
    )
    .await;
    let args: Vec<String> = [
        "alter",
        "t",
        "--delete-config",
        "a",
        "--config",
        "b=3",
        "--config",
        "c=4",
        "-b",
        &fake.addr,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let parsed = samsa::cli::topics::parse_args(&args).expect("parses");
    samsa::cli::topics::run(parsed)
        .await
        .expect("alter succeeds");
    let sent = fake.seen(33);
    assert_eq!(sent.len(), 1);
    let request: AlterConfigsRequest = decode(&sent[0]);
    let configs: Vec<(String, Option<String>)> = request.resources[0]
        .configs
        .iter()
        .map(|c| (c.name.clone(), c.value.clone()))
        .collect();
    assert_eq!(
        configs,
        vec![
            ("b".to_owned(), Some("3".to_owned())),
            ("c".to_owned(), Some("4".to_owned()))
        ]
    );
    assert_eq!(request.resources[0].resource_name, "t");
}
