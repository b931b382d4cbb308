//! The idempotent [`Producer`] against a scripted fake broker over real TCP: the fake grants a
//! producer id (InitProducerId), keeps Kafka's per-producer sequence rules for one partition
//! (accept the next sequence, answer a duplicate of a stored batch with its original offset,
//! refuse a gap with OUT_OF_ORDER_SEQUENCE_NUMBER), and cuts the connection once right after
//! appending a batch without answering. The producer must retry with the same sequences, so
//! the log ends with every record exactly once, in send order.
#![cfg(not(feature = "sim"))]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use samsa::client::{ClientConfig, Producer, ProducerConfig, ProducerRecord};
use samsa::protocol::api_versions::{ApiVersion, ApiVersionsResponse};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::frame::parse_request;
use samsa::protocol::header::ResponseHeader;
use samsa::protocol::init_producer_id::InitProducerIdResponse;
use samsa::protocol::message::Message;
use samsa::protocol::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use samsa::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use samsa::protocol::record_batch::BatchHeader;
use samsa::protocol::response_header_version;
use samsa::protocol::types::{NodeId, Offset, ProducerEpoch, ProducerId};

const PRODUCER_ID: i64 = 1000;
/// The produce request after whose append the fake closes the connection unanswered.
const CUT_AFTER_PRODUCE: usize = 3;

/// The fake's partition log, as sequence bookkeeping.
#[derive(Default)]
struct Log {
    next_offset: i64,
    next_sequence: i32,
    /// base sequence -> (base offset, record count) of every appended batch.
    batches: BTreeMap<i32, (i64, i32)>,
    produce_requests: usize,
    connections: usize,
    out_of_order: usize,
    duplicates: usize,
}

fn encode<M: Message>(message: &M, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).expect("response encodes");
    out.freeze()
}

