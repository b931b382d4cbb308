//! The client against a fake broker over real TCP. The fake parses every request with
//! Samsa's own framing and codec, records what it saw (so the tests check the client's
//! encoding, header versions, versions negotiated and correlation ids), and answers as each
//! test scripts it: normally, with errors, by closing the connection, by not answering, or
//! with a wrong correlation id.
#![cfg(not(feature = "sim"))]

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use samsa::client::{
    build_batch, Client, ClientConfig, ClientError, Connection, ConnectionLimits, FetchOptions,
    ProducerRecord,
};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::fetch::{FetchRequest, FetchResponse, FetchableTopicResponse, PartitionData};
use samsa::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use samsa::protocol::record_batch::{BatchBuilder, Compression};
use samsa::protocol::types::Offset;

#[path = "../support/fake_broker.rs"]
mod fake_broker;

use fake_broker::{api_versions, encode};

const API_VERSIONS: i16 = 18;
const METADATA: i16 = 3;
const PRODUCE: i16 = 0;
const FETCH: i16 = 1;

/// One request as the fake broker received it.
#[derive(Clone, Debug)]
struct Seen {
    /// Which accepted connection (0, 1, ...) it came on.
    conn: usize,
    api_key: i16,
    version: i16,
    header_version: i16,
    correlation_id: i32,
    client_id: Option<String>,
    body: Bytes,
}

/// How the fake answers one request.
enum Action {
    /// The body (already encoded in the version the test chose), framed with the request's
    /// correlation id.
    Reply(Bytes),
    /// The body under another correlation id.
    ReplyAs(i32, Bytes),
    /// Close the connection without answering.
    Close,
    /// Never answer, keep the connection open.
    Silent,
}

type Handler = Box<dyn FnMut(&Seen) -> Action + Send>;

struct FakeBroker {
    addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FakeBroker {
    /// Binds a port on loopback and serves every connection with `make(port)`'s handler.
    async fn start(make: impl FnOnce(i32) -> Handler) -> FakeBroker {
        let (listener, port) = fake_broker::bind().await;
        let handler = Arc::new(Mutex::new(make(port)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        fake_broker::accept_all(listener, move |stream, conn| {
            serve(stream, conn, handler.clone(), log.clone())
        });
        FakeBroker {
            addr: format!("127.0.0.1:{port}"),
            seen,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log lock").clone()
    }

    fn seen_api(&self, api_key: i16) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.api_key == api_key)
            .collect()
    }
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    conn: usize,
    handler: Arc<Mutex<Handler>>,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    while let Some(request) = fake_broker::read_request(&mut stream).await {
        let seen = Seen {
            conn,
            api_key: request.api_key,
            version: request.version,
            header_version: request.header_version,
            correlation_id: request.correlation_id,
            client_id: request.client_id,
            body: request.body,
        };
        log.lock().expect("log lock").push(seen.clone());
        let action = (handler.lock().expect("handler lock"))(&seen);
        let (correlation_id, body) = match action {
            Action::Reply(body) => (seen.correlation_id, body),
            Action::ReplyAs(id, body) => (id, body),
            Action::Close => return,
            Action::Silent => continue,
        };
        if !fake_broker::write_response(
            &mut stream,
            seen.api_key,
            seen.version,
            correlation_id,
            &body,
        )
        .await
        {
            return;
        }
    }
}

/// What the fake advertises unless a test says otherwise.
const RANGES: &[(i16, i16, i16)] = &[
    (PRODUCE, 3, 11),
    (FETCH, 4, 15),
    (2, 1, 8),
    (METADATA, 0, 12),
    (API_VERSIONS, 0, 4),
];

/// ApiVersions and Metadata answered normally; `None` for anything else.
fn standard(seen: &Seen, port: i32) -> Option<Action> {
    match seen.api_key {
        API_VERSIONS => Some(Action::Reply(api_versions(
            RANGES,
            ErrorCode::NONE,
            seen.version,
        ))),
        METADATA => Some(Action::Reply(fake_broker::metadata_one_partition(
            seen.body.clone(),
            seen.version,
            port,
        ))),
        _ => None,
    }
}

fn produce_reply(seen: &Seen, error: ErrorCode, base_offset: i64) -> Action {
    let request =
        ProduceRequest::decode_exact(seen.body.clone(), seen.version).expect("produce decodes");
    let responses = request
        .topic_data
        .iter()
        .map(|t| TopicProduceResponse {
            name: t.name.clone(),
            partition_responses: t
                .partition_data
                .iter()
                .map(|p| PartitionProduceResponse {
                    index: p.index,
                    error_code: error.0,
                    base_offset: Offset(base_offset),
                    log_start_offset: Offset(0),
                    ..PartitionProduceResponse::default()
                })
                .collect(),
            ..TopicProduceResponse::default()
        })
        .collect();
    Action::Reply(encode(
        &ProduceResponse {
            responses,
            ..ProduceResponse::default()
        },
        seen.version,
    ))
}

fn fetch_reply(seen: &Seen, records: Bytes, high_watermark: i64) -> Action {
    let request =
        FetchRequest::decode_exact(seen.body.clone(), seen.version).expect("fetch decodes");
    let responses = request
        .topics
        .iter()
        .map(|t| FetchableTopicResponse {
            topic: t.topic.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| PartitionData {
                    partition_index: p.partition,
                    high_watermark: Offset(high_watermark),
                    log_start_offset: Offset(0),
                    records: Some(records.clone()),
                    ..PartitionData::default()
                })
                .collect(),
            ..FetchableTopicResponse::default()
        })
        .collect();
    Action::Reply(encode(
        &FetchResponse {
            responses,
            ..FetchResponse::default()
        },
        seen.version,
    ))
}

fn config(addr: &str, retries_max: u32) -> ClientConfig {
    ClientConfig {
        bootstrap: vec![addr.to_owned()],
        client_id: "fake-broker-test".into(),
        request_timeout_ms: 5_000,
        retries_max,
        retry_backoff_ms: 1,
        ..ClientConfig::default()
    }
}

fn one_batch() -> Bytes {
    build_batch(
        &[ProducerRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"hello")),
            headers: Vec::new(),
            timestamp: 1_000,
        }],
        Compression::None,
    )
    .expect("batch builds")
}

