//! Opening a log: finding its segments, trusting what the recovery point says is synced,
//! scanning the rest, and truncating at the first batch that fails a check.
//!
//! Recovery point checkpoint format (`recovery-point-offset-checkpoint`, text): the version
//! line `0`, then the recovery point offset on its own line. Everything below it was synced
//! when it was written. A missing or unreadable checkpoint means "scan everything".
//!
//! Rules:
//! - Without a clean-shutdown marker, the segment holding the recovery point and every later
//!   one are scanned: each batch's length, offsets (contiguous) and CRC-32C are checked and
//!   the log is truncated at the first failure; later segments are deleted.
//! - Segments wholly below the recovery point are trusted: their indexes are loaded (rebuilt if
//!   missing or inconsistent) and only the tail is walked (see `Segment::load_tail`).
//! - After a scan everything is synced and the recovery point moves to the log end, so the
//!   recovered data is durable before anything new is acknowledged.
//! - The clean-shutdown marker is removed (durably) before the log accepts appends.
//! - Retention may have been cut short by a crash between the checkpoint and the unlinks:
//!   every segment wholly below the checkpointed log start offset is removed (a segment
//!   already gone, a gap among such segments, or index files whose `.log` is gone are all
//!   tolerated), and if the log now ends below its start (recovery cut data the start had
//!   passed) it is emptied and restarted at the log start offset, as Kafka does.
//! - The log cleaner may have been cut short (see [`super::cleaner`]): `.cleaned` files are
//!   removed (the swap had not begun), and each `.swap` file finishes its swap: the segments
//!   whose base offsets lie in its offset range are removed and it is renamed into place.
//! - Segments below the cleaner checkpoint's `gaps_below` offset were rewritten by the
//!   cleaner and may skip offsets ([`Segment::gaps`]); every other segment must be contiguous.

use super::cleaner::{self, CleanerCheckpoint};
use super::segment::{continues, parse_log_name, Segment};
use super::{LogConfig, LogError, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE};
use crate::protocol::record_batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::rt::disk::{join, Disk};
use crate::rt::fault::FaultPoint;
use std::collections::BTreeMap;

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub clean_shutdown: bool,
    pub recovery_point: i64,
    pub segments: usize,
    pub segments_scanned: usize,
    pub batches_scanned: u64,
    pub indexes_rebuilt: usize,
    /// Where recovery cut the log, if it did: the offset that is now the log end, the segment,
    /// the byte position and why.
    pub truncated: Option<Truncation>,
    /// Segments deleted because they came after a cut or a gap in the offsets.
    pub segments_removed: usize,
    /// Segments (or leftover index files) removed because they lay wholly below the
    /// checkpointed log start offset: retention interrupted by a crash.
    pub segments_below_start_removed: usize,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The log cleaner's checkpoint as recovery found it.
    pub cleaner: CleanerCheckpoint,
    /// Cleaner swaps that a crash interrupted and recovery finished.
    pub swaps_finished: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub offset: i64,
    pub segment: String,
    pub position: u64,
    pub bytes_removed: u64,
    pub reason: String,
}

pub fn encode_checkpoint(recovery_point: i64) -> String {
    format!("0\n{recovery_point}\n")
}

/// Writes the recovery point checkpoint of the log in `dir` durably and atomically. Callers
/// pass an offset below which everything is synced.
pub(super) async fn write_checkpoint(
    disk: &Disk,
    dir: &str,
    recovery_point: i64,
) -> Result<(), LogError> {
    let path = join(dir, RECOVERY_POINT_FILE);
    disk.fault(FaultPoint::CheckpointWrite)
        .await
        .map_err(|e| LogError::io("write checkpoint", &path, e))?;
    disk.write_file_atomic(&path, encode_checkpoint(recovery_point).as_bytes())
        .await
        .map_err(|e| LogError::io("write checkpoint", &path, e))
}

/// Writes the log start offset checkpoint of the log in `dir` durably and atomically.
pub(super) async fn write_log_start_checkpoint(
    disk: &Disk,
    dir: &str,
    log_start_offset: i64,
) -> Result<(), LogError> {
    let path = join(dir, LOG_START_OFFSET_FILE);
    disk.write_file_atomic(&path, encode_checkpoint(log_start_offset).as_bytes())
        .await
        .map_err(|e| LogError::io("write log start checkpoint", &path, e))
}

