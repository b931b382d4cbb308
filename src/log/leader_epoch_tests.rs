//! Tests of the log for replicas: a leader's appends stamped with its epoch and recorded in
//! the leader-epoch cache, a follower's appends that keep the leader's offsets and epochs,
//! truncation to a diverging point, and the cache's checkpoint across restarts and crashes.

use super::*;
use crate::protocol::record_batch::BatchBuilder;
use crate::rt::disk::{CrashMode, MemDisk};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const DIR: &str = "metadata-0";

/// A batch of `n` records whose values name `tag`.
fn batch(n: usize, tag: u8) -> Bytes {
    let mut b = BatchBuilder::new(0);
    for i in 0..n {
        b.push(1_000, Some(&[i as u8]), Some(&[tag; 50]), &[]);
    }
    b.build().freeze()
}

fn config(flush: FlushPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        verify_crc_on_read: true,
        flush,
        ..LogConfig::default()
    }
}

async fn open_in(disk: &Disk, dir: &str, flush: FlushPolicy) -> Arc<Log> {
    Log::open(disk.clone(), dir, config(flush), Clock::new())
        .await
        .expect("open")
        .0
}

async fn open(disk: &Disk) -> Arc<Log> {
    open_in(disk, DIR, FlushPolicy::SyncBeforeAck).await
}

/// Every batch of the log: (base offset, partition leader epoch), CRCs checked.
async fn batches_of(log: &Log) -> Vec<(i64, i32)> {
    let bytes = everything(log).await;
    record_batch::batches(bytes)
        .map(|item| {
            let (header, batch) = item.expect("a whole batch");
            record_batch::verify(&batch).expect("a valid CRC");
            (header.base_offset, header.partition_leader_epoch)
        })
        .collect()
}

/// The log's bytes from its start to its end.
async fn everything(log: &Log) -> Bytes {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset().await;
    while offset < log.log_end_offset() {
        let read = log
            .read(offset, 1 << 20, log.log_end_offset())
            .await
            .expect("read");
        out.extend_from_slice(&read.records);
        offset = read.next_offset;
    }
    Bytes::from(out)
}

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs
        .iter()
        .map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        })
        .collect()
}

fn end(epoch: i32, end_offset: i64) -> EpochEnd {
    EpochEnd { epoch, end_offset }
}

/// Epoch 0 writes offsets 0..6, epoch 3 writes 6..10 (batches of 3, 3, 2, 2 records).
async fn leader_log(disk: &Disk) -> Arc<Log> {
    let log = open(disk).await;
    log.append_as_leader(batch(3, 1), 0).await.expect("append");
    log.append_as_leader(batch(3, 2), 0).await.expect("append");
    log.append_as_leader(batch(2, 3), 3).await.expect("append");
    log.append_as_leader(batch(2, 4), 3).await.expect("append");
    log
}

#[tokio::test]
async fn a_leader_stamps_its_epoch_and_the_cache_answers_where_each_epoch_ends() {
    let disk = Disk::mem(MemDisk::new(1));
    let log = leader_log(&disk).await;
    assert_eq!(
        batches_of(&log).await,
        vec![(0, 0), (3, 0), (6, 3), (8, 3)],
        "every batch carries its leader's epoch, with a valid CRC"
    );
    assert_eq!(log.epoch_entries().await, entries(&[(0, 0), (3, 6)]));
    assert_eq!(log.end_offset_for_epoch(0).await, end(0, 6));
    assert_eq!(log.end_offset_for_epoch(2).await, end(0, 6));
    assert_eq!(log.end_offset_for_epoch(3).await, end(3, 10));
    assert_eq!(log.end_offset_for_epoch(4).await, EpochEnd::UNDEFINED);
    assert_eq!(log.epoch_for_offset(7).await, Some(3));
    // A client's append (the single-node path) neither stamps nor records an epoch.
    log.append(batch(1, 5)).await.expect("append");
    assert_eq!(batches_of(&log).await.last(), Some(&(10, -1)));
    assert_eq!(log.latest_epoch().await, Some(3));
    // An older leader is refused, and leaves no trace.
    let err = log
        .append_as_leader(batch(1, 6), 2)
        .await
        .expect_err("epoch 2 after epoch 3");
    assert!(
        matches!(
            err,
            LogError::EpochOutOfOrder {
                offset: 11,
                epoch: 2,
                latest_epoch: 3
            }
        ),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 11);
}