#[tokio::test]
async fn client_negotiates_versions_and_encodes_produce() {
    let broker = FakeBroker::start(|port| {
        Box::new(move |seen: &Seen| {
            standard(seen, port).unwrap_or_else(|| produce_reply(seen, ErrorCode::NONE, 42))
        })
    })
    .await;
    let mut client = Client::new(config(&broker.addr, 0));
    let batch = one_batch();
    let ack = client
        .produce("t", 0, batch.clone(), -1, 1_000)
        .await
        .expect("produce succeeds");
    assert_eq!(ack.base_offset, 42);
    assert_eq!(ack.log_start_offset, 0);

    let seen = broker.seen();
    let apis: Vec<(i16, i16, i16)> = seen
        .iter()
        .map(|s| (s.api_key, s.version, s.header_version))
        .collect();
    // ApiVersions at the newest version (flexible header), Metadata at the broker's newest
    // (12 < codec's 13), Produce at the broker's newest (11, flexible from 9).
    assert_eq!(
        apis,
        vec![
            (API_VERSIONS, 4, 2),
            (METADATA, 12, 2),
            (API_VERSIONS, 4, 2),
            (PRODUCE, 11, 2),
        ]
    );
    assert!(seen
        .iter()
        .all(|s| s.client_id.as_deref() == Some("fake-broker-test")));
    // Correlation ids count up per connection.
    for conn in [0, 1] {
        let ids: Vec<i32> = seen
            .iter()
            .filter(|s| s.conn == conn)
            .map(|s| s.correlation_id)
            .collect();
        assert_eq!(ids, vec![0, 1], "connection {conn}");
    }
    let produce = &broker.seen_api(PRODUCE)[0];
    let request = ProduceRequest::decode_exact(produce.body.clone(), produce.version)
        .expect("produce decodes");
    assert_eq!(request.acks, -1);
    assert_eq!(request.timeout_ms, 1_000);
    assert_eq!(request.topic_data.len(), 1);
    assert_eq!(request.topic_data[0].name, "t");
    assert_eq!(request.topic_data[0].partition_data[0].index, 0);
    assert_eq!(
        request.topic_data[0].partition_data[0].records.as_ref(),
        Some(&batch)
    );
}

