//! Damaged log directories on real files: each test writes a log of several segments, closes
//! it (or drops it without closing), damages files behind its back, reopens it, and checks
//! that recovery either repairs the log with the right outcome or fails with an error naming
//! the problem, and that the log never serves a record it was not given at that offset.
#![cfg(not(feature = "sim"))]

use proptest::prelude::*;
use proptest::test_runner::Config;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use samsa::log::segment::file_name;
use samsa::log::{Log, LogConfig, LogError, RecoveryReport, RECOVERY_POINT_FILE};
use samsa::protocol::record_batch::{self, BatchBuilder};
use samsa::rt::clock::Clock;
use samsa::rt::disk::Disk;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "t-0";
const RECORDS_PER_BATCH: i64 = 3;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        verify_crc_on_read: true,
        ..LogConfig::default()
    }
}

/// Record timestamps go up and down (as producer CreateTimes may).
fn timestamp_of(offset: i64) -> i64 {
    1_000 + (offset * 37) % 101
}

/// The value of the record written at `offset`: the offset (as the record's id), then padding
/// derived from it.
fn value_of(offset: i64) -> Vec<u8> {
    let mut value = offset.to_be_bytes().to_vec();
    let pad = 40 + (offset % 7) as usize * 10;
    value.extend((0..pad).map(|j| (offset as u8).wrapping_mul(13).wrapping_add(j as u8)));
    value
}

/// Batch `i` holds offsets `3i..3i+3`.
fn batch(i: i64) -> bytes::Bytes {
    batch_from(i * RECORDS_PER_BATCH)
}

/// The batch of 3 records meant for offsets `first..first+3`.
fn batch_from(first: i64) -> bytes::Bytes {
    let mut builder = BatchBuilder::new(0);
    for offset in first..first + RECORDS_PER_BATCH {
        builder.push(timestamp_of(offset), None, Some(&value_of(offset)), &[]);
    }
    builder.build().freeze()
}