/// Reads an offset checkpoint named `name` in `dir` (listed in `names`): 0 when missing or
/// unusable (with a warning naming the file and why).
async fn read_offset_checkpoint(
    disk: &Disk,
    dir: &str,
    names: &[String],
    name: &str,
) -> Result<i64, LogError> {
    if !names.iter().any(|n| n == name) {
        return Ok(0);
    }
    let path = join(dir, name);
    let bytes = disk
        .read_file(&path)
        .await
        .map_err(|e| LogError::io("read checkpoint", &path, e))?;
    match decode_checkpoint(&bytes) {
        Ok(offset) => Ok(offset),
        Err(why) => {
            tracing::warn!(path = %path, why, "ignoring unusable offset checkpoint");
            Ok(0)
        }
    }
}

/// The lines of a checkpoint file after its version line `0`; `Err` says why they cannot
/// be read (not UTF-8, empty, another version).
pub(super) fn checkpoint_lines(bytes: &[u8]) -> Result<std::str::Lines<'_>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let mut lines = text.lines();
    match lines.next() {
        Some("0") => Ok(lines),
        Some(other) => Err(format!("unknown version {other:?}")),
        None => Err("empty".to_string()),
    }
}

/// Parses a checkpoint file; `Err` says why it cannot be used.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<i64, String> {
    let mut lines = checkpoint_lines(bytes)?;
    let offset = lines
        .next()
        .ok_or("missing the offset line")?
        .trim()
        .parse::<i64>()
        .map_err(|e| format!("bad offset: {e}"))?;
    if offset < 0 {
        return Err(format!("negative offset {offset}"));
    }
    Ok(offset)
}