#[tokio::test]
async fn client_falls_back_to_the_brokers_v0_api_versions_answer() {
    // An old broker: ApiVersions only to v2, Metadata only to v8 (not flexible).
    let old: &[(i16, i16, i16)] = &[(API_VERSIONS, 0, 2), (METADATA, 0, 8)];
    let broker = FakeBroker::start(move |port| {
        Box::new(move |seen: &Seen| match seen.api_key {
            API_VERSIONS if seen.version > 2 => {
                Action::Reply(api_versions(old, ErrorCode::UNSUPPORTED_VERSION, 0))
            }
            API_VERSIONS => Action::Reply(api_versions(old, ErrorCode::NONE, seen.version)),
            _ => standard(seen, port).unwrap_or(Action::Close),
        })
    })
    .await;
    let conn = Connection::connect(&broker.addr, "c", ConnectionLimits::default())
        .await
        .expect("connects despite UNSUPPORTED_VERSION");
    assert_eq!(conn.version_for(METADATA).ok(), Some(8));
    assert_eq!(conn.broker_versions(METADATA), Some((0, 8)));
    assert!(matches!(
        conn.version_for(PRODUCE),
        Err(ClientError::UnsupportedApi {
            broker_range: None,
            ..
        })
    ));
    drop(conn);

    let mut client = Client::new(config(&broker.addr, 0));
    let topics = client.metadata(&["t"]).await.expect("metadata");
    assert_eq!(topics.get("t").map(|t| t.partitions.len()), Some(1));
    let metadata = broker.seen_api(METADATA);
    assert_eq!(metadata.len(), 1);
    assert_eq!((metadata[0].version, metadata[0].header_version), (8, 1));
    // A Produce cannot go out: the broker speaks no Produce version.
    let err = client
        .produce("t", 0, one_batch(), 1, 1_000)
        .await
        .expect_err("no common Produce version");
    assert!(
        matches!(err, ClientError::UnsupportedApi { .. }),
        "unexpected {err}"
    );
    assert!(broker.seen_api(PRODUCE).is_empty());
}

#[tokio::test]
async fn client_retries_a_produce_after_a_dropped_connection_and_a_leader_change() {
    let broker = FakeBroker::start(|port| {
        let mut produces = 0;
        Box::new(move |seen: &Seen| {
            if let Some(action) = standard(seen, port) {
                return action;
            }
            produces += 1;
            match produces {
                1 => Action::Close,
                2 => produce_reply(seen, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1),
                _ => produce_reply(seen, ErrorCode::NONE, 7),
            }
        })
    })
    .await;
    let mut client = Client::new(config(&broker.addr, 3));
    let ack = client
        .produce("t", 0, one_batch(), -1, 1_000)
        .await
        .expect("succeeds on the third attempt");
    assert_eq!(ack.base_offset, 7);
    let seen = broker.seen();
    let produce_conns: Vec<usize> = seen
        .iter()
        .filter(|s| s.api_key == PRODUCE)
        .map(|s| s.conn)
        .collect();
    assert_eq!(produce_conns.len(), 3);
    // The dropped connection is not reused.
    assert_ne!(produce_conns[0], produce_conns[1]);
    // Each failure refreshed the metadata before the next attempt.
    let apis: Vec<i16> = seen
        .iter()
        .map(|s| s.api_key)
        .filter(|k| *k != API_VERSIONS)
        .collect();
    assert_eq!(
        apis,
        vec![METADATA, PRODUCE, METADATA, PRODUCE, METADATA, PRODUCE]
    );
}