#[tokio::test]
async fn a_follower_keeps_the_leaders_offsets_and_epochs_byte_for_byte() {
    let disk = Disk::mem(MemDisk::new(2));
    let leader = leader_log(&disk).await;
    let follower = open_in(&disk, "follower-0", FlushPolicy::SyncBeforeAck).await;
    let bytes = everything(&leader).await;
    // Fetched in two pieces: the first two batches, then the rest.
    let cut = record_batch::batches(bytes.clone())
        .take(2)
        .map(|item| item.expect("a batch").1.len())
        .sum::<usize>();
    let info = follower
        .append_as_follower(bytes.slice(..cut))
        .await
        .expect("append");
    assert_eq!((info.base_offset, info.last_offset), (0, 5));
    // A piece that does not start at the follower's end is refused.
    let err = follower
        .append_as_follower(bytes.slice(..cut))
        .await
        .expect_err("offset 0 again");
    assert!(
        matches!(
            err,
            LogError::UnexpectedAppendOffset {
                expected: 6,
                found: 0
            }
        ),
        "{err}"
    );
    follower
        .append_as_follower(bytes.slice(cut..))
        .await
        .expect("append");
    assert_eq!(everything(&follower).await, bytes, "the same bytes");
    assert_eq!(follower.epoch_entries().await, leader.epoch_entries().await);
    // Batches that skip offsets, or whose epoch goes back, are refused.
    let mut later = BatchBuilder::new(12);
    later.push(1_000, Some(b"k"), Some(b"v"), &[]);
    let err = follower
        .append_as_follower(later.build().freeze())
        .await
        .expect_err("a gap");
    assert!(
        matches!(
            err,
            LogError::UnexpectedAppendOffset {
                expected: 10,
                found: 12
            }
        ),
        "{err}"
    );
    let old_epoch = {
        let other = open_in(&disk, "other-0", FlushPolicy::SyncBeforeAck).await;
        for _ in 0..10 {
            other.append(batch(1, 9)).await.expect("fill");
        }
        other
            .append_as_leader(batch(1, 9), 1)
            .await
            .expect("append");
        let read = other.read(10, 1 << 20, 11).await.expect("read");
        read.records
    };
    let err = follower
        .append_as_follower(old_epoch)
        .await
        .expect_err("epoch 1 after epoch 3");
    assert!(
        matches!(
            err,
            LogError::EpochOutOfOrder {
                offset: 10,
                epoch: 1,
                latest_epoch: 3
            }
        ),
        "{err}"
    );
    assert_eq!(follower.log_end_offset(), 10);
}

#[tokio::test]
async fn truncation_to_a_diverging_point_trims_the_cache_on_disk_too() {
    let disk = Disk::mem(MemDisk::new(3));
    let log = leader_log(&disk).await;
    log.append_as_leader(batch(2, 7), 5).await.expect("append");
    assert_eq!(
        log.epoch_entries().await,
        entries(&[(0, 0), (3, 6), (5, 10)])
    );
    // The follower learns that epoch 3 ended at 8 on the new leader: it cuts there.
    assert_eq!(log.truncate_to(8).await.expect("truncate"), 8);
    assert_eq!(log.epoch_entries().await, entries(&[(0, 0), (3, 6)]));
    assert_eq!(log.end_offset_for_epoch(3).await, end(3, 8));
    // The new leader's epoch 4 continues the log.
    log.append_as_leader(batch(1, 8), 4).await.expect("append");
    log.close().await.expect("close");
    drop(log);
    let log = open(&disk).await;
    assert_eq!(
        log.epoch_entries().await,
        entries(&[(0, 0), (3, 6), (4, 8)])
    );
    assert_eq!(batches_of(&log).await, vec![(0, 0), (3, 0), (6, 3), (8, 4)]);
}