pub(super) async fn recover(
    disk: &Disk,
    dir: &str,
    config: &LogConfig,
) -> Result<(BTreeMap<i64, Segment>, RecoveryReport), LogError> {
    let io = |op: &'static str, path: &str| {
        let path = path.to_string();
        move |e| LogError::io(op, &path, e)
    };
    disk.create_dir_all(dir)
        .await
        .map_err(io("create directory", dir))?;
    let parent = dir.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    disk.sync_dir(parent)
        .await
        .map_err(io("sync directory", parent))?;
    let names = disk.list(dir).await.map_err(io("list", dir))?;
    let mut report = RecoveryReport {
        clean_shutdown: names.iter().any(|n| n == CLEAN_SHUTDOWN_FILE),
        ..RecoveryReport::default()
    };
    for name in names.iter().filter(|n| n.ends_with(".tmp")) {
        let path = join(dir, name);
        disk.remove(&path).await.map_err(io("remove", &path))?;
    }
    report.swaps_finished = cleaner::finish_interrupted_swaps(disk, dir, &names).await?;
    let names = if report.swaps_finished > 0 || names.iter().any(|n| n.ends_with(".cleaned")) {
        disk.list(dir).await.map_err(io("list", dir))?
    } else {
        names
    };
    report.cleaner = cleaner::read_checkpoint(disk, dir, &names).await?;
    let gaps_below = report.cleaner.gaps_below;
    report.recovery_point = read_offset_checkpoint(disk, dir, &names, RECOVERY_POINT_FILE).await?;
    let checkpointed_start =
        read_offset_checkpoint(disk, dir, &names, LOG_START_OFFSET_FILE).await?;
    let mut bases: Vec<i64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    report.segments_below_start_removed =
        remove_below_start(disk, dir, &names, &mut bases, checkpointed_start).await?;
    let mut segments = BTreeMap::new();
    if bases.is_empty() {
        // A new log, or one whose every segment retention removed: it starts at its start.
        let segment = Segment::create(disk, dir, checkpointed_start).await?;
        segments.insert(checkpointed_start, segment);
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
        report.segments = 1;
        report.log_start_offset = checkpointed_start;
        report.log_end_offset = checkpointed_start;
        if checkpointed_start > 0 {
            write_checkpoint(disk, dir, checkpointed_start).await?;
        }
        return Ok((segments, report));
    }
    // The first segment to scan: the one holding the recovery point (none after a clean
    // shutdown, where only the tail of each segment is walked).
    let scan_from = if report.clean_shutdown {
        i64::MAX
    } else {
        bases
            .iter()
            .copied()
            .rfind(|b| *b <= report.recovery_point)
            .unwrap_or(bases[0])
    };
    let interval = config.index_interval_bytes;
    let mut expected_base: Option<i64> = None;
    let mut previous_gaps = false;
    let mut cut = false;
    let mut scanned_any = false;
    for &base in &bases {
        if cut {
            remove_segment(disk, dir, base).await?;
            report.segments_removed += 1;
            continue;
        }
        if let Some(expected) = expected_base {
            // A cleaned segment may end below the next one's base (its last batches were
            // cleaned away); segments never overlap.
            if !continues(previous_gaps, base, expected) {
                tracing::warn!(
                    dir,
                    base,
                    expected,
                    "segment does not continue the log; removing it and every later one"
                );
                remove_segment(disk, dir, base).await?;
                report.segments_removed += 1;
                cut = true;
                report.truncated.get_or_insert(Truncation {
                    offset: expected,
                    segment: Segment::path(dir, base, ".log"),
                    position: 0,
                    bytes_removed: 0,
                    reason: format!("segment base {base} does not continue the log at {expected}"),
                });
                continue;
            }
        }
        let mut full_scan = base >= scan_from;
        // Opening the segment creates missing index files (empty), so look for them first: an
        // empty index would pass for a valid one and leave every lookup to walk from 0.
        let mut missing_index = None;
        if !full_scan {
            for suffix in [".index", ".timeindex"] {
                let path = Segment::path(dir, base, suffix);
                if !disk.exists(&path).await.map_err(io("stat", &path))? {
                    missing_index.get_or_insert(format!("{path} is missing"));
                }
            }
        }
        let mut segment = Segment::open_files(disk, dir, base).await?;
        segment.gaps = base < gaps_below;
        if !full_scan {
            let trusted = match missing_index {
                Some(why) => Err(why),
                None => match segment.load_indexes().await {
                    Ok(()) => {
                        let next_base = bases.iter().copied().find(|&b| b > base);
                        segment.load_tail(next_base).await
                    }
                    Err(why) => Err(why),
                },
            };
            if let Err(why) = trusted {
                tracing::warn!(dir, base, why, "rebuilding the segment's indexes");
                report.indexes_rebuilt += 1;
                segment = Segment::open_files(disk, dir, base).await?;
                segment.gaps = base < gaps_below;
                full_scan = true;
            }
        }
        if full_scan {
            disk.fault(FaultPoint::RecoveryScan)
                .await
                .map_err(io("scan", segment.log.path()))?;
            scanned_any = true;
            report.segments_scanned += 1;
            let file_len = segment.size;
            let outcome = segment
                .scan(0, !config.bugs.recovery_skips_crc, interval)
                .await?;
            report.batches_scanned += outcome.batches;
            if let Some((position, reason)) = outcome.invalid_at {
                tracing::warn!(
                    segment = %segment.log.path(), position, offset = segment.next_offset, reason,
                    "truncating the log at the first invalid batch"
                );
                disk.fault(FaultPoint::RecoveryTruncate)
                    .await
                    .map_err(io("truncate", segment.log.path()))?;
                // A planted bug (`LogBugs::torn_batch_leaves_hole`): the log end moves past the
                // torn batch as its header claims, leaving a hole in the offsets.
                let hole_end = if config.bugs.torn_batch_leaves_hole {
                    segment
                        .log
                        .read_at(position, BATCH_HEADER_LEN)
                        .await
                        .ok()
                        .and_then(|bytes| BatchHeader::parse(&bytes).ok())
                        .map(|h| h.next_offset())
                        .filter(|&end| end > segment.next_offset)
                } else {
                    None
                };
                segment
                    .log
                    .set_len(position)
                    .await
                    .map_err(io("truncate", segment.log.path()))?;
                report.truncated = Some(Truncation {
                    offset: segment.next_offset,
                    segment: segment.log.path().to_string(),
                    position,
                    bytes_removed: file_len - position,
                    reason,
                });
                cut = true;
                if let Some(end) = hole_end {
                    segment.next_offset = end;
                }
            }
            segment.final_time_entry();
            segment.write_indexes().await?;
        }
        expected_base = Some(segment.next_offset);
        previous_gaps = segment.gaps;
        segments.insert(base, segment);
    }
    if scanned_any || report.segments_removed > 0 {
        // Make what recovery kept durable before anything new is acknowledged on top of it.
        for segment in segments.values() {
            for file in [&segment.log, &segment.index_file, &segment.time_index_file] {
                file.sync().await.map_err(io("sync", file.path()))?;
            }
        }
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
    }
    let mut end = segments.values().next_back().map_or(0, |s| s.next_offset);
    if end < checkpointed_start {
        // Recovery cut the log below a start that had already passed there (only possible
        // after damage to synced data): nothing between the two can be served, so restart the
        // log empty at its start, as Kafka does.
        tracing::warn!(
            dir,
            end,
            log_start_offset = checkpointed_start,
            "log ends below its start offset; restarting it empty at the start"
        );
        for base in std::mem::take(&mut segments).into_keys() {
            remove_segment(disk, dir, base).await?;
            report.segments_removed += 1;
        }
        let segment = Segment::create(disk, dir, checkpointed_start).await?;
        segments.insert(checkpointed_start, segment);
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
        end = checkpointed_start;
    }
    report.log_start_offset = segments
        .keys()
        .next()
        .map_or(checkpointed_start, |&first| first.max(checkpointed_start));
    if end < report.recovery_point && report.truncated.is_none() {
        tracing::warn!(
            dir,
            end,
            recovery_point = report.recovery_point,
            "log ends below its recovery point"
        );
    }
    write_checkpoint(disk, dir, end).await?;
    if report.clean_shutdown {
        let marker = join(dir, CLEAN_SHUTDOWN_FILE);
        disk.remove(&marker).await.map_err(io("remove", &marker))?;
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
    }
    report.segments = segments.len();
    report.log_end_offset = end;
    Ok((segments, report))
}