#[tokio::test]
async fn client_tells_unknown_outcomes_from_failures() {
    // Every produce is dropped: the outcome is unknown once retries run out.
    let broker = FakeBroker::start(|port| {
        Box::new(move |seen: &Seen| standard(seen, port).unwrap_or(Action::Close))
    })
    .await;
    let mut client = Client::new(config(&broker.addr, 2));
    let err = client
        .produce("t", 0, one_batch(), -1, 1_000)
        .await
        .expect_err("never answered");
    assert!(err.is_unknown_outcome(), "{err}");
    match &err {
        ClientError::UnknownOutcome {
            topic,
            partition,
            attempts,
            ..
        } => assert_eq!((topic.as_str(), *partition, *attempts), ("t", 0, 3)),
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains("t-0"), "{err}");
    assert_eq!(broker.seen_api(PRODUCE).len(), 3);

    // A refusal before the append is a failure, reported at once.
    let broker = FakeBroker::start(|port| {
        Box::new(move |seen: &Seen| {
            standard(seen, port)
                .unwrap_or_else(|| produce_reply(seen, ErrorCode::MESSAGE_TOO_LARGE, -1))
        })
    })
    .await;
    let mut client = Client::new(config(&broker.addr, 2));
    let err = client
        .produce("t", 0, one_batch(), -1, 1_000)
        .await
        .expect_err("refused");
    match &err {
        ClientError::Kafka {
            code,
            topic,
            partition,
            ..
        } => assert_eq!(
            (*code, topic.as_str(), *partition),
            (ErrorCode::MESSAGE_TOO_LARGE, "t", 0)
        ),
        other => panic!("unexpected {other}"),
    }
    assert_eq!(broker.seen_api(PRODUCE).len(), 1);

    // NOT_LEADER_OR_FOLLOWER is a definite failure with acks=1, but with acks=all a leader
    // that lost leadership after appending answers it too: unknown.
    for (acks, unknown) in [(1i16, false), (-1, true)] {
        let broker = FakeBroker::start(|port| {
            Box::new(move |seen: &Seen| {
                standard(seen, port)
                    .unwrap_or_else(|| produce_reply(seen, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1))
            })
        })
        .await;
        let mut client = Client::new(config(&broker.addr, 1));
        let err = client
            .produce("t", 0, one_batch(), acks, 1_000)
            .await
            .expect_err("never a leader");
        assert_eq!(err.is_unknown_outcome(), unknown, "acks={acks}: {err}");
        assert_eq!(broker.seen_api(PRODUCE).len(), 2);
    }
}

