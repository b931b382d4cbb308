//! Tests of retention and the log start offset: deletion by time, by size and both, the
//! active segment and the high watermark as limits, DeleteRecords, the start offset's
//! checkpoint across restarts and crashes, and recovery from a deletion cut short.

use super::*;
use crate::protocol::record_batch::BatchBuilder;
use crate::rt::disk::{CrashMode, MemDisk};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;

const DIR: &str = "t-0";

/// A batch of `n` records of 100-byte values, every record stamped `timestamp`.
fn batch(n: usize, timestamp: i64) -> Bytes {
    let mut b = BatchBuilder::new(0);
    for i in 0..n {
        b.push(timestamp, Some(&[i as u8]), Some(&[7u8; 100]), &[]);
    }
    b.build().freeze()
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        verify_crc_on_read: true,
        ..LogConfig::default()
    }
}

async fn open(disk: &Disk) -> (Arc<Log>, RecoveryReport) {
    Log::open(disk.clone(), DIR, config(), Clock::new())
        .await
        .expect("open")
}

fn mem_disk() -> Disk {
    Disk::mem(MemDisk::new(7))
}

/// Segment bases, in order.
async fn bases(log: &Log) -> Vec<i64> {
    log.state.lock().await.segments.keys().copied().collect()
}

async fn size_below_end(log: &Log) -> u64 {
    let state = log.state.lock().await;
    state.bytes_below(state.log_end_offset).await.expect("size")
}

fn size_policy(bytes: i64) -> RetentionPolicy {
    RetentionPolicy {
        retention_bytes: bytes,
        ..RetentionPolicy::UNLIMITED
    }
}

fn time_policy(ms: i64) -> RetentionPolicy {
    RetentionPolicy {
        retention_ms: ms,
        ..RetentionPolicy::UNLIMITED
    }
}

/// Appends `batches` batches of 3 records, timestamps `1000 * i`: each ~400 bytes, so two
/// fit in a 1 KiB segment.
async fn fill(log: &Log, batches: i64) {
    for i in 0..batches {
        log.append(batch(3, 1000 * i)).await.expect("append");
    }
}

#[tokio::test]
async fn retention_by_size_keeps_at_least_retention_bytes() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 20).await;
    let before = bases(&log).await;
    assert!(before.len() >= 8, "segments: {before:?}");
    let end = log.log_end_offset();
    let total = size_below_end(&log).await;
    let keep = total / 3;
    let outcome = log
        .enforce_retention(size_policy(keep as i64), end, 0)
        .await
        .expect("retention");
    let after = bases(&log).await;
    assert!(outcome.segments_deleted > 0);
    assert_eq!(after.len(), before.len() - outcome.segments_deleted);
    assert_eq!(log.log_start_offset().await, after[0]);
    assert_eq!(outcome.log_start_offset, after[0]);
    let left = size_below_end(&log).await;
    assert!(left >= keep, "{left} bytes left, {keep} to keep");
    // Kafka's rule: one more segment would have gone below retention.bytes.
    let first_size = log.state.lock().await.segments[&after[0]].size;
    assert!(left - first_size < keep);
    // Records below the start are refused; at the start they are served.
    let below = log.read(after[0] - 1, 1 << 20, end).await;
    assert!(matches!(below, Err(LogError::OffsetOutOfRange { .. })));
    let at = log.read(after[0], 1 << 20, end).await.expect("read");
    assert!(!at.records.is_empty());
    // A second pass finds nothing more to delete.
    let again = log
        .enforce_retention(size_policy(keep as i64), end, 0)
        .await
        .expect("retention");
    assert_eq!(again.segments_deleted, 0);
}

