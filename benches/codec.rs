//! Codec throughput on the produce and fetch paths, next to memcpy of the same bytes.
//!
//! A Produce request and a Fetch response each carrying 1 MiB of 100-byte records (in 16 KiB
//! batches, as a producer with default batching sends them) are encoded and decoded. The
//! codec keeps record data as `Bytes` slices of the frame, so decoding should not touch the
//! record bytes at all (far faster than memcpy) and encoding should cost about one memcpy
//! (the frame is written once).
//!
//! The log validator's check of a produced batch (`validate_1MiB_of_100B_records`) runs on one
//! 1 MiB batch of the same records, next to its own memcpy: it reads every record's varints in
//! place and computes one CRC-32C, so it should cost about a memcpy.
//!
//! Run: `cargo bench --bench codec` (`-- validate` for the validator alone).

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use samsa::log::validator::{validate_produce, TimestampType, ValidatorConfig};
use samsa::protocol::fetch::{FetchResponse, FetchableTopicResponse, PartitionData};
use samsa::protocol::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use samsa::protocol::record_batch::BatchBuilder;
use samsa::protocol::types::Offset;
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
                high_watermark: Offset(1 << 20),
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

/// One batch of about 1 MiB of 100-byte records, as the validator sees a produced batch.
fn one_batch() -> Vec<u8> {
    let value = [7u8; RECORD_BYTES];
    let mut batch = BatchBuilder::new(0);
    for i in 0..PAYLOAD_BYTES / (RECORD_BYTES + 8) {
        batch.push(1_700_000_000_000 + i as i64, None, Some(&value), &[]);
    }
    batch.build().to_vec()
}

fn bench_validate(c: &mut Criterion) {
    let mut records = one_batch();
    let len = records.len();
    let cfg = ValidatorConfig {
        topic: "bench",
        partition: 0,
        produce_version: 9,
        max_message_bytes: 2 << 20,
        timestamp_type: TimestampType::CreateTime,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: false,
        now_ms: 1_700_000_000_000,
        decompressed_bytes_max: 64 << 20,
        compression: None,
    };
    let mut group = c.benchmark_group("validate_1MiB_of_100B_records");
    group.throughput(Throughput::Bytes(len as u64));
    group.sample_size(50);
    let mut target = vec![0u8; len];
    group.bench_function("memcpy", |b| {
        b.iter(|| {
            target.copy_from_slice(black_box(&records));
            black_box(&target);
        })
    });
    // The CRC alone, the part of validation that must touch every byte.
    group.bench_function("crc32c", |b| {
        b.iter(|| {
            black_box(samsa::protocol::record_batch::compute_crc(black_box(
                &records,
            )))
        })
    });
    // Under CreateTime with a consistent header nothing is rewritten, so the same bytes are
    // validated every iteration.
    group.bench_function("validate", |b| {
        b.iter(|| black_box(validate_produce(black_box(&mut records), &cfg).expect("valid")))
    });
    group.finish();
}

criterion_group!(benches, bench, bench_validate);
criterion_main!(benches);