#[tokio::test]
async fn an_epoch_whose_first_batch_a_crash_lost_is_forgotten_at_open() {
    for mode in [
        CrashMode::Process,
        CrashMode::PowerLossDropUnsynced,
        CrashMode::PowerLossRandomPrefix,
    ] {
        let mem = MemDisk::new(4);
        let disk = Disk::mem(mem.clone());
        let page_cache = FlushPolicy::PageCache {
            flush_messages: u64::MAX,
            flush_ms: u64::MAX,
        };
        let log = open_in(&disk, DIR, page_cache).await;
        log.append_as_leader(batch(3, 1), 0).await.expect("append");
        log.flush_to(3).await.expect("sync");
        // Epoch 2's checkpoint entry is durable before its batch, which is not synced.
        log.append_as_leader(batch(3, 2), 2).await.expect("append");
        drop(log);
        mem.crash(mode, &mut SmallRng::seed_from_u64(5));
        let log = open_in(&disk, DIR, page_cache).await;
        let end_offset = log.log_end_offset();
        let expected = if end_offset > 3 {
            entries(&[(0, 0), (2, 3)])
        } else {
            entries(&[(0, 0)])
        };
        assert_eq!(log.epoch_entries().await, expected, "{}", mode.name());
        // Whatever survived, a new epoch continues from the log end.
        log.append_as_leader(batch(1, 3), 6).await.expect("append");
        assert_eq!(log.end_offset_for_epoch(6).await, end(6, end_offset + 1));
    }
}

#[tokio::test]
async fn retention_moves_the_first_epochs_start_and_a_bad_checkpoint_is_named() {
    let disk = Disk::mem(MemDisk::new(5));
    let log = leader_log(&disk).await;
    log.delete_records(4, log.log_end_offset())
        .await
        .expect("delete records");
    let start = log.log_start_offset().await;
    assert_eq!(start, 4);
    assert_eq!(log.epoch_entries().await, entries(&[(0, 4), (3, 6)]));
    log.close().await.expect("close");
    drop(log);
    let log = open(&disk).await;
    assert_eq!(log.epoch_entries().await, entries(&[(0, 4), (3, 6)]));
    log.close().await.expect("close");
    drop(log);
    let path = join(DIR, leader_epoch::LEADER_EPOCH_FILE);
    disk.write_file_atomic(&path, b"0\n2\n3 6\n0 4\n")
        .await
        .expect("write");
    let err = Log::open(
        disk.clone(),
        DIR,
        config(FlushPolicy::SyncBeforeAck),
        Clock::new(),
    )
    .await
    .expect_err("a checkpoint out of order");
    let message = err.to_string();
    assert!(
        message.contains(leader_epoch::LEADER_EPOCH_FILE) && message.contains("out of order"),
        "{message}"
    );
}