#[tokio::test]
async fn retention_by_time_deletes_the_old_prefix_only() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 20).await;
    let end = log.log_end_offset();
    // Batch i has timestamp 1000*i; at now = 20_000 with retention 10_500, batches 0..=9
    // are older than retention. A segment goes only when its largest timestamp is.
    let outcome = log
        .enforce_retention(time_policy(10_500), end, 20_000)
        .await
        .expect("retention");
    assert!(outcome.segments_deleted > 0);
    let state = log.state.lock().await;
    let first = state.segments.values().next().expect("a segment");
    assert!(
        20_000 - first.max_timestamp <= 10_500,
        "the first kept segment is young enough"
    );
    assert_eq!(state.log_start_offset, first.base_offset);
    drop(state);
    // The deleted segments' records were all older than retention: the first record kept
    // is from batch <= 10 (offset 30 at most), and every batch from 10 on is still there.
    assert!(log.log_start_offset().await <= 30);
}

#[tokio::test]
async fn retention_by_time_and_size_together() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 20).await;
    let end = log.log_end_offset();
    let total = size_below_end(&log).await;
    // Time alone would delete a little, size alone more: together, the larger.
    let by_time = RetentionPolicy {
        retention_ms: 17_500,
        retention_bytes: (total / 2) as i64,
        delete_one_segment_too_many: false,
    };
    log.enforce_retention(by_time, end, 20_000)
        .await
        .expect("retention");
    let left = size_below_end(&log).await;
    assert!(left >= total / 2);
    assert!(log.log_start_offset().await > 6, "size retention applied");
}

#[tokio::test]
async fn the_active_segment_and_data_above_the_high_watermark_stay() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 9).await;
    let active = *bases(&log).await.last().expect("a segment");
    let zero = RetentionPolicy {
        retention_ms: 0,
        retention_bytes: 0,
        delete_one_segment_too_many: false,
    };
    // With the high watermark at 6, only segments wholly below offset 6 may go.
    log.enforce_retention(zero, 6, i64::MAX)
        .await
        .expect("retention");
    let after = bases(&log).await;
    assert!(after[0] <= 6 && after.contains(&active));
    assert!(log.read(6, 1 << 20, 27).await.is_ok());
    // With everything acknowledged, all but the active segment go, even at zero bytes.
    log.enforce_retention(zero, log.log_end_offset(), i64::MAX)
        .await
        .expect("retention");
    assert_eq!(bases(&log).await, vec![active]);
    assert_eq!(log.log_start_offset().await, active);
    // Appends continue after the start.
    let info = log.append(batch(1, 0)).await.expect("append");
    assert_eq!(info.base_offset, 27);
}