/// What `offset_for_timestamp(t)` must answer for a log holding the first `batches` batches.
fn expected_offset_for_timestamp(batches: i64, t: i64) -> Option<i64> {
    (0..batches)
        .find(|&i| {
            (i * RECORDS_PER_BATCH..(i + 1) * RECORDS_PER_BATCH).any(|o| timestamp_of(o) >= t)
        })
        .map(|i| i * RECORDS_PER_BATCH)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A log directory in a temporary directory.
struct Fixture {
    tmp: tempfile::TempDir,
    disk: Disk,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let disk = Disk::real(tmp.path()).expect("real disk");
        Fixture { tmp, disk }
    }

    fn log_dir(&self) -> PathBuf {
        self.tmp.path().join(DIR)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.log_dir().join(name)
    }

    fn segment_path(&self, base: i64, suffix: &str) -> PathBuf {
        self.path(&file_name(base, suffix))
    }

    async fn open(&self) -> Result<(Arc<Log>, RecoveryReport), LogError> {
        Log::open(self.disk.clone(), DIR, config(), Clock::new()).await
    }

    /// Writes `batches` batches (3 records each) and returns the open log.
    async fn write(&self, batches: i64) -> Arc<Log> {
        let (log, _) = self.open().await.expect("open a new log");
        for i in 0..batches {
            let info = log.append(batch(i)).await.expect("append");
            assert_eq!(info.base_offset, i * RECORDS_PER_BATCH);
        }
        assert!(
            log.segment_count().await >= 4,
            "the test wants several segments"
        );
        log
    }

    /// The base offsets of the segments on disk, in order.
    fn segment_bases(&self) -> Vec<i64> {
        let mut bases: Vec<i64> = self
            .names()
            .iter()
            .filter_map(|n| n.strip_suffix(".log")?.parse().ok())
            .collect();
        bases.sort_unstable();
        bases
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.log_dir())
            .expect("list the log directory")
            .map(|e| {
                e.expect("directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    /// The (position, base offset, length) of every batch in a segment file.
    fn batches_of(&self, base: i64) -> Vec<(u64, i64, u64)> {
        let bytes = std::fs::read(self.segment_path(base, ".log")).expect("read segment");
        let mut position = 0;
        let mut out = Vec::new();
        for item in record_batch::batches(bytes.into()) {
            let (header, _) = item.expect("an undamaged segment");
            out.push((position, header.base_offset, header.total_len() as u64));
            position += header.total_len() as u64;
        }
        out
    }
}

#[allow(clippy::disallowed_methods)] // tests damage the log's files behind its back
fn overwrite(path: &Path, position: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.write_all_at(bytes, position)
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[allow(clippy::disallowed_methods)] // tests damage the log's files behind its back
fn set_len(path: &Path, len: u64) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.set_len(len)
        .unwrap_or_else(|e| panic!("truncate {}: {e}", path.display()));
}

#[allow(clippy::disallowed_methods)] // tests damage the log's files behind its back
fn replace(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[allow(clippy::disallowed_methods)] // tests damage the log's files behind its back
fn remove(path: &Path) {
    std::fs::remove_file(path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
}

/// Flips every bit of `len` bytes at `position`, so they surely change.
fn flip(path: &Path, position: u64, len: usize) {
    let bytes = std::fs::read(path).expect("read file");
    let start = position as usize;
    let flipped: Vec<u8> = bytes[start..start + len].iter().map(|b| !b).collect();
    overwrite(path, position, &flipped);
}

/// Checks that the log holds exactly offsets `[0, end)` as written, reading them back one
/// batch at a time and then in as few reads as possible.
async fn check_contents(log: &Log, end: i64) {
    assert_eq!(log.log_end_offset(), end, "log end offset");
    assert_eq!(log.log_start_offset().await, 0, "log start offset");
    for max_bytes in [1, usize::MAX] {
        let mut offset = 0;
        while offset < end {
            let result = log
                .read(offset, max_bytes, i64::MAX)
                .await
                .unwrap_or_else(|e| panic!("read({offset}) failed: {e}"));
            assert!(
                result.next_offset > offset,
                "read({offset}) made no progress"
            );
            for item in record_batch::batches(result.records.clone()) {
                let (header, batch) = item.expect("whole batches");
                record_batch::verify(&batch).expect("a batch with a good CRC");
                assert_eq!(header.base_offset, offset, "batches are contiguous");
                for record in record_batch::records(&batch).expect("uncompressed") {
                    let record = record.expect("a good record");
                    assert_eq!(record.offset, offset);
                    assert_eq!(record.value.as_deref(), Some(&value_of(offset)[..]));
                    assert_eq!(record.timestamp, timestamp_of(offset));
                    offset += 1;
                }
            }
            assert_eq!(result.next_offset, offset);
        }
        assert_eq!(offset, end);
    }
    for t in [999, 1_000, 1_050, 1_099, 1_100, 1_101] {
        assert_eq!(
            log.offset_for_timestamp(t).await.expect("time lookup"),
            expected_offset_for_timestamp(end / RECORDS_PER_BATCH, t),
            "offset_for_timestamp({t})"
        );
    }
}

/// Appends one more batch at the log end and reads it back.
async fn check_appends_continue(log: &Log) {
    let end = log.log_end_offset();
    assert_eq!(end % RECORDS_PER_BATCH, 0);
    let info = log
        .append(batch(end / RECORDS_PER_BATCH))
        .await
        .expect("append after recovery");
    assert_eq!(info.base_offset, end);
    check_contents(log, end + RECORDS_PER_BATCH).await;
}

const BATCHES: i64 = 24;
const END: i64 = BATCHES * RECORDS_PER_BATCH;

#[test]
fn damaged_bytes_in_the_last_segment_cut_the_log_at_that_batch() {
    runtime().block_on(async {
        let fx = Fixture::new();
        drop(fx.write(BATCHES).await); // unclean: no clean-shutdown marker
        let last = *fx.segment_bases().last().unwrap();
        let path = fx.segment_path(last, ".log");
        let file_len = std::fs::metadata(&path).unwrap().len();
        let batches = fx.batches_of(last);
        let &(position, base, _) = batches
            .iter()
            .find(|(p, _, len)| p + len > file_len / 2)
            .unwrap();
        // Inside the records, which the CRC covers.
        flip(&path, position + 70, 8);

        let (log, report) = fx.open().await.expect("recovery repairs the log");
        assert!(!report.clean_shutdown);
        let cut = report.truncated.clone().expect("recovery cut the log");
        assert_eq!(cut.offset, base, "{report:?}");
        assert_eq!(cut.position, position, "{report:?}");
        assert_eq!(cut.bytes_removed, file_len - position, "{report:?}");
        assert!(
            cut.segment.ends_with(&file_name(last, ".log")),
            "{report:?}"
        );
        assert!(cut.reason.contains("CRC"), "{report:?}");
        assert_eq!(report.log_end_offset, base);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), position);
        check_contents(&log, base).await;
        check_appends_continue(&log).await;
        drop(log);

        let (log, report) = fx.open().await.expect("reopen");
        assert!(report.truncated.is_none(), "{report:?}");
        check_contents(&log, base + RECORDS_PER_BATCH).await;
    });
}

#[test]
fn a_last_segment_cut_mid_batch_loses_only_the_cut_batch() {
    runtime().block_on(async {
        // Cut inside the header, inside the records, and one byte short of the end.
        for (into, expected_reason) in [(30, "truncated"), (100, "cut off"), (u64::MAX, "cut off")]
        {
            let fx = Fixture::new();
            drop(fx.write(BATCHES).await);
            let last = *fx.segment_bases().last().unwrap();
            let path = fx.segment_path(last, ".log");
            let batches = fx.batches_of(last);
            let &(position, base, len) = batches.last().unwrap();
            let cut_at = position + into.min(len - 1);
            set_len(&path, cut_at);

            let (log, report) = fx.open().await.expect("recovery repairs the log");
            let cut = report.truncated.clone().expect("recovery cut the log");
            assert_eq!(cut.offset, base, "{report:?}");
            assert_eq!(cut.position, position, "{report:?}");
            assert_eq!(cut.bytes_removed, cut_at - position, "{report:?}");
            assert!(cut.reason.contains(expected_reason), "{report:?}");
            assert_eq!(report.log_end_offset, base);
            check_contents(&log, base).await;
            check_appends_continue(&log).await;
        }
    });
}

/// Closes cleanly, removes or damages one index file of a segment below the recovery point,
/// reopens, and checks the index was rebuilt exactly as it was written.
async fn check_index_rebuilt(suffix: &str, damage: impl Fn(&Path, u64)) {
    let fx = Fixture::new();
    let log = fx.write(BATCHES).await;
    log.close().await.expect("close");
    drop(log);
    let base = fx.segment_bases()[1];
    let path = fx.segment_path(base, suffix);
    let original = std::fs::read(&path).unwrap();
    assert!(
        !original.is_empty(),
        "{suffix} of segment {base} should have entries"
    );
    let log_len = std::fs::metadata(fx.segment_path(base, ".log"))
        .unwrap()
        .len();
    damage(&path, log_len);

    let (log, report) = fx.open().await.expect("recovery rebuilds the index");
    assert!(report.clean_shutdown);
    assert!(report.indexes_rebuilt >= 1, "{report:?}");
    assert!(report.truncated.is_none(), "{report:?}");
    assert_eq!(report.log_end_offset, END);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        original,
        "the rebuilt {suffix}"
    );
    check_contents(&log, END).await;
    check_appends_continue(&log).await;
}

#[test]
fn a_missing_offset_index_is_rebuilt() {
    runtime().block_on(check_index_rebuilt(".index", |path, _| remove(path)));
}

#[test]
fn a_missing_time_index_is_rebuilt() {
    runtime().block_on(check_index_rebuilt(".timeindex", |path, _| remove(path)));
}

#[test]
fn a_garbage_offset_index_is_rebuilt() {
    runtime().block_on(async {
        // Random bytes, a whole number of entries.
        check_index_rebuilt(".index", |path, _| {
            let mut rng = SmallRng::seed_from_u64(1);
            let garbage: Vec<u8> = (0..32).map(|_| rng.gen()).collect();
            replace(path, &garbage);
        })
        .await;
        // A length that is not a whole number of entries.
        check_index_rebuilt(".index", |path, _| {
            let mut bytes = std::fs::read(path).unwrap();
            bytes.extend_from_slice(&[0, 0, 1]);
            replace(path, &bytes);
        })
        .await;
        // Well-formed entries pointing beyond the end of the log file.
        check_index_rebuilt(".index", |path, log_len| {
            let mut bytes = std::fs::read(path).unwrap();
            let beyond = u32::try_from(log_len + 100).unwrap();
            bytes.extend_from_slice(&1_000u32.to_be_bytes());
            bytes.extend_from_slice(&beyond.to_be_bytes());
            replace(path, &bytes);
        })
        .await;
        // A well-formed last entry that names the wrong offset for its position.
        check_index_rebuilt(".index", |path, _| {
            let mut bytes = std::fs::read(path).unwrap();
            let n = bytes.len();
            let rel = u32::from_be_bytes(bytes[n - 8..n - 4].try_into().unwrap());
            bytes[n - 8..n - 4].copy_from_slice(&(rel + 1).to_be_bytes());
            replace(path, &bytes);
        })
        .await;
    });
}

#[test]
fn a_garbage_time_index_is_rebuilt() {
    runtime().block_on(async {
        check_index_rebuilt(".timeindex", |path, _| {
            let mut rng = SmallRng::seed_from_u64(2);
            let garbage: Vec<u8> = (0..25).map(|_| rng.gen()).collect();
            replace(path, &garbage);
        })
        .await;
        // One well-formed entry for an offset far beyond the segment.
        check_index_rebuilt(".timeindex", |path, _| {
            let mut entry = 5i64.to_be_bytes().to_vec();
            entry.extend_from_slice(&1_000_000u32.to_be_bytes());
            replace(path, &entry);
        })
        .await;
        // A last entry whose timestamp is not its batch's.
        check_index_rebuilt(".timeindex", |path, _| {
            let mut bytes = std::fs::read(path).unwrap();
            let n = bytes.len();
            let ts = i64::from_be_bytes(bytes[n - 12..n - 4].try_into().unwrap());
            bytes[n - 12..n - 4].copy_from_slice(&(ts + 1).to_be_bytes());
            replace(path, &bytes);
        })
        .await;
    });
}

#[test]
fn a_garbage_time_index_on_the_active_segment_does_not_break_appends() {
    runtime().block_on(async {
        let fx = Fixture::new();
        // One batch more than usual, so the active segment holds one batch and has room.
        let log = fx.write(BATCHES + 1).await;
        log.close().await.expect("close");
        drop(log);
        let last = *fx.segment_bases().last().unwrap();
        assert_eq!(fx.batches_of(last).len(), 1);
        // A well-formed entry (old timestamp) for an offset far beyond the segment. Trusted,
        // the next indexed append into this segment would push an entry with a smaller
        // offset after it.
        let mut entry = (-5i64).to_be_bytes().to_vec();
        entry.extend_from_slice(&1_000_000u32.to_be_bytes());
        replace(&fx.segment_path(last, ".timeindex"), &entry);

        let (log, report) = fx.open().await.expect("recovery rebuilds the index");
        assert!(report.indexes_rebuilt >= 1, "{report:?}");
        check_contents(&log, END + RECORDS_PER_BATCH).await;
        for _ in 0..4 {
            check_appends_continue(&log).await;
        }
    });
}

#[test]
fn a_garbage_recovery_point_is_ignored_and_the_whole_log_scanned() {
    runtime().block_on(async {
        for garbage in [
            &b"\xff\xfe garbage"[..],
            b"",
            b"0\n",
            b"7\n12\n",
            b"0\n-5\n",
        ] {
            let fx = Fixture::new();
            drop(fx.write(BATCHES).await);
            replace(&fx.path(RECOVERY_POINT_FILE), garbage);

            let (log, report) = fx.open().await.expect("recovery ignores the checkpoint");
            assert!(!report.clean_shutdown);
            assert_eq!(report.recovery_point, 0, "{report:?}");
            assert_eq!(report.segments_scanned, report.segments, "{report:?}");
            assert!(report.truncated.is_none(), "{report:?}");
            check_contents(&log, END).await;
            drop(log);
            let checkpoint = std::fs::read(fx.path(RECOVERY_POINT_FILE)).unwrap();
            assert_eq!(checkpoint, format!("0\n{END}\n").as_bytes(), "rewritten");
        }
    });
}

#[test]
fn a_missing_middle_segment_ends_the_log_at_the_gap() {
    runtime().block_on(async {
        for clean in [true, false] {
            for only_the_log_file in [true, false] {
                let fx = Fixture::new();
                let log = fx.write(BATCHES).await;
                if clean {
                    log.close().await.expect("close");
                }
                drop(log);
                let bases = fx.segment_bases();
                let gap = bases.len() / 2;
                let suffixes: &[&str] = if only_the_log_file {
                    &[".log"]
                } else {
                    &[".log", ".index", ".timeindex"]
                };
                for suffix in suffixes {
                    remove(&fx.segment_path(bases[gap], suffix));
                }

                let (log, report) = fx.open().await.expect("recovery keeps the prefix");
                assert_eq!(report.clean_shutdown, clean);
                assert_eq!(report.segments_removed, bases.len() - gap - 1, "{report:?}");
                assert_eq!(report.segments, gap, "{report:?}");
                let cut = report.truncated.clone().expect("a cut at the gap");
                assert_eq!(cut.offset, bases[gap], "{report:?}");
                assert!(cut.reason.contains("does not continue"), "{report:?}");
                assert_eq!(report.log_end_offset, bases[gap]);
                for &base in &bases[gap + 1..] {
                    assert!(
                        !fx.segment_path(base, ".log").exists(),
                        "segment {base} stays"
                    );
                }
                check_contents(&log, bases[gap]).await;
                check_appends_continue(&log).await;
            }
        }
    });
}

#[test]
fn stray_temporary_files_are_removed() {
    runtime().block_on(async {
        let fx = Fixture::new();
        let log = fx.write(BATCHES).await;
        log.close().await.expect("close");
        drop(log);
        let strays = [
            format!("{RECOVERY_POINT_FILE}.tmp"),
            format!("{}.tmp", file_name(0, ".index")),
            "leftover.tmp".to_string(),
        ];
        for name in &strays {
            replace(&fx.path(name), b"half-written garbage");
        }

        let (log, report) = fx.open().await.expect("recovery removes the strays");
        assert!(report.clean_shutdown);
        assert_eq!(report.log_end_offset, END);
        for name in &strays {
            assert!(!fx.path(name).exists(), "{name} was not removed");
        }
        assert!(!fx.names().iter().any(|n| n.ends_with(".tmp")));
        check_contents(&log, END).await;
    });
}

#[test]
fn empty_log_files() {
    runtime().block_on(async {
        // An empty segment at the log end (a crash right after a roll) is kept.
        let fx = Fixture::new();
        drop(fx.write(BATCHES).await);
        let segments = fx.segment_bases().len();
        replace(&fx.segment_path(END, ".log"), b"");
        let (log, report) = fx.open().await.expect("an empty last segment is fine");
        assert!(report.truncated.is_none(), "{report:?}");
        assert_eq!(report.segments, segments + 1, "{report:?}");
        check_contents(&log, END).await;
        check_appends_continue(&log).await;
        drop(log);

        // An emptied middle segment ends the log at its base.
        for clean in [true, false] {
            let fx = Fixture::new();
            let log = fx.write(BATCHES).await;
            if clean {
                log.close().await.expect("close");
            }
            drop(log);
            let bases = fx.segment_bases();
            let middle = bases.len() / 2;
            set_len(&fx.segment_path(bases[middle], ".log"), 0);
            let (log, report) = fx.open().await.expect("recovery keeps the prefix");
            assert!(report.truncated.is_some(), "{report:?}");
            assert_eq!(
                report.segments_removed,
                bases.len() - middle - 1,
                "{report:?}"
            );
            assert_eq!(report.log_end_offset, bases[middle], "{report:?}");
            check_contents(&log, bases[middle]).await;
            check_appends_continue(&log).await;
        }

        // A log whose only segment is empty.
        let fx = Fixture::new();
        fx.disk
            .create_dir_all(DIR)
            .await
            .expect("create the log directory");
        replace(&fx.segment_path(0, ".log"), b"");
        let (log, report) = fx.open().await.expect("an empty log");
        assert_eq!(report.log_end_offset, 0);
        assert!(report.truncated.is_none(), "{report:?}");
        check_appends_continue(&log).await;
    });
}

#[test]
fn corruption_below_the_recovery_point_is_refused_on_read() {
    runtime().block_on(async {
        let fx = Fixture::new();
        let log = fx.write(BATCHES).await;
        log.close().await.expect("close");
        drop(log);
        let bases = fx.segment_bases();
        let batches = fx.batches_of(bases[0]);
        assert!(batches.len() >= 3);
        let (position, base, _) = batches[1];
        let path = fx.segment_path(bases[0], ".log");
        flip(&path, position + 80, 1);

        // Trusted after a clean shutdown: recovery does not look, reads must.
        let (log, report) = fx.open().await.expect("open");
        assert!(report.clean_shutdown);
        assert!(report.truncated.is_none(), "{report:?}");
        assert_eq!(report.log_end_offset, END);
        for (from, max_bytes) in [(base, 1), (base + 1, usize::MAX), (0, usize::MAX)] {
            match log.read(from, max_bytes, i64::MAX).await {
                Err(e @ LogError::Corrupt { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains(&file_name(bases[0], ".log")), "{text}");
                    assert!(text.contains(&format!("position {position}")), "{text}");
                    assert!(text.contains("CRC"), "{text}");
                }
                other => panic!("read({from}, {max_bytes}) served corrupt data: {other:?}"),
            }
        }
        // The batch before the damaged one is still served on its own, and so is the rest of
        // the log.
        let first = log.read(0, 1, i64::MAX).await.expect("an intact batch");
        assert_eq!(first.next_offset, RECORDS_PER_BATCH);
        let mut offset = bases[1];
        while offset < END {
            offset = log
                .read(offset, 1, i64::MAX)
                .await
                .expect("intact")
                .next_offset;
        }
    });
}

#[test]
fn a_damaged_base_offset_below_the_recovery_point_is_never_served() {
    runtime().block_on(async {
        let fx = Fixture::new();
        let log = fx.write(BATCHES).await;
        log.close().await.expect("close");
        drop(log);
        let segment = fx.segment_bases()[1];
        let (position, base, _) = fx.batches_of(segment)[1];
        // The base offset is outside the CRC: only its place in the sequence can give it away.
        let path = fx.segment_path(segment, ".log");
        overwrite(&path, position, &(base - 2).to_be_bytes());

        let (log, report) = fx.open().await.expect("open");
        assert!(report.clean_shutdown);
        assert_eq!(report.log_end_offset, END);
        match log.read(base, 1, i64::MAX).await {
            Err(e @ LogError::Corrupt { .. }) => {
                let text = e.to_string();
                assert!(text.contains(&file_name(segment, ".log")), "{text}");
                assert!(
                    text.contains(&format!("base offset {}", base - 2)),
                    "{text}"
                );
            }
            other => panic!("read({base}) served a batch with a damaged base offset: {other:?}"),
        }
        // No read and no time lookup may hand out the damaged batch's offsets.
        assert!(check_served_records(&log).await > 0);
        for t in 990..1_110 {
            match log.offset_for_timestamp(t).await {
                Ok(found) => assert_eq!(found, expected_offset_for_timestamp(BATCHES, t)),
                Err(e) => assert!(matches!(e, LogError::Corrupt { .. }), "{e}"),
            }
        }
    });
}

#[test]
fn a_damaged_last_batch_header_below_the_recovery_point_cannot_move_the_log_end() {
    runtime().block_on(async {
        for which in ["middle", "last"] {
            let fx = Fixture::new();
            let log = fx.write(BATCHES).await;
            log.close().await.expect("close");
            drop(log);
            let bases = fx.segment_bases();
            let segment = if which == "middle" {
                bases[1]
            } else {
                *bases.last().unwrap()
            };
            let &(position, base, _) = fx.batches_of(segment).last().unwrap();
            // lastOffsetDelta (bytes 23..27, under the CRC) grows from 2 to 2 + 2^16: the
            // header still parses, and the segment would seem to end far beyond its data.
            overwrite(&fx.segment_path(segment, ".log"), position + 25, &[1]);

            let (log, report) = fx.open().await.expect("recovery cuts the damaged batch");
            assert!(report.clean_shutdown);
            let cut = report
                .truncated
                .clone()
                .expect("a cut at the damaged batch");
            assert_eq!(
                (cut.offset, cut.position),
                (base, position),
                "{which}: {report:?}"
            );
            assert!(cut.reason.contains("CRC"), "{which}: {report:?}");
            assert_eq!(report.log_end_offset, base, "{which}: {report:?}");
            let later = bases.iter().filter(|&&b| b > segment).count();
            assert_eq!(report.segments_removed, later, "{which}: {report:?}");
            check_contents(&log, base).await;
            check_appends_continue(&log).await;
        }
    });
}

/// One damage to one file of the log directory.
#[derive(Clone, Debug)]
enum Damage {
    /// Overwrite bytes at a fraction of the file's length.
    Overwrite {
        file: usize,
        at: f64,
        bytes: Vec<u8>,
    },
    /// Cut the file to a fraction of its length.
    Truncate { file: usize, to: f64 },
}

fn damage_strategy() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => (any::<usize>(), 0.0..1.0f64, prop::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(file, at, bytes)| Damage::Overwrite { file, at, bytes }),
        1 => (any::<usize>(), 0.0..1.0f64).prop_map(|(file, to)| Damage::Truncate { file, to }),
    ]
}

