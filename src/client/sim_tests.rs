//! The client under madsim: a scripted broker node and a client node on the simulated
//! network, so that the paths that differ from real TCP (explicit flush, end of stream as a
//! zero-length read, simulated time for timeouts and backoff) are exercised. Built only for
//! `cargo test --features sim --lib client::`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Client, ClientConfig, ClientError};
use crate::protocol::api_versions::{ApiVersion, ApiVersionsResponse};
use crate::protocol::frame::parse_request;
use crate::protocol::header::ResponseHeader;
use crate::protocol::message::Message;
use crate::protocol::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use crate::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use crate::protocol::record_batch::BatchBuilder;
use crate::protocol::response_header_version;
use crate::protocol::types::{NodeId, Offset};

const BROKER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const CLIENT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const PORT: u16 = 9092;

fn encode<M: Message>(message: &M, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).expect("encodes");
    out.freeze()
}

/// Answers ApiVersions, Metadata and Produce; closes the connection on the first
/// `drop_first` produces without answering.
async fn broker(drop_first: usize, produces: Arc<AtomicUsize>) {
    let listener = crate::rt::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT))
        .await
        .expect("bind");
    while let Ok((mut stream, _)) = listener.accept().await {
        let produces = produces.clone();
        crate::rt::task::spawn(async move {
            loop {
                let Ok(len) = stream.read_u32().await else {
                    return;
                };
                let mut frame = vec![0u8; len as usize];
                if stream.read_exact(&mut frame).await.is_err() {
                    return;
                }
                let request = parse_request(Bytes::from(frame)).expect("valid frame");
                let (key, version) = (request.api_key(), request.api_version());
                let body = match key {
                    18 => encode(
                        &ApiVersionsResponse {
                            api_keys: [(0, 3, 12), (3, 0, 13), (18, 0, 4)]
                                .into_iter()
                                .map(|(api_key, min_version, max_version)| ApiVersion {
                                    api_key,
                                    min_version,
                                    max_version,
                                })
                                .collect(),
                            ..ApiVersionsResponse::default()
                        },
                        version,
                    ),
                    3 => {
                        let req = MetadataRequest::decode_exact(request.body.clone(), version)
                            .expect("metadata decodes");
                        let topics = req
                            .topics
                            .unwrap_or_default()
                            .into_iter()
                            .map(|t| MetadataResponseTopic {
                                name: t.name,
                                partitions: vec![MetadataResponsePartition {
                                    leader_id: NodeId(1),
                                    ..MetadataResponsePartition::default()
                                }],
                                ..MetadataResponseTopic::default()
                            })
                            .collect();
                        encode(
                            &MetadataResponse {
                                brokers: vec![MetadataResponseBroker {
                                    node_id: NodeId(1),
                                    host: BROKER_IP.to_string(),
                                    port: i32::from(PORT),
                                    rack: None,
                                }],
                                topics,
                                ..MetadataResponse::default()
                            },
                            version,
                        )
                    }
                    0 => {
                        let n = produces.fetch_add(1, Ordering::SeqCst);
                        if n < drop_first {
                            return;
                        }
                        let req = ProduceRequest::decode_exact(request.body.clone(), version)
                            .expect("produce decodes");
                        let responses = req
                            .topic_data
                            .iter()
                            .map(|t| TopicProduceResponse {
                                name: t.name.clone(),
                                partition_responses: vec![PartitionProduceResponse {
                                    base_offset: Offset(i64::try_from(n).unwrap_or(-1)),
                                    ..PartitionProduceResponse::default()
                                }],
                                ..TopicProduceResponse::default()
                            })
                            .collect();
                        encode(
                            &ProduceResponse {
                                responses,
                                ..ProduceResponse::default()
                            },
                            version,
                        )
                    }
                    _ => return,
                };
                let header_version = response_header_version(key, version).expect("known");
                let mut out = BytesMut::new();
                out.put_i32(0);
                ResponseHeader {
                    correlation_id: request.header.correlation_id,
                }
                .encode(&mut out, header_version)
                .expect("header encodes");
                out.extend_from_slice(&body);
                let size = i32::try_from(out.len() - 4).expect("fits");
                out[..4].copy_from_slice(&size.to_be_bytes());
                if stream.write_all(&out).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Runs a client producing twice against a broker that drops the first `drop_first`
/// produces; returns both results and how many produces the broker saw.
fn run(seed: u64, drop_first: usize, retries_max: u32) -> (Vec<Result<i64, ClientError>>, usize) {
    let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async move {
        let handle = madsim::runtime::Handle::current();
        let produces = Arc::new(AtomicUsize::new(0));
        let counter = produces.clone();
        let _broker = handle
            .create_node()
            .name("broker")
            .ip(BROKER_IP)
            .init(move || broker(drop_first, counter.clone()))
            .build();
        let client = handle.create_node().name("client").ip(CLIENT_IP).build();
        let results = client
            .spawn(async move {
                // Let the broker bind first.
                crate::rt::time::sleep(std::time::Duration::from_millis(10)).await;
                let mut client = Client::new(ClientConfig {
                    bootstrap: vec![format!("{BROKER_IP}:{PORT}")],
                    request_timeout_ms: 1_000,
                    retries_max,
                    retry_backoff_ms: 10,
                    ..ClientConfig::default()
                });
                let mut results = Vec::new();
                for _ in 0..2 {
                    let mut batch = BatchBuilder::new(0);
                    batch.push(1, None, Some(b"v"), &[]);
                    let result = client
                        .produce("t", 0, batch.build().freeze(), -1, 500)
                        .await
                        .map(|ack| ack.base_offset);
                    results.push(result);
                }
                results
            })
            .await
            .expect("client task");
        (results, produces.load(Ordering::SeqCst))
    })
}

#[test]
fn client_sim_produces_and_retries_over_simulated_tcp() {
    let (results, seen) = run(1, 1, 3);
    let offsets: Vec<Option<i64>> = results.iter().map(|r| r.as_ref().ok().copied()).collect();
    assert_eq!(offsets, vec![Some(1), Some(2)]);
    assert_eq!(seen, 3);
}

#[test]
fn client_sim_reports_unknown_outcome_when_every_attempt_is_dropped() {
    let (results, seen) = run(2, usize::MAX, 1);
    assert_eq!(seen, 4);
    for result in results {
        let err = result.expect_err("dropped");
        assert!(err.is_unknown_outcome(), "{err}");
    }
}
