//! The idempotent [`Producer`] against a scripted fake broker over real TCP: the fake grants a
//! producer id (InitProducerId), keeps Kafka's per-producer sequence rules for one partition
//! (accept the next sequence, answer a duplicate of a stored batch with its original offset,
//! refuse a gap with OUT_OF_ORDER_SEQUENCE_NUMBER), and cuts the connection once right after
//! appending a batch without answering. The producer must retry with the same sequences, so
//! the log ends with every record exactly once, in send order.
#![cfg(not(feature = "sim"))]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use samsa::client::{ClientConfig, Producer, ProducerConfig, ProducerRecord};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::init_producer_id::InitProducerIdResponse;
use samsa::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use samsa::protocol::record_batch::BatchHeader;
use samsa::protocol::types::{Offset, ProducerEpoch, ProducerId};

#[path = "../support/fake_broker.rs"]
mod fake_broker;

use fake_broker::{api_versions, encode};

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

/// Answers one request: `None` closes the connection unanswered.
fn answer(log: &Mutex<Log>, port: i32, api_key: i16, version: i16, body: Bytes) -> Option<Bytes> {
    match api_key {
        18 => Some(api_versions(
            &[(0, 3, 9), (3, 0, 12), (18, 0, 3), (22, 0, 4)],
            ErrorCode::NONE,
            version,
        )),
        3 => Some(fake_broker::metadata_one_partition(body, version, port)),
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
    while let Some(request) = fake_broker::read_request(&mut stream).await {
        let (api_key, version) = (request.api_key, request.version);
        let Some(body) = answer(&log, port, api_key, version, request.body) else {
            return;
        };
        if !fake_broker::write_response(
            &mut stream,
            api_key,
            version,
            request.correlation_id,
            &body,
        )
        .await
        {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_producer_idempotent_retry_after_a_cut_connection_leaves_no_duplicate_and_no_gap() {
    let (listener, port) = fake_broker::bind().await;
    let log = Arc::new(Mutex::new(Log::default()));
    let accept_log = log.clone();
    fake_broker::accept_all(listener, move |stream, _| {
        accept_log.lock().expect("log lock").connections += 1;
        serve(stream, accept_log.clone(), port)
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