/// Applies the damages to the files of the log directory.
fn apply_damages(fx: &Fixture, damages: &[Damage]) {
    let names = fx.names();
    for damage in damages {
        match damage {
            Damage::Overwrite { file, at, bytes } => {
                let path = fx.path(&names[file % names.len()]);
                let len = std::fs::metadata(&path).unwrap().len();
                overwrite(&path, (len as f64 * at) as u64, bytes);
            }
            Damage::Truncate { file, to } => {
                let path = fx.path(&names[file % names.len()]);
                let len = std::fs::metadata(&path).unwrap().len();
                set_len(&path, (len as f64 * to) as u64);
            }
        }
    }
}

/// Reads every offset of a damaged log; every record served must be one that was written at
/// that offset. Returns how many records were served.
async fn check_served_records(log: &Log) -> i64 {
    let start = log.log_start_offset().await;
    let end = log.log_end_offset();
    let mut served = 0;
    let mut offset = start;
    while offset < end {
        match log.read(offset, usize::MAX, i64::MAX).await {
            Ok(result) if result.next_offset > offset => {
                for item in record_batch::batches(result.records.clone()) {
                    let (_, batch) = item.expect("reads return whole batches");
                    record_batch::verify(&batch).expect("reads verify CRCs");
                    for record in record_batch::records(&batch).expect("uncompressed") {
                        let record = record.expect("a record that passed the CRC");
                        assert_eq!(
                            record.value.as_deref(),
                            Some(&value_of(record.offset)[..]),
                            "the record served at offset {} is not the one written there",
                            record.offset
                        );
                        served += 1;
                    }
                }
                offset = result.next_offset;
            }
            // Nothing served, or refused: try the next offset.
            Ok(_) => offset += 1,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                offset += 1;
            }
        }
    }
    served
}

