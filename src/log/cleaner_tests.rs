//! Tests of the log cleaner on tokio and the in-memory disk: what a pass keeps (the latest
//! value of each key, every offset unrenumbered, tombstones until their horizon, each
//! producer's last batch), several passes with a small dedupe buffer, reads and recovery
//! over the gaps, and a crash at every fault point of a pass in every crash mode.

use super::cleaner::{CleanerBugs, CleanerPolicy, CLEANER_CHECKPOINT_FILE};
use super::*;
use crate::protocol::record_batch::{BatchBuilder, BatchHeader};
use crate::rt::disk::{CrashMode, MemDisk};
use crate::rt::fault::{Fault, FaultInjector};
use crate::rt::latch::Latch;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::atomic::AtomicUsize;

const DIR: &str = "c-0";

/// What one offset holds: key and value (`None`: a tombstone).
type Written = BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)>;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        verify_crc_on_read: true,
        ..LogConfig::default()
    }
}

fn policy() -> CleanerPolicy {
    CleanerPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CleanerPolicy::DEFAULT
    }
}

async fn open(disk: &Disk) -> (Arc<Log>, RecoveryReport) {
    Log::open(disk.clone(), DIR, config(), Clock::new())
        .await
        .expect("open")
}

/// A batch of keyed records, each stamped `timestamp`.
fn keyed(records: &[(&[u8], Option<&[u8]>)], timestamp: i64) -> Bytes {
    let mut b = BatchBuilder::new(0);
    for (key, value) in records {
        b.push(timestamp, Some(key), *value, &[]);
    }
    b.build().freeze()
}

/// Appends `rounds` rounds of one 3-record batch per key of `keys` (values name the round),
/// recording what each offset holds.
async fn fill(log: &Log, written: &mut Written, keys: usize, rounds: usize) {
    fill_keys(log, written, "key", keys, rounds).await;
}

/// [`fill`] with keys `{prefix}-{k}`.
async fn fill_keys(log: &Log, written: &mut Written, prefix: &str, keys: usize, rounds: usize) {
    for round in 0..rounds {
        for k in 0..keys {
            let key = format!("{prefix}-{k}").into_bytes();
            let values: Vec<Vec<u8>> = (0..3)
                .map(|i| format!("value-{round}-{i}-{}", "x".repeat(40)).into_bytes())
                .collect();
            let records: Vec<(&[u8], Option<&[u8]>)> = values
                .iter()
                .map(|v| (key.as_slice(), Some(v.as_slice())))
                .collect();
            let info = log.append(keyed(&records, 1_000)).await.expect("append");
            for (i, v) in values.iter().enumerate() {
                written.insert(info.base_offset + i as i64, (key.clone(), Some(v.clone())));
            }
        }
    }
}

/// Every record of the log, in order: (offset, key, value).
async fn read_all(log: &Log) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset().await;
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1 << 20, i64::MAX).await.expect("read");
        assert!(read.next_offset > offset, "the read moved on from {offset}");
        for item in record_batch::batches(read.records.clone()) {
            let (_, batch) = item.expect("batch");
            for record in record_batch::records(&batch).expect("records") {
                let record = record.expect("record");
                if record.offset >= offset {
                    out.push((
                        record.offset,
                        record.key.map(|k| k.to_vec()).unwrap_or_default(),
                        record.value.map(|v| v.to_vec()),
                    ));
                }
            }
        }
        offset = read.next_offset;
    }
    out
}

/// The latest value of each key when `records` are replayed in order.
fn replay<'a>(
    records: impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>,
) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let mut latest = BTreeMap::new();
    for (key, value) in records {
        latest.insert(key.clone(), value.clone());
    }
    latest
}