#[tokio::test]
async fn delete_records_moves_the_start_and_survives_restart() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 10).await;
    let end = log.log_end_offset();
    assert!(matches!(
        log.delete_records(end + 1, end).await,
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        log.delete_records(10, 8).await,
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // Into the middle of a segment (and of a batch): the start moves exactly there.
    assert_eq!(log.delete_records(13, end).await.expect("delete"), 13);
    assert!(bases(&log).await[0] <= 13);
    assert!(matches!(
        log.read(12, 1 << 20, end).await,
        Err(LogError::OffsetOutOfRange { .. })
    ));
    let read = log.read(13, 1 << 20, end).await.expect("read");
    assert_eq!(read.log_start_offset, 13);
    // Backwards is a no-op that answers the current start.
    assert_eq!(log.delete_records(5, end).await.expect("delete"), 13);
    // A timestamp lookup never answers below the start.
    assert_eq!(log.offset_for_timestamp(0).await.expect("lookup"), Some(13));
    drop(log);
    let (log, report) = open(&disk).await;
    assert_eq!(report.log_start_offset, 13);
    assert_eq!(log.log_start_offset().await, 13);
    // Up to the log end: everything but the (empty-able) active segment goes.
    assert_eq!(log.delete_records(end, end).await.expect("delete"), end);
    assert_eq!(log.log_start_offset().await, end);
    let info = log.append(batch(1, 0)).await.expect("append");
    assert_eq!(info.base_offset, end);
}

#[tokio::test]
async fn power_loss_after_retention_never_exposes_deleted_records() {
    for mode in [
        CrashMode::Process,
        CrashMode::PowerLossDropUnsynced,
        CrashMode::PowerLossRandomPrefix,
    ] {
        let mem = MemDisk::new(11);
        let disk = Disk::mem(mem.clone());
        let (log, _) = open(&disk).await;
        fill(&log, 12).await;
        let end = log.log_end_offset();
        let outcome = log
            .enforce_retention(size_policy(1500), end, 0)
            .await
            .expect("retention");
        assert!(outcome.segments_deleted > 0);
        let start = outcome.log_start_offset;
        drop(log);
        mem.crash(mode, &mut SmallRng::seed_from_u64(3));
        let (log, report) = open(&disk).await;
        assert_eq!(report.log_start_offset, start, "{}", mode.name());
        assert_eq!(log.log_end_offset(), end, "{}", mode.name());
        assert!(bases(&log).await[0] >= start - 6);
    }
}

/// A crash between the checkpoint and the unlinks: the checkpoint names a start above
/// segments still on disk, one of which lost only its `.log` and another only its indexes.
#[tokio::test]
async fn recovery_finishes_a_deletion_cut_short() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 12).await;
    let all = bases(&log).await;
    let end = log.log_end_offset();
    log.close().await.expect("close");
    drop(log);
    let start = all[4];
    disk.write_file_atomic(
        &join(DIR, LOG_START_OFFSET_FILE),
        recovery::encode_checkpoint(start).as_bytes(),
    )
    .await
    .expect("checkpoint");
    // Segment 1 is half-deleted (its .log gone, indexes left); segment 2's indexes are gone.
    disk.remove(&Segment::path(DIR, all[1], ".log"))
        .await
        .expect("rm");
    disk.remove(&Segment::path(DIR, all[2], ".index"))
        .await
        .expect("rm");
    let (log, report) = open(&disk).await;
    assert_eq!(report.log_start_offset, start);
    assert_eq!(report.log_end_offset, end);
    assert_eq!(bases(&log).await, all[4..].to_vec());
    let names = disk.list(DIR).await.expect("list");
    for base in &all[..4] {
        let prefix = segment::file_name(*base, "");
        assert!(
            !names.iter().any(|n| n.starts_with(&prefix)),
            "{prefix} left in {names:?}"
        );
    }
    let read = log.read(start, 1 << 20, end).await.expect("read");
    assert!(!read.records.is_empty());
}

/// IO errors at any point of a deletion: the log goes offline, and after a crash and
/// reopen the start is either the old or the new one, with every record from it readable.
#[tokio::test]
async fn io_errors_during_retention_leave_a_consistent_log() {
    let mut failed = 0;
    for seed in 0..40u64 {
        let mem = MemDisk::new(seed);
        let disk = Disk::mem(mem.clone());
        let (log, _) = open(&disk).await;
        fill(&log, 12).await;
        let end = log.log_end_offset();
        mem.set_io_error_rate(150_000);
        let result = log.enforce_retention(size_policy(1500), end, 0).await;
        mem.set_io_error_rate(0);
        if result.is_err() {
            failed += 1;
            assert!(matches!(
                log.read(end - 1, 1, end).await,
                Err(LogError::Offline { .. })
            ));
        }
        drop(log);
        mem.crash(
            CrashMode::PowerLossDropUnsynced,
            &mut SmallRng::seed_from_u64(seed),
        );
        let (log, report) = open(&disk).await;
        assert_eq!(report.log_end_offset, end, "seed {seed}");
        let start = log.log_start_offset().await;
        let mut offset = start;
        while offset < end {
            let read = log.read(offset, 1 << 20, end).await.expect("read");
            assert!(read.next_offset > offset, "seed {seed}");
            offset = read.next_offset;
        }
        // A second, error-free pass reaches the same place as one that never failed.
        let outcome = log
            .enforce_retention(size_policy(1500), end, 0)
            .await
            .expect("retention");
        assert!(size_below_end(&log).await >= 1500);
        assert_eq!(
            bases(&log).await[0],
            outcome.log_start_offset,
            "seed {seed}"
        );
    }
    assert!(
        failed >= 10,
        "only {failed} of 40 passes met an injected error"
    );
}