/// Removes the segments of `bases` that lie wholly below `log_start` (a later segment begins
/// at or below it), and index files left without their `.log`, which a crash in the middle of
/// retention's unlinks leaves behind. The last segment always stays. Returns how many
/// segments (or orphan index pairs) went; the directory is synced if any did.
async fn remove_below_start(
    disk: &Disk,
    dir: &str,
    names: &[String],
    bases: &mut Vec<i64>,
    log_start: i64,
) -> Result<usize, LogError> {
    let mut doomed: Vec<i64> = bases
        .windows(2)
        .filter_map(|pair| match pair {
            [base, next] if *next <= log_start => Some(*base),
            _ => None,
        })
        .collect();
    bases.retain(|b| !doomed.contains(b));
    let orphans = names.iter().filter_map(|n| {
        let digits = n
            .strip_suffix(".index")
            .or_else(|| n.strip_suffix(".timeindex"))?;
        parse_log_name(&format!("{digits}.log")).filter(|b| !bases.contains(b))
    });
    doomed.extend(orphans);
    doomed.sort_unstable();
    doomed.dedup();
    for &base in &doomed {
        tracing::info!(
            dir,
            base,
            log_start,
            "removing a segment below the log start offset"
        );
        remove_segment(disk, dir, base).await?;
    }
    if !doomed.is_empty() {
        disk.sync_dir(dir)
            .await
            .map_err(|e| LogError::io("sync directory", dir, e))?;
    }
    Ok(doomed.len())
}

/// Removes a segment's files, whichever of them still exist (the `.log` last, so a crash
/// part-way leaves a segment recovery still recognises, or only orphan index files).
pub(super) async fn remove_segment(disk: &Disk, dir: &str, base: i64) -> Result<(), LogError> {
    for suffix in [".index", ".timeindex", ".log"] {
        let path = Segment::path(dir, base, suffix);
        if disk
            .exists(&path)
            .await
            .map_err(|e| LogError::io("stat", &path, e))?
        {
            disk.remove(&path)
                .await
                .map_err(|e| LogError::io("remove", &path, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_rejects_garbage() {
        assert_eq!(decode_checkpoint(encode_checkpoint(42).as_bytes()), Ok(42));
        assert!(decode_checkpoint(b"").is_err());
        assert!(decode_checkpoint(b"1\n5\n")
            .unwrap_err()
            .contains("version"));
        assert!(decode_checkpoint(b"0\nxyz\n")
            .unwrap_err()
            .contains("bad offset"));
        assert!(decode_checkpoint(b"0\n-3\n")
            .unwrap_err()
            .contains("negative"));
        assert!(decode_checkpoint(&[0xff, 0xfe]).is_err());
    }
}