/// The compaction properties of `log` against what was written: every record read is the
/// one written at its offset, offsets strictly increase, and replaying what is left gives
/// every key's latest value (a key whose latest record is a tombstone may be gone). `Err`
/// names the first violation.
async fn compaction_checked(
    log: &Log,
    written: &Written,
) -> Result<Vec<(i64, Vec<u8>, Option<Vec<u8>>)>, String> {
    let read = read_all(log).await;
    let mut previous = -1;
    for (offset, key, value) in &read {
        if *offset <= previous {
            return Err(format!("offsets go backwards at {offset}"));
        }
        previous = *offset;
        if written.get(offset) != Some(&(key.clone(), value.clone())) {
            return Err(format!(
                "offset {offset} does not hold what was written there"
            ));
        }
    }
    let expected = replay(written.values().map(|(k, v)| (k, v)));
    let actual = replay(read.iter().map(|(_, k, v)| (k, v)));
    for (key, value) in &expected {
        let ok = match value {
            Some(_) => actual.get(key) == Some(value),
            None => matches!(actual.get(key), None | Some(None)),
        };
        if !ok {
            return Err(format!(
                "key {:?}: latest {:?}, the log gives {:?}",
                String::from_utf8_lossy(key),
                value.as_deref().map(String::from_utf8_lossy),
                actual.get(key)
            ));
        }
    }
    if let Some(key) = actual.keys().find(|k| !expected.contains_key(*k)) {
        return Err(format!("key {key:?} was never written"));
    }
    Ok(read)
}

async fn check_compacted(log: &Log, written: &Written) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    match compaction_checked(log, written).await {
        Ok(read) => read,
        Err(why) => panic!("{why}"),
    }
}

#[tokio::test]
async fn a_pass_keeps_the_latest_value_of_every_key_at_its_offset() {
    let disk = Disk::mem(MemDisk::new(1));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 10, 8).await;
    let end = log.log_end_offset();
    let before = log.segment_count().await;
    let size_before = log.size_bytes().await;
    let outcome = log
        .clean(&policy(), end, 10_000, &Latch::new())
        .await
        .expect("clean");
    assert!(outcome.records_removed > 0, "{outcome:?}");
    assert_eq!(outcome.keys, 10);
    assert_eq!(log.log_end_offset(), end, "the log end never moves");
    assert!(log.size_bytes().await < size_before / 2, "the log shrank");
    assert!(log.segment_count().await <= before);
    let read = check_compacted(&log, &written).await;
    // Below the end of the pass, each key once, at its latest offset.
    let cleaned_end = outcome.end_offset;
    let below: Vec<_> = read.iter().filter(|(o, _, _)| *o < cleaned_end).collect();
    let keys: std::collections::BTreeSet<_> = below.iter().map(|(_, k, _)| k).collect();
    assert_eq!(
        keys.len(),
        below.len(),
        "one record per key below {cleaned_end}"
    );
    // Segments are grouped by their size before cleaning (Kafka's groupSegmentsBySize), so
    // the small cleaned ones merge at the next pass.
    let cleaned_segments = log.segment_count().await;
    fill(&log, &mut written, 10, 1).await;
    let end = log.log_end_offset();
    let second = log
        .clean(&policy(), end, 10_000, &Latch::new())
        .await
        .expect("clean");
    assert!(
        log.segment_count().await < cleaned_segments,
        "small cleaned segments merged: {second:?}"
    );
    check_compacted(&log, &written).await;
    let cleaned_end = second.end_offset;
    // The same after a restart: recovery accepts the gaps.
    log.close().await.expect("close");
    let (log, report) = open(&disk).await;
    assert_eq!(report.log_end_offset, end);
    assert!(report.truncated.is_none(), "{report:?}");
    assert_eq!(report.cleaner.first_dirty_offset, cleaned_end);
    check_compacted(&log, &written).await;
    // Recovery that scans everything (no clean shutdown, no recovery point) agrees.
    drop(log);
    disk.remove(&join(DIR, RECOVERY_POINT_FILE))
        .await
        .expect("remove checkpoint");
    let (log, report) = open(&disk).await;
    assert!(report.truncated.is_none(), "{report:?}");
    assert_eq!(report.log_end_offset, end);
    check_compacted(&log, &written).await;
}

#[tokio::test]
async fn reads_inside_a_gap_move_to_the_next_batch() {
    let disk = Disk::mem(MemDisk::new(2));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 4, 6).await;
    let end = log.log_end_offset();
    log.clean(&policy(), end, 10_000, &Latch::new())
        .await
        .expect("clean");
    let kept: Vec<i64> = read_all(&log).await.iter().map(|(o, _, _)| *o).collect();
    for offset in 0..end {
        let read = log.read(offset, 1, i64::MAX).await.expect("read");
        let first_kept = kept.iter().copied().find(|&o| o >= offset);
        let got: Vec<i64> = record_batch::batches(read.records.clone())
            .flat_map(|item| {
                let (_, batch) = item.expect("batch");
                record_batch::records(&batch)
                    .expect("records")
                    .map(|r| r.expect("record").offset)
                    .collect::<Vec<_>>()
            })
            .filter(|&o| o >= offset)
            .collect();
        assert_eq!(got.first().copied(), first_kept, "read at {offset}");
    }
}