#[tokio::test]
async fn client_refuses_a_response_larger_than_response_bytes_max() {
    let mut big = BatchBuilder::new(0);
    big.push(1, None, Some(&[7u8; 64 * 1024]), &[]);
    let big = big.build().freeze();
    let broker = FakeBroker::start(move |port| {
        Box::new(move |seen: &Seen| {
            standard(seen, port).unwrap_or_else(|| fetch_reply(seen, big.clone(), 1))
        })
    })
    .await;
    let mut client = Client::new(ClientConfig {
        response_bytes_max: 16 * 1024,
        ..config(&broker.addr, 3)
    });
    let err = client
        .fetch("t", 0, 0, FetchOptions::default())
        .await
        .expect_err("too large");
    match &err {
        ClientError::ResponseTooLarge {
            addr, size, max, ..
        } => {
            assert_eq!(addr, &broker.addr);
            assert!(*size > 64 * 1024);
            assert_eq!(*max, 16 * 1024);
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains("response_bytes_max"), "{err}");
    // Not retried: a bigger answer will not get smaller.
    assert_eq!(broker.seen_api(FETCH).len(), 1);
}

#[tokio::test]
async fn client_fetches_and_skips_records_below_the_offset() {
    let mut first = BatchBuilder::new(0);
    for i in 0..3 {
        first.push(100 + i, None, Some(format!("v{i}").as_bytes()), &[]);
    }
    let mut second = BatchBuilder::new(3).compression(Compression::Snappy);
    for i in 3..5 {
        second.push(100 + i, Some(b"k"), Some(format!("v{i}").as_bytes()), &[]);
    }
    let mut records = first.build();
    records.extend_from_slice(&second.build());
    let records = records.freeze();
    let broker = FakeBroker::start(move |port| {
        Box::new(move |seen: &Seen| {
            standard(seen, port).unwrap_or_else(|| fetch_reply(seen, records.clone(), 5))
        })
    })
    .await;
    let mut client = Client::new(config(&broker.addr, 0));
    let options = FetchOptions {
        max_wait_ms: 10,
        min_bytes: 1,
        max_bytes: 1 << 20,
        partition_max_bytes: 1 << 16,
        isolation_level: 0,
    };
    let fetched = client.fetch("t", 0, 2, options).await.expect("fetch");
    assert_eq!(fetched.high_watermark, 5);
    assert_eq!(fetched.error, ErrorCode::NONE);
    let got: Vec<(i64, String)> = client
        .records("t", 0, &fetched, 2)
        .map(|r| r.expect("record decodes"))
        .map(|r| {
            let value = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
            (r.offset, value.unwrap_or_default())
        })
        .collect();
    assert_eq!(
        got,
        vec![(2, "v2".into()), (3, "v3".into()), (4, "v4".into())]
    );
    let fetch = &broker.seen_api(FETCH)[0];
    assert_eq!(fetch.version, 12);
    let request = FetchRequest::decode_exact(fetch.body.clone(), fetch.version).expect("decodes");
    assert_eq!(
        (request.max_wait_ms, request.min_bytes, request.max_bytes),
        (10, 1, 1 << 20)
    );
    let partition = &request.topics[0].partitions[0];
    assert_eq!(request.topics[0].topic, "t");
    assert_eq!(
        (
            partition.partition,
            partition.fetch_offset,
            partition.partition_max_bytes
        ),
        (0, Offset(2), 1 << 16)
    );
}

#[tokio::test]
async fn client_refuses_a_mismatched_correlation_id_and_times_out_a_silent_broker() {
    let broker = FakeBroker::start(|port| {
        let mut fetches = 0;
        Box::new(move |seen: &Seen| {
            if let Some(action) = standard(seen, port) {
                return action;
            }
            fetches += 1;
            if fetches == 1 {
                match fetch_reply(seen, Bytes::new(), 0) {
                    Action::Reply(body) => Action::ReplyAs(seen.correlation_id + 100, body),
                    other => other,
                }
            } else {
                Action::Silent
            }
        })
    })
    .await;
    let mut client = Client::new(ClientConfig {
        request_timeout_ms: 300,
        ..config(&broker.addr, 0)
    });
    let options = FetchOptions {
        max_wait_ms: 0,
        ..FetchOptions::default()
    };
    let err = client
        .fetch("t", 0, 0, options)
        .await
        .expect_err("mismatch");
    match &err {
        ClientError::CorrelationMismatch {
            expected, found, ..
        } => assert_eq!(*found, expected + 100),
        other => panic!("unexpected {other}"),
    }
    let err = client.fetch("t", 0, 0, options).await.expect_err("silent");
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("Fetch"), "{err}");
    // Each failure broke its connection: the second fetch went out on a new one.
    let conns: Vec<usize> = broker.seen_api(FETCH).iter().map(|s| s.conn).collect();
    assert_eq!(conns.len(), 2);
    assert_ne!(conns[0], conns[1]);
}