/// A start checkpointed past the end of what recovery keeps: the log restarts empty there.
#[tokio::test]
async fn a_log_ending_below_its_start_restarts_at_the_start() {
    let disk = mem_disk();
    let (log, _) = open(&disk).await;
    fill(&log, 3).await;
    log.close().await.expect("close");
    drop(log);
    disk.write_file_atomic(
        &join(DIR, LOG_START_OFFSET_FILE),
        recovery::encode_checkpoint(50).as_bytes(),
    )
    .await
    .expect("checkpoint");
    let (log, report) = open(&disk).await;
    assert_eq!((report.log_start_offset, report.log_end_offset), (50, 50));
    assert_eq!(bases(&log).await, vec![50]);
    assert_eq!(
        log.append(batch(1, 0)).await.expect("append").base_offset,
        50
    );
}

#[derive(Clone, Debug)]
enum Step {
    Append { records: usize, timestamp: i64 },
    Retention { ms: i64, bytes: i64, now: i64 },
    DeleteRecords { fraction: u8 },
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1usize..6, 0i64..10_000).prop_map(|(records, timestamp)| Step::Append { records, timestamp }),
        2 => (prop_oneof![Just(-1i64), 0i64..20_000], prop_oneof![Just(-1i64), 0i64..6_000], 0i64..30_000)
            .prop_map(|(ms, bytes, now)| Step::Retention { ms, bytes, now }),
        1 => (0u8..=100).prop_map(|fraction| Step::DeleteRecords { fraction }),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Against a model (the timestamp of every offset): the start only moves forward, never
    /// past the log end; everything from the start on reads back; size retention keeps at
    /// least retention.bytes; time retention deletes only old records.
    #[test]
    fn retention_against_a_model(steps in proptest::collection::vec(step(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let disk = mem_disk();
            let (mut log, _) = open(&disk).await;
            let mut timestamps: Vec<i64> = Vec::new();
            let mut start = 0i64;
            for step in steps {
                match step {
                    Step::Append { records, timestamp } => {
                        let info = log.append(batch(records, timestamp)).await.expect("append");
                        assert_eq!(info.base_offset, timestamps.len() as i64);
                        timestamps.extend(std::iter::repeat_n(timestamp, records));
                    }
                    Step::Retention { ms, bytes, now } => {
                        let end = log.log_end_offset();
                        let before = size_below_end(&log).await;
                        let policy = RetentionPolicy {
                            retention_ms: ms,
                            retention_bytes: bytes,
                            delete_one_segment_too_many: false,
                        };
                        let outcome = log.enforce_retention(policy, end, now).await.expect("retention");
                        // Segments wholly below an unchanged start (left by a DeleteRecords
                        // at a segment's end) go without any limit applying.
                        if outcome.log_start_offset > start {
                            let left = size_below_end(&log).await;
                            let deleted_by_size = bytes >= 0 && left >= bytes as u64;
                            let new_start = outcome.log_start_offset as usize;
                            let all_old = ms >= 0
                                && timestamps[start as usize..new_start]
                                    .iter()
                                    .all(|t| now - t > ms);
                            assert!(
                                deleted_by_size || all_old,
                                "deleted {} segments ({before} -> {left} bytes) without cause",
                                outcome.segments_deleted
                            );
                        }
                    }
                    Step::DeleteRecords { fraction } => {
                        let end = log.log_end_offset();
                        let offset = end * i64::from(fraction) / 100;
                        let low = log.delete_records(offset, end).await.expect("delete");
                        assert_eq!(low, offset.max(start));
                    }
                    Step::Reopen => {
                        drop(log);
                        log = open(&disk).await.0;
                    }
                }
                let now_start = log.log_start_offset().await;
                assert!(now_start >= start, "start moved back {start} -> {now_start}");
                assert!(now_start <= log.log_end_offset());
                start = now_start;
                // Everything from the start reads back, in order.
                let end = log.log_end_offset();
                let mut offset = start;
                while offset < end {
                    let read = log.read(offset, 1 << 20, end).await.expect("read");
                    assert!(read.next_offset > offset);
                    offset = read.next_offset;
                }
                if start < end {
                    assert!(matches!(
                        log.read(start - 1, 1, end).await,
                        Err(LogError::OffsetOutOfRange { .. })
                    ) || start == 0);
                }
            }
        });
    }
}