#[tokio::test]
async fn tombstones_stay_until_their_delete_horizon() {
    let disk = Disk::mem(MemDisk::new(3));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 3, 2).await;
    let info = log
        .append(keyed(&[(b"key-0", None)], 2_000))
        .await
        .expect("tombstone");
    written.insert(info.base_offset, (b"key-0".to_vec(), None));
    let tombstone = info.base_offset;
    fill(&log, &mut written, 3, 4).await; // Dirt after it, so the tombstone is cleanable...
                                          // ...but key-0 is written again, so delete it once more at the end.
    let info = log
        .append(keyed(&[(b"key-1", None)], 3_000))
        .await
        .expect("tombstone");
    written.insert(info.base_offset, (b"key-1".to_vec(), None));
    let tombstone_1 = info.base_offset;
    fill(&log, &mut written, 1, 8).await; // Only key-0 afterwards.
    let policy = CleanerPolicy {
        delete_retention_ms: 50_000,
        ..policy()
    };
    let end = log.log_end_offset();
    let first = log
        .clean(&policy, end, 100_000, &Latch::new())
        .await
        .expect("clean");
    assert!(first.end_offset > tombstone_1, "{first:?}");
    let read = check_compacted(&log, &written).await;
    assert!(
        read.iter()
            .any(|(o, _, v)| *o == tombstone_1 && v.is_none()),
        "the tombstone stays before its horizon"
    );
    assert!(!read.iter().any(|(o, _, _)| *o == tombstone), "superseded");
    assert!(
        !read
            .iter()
            .any(|(o, k, _)| *o < tombstone_1 && k == b"key-1"),
        "older values of a deleted key go"
    );
    // The horizon is stamped on the batch (KIP-534).
    let batch = log.read(tombstone_1, 1, i64::MAX).await.expect("read");
    let header = BatchHeader::parse(&batch.records).expect("header");
    assert!(header.has_delete_horizon());
    assert_eq!(header.base_timestamp, 100_000 + 50_000);
    // Before the horizon a second pass keeps it; after, the tombstone goes.
    fill(&log, &mut written, 1, 20).await;
    let end = log.log_end_offset();
    log.clean(&policy, end, 149_999, &Latch::new())
        .await
        .expect("clean");
    assert!(read_all(&log)
        .await
        .iter()
        .any(|(o, _, _)| *o == tombstone_1));
    fill(&log, &mut written, 1, 20).await;
    let end = log.log_end_offset();
    log.clean(&policy, end, 150_000, &Latch::new())
        .await
        .expect("clean");
    let read = check_compacted(&log, &written).await;
    assert!(
        !read.iter().any(|(_, k, _)| k == b"key-1"),
        "the deleted key is gone after the horizon"
    );
}

/// One batch of an idempotent producer: `key` at sequence `seq`, stamped now (producer
/// state expires by its batches' timestamps).
fn idempotent(key: &[u8], seq: i32) -> Bytes {
    let mut b = BatchBuilder::new(0).producer(77, 0, seq);
    b.push(
        Clock::new().now_ms(),
        Some(key),
        Some(b"from the producer"),
        &[],
    );
    b.build().freeze()
}

async fn producer_last_batch_case(bugs: CleanerBugs) -> bool {
    let disk = Disk::mem(MemDisk::new(4));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    log.append(idempotent(b"key-0", 0)).await.expect("append");
    let last = log.append(idempotent(b"key-0", 1)).await.expect("append");
    // Another writer overwrites the key, so every record of the producer is superseded.
    fill(&log, &mut written, 1, 12).await;
    let end = log.log_end_offset();
    let policy = CleanerPolicy { bugs, ..policy() };
    let outcome = log
        .clean(&policy, end, Clock::new().now_ms(), &Latch::new())
        .await
        .expect("clean");
    assert!(outcome.first_dirty_offset < last.base_offset && outcome.end_offset > last.last_offset);
    let kept = log.read(last.base_offset, 1, i64::MAX).await.expect("read");
    let header = BatchHeader::parse(&kept.records).expect("header");
    if !bugs.drops_producer_last_batch {
        // Kafka's empty batch: the producer's range and sequence stay, no records.
        assert_eq!(header.base_offset, last.base_offset);
        assert_eq!(header.records_count, 0);
        assert_eq!(header.producer_id, 77);
        assert_eq!(header.base_sequence, 1);
    }
    // A restart that rebuilds producer state from the log (no snapshot survives), then the
    // producer's retry of its last batch.
    log.close().await.expect("close");
    drop(log);
    for name in disk.list(DIR).await.expect("list") {
        if name.ends_with(".snapshot") {
            disk.remove(&join(DIR, &name)).await.expect("remove");
        }
    }
    let (log, _) = open(&disk).await;
    let retry = log
        .append_unacknowledged(idempotent(b"key-0", 1))
        .await
        .expect("retry");
    retry.duplicate
}

