//! Codec throughput on the produce and fetch paths, next to memcpy of the same bytes.
//!
//! A Produce request and a Fetch response each carrying 1 MiB of 100-byte records (in 16 KiB
//! batches, as a producer with default batching sends them) are encoded and decoded. The
//! codec keeps record data as `Bytes` slices of the frame, so decoding should not touch the
//! record bytes at all (far faster than memcpy) and encoding should cost about one memcpy
//! (the frame is written once).
//!
//! Run: `cargo bench --bench codec`.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use samsa::protocol::fetch::{FetchResponse, FetchableTopicResponse, PartitionData};
use samsa::protocol::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use samsa::protocol::record_batch::BatchBuilder;
use samsa::protocol::wire::Reader;
use std::hint::black_box;

const RECORD_BYTES: usize = 100;
const PAYLOAD_BYTES: usize = 1 << 20;
const BATCH_BYTES: usize = 16 << 10;

/// About 1 MiB of whole record batches of 100-byte records.
fn records() -> Bytes {
    let value = [7u8; RECORD_BYTES];
    let mut out = BytesMut::with_capacity(PAYLOAD_BYTES + BATCH_BYTES);
    let mut offset = 0i64;
    while out.len() < PAYLOAD_BYTES {
        let mut batch = BatchBuilder::new(offset);
        for i in 0..BATCH_BYTES / (RECORD_BYTES + 8) {
            batch.push(1_700_000_000_000 + i as i64, None, Some(&value), &[]);
            offset += 1;
        }
        out.extend_from_slice(&batch.build());
    }
    out.freeze()
}

fn produce_request(records: Bytes) -> ProduceRequest {
    ProduceRequest {
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: "bench".to_string(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(records),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn fetch_response(records: Bytes) -> FetchResponse {
    FetchResponse {
        responses: vec![FetchableTopicResponse {
            topic: "bench".to_string(),
            partitions: vec![PartitionData {
                partition_index: 0,
                high_watermark: 1 << 20,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let records = records();
    let len = records.len();
    let mut group = c.benchmark_group("codec_1MiB_of_100B_records");
    group.throughput(Throughput::Bytes(len as u64));
    group.sample_size(50);

    let mut target = vec![0u8; len];
    group.bench_function("memcpy", |b| {
        b.iter(|| {
            target.copy_from_slice(black_box(&records));
            black_box(&target);
        })
    });

    for version in [3i16, 9, 12] {
        let request = produce_request(records.clone());
        let mut frame = BytesMut::with_capacity(len + 1024);
        request.encode(&mut frame, version).expect("encodable");
        let frame = frame.freeze();
        group.bench_function(format!("produce_request_v{version}_encode"), |b| {
            let mut out = BytesMut::with_capacity(len + 1024);
            b.iter(|| {
                out.clear();
                request.encode(&mut out, version).expect("encodable");
                black_box(&out);
            })
        });
        group.bench_function(format!("produce_request_v{version}_decode"), |b| {
            b.iter(|| {
                let mut reader = Reader::new(frame.clone());
                black_box(ProduceRequest::decode(&mut reader, version).expect("decodable"))
            })
        });
    }
    for version in [4i16, 12, 16] {
        let response = fetch_response(records.clone());
        let mut frame = BytesMut::with_capacity(len + 1024);
        response.encode(&mut frame, version).expect("encodable");
        let frame = frame.freeze();
        group.bench_function(format!("fetch_response_v{version}_encode"), |b| {
            let mut out = BytesMut::with_capacity(len + 1024);
            b.iter(|| {
                out.clear();
                response.encode(&mut out, version).expect("encodable");
                black_box(&out);
            })
        });
        group.bench_function(format!("fetch_response_v{version}_decode"), |b| {
            b.iter(|| {
                let mut reader = Reader::new(frame.clone());
                black_box(FetchResponse::decode(&mut reader, version).expect("decodable"))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
