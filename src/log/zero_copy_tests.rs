//! Tests that appending a batch as a shared slice of a request frame (the produce path without
//! a copy: `validator::validate_produce_bytes`, then `Log::append_validated_unacknowledged`)
//! stores exactly the bytes the old path stored: copy the batch, validate (and stamp) it in
//! place, patch its base offset.

use super::*;
use crate::log::validator::{self, ValidatorConfig};
use crate::protocol::record_batch::{BatchBuilder, Compression, TimestampType};
use crate::rt::disk::MemDisk;

const DIR: &str = "zc-0";
const NOW_MS: i64 = 1_700_000_000_000;

fn cfg(timestamp_type: TimestampType) -> ValidatorConfig<'static> {
    ValidatorConfig {
        topic: "zc",
        partition: 0,
        produce_version: 9,
        max_message_bytes: 1 << 20,
        timestamp_type,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: false,
        now_ms: NOW_MS,
        decompressed_bytes_max: 64 << 20,
        compression: None,
    }
}

/// A batch of 20 records as a producer sends it, optionally with a wrong `maxTimestamp` in its
/// header (which validation must correct under CreateTime too).
fn batch(codec: Compression, wrong_max_timestamp: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(0).compression(codec);
    for i in 0..20u8 {
        b.push(
            NOW_MS - 1000 + i64::from(i),
            Some(&[i]),
            Some(&[i; 100]),
            &[],
        );
    }
    let mut batch = b.build();
    if wrong_max_timestamp {
        record_batch::set_max_timestamp(&mut batch, TimestampType::CreateTime, NOW_MS - 5000)
            .expect("set max timestamp");
    }
    batch.to_vec()
}

/// Appends `batch` twice (base offsets 0 and 20) through the zero-copy path, each time as a
/// slice of a larger, shared frame, and returns the segment's bytes.
async fn stored_by_new_path(batch: &[u8], timestamp_type: TimestampType, copied: bool) -> Vec<u8> {
    let disk = Disk::mem(MemDisk::new(7));
    let (log, _) = Log::open(disk.clone(), DIR, LogConfig::default(), Clock::new())
        .await
        .expect("open");
    let mut frame = vec![0xAB; 13];
    frame.extend_from_slice(batch);
    frame.extend_from_slice(&[0xCD; 7]);
    let frame = Bytes::from(frame);
    for _ in 0..2 {
        let slice = frame.slice(13..13 + batch.len());
        let (_, batch) =
            validator::validate_produce_bytes(slice.clone(), &cfg(timestamp_type)).expect("valid");
        // Only a batch whose header validation rewrites is copied.
        assert_eq!(batch.bytes().as_ptr() != slice.as_ptr(), copied);
        let pending = log
            .append_validated_unacknowledged(&batch, 0)
            .await
            .expect("append");
        log.acknowledge(pending).await.expect("acknowledge");
    }
    // The frame around the batch is untouched.
    assert_eq!(&frame[..13], &[0xAB; 13]);
    assert_eq!(&frame[13..13 + batch.len()], batch);
    disk.read_file(&Segment::path(DIR, 0, ".log"))
        .await
        .expect("read segment")
        .to_vec()
}

/// The old path: a private copy, validated and stamped in place, base offset and leader epoch
/// set in place.
fn stored_by_old_path(batch: &[u8], timestamp_type: TimestampType) -> Vec<u8> {
    let mut stored = Vec::new();
    for base_offset in [0, 20] {
        let mut copy = batch.to_vec();
        validator::validate_produce(&mut copy, &cfg(timestamp_type)).expect("valid");
        record_batch::set_base_offset(&mut copy, base_offset);
        // The leader (epoch 0 here) stamps its epoch, outside the CRC.
        record_batch::set_partition_leader_epoch(&mut copy, 0);
        stored.extend_from_slice(&copy);
    }
    stored
}

#[tokio::test]
async fn zero_copy_append_stores_the_bytes_a_copy_would() {
    for codec in [Compression::None, Compression::Lz4, Compression::Gzip] {
        for (timestamp_type, wrong_max_timestamp, copied) in [
            (TimestampType::CreateTime, false, false),
            (TimestampType::CreateTime, true, true),
            (TimestampType::LogAppendTime, false, true),
        ] {
            let batch = batch(codec, wrong_max_timestamp);
            let new = stored_by_new_path(&batch, timestamp_type, copied).await;
            let old = stored_by_old_path(&batch, timestamp_type);
            assert_eq!(
                new, old,
                "{codec:?} {timestamp_type:?} wrong max timestamp {wrong_max_timestamp}"
            );
            // And the stored batches are valid, with their offsets assigned.
            let second = &new[batch.len()..];
            let header = record_batch::verify(second).expect("stored batch verifies");
            assert_eq!(header.base_offset, 20);
            if timestamp_type == TimestampType::LogAppendTime {
                assert_eq!(header.max_timestamp, NOW_MS);
            }
        }
    }
}