#[tokio::test]
async fn a_producers_last_batch_stays_empty_so_its_retry_is_still_a_duplicate() {
    assert!(producer_last_batch_case(CleanerBugs::NONE).await);
}

#[tokio::test]
async fn planted_cleaner_dropping_the_producers_last_batch_lets_a_retry_in() {
    let bugs = CleanerBugs {
        drops_producer_last_batch: true,
        ..CleanerBugs::NONE
    };
    assert!(!producer_last_batch_case(bugs).await);
}

#[tokio::test]
async fn planted_cleaner_dropping_the_latest_value_is_seen() {
    let disk = Disk::mem(MemDisk::new(5));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 5, 6).await;
    // Other keys after them, so the latest values of the first five lie in closed segments.
    fill_keys(&log, &mut written, "tail", 12, 3).await;
    let end = log.log_end_offset();
    let policy = CleanerPolicy {
        bugs: CleanerBugs {
            drops_latest_value: true,
            ..CleanerBugs::NONE
        },
        ..policy()
    };
    log.clean(&policy, end, 10_000, &Latch::new())
        .await
        .expect("clean");
    let found = compaction_checked(&log, &written).await;
    assert!(found.is_err(), "the compaction check fails");
}

#[tokio::test]
async fn a_small_dedupe_buffer_cleans_in_several_passes_to_the_same_result() {
    let disk = Disk::mem(MemDisk::new(6));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 40, 3).await;
    let end = log.log_end_offset();
    // Room for about 12 keys of 5 bytes.
    let small = CleanerPolicy {
        dedupe_buffer_bytes: 12 * (5 + cleaner::OFFSET_MAP_ENTRY_OVERHEAD_BYTES),
        ..policy()
    };
    let mut passes = 0;
    loop {
        let outcome = log
            .clean(&small, end, 10_000, &Latch::new())
            .await
            .expect("clean");
        if outcome.end_offset == outcome.first_dirty_offset {
            break;
        }
        assert!(outcome.keys <= 12, "{outcome:?}");
        passes += 1;
        assert!(passes < 100, "the passes make progress");
        check_compacted(&log, &written).await;
    }
    assert!(passes > 2, "{passes} passes");
    let checkpoint = log.cleaner_checkpoint().await;
    let active_base = *log
        .state
        .lock()
        .await
        .segments
        .keys()
        .next_back()
        .expect("active");
    assert_eq!(checkpoint.first_dirty_offset, active_base);
    check_compacted(&log, &written).await;
    // A buffer too small for one batch is refused with the setting's name.
    let tiny = CleanerPolicy {
        dedupe_buffer_bytes: 10,
        ..policy()
    };
    fill(&log, &mut written, 2, 10).await;
    let err = log
        .clean(&tiny, log.log_end_offset(), 10_000, &Latch::new())
        .await
        .expect_err("too small");
    assert!(
        err.to_string().contains("log.cleaner.dedupe.buffer.size"),
        "{err}"
    );
}

#[tokio::test]
async fn the_active_segment_and_data_above_the_high_watermark_are_never_cleaned() {
    let disk = Disk::mem(MemDisk::new(7));
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 2, 10).await;
    let bases: Vec<i64> = log.state.lock().await.segments.keys().copied().collect();
    let high_watermark = bases[bases.len() / 2];
    let outcome = log
        .clean(&policy(), high_watermark, 10_000, &Latch::new())
        .await
        .expect("clean");
    assert!(outcome.end_offset <= high_watermark, "{outcome:?}");
    let read = check_compacted(&log, &written).await;
    for (offset, _) in written.range(high_watermark..) {
        assert!(
            read.iter().any(|(o, _, _)| o == offset),
            "{offset} was above the watermark"
        );
    }
    // An aborted pass changes nothing.
    let aborted = Latch::new();
    aborted.set();
    let before = read_all(&log).await;
    let err = log
        .clean(&policy(), log.log_end_offset(), 10_000, &aborted)
        .await
        .expect_err("aborted");
    assert!(matches!(err, LogError::Aborted));
    assert_eq!(read_all(&log).await, before);
    assert!(!disk
        .list(DIR)
        .await
        .expect("list")
        .iter()
        .any(|n| n.ends_with(cleaner::CLEANED_SUFFIX)));
}