proptest! {
    #![proptest_config(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    })]

    /// Random damage to random files never makes the log panic or serve a record that is
    /// not the one written at its offset.
    #[test]
    fn random_damage_never_panics_nor_serves_wrong_records(
        clean in any::<bool>(),
        damages in prop::collection::vec(damage_strategy(), 1..5),
        time_lookups in prop::collection::vec(990i64..1_110, 3),
    ) {
        runtime().block_on(async {
            let fx = Fixture::new();
            let log = fx.write(BATCHES).await;
            if clean {
                log.close().await.expect("close");
            }
            drop(log);
            apply_damages(&fx, &damages);

            let (log, _report) = match fx.open().await {
                Ok(opened) => opened,
                Err(e) => {
                    // Refusing to open is fine if it says why.
                    assert!(!e.to_string().is_empty());
                    return;
                }
            };
            let end = log.log_end_offset();
            assert!(end <= END, "the log grew to {end}");
            check_served_records(&log).await;
            for t in time_lookups {
                if let Ok(Some(offset)) = log.offset_for_timestamp(t).await {
                    assert!(offset < end, "offset_for_timestamp({t}) = {offset} beyond {end}");
                }
            }
            // The log takes appends at its end.
            let info = log.append(batch_from(end)).await.expect("append after recovery");
            assert_eq!(info.base_offset, end);
            drop(log);
            let (log, report) = fx.open().await.expect("reopen after recovery");
            assert_eq!(report.log_end_offset, end + RECORDS_PER_BATCH, "{report:?}");
            check_served_records(&log).await;
        });
    }
}