/// A read plans under the state lock and reads without it: a truncation between the two is
/// seen by the truncation count, so `Log::read` reads again instead of trusting bytes a cut
/// may have changed. Here the stale plan's bytes are a new leader's, at the same offsets.
#[tokio::test]
async fn a_truncation_between_planning_and_reading_is_detected() {
    let disk = Disk::mem(MemDisk::new(6));
    let log = leader_log(&disk).await;
    let plan = {
        let state = log.state.lock().await;
        log.plan_read(&state, 6, i64::MAX).expect("plan")
    };
    let cuts = plan.cuts;
    log.truncate_to(6).await.expect("truncate");
    log.append_as_leader(batch(4, 9), 5).await.expect("append");
    assert_ne!(log.cuts.load(Ordering::Acquire), cuts, "the cut is counted");
    // What the stale plan reads is not what was there when it was planned...
    let stale = log.run_plan(plan, 1 << 20, true).await;
    let stale_epochs: Vec<i32> = match &stale {
        Ok((_, records)) => record_batch::batches(records.clone())
            .map(|item| item.expect("a batch").0.partition_leader_epoch)
            .collect(),
        Err(_) => Vec::new(),
    };
    assert_ne!(stale_epochs, vec![3, 3], "the old batches are gone");
    // ...and a read after the cut plans afresh and sees the new leader's batch.
    let read = log.read(6, 1 << 20, i64::MAX).await.expect("read");
    let epochs: Vec<(i64, i32)> = record_batch::batches(read.records)
        .map(|item| {
            let header = item.expect("a batch").0;
            (header.base_offset, header.partition_leader_epoch)
        })
        .collect();
    assert_eq!(epochs, vec![(6, 5)]);
    assert_eq!(read.next_offset, 10);
}

/// Starting over at an offset (a follower behind the leader's log start, or loading a
/// snapshot): the log is empty there, epochs and producer snapshots gone, and a follower's
/// append continues it; the state survives a reopen and every crash mode.
#[tokio::test]
async fn a_log_starts_over_at_an_offset_above_or_inside_it() {
    for (offset, seed) in [(25, 7), (4, 8)] {
        for mode in [
            CrashMode::Process,
            CrashMode::PowerLossDropUnsynced,
            CrashMode::PowerLossRandomPrefix,
        ] {
            let mem = MemDisk::new(seed);
            let disk = Disk::mem(mem.clone());
            let log = leader_log(&disk).await;
            log.truncate_fully_and_start_at(offset)
                .await
                .expect("restart");
            assert_eq!(log.log_start_offset().await, offset);
            assert_eq!(log.log_end_offset(), offset);
            assert_eq!(log.durable_end_offset(), offset);
            assert_eq!(log.epoch_entries().await, Vec::new());
            assert!(producer_snapshot::list(&disk, DIR)
                .await
                .expect("list")
                .is_empty());
            assert!(matches!(
                log.read(2, 1 << 20, i64::MAX).await,
                Err(LogError::OffsetOutOfRange { .. })
            ));
            let mut next = BatchBuilder::new(offset);
            next.push(1_000, Some(b"k"), Some(b"v"), &[]);
            let mut stamped = next.build();
            stamped[12..16].copy_from_slice(&7i32.to_be_bytes());
            log.append_as_follower(stamped.freeze())
                .await
                .expect("the leader's next batch");
            drop(log);
            mem.crash(mode, &mut SmallRng::seed_from_u64(seed));
            let log = open(&disk).await;
            assert_eq!(log.log_start_offset().await, offset, "{}", mode.name());
            assert_eq!(log.log_end_offset(), offset + 1, "{}", mode.name());
            assert_eq!(batches_of(&log).await, vec![(offset, 7)]);
            assert_eq!(log.epoch_entries().await, entries(&[(7, offset)]));
        }
    }
}

/// The restart's commit point is the log start checkpoint: a crash right after it, with
/// the old segments and epochs still on disk, opens as an empty log at the new start.
#[tokio::test]
async fn a_restart_cut_short_after_its_commit_point_opens_empty() {
    let disk = Disk::mem(MemDisk::new(9));
    let log = leader_log(&disk).await;
    log.close().await.expect("close");
    drop(log);
    recovery::write_log_start_checkpoint(&disk, DIR, 25)
        .await
        .expect("checkpoint");
    let log = open(&disk).await;
    assert_eq!(log.log_start_offset().await, 25);
    assert_eq!(log.log_end_offset(), 25);
    assert_eq!(
        log.epoch_entries().await,
        Vec::new(),
        "an empty log has no epochs"
    );
    assert_eq!(
        log.append_as_leader(batch(1, 1), 2)
            .await
            .expect("append")
            .base_offset,
        25
    );
}