/// Crashes the disk at the `target`-th fault point it meets (counting from 1), in `mode`,
/// and tells the test through `halted`.
#[derive(Debug)]
struct CrashAt {
    mem: MemDisk,
    mode: CrashMode,
    target: usize,
    seen: AtomicUsize,
    halted: tokio::sync::Notify,
}

impl FaultInjector for CrashAt {
    fn at(&self, _point: crate::rt::fault::FaultPoint) -> Option<Fault> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.target {
            self.mem
                .crash(self.mode, &mut SmallRng::seed_from_u64(n as u64));
            self.halted.notify_one();
            return Some(Fault::Halt);
        }
        None
    }

    fn halt(&self, _point: crate::rt::fault::FaultPoint) -> bool {
        false
    }
}

/// Writes a log, runs a pass that crashes at fault point `target` in `mode`, reopens and
/// checks the compaction properties. `None` when the pass met fewer points than `target`.
async fn crash_during_a_pass(target: usize, mode: CrashMode, bugs: CleanerBugs) -> Option<bool> {
    let mem = MemDisk::new(8);
    let disk = Disk::mem(mem.clone());
    let (log, _) = open(&disk).await;
    let mut written = Written::new();
    fill(&log, &mut written, 6, 6).await;
    let end = log.log_end_offset();
    let injector = Arc::new(CrashAt {
        mem: mem.clone(),
        mode,
        target,
        seen: AtomicUsize::new(0),
        halted: tokio::sync::Notify::new(),
    });
    mem.set_fault_injector(Some(injector.clone()));
    let policy = CleanerPolicy { bugs, ..policy() };
    let abort = Latch::new();
    let finished = tokio::select! {
        biased;
        _ = injector.halted.notified() => false,
        _ = log.clean(&policy, end, 10_000, &abort) => true,
    };
    mem.set_fault_injector(None);
    drop(log);
    if finished {
        return None; // The pass finished before the target point.
    }
    let (log, report) = open(&disk).await;
    let whole = report.log_end_offset == end;
    Some(whole && compaction_checked(&log, &written).await.is_ok())
}

#[tokio::test]
async fn a_crash_at_any_point_of_a_pass_leaves_the_old_or_the_new_segments() {
    let mut crashed = 0;
    for mode in [
        CrashMode::Process,
        CrashMode::PowerLossDropUnsynced,
        CrashMode::PowerLossRandomPrefix,
    ] {
        for target in 1.. {
            match crash_during_a_pass(target, mode, CleanerBugs::NONE).await {
                None => break,
                Some(ok) => {
                    assert!(ok, "crash at point {target} in {}", mode.name());
                    crashed += 1;
                }
            }
        }
    }
    assert!(crashed > 30, "{crashed} crash points");
}

#[tokio::test]
async fn planted_swap_that_is_not_crash_safe_loses_data_at_some_crash_point() {
    let bugs = CleanerBugs {
        swap_not_crash_safe: true,
        ..CleanerBugs::NONE
    };
    let mut lost = 0;
    for target in 1.. {
        match crash_during_a_pass(target, CrashMode::PowerLossDropUnsynced, bugs).await {
            None => break,
            Some(ok) => lost += usize::from(!ok),
        }
    }
    assert!(lost > 0, "no crash point showed the planted bug");
}

#[tokio::test]
async fn an_unusable_cleaner_checkpoint_is_refused_by_name() {
    let disk = Disk::mem(MemDisk::new(9));
    let (log, _) = open(&disk).await;
    log.close().await.expect("close");
    drop(log);
    disk.write_file_atomic(&join(DIR, CLEANER_CHECKPOINT_FILE), b"0\n12\n3\n")
        .await
        .expect("write");
    let err = Log::open(disk.clone(), DIR, config(), Clock::new())
        .await
        .expect_err("refused");
    assert!(err.to_string().contains(CLEANER_CHECKPOINT_FILE), "{err}");
    assert!(
        err.to_string().contains("below the first dirty offset"),
        "{err}"
    );
}