/// Answers one request: `None` closes the connection unanswered.
fn answer(log: &Mutex<Log>, port: i32, api_key: i16, version: i16, body: Bytes) -> Option<Bytes> {
    match api_key {
        18 => Some(encode(
            &ApiVersionsResponse {
                api_keys: [(0, 3, 9), (3, 0, 12), (18, 0, 3), (22, 0, 4)]
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
        )),
        3 => {
            let request = MetadataRequest::decode_exact(body, version).expect("metadata decodes");
            let topics = request
                .topics
                .unwrap_or_default()
                .into_iter()
                .map(|t| MetadataResponseTopic {
                    name: t.name,
                    partitions: vec![MetadataResponsePartition {
                        partition_index: 0,
                        leader_id: NodeId(1),
                        replica_nodes: vec![NodeId(1)],
                        isr_nodes: vec![NodeId(1)],
                        ..MetadataResponsePartition::default()
                    }],
                    ..MetadataResponseTopic::default()
                })
                .collect();
            Some(encode(
                &MetadataResponse {
                    brokers: vec![MetadataResponseBroker {
                        node_id: NodeId(1),
                        host: "127.0.0.1".into(),
                        port,
                        rack: None,
                    }],
                    controller_id: NodeId(1),
                    topics,
                    ..MetadataResponse::default()
                },
                version,
            ))
        }
        22 => Some(encode(
            &InitProducerIdResponse {
                producer_id: ProducerId(PRODUCER_ID),
                producer_epoch: ProducerEpoch(0),
                ..InitProducerIdResponse::default()
            },
            version,
        )),
        0 => {
            let request = ProduceRequest::decode_exact(body, version).expect("produce decodes");
            let mut log = log.lock().expect("log lock");
            log.produce_requests += 1;
            let cut = log.produce_requests == CUT_AFTER_PRODUCE;
            let mut responses = Vec::new();
            for topic in request.topic_data {
                let mut partition_responses = Vec::new();
                for p in topic.partition_data {
                    let records = p.records.unwrap_or_default();
                    let h = BatchHeader::parse(&records).expect("a whole batch header");
                    assert_eq!((h.producer_id, h.producer_epoch), (PRODUCER_ID, 0));
                    let (code, base) = if h.base_sequence == log.next_sequence {
                        let base = log.next_offset;
                        log.next_offset += i64::from(h.records_count);
                        log.next_sequence += h.records_count;
                        log.batches.insert(h.base_sequence, (base, h.records_count));
                        (ErrorCode::NONE, base)
                    } else if let Some(&(base, count)) = log.batches.get(&h.base_sequence) {
                        assert_eq!(count, h.records_count, "a resent batch keeps its records");
                        log.duplicates += 1;
                        (ErrorCode::NONE, base)
                    } else {
                        log.out_of_order += 1;
                        (ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
                    };
                    partition_responses.push(PartitionProduceResponse {
                        index: p.index,
                        error_code: code.0,
                        base_offset: Offset(base),
                        ..PartitionProduceResponse::default()
                    });
                }
                responses.push(TopicProduceResponse {
                    name: topic.name,
                    partition_responses,
                    ..TopicProduceResponse::default()
                });
            }
            if cut {
                return None;
            }
            Some(encode(
                &ProduceResponse {
                    responses,
                    ..ProduceResponse::default()
                },
                version,
            ))
        }
        other => panic!("the producer sent API {other}"),
    }
}

async fn serve(mut stream: tokio::net::TcpStream, log: Arc<Mutex<Log>>, port: i32) {
    loop {
        let mut prefix = [0u8; 4];
        if stream.read_exact(&mut prefix).await.is_err() {
            return;
        }
        let len = usize::try_from(i32::from_be_bytes(prefix)).expect("non-negative size");
        let mut frame = vec![0u8; len];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let request = parse_request(Bytes::from(frame)).expect("valid frames");
        let (api_key, version) = (request.api_key(), request.api_version());
        let Some(body) = answer(&log, port, api_key, version, request.body.clone()) else {
            return;
        };
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader {
            correlation_id: request.header.correlation_id,
        }
        .encode(
            &mut out,
            response_header_version(api_key, version).expect("known API"),
        )
        .expect("header encodes");
        out.extend_from_slice(&body);
        let size = i32::try_from(out.len() - 4).expect("response fits");
        out[..4].copy_from_slice(&size.to_be_bytes());
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_producer_idempotent_retry_after_a_cut_connection_leaves_no_duplicate_and_no_gap() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let log = Arc::new(Mutex::new(Log::default()));
    let accept_log = log.clone();
    // Test scaffolding on real tokio; its tasks die with the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            accept_log.lock().expect("log lock").connections += 1;
            #[allow(clippy::disallowed_methods)]
            tokio::spawn(serve(stream, accept_log.clone(), i32::from(port)));
        }
    });
    let producer = Producer::new(ProducerConfig {
        client: ClientConfig {
            bootstrap: vec![format!("127.0.0.1:{port}")],
            retry_backoff_ms: 10,
            request_timeout_ms: 5_000,
            ..ClientConfig::default()
        },
        linger_ms: 0,
        // About three 20-byte records per batch: many batches, several in flight.
        batch_size: 61 + 3 * 30,
        ack_timeout_ms: 1_000,
        ..ProducerConfig::default()
    })
    .await
    .expect("the fake grants a producer id");
    assert_eq!(producer.producer_identity(), Some((PRODUCER_ID, 0)));
    let mut deliveries = Vec::new();
    for i in 0..60 {
        let record = ProducerRecord {
            key: None,
            value: Some(Bytes::from(format!("value-{i:014}"))),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i,
        };
        deliveries.push(producer.send("t", Some(0), record).await.expect("queued"));
    }
    let mut offsets = Vec::new();
    for d in deliveries {
        offsets.push(d.await.expect("delivered").offset);
    }
    producer.close().await;
    // Every record once, in send order: offsets 0..60, and the log holds exactly 60.
    assert_eq!(offsets, (0..60).collect::<Vec<i64>>());
    let log = log.lock().expect("log lock");
    assert_eq!(log.next_offset, 60);
    assert_eq!(log.next_sequence, 60);
    // The cut forced a reconnection and a resend the fake recognised as a duplicate.
    assert!(
        log.connections >= 3,
        "bootstrap, first and second produce connection: {}",
        log.connections
    );
    assert!(log.duplicates >= 1, "the unanswered batch was resent");
}