#[tokio::test]
async fn client_admin_requests_and_list_offsets() {
    use samsa::protocol::create_topics::{
        CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
    };
    use samsa::protocol::delete_topics::{
        DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
    };
    use samsa::protocol::list_offsets::{
        ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse,
        ListOffsetsTopicResponse,
    };
    const LIST_OFFSETS: i16 = 2;
    const CREATE_TOPICS: i16 = 19;
    const DELETE_TOPICS: i16 = 20;

    // DeleteTopics names topics in `topic_names` up to v5 and in `topics` from v6.
    for delete_max in [5i16, 6] {
        let broker = FakeBroker::start(move |port| {
            Box::new(move |seen: &Seen| match seen.api_key {
                API_VERSIONS => {
                    let mut ranges = RANGES.to_vec();
                    ranges.extend([(CREATE_TOPICS, 2, 7), (DELETE_TOPICS, 1, delete_max)]);
                    Action::Reply(api_versions(&ranges, ErrorCode::NONE, seen.version))
                }
                CREATE_TOPICS => {
                    let request =
                        CreateTopicsRequest::decode_exact(seen.body.clone(), seen.version)
                            .expect("create decodes");
                    let topics = request
                        .topics
                        .iter()
                        .map(|t| CreatableTopicResult {
                            name: t.name.clone(),
                            error_code: if t.name == "exists" {
                                ErrorCode::TOPIC_ALREADY_EXISTS.0
                            } else {
                                0
                            },
                            ..CreatableTopicResult::default()
                        })
                        .collect();
                    Action::Reply(encode(
                        &CreateTopicsResponse {
                            topics,
                            ..CreateTopicsResponse::default()
                        },
                        seen.version,
                    ))
                }
                DELETE_TOPICS => {
                    let request =
                        DeleteTopicsRequest::decode_exact(seen.body.clone(), seen.version)
                            .expect("delete decodes");
                    let names: Vec<String> = if seen.version >= 6 {
                        request
                            .topics
                            .iter()
                            .filter_map(|t| t.name.clone())
                            .collect()
                    } else {
                        request.topic_names.clone()
                    };
                    let responses = names
                        .into_iter()
                        .map(|name| DeletableTopicResult {
                            name: Some(name),
                            ..DeletableTopicResult::default()
                        })
                        .collect();
                    Action::Reply(encode(
                        &DeleteTopicsResponse {
                            responses,
                            ..DeleteTopicsResponse::default()
                        },
                        seen.version,
                    ))
                }
                LIST_OFFSETS => {
                    let request = ListOffsetsRequest::decode_exact(seen.body.clone(), seen.version)
                        .expect("list offsets decodes");
                    let t = &request.topics[0];
                    let p = &t.partitions[0];
                    Action::Reply(encode(
                        &ListOffsetsResponse {
                            topics: vec![ListOffsetsTopicResponse {
                                name: t.name.clone(),
                                partitions: vec![ListOffsetsPartitionResponse {
                                    partition_index: p.partition_index,
                                    // Echo the timestamp asked for, to check it went out.
                                    timestamp: p.timestamp,
                                    offset: Offset(99),
                                    ..ListOffsetsPartitionResponse::default()
                                }],
                            }],
                            ..ListOffsetsResponse::default()
                        },
                        seen.version,
                    ))
                }
                _ => standard(seen, port).unwrap_or(Action::Close),
            })
        })
        .await;
        let mut client = Client::new(config(&broker.addr, 0));
        let created = client
            .create_topics(&[
                ("a", 3, 1, &[("cleanup.policy", "compact")]),
                ("exists", 1, 1, &[]),
            ])
            .await
            .expect("create answered");
        assert_eq!(created.len(), 2);
        assert!(created[0].1.is_ok());
        assert_eq!(
            created[1].1.as_ref().err().and_then(ClientError::code),
            Some(ErrorCode::TOPIC_ALREADY_EXISTS)
        );
        let create = &broker.seen_api(CREATE_TOPICS)[0];
        assert_eq!(create.version, 7);
        let request = CreateTopicsRequest::decode_exact(create.body.clone(), create.version)
            .expect("decodes");
        assert_eq!(
            (
                request.topics[0].num_partitions,
                request.topics[0].replication_factor
            ),
            (3, 1)
        );
        assert_eq!(request.topics[0].configs[0].name, "cleanup.policy");
        assert_eq!(
            request.topics[0].configs[0].value.as_deref(),
            Some("compact")
        );

        let deleted = client
            .delete_topics(&["a", "b"])
            .await
            .expect("delete answered");
        let names: Vec<&str> = deleted.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["a", "b"], "DeleteTopics v{delete_max}");
        assert!(deleted.iter().all(|(_, r)| r.is_ok()));
        assert_eq!(broker.seen_api(DELETE_TOPICS)[0].version, delete_max);

        let (offset, timestamp) = client.list_offsets("t", 0, -2).await.expect("offsets");
        assert_eq!((offset, timestamp), (99, -2));
        assert_eq!(broker.seen_api(LIST_OFFSETS)[0].version, 8);
    }
}