/// The offset index is only a hint: a wrong entry in the middle, which recovery's checks of
/// the last entries do not see, must not make any record unreadable or misplaced.
#[test]
fn a_wrong_middle_index_entry_only_costs_a_walk_from_the_segment_start() {
    runtime().block_on(async {
        let fx = Fixture::new();
        let log = fx.write(BATCHES).await;
        log.close().await.expect("close");
        drop(log);
        let base = fx.segment_bases()[1];
        let path = fx.segment_path(base, ".index");
        let mut bytes = std::fs::read(&path).unwrap();
        assert!(
            bytes.len() >= 16,
            "the test wants at least two index entries"
        );
        // Point the first entry at the right position but the wrong (still increasing) offset.
        let rel = u32::from_be_bytes(bytes[0..4].try_into().unwrap());
        let next_rel = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
        assert!(rel + 1 < next_rel, "entries must stay increasing");
        bytes[0..4].copy_from_slice(&(rel + 1).to_be_bytes());
        replace(&path, &bytes);

        let (log, report) = fx.open().await.expect("open");
        assert!(report.clean_shutdown);
        assert_eq!(report.log_end_offset, END);
        // Every offset, including those inside batches that the wrong entry claims to start.
        for offset in 0..END {
            let read = log
                .read(offset, 1, END)
                .await
                .expect("read despite the wrong hint");
            let (header, _) = record_batch::batches(read.records)
                .next()
                .expect("at least one batch")
                .expect("a whole batch");
            assert!(header.base_offset <= offset && offset <= header.last_offset());
        }
        check_contents(&log, END).await;
        check_appends_continue(&log).await;
    });
}
