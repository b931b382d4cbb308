//! Producer state snapshot files and the rebuild of a log's producer state on open.
//!
//! A snapshot is `<20-digit offset>.snapshot` in the log directory, Kafka's name, holding the
//! [`ProducerStateMap`] as it was when the log ended at that offset (format: see
//! `producer_state.rs`; our own, CRC-32C checked). The log writes one at every segment roll
//! (named after the new segment's base offset) and at a clean close (the log end).
//!
//! Rebuild ([`load`]): snapshots above the log end (they describe batches a crash or a
//! truncation took away) are removed durably before the log takes any append, so a stale one
//! can never be matched with new batches at the same offsets; so are damaged ones and, as in
//! [`remove_below`], those below the log start but the newest. The newest snapshot that decodes
//! is loaded (a damaged one is removed with a warning and the next older tried), and the batch
//! headers from its offset
//! (or the log start, whichever is later) to the log end are replayed. Without any usable
//! snapshot the whole log is replayed. Expired producers are dropped after the rebuild.
//!
//! Invariant: after [`load`], the map's `end_offset` equals the log end offset, and no cached
//! batch lies at or above it.

use std::collections::BTreeMap;

use super::producer_state::{ProducerBatch, ProducerStateMap};
use super::segment::Segment;
use super::LogError;
use crate::rt::disk::{join, Disk};
use crate::rt::fault::FaultPoint;

/// The suffix of snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";

/// A snapshot larger than this cannot be ours (a producer takes at most ~200 bytes, and a
/// partition does not see millions of live producers); it is refused unread.
pub const SNAPSHOT_FILE_BYTES_MAX: u64 = 256 << 20;

/// The file name of the snapshot at `offset`.
pub fn snapshot_name(offset: i64) -> String {
    format!("{offset:020}{SNAPSHOT_SUFFIX}")
}

/// The offset a snapshot file name stands for, if it is one.
pub fn parse_snapshot_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The offsets of the snapshots in `dir`, ascending.
pub async fn list(disk: &Disk, dir: &str) -> Result<Vec<i64>, LogError> {
    let names = disk
        .list(dir)
        .await
        .map_err(|e| LogError::io("list", dir, e))?;
    let mut offsets: Vec<i64> = names
        .iter()
        .filter_map(|n| parse_snapshot_name(n))
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// Writes the map's snapshot durably (atomic replace, synced with its directory entry).
pub async fn write(disk: &Disk, dir: &str, map: &ProducerStateMap) -> Result<(), LogError> {
    let path = join(dir, &snapshot_name(map.end_offset()));
    disk.fault(FaultPoint::SnapshotWrite)
        .await
        .map_err(|e| LogError::io("write producer snapshot", &path, e))?;
    disk.write_file_atomic(&path, &map.encode_snapshot())
        .await
        .map_err(|e| LogError::io("write producer snapshot", &path, e))
}

pub(super) async fn remove(disk: &Disk, dir: &str, offsets: &[i64]) -> Result<(), LogError> {
    if offsets.is_empty() {
        return Ok(());
    }
    for offset in offsets {
        let path = join(dir, &snapshot_name(*offset));
        disk.remove(&path)
            .await
            .map_err(|e| LogError::io("remove producer snapshot", &path, e))?;
    }
    disk.sync_dir(dir)
        .await
        .map_err(|e| LogError::io("sync directory", dir, e))
}

/// Removes every snapshot below `log_start_offset` except the newest snapshot overall, which
/// still carries the state of producers whose batches are gone (retention keeps producer state
/// until it expires, as Kafka does since KIP-360). Returns how many were removed.
pub async fn remove_below(
    disk: &Disk,
    dir: &str,
    log_start_offset: i64,
) -> Result<usize, LogError> {
    let all = list(disk, dir).await?;
    let newest = all.last().copied();
    let doomed: Vec<i64> = all
        .into_iter()
        .filter(|o| *o < log_start_offset && Some(*o) != newest)
        .collect();
    remove(disk, dir, &doomed).await?;
    Ok(doomed.len())
}

/// Rebuilds the producer state of the log in `dir` (see the module docs).
pub async fn load(
    disk: &Disk,
    dir: &str,
    segments: &BTreeMap<i64, Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
) -> Result<ProducerStateMap, LogError> {
    // One listing serves every removal below, and one directory sync makes them durable
    // before the log takes any append.
    let (mut doomed, kept): (Vec<i64>, Vec<i64>) = list(disk, dir)
        .await?
        .into_iter()
        .partition(|o| *o > log_end_offset);
    let mut map = None;
    let mut usable = kept.len();
    for &offset in kept.iter().rev() {
        let path = join(dir, &snapshot_name(offset));
        match read_snapshot(disk, &path, offset).await {
            Ok(loaded) => {
                map = Some(loaded);
                break;
            }
            Err(why) => {
                tracing::warn!(%path, why, "unusable producer snapshot; removing it and rebuilding from the log");
                doomed.push(offset);
                usable -= 1;
            }
        }
    }
    // A deletion cut short by a crash may have left snapshots below the start, next to the
    // segments recovery removed; they go as in `remove_below`, keeping the newest remaining.
    let remaining = kept.get(..usable).unwrap_or_default();
    let newest = remaining.last().copied();
    doomed.extend(
        remaining
            .iter()
            .copied()
            .filter(|o| *o < log_start_offset && Some(*o) != newest),
    );
    remove(disk, dir, &doomed).await?;
    let mut map = map.unwrap_or_else(|| ProducerStateMap::new(log_start_offset));
    let from = map.end_offset().max(log_start_offset);
    map.advance_to(from);
    replay(segments, &mut map, from).await?;
    map.advance_to(log_end_offset);
    assert_eq!(
        map.end_offset(),
        log_end_offset,
        "producer state rebuilt past the log end"
    );
    Ok(map)
}

async fn read_snapshot(disk: &Disk, path: &str, offset: i64) -> Result<ProducerStateMap, String> {
    let file = disk
        .open(path, crate::rt::disk::OpenMode::Existing)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let len = file.len().await.map_err(|e| format!("stat: {e}"))?;
    if len > SNAPSHOT_FILE_BYTES_MAX {
        return Err(format!("{len} bytes, more than {SNAPSHOT_FILE_BYTES_MAX}"));
    }
    let bytes = file
        .read_at(0, len as usize)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let map = ProducerStateMap::decode_snapshot(&bytes).map_err(|e| e.to_string())?;
    if map.end_offset() != offset {
        return Err(format!(
            "holds the state at offset {}, not at its name's offset {offset}",
            map.end_offset()
        ));
    }
    Ok(map)
}

/// Replays every batch at or above `from` into `map`, reading only batch headers.
pub async fn replay(
    segments: &BTreeMap<i64, Segment>,
    map: &mut ProducerStateMap,
    from: i64,
) -> Result<u64, LogError> {
    let mut replayed = 0;
    for segment in segments.values() {
        if segment.next_offset <= from {
            continue;
        }
        let mut position = if from <= segment.base_offset {
            0
        } else {
            match segment.seek(from, |h| h.next_offset() > from).await? {
                Some((position, _)) => position,
                None => continue,
            }
        };
        while position < segment.size {
            let header = segment.read_header(position).await?;
            if header.base_offset >= from {
                if let Some(batch) = ProducerBatch::from_header(&header) {
                    map.replay(&batch);
                    replayed += 1;
                }
            }
            map.advance_to(header.next_offset());
            position += header.total_len() as u64;
        }
    }
    Ok(replayed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(snapshot_name(42), "00000000000000000042.snapshot");
        assert_eq!(parse_snapshot_name(&snapshot_name(42)), Some(42));
        assert_eq!(parse_snapshot_name("42.snapshot"), None);
        assert_eq!(
            parse_snapshot_name("00000000000000000042.snapshot.tmp"),
            None
        );
        assert_eq!(parse_snapshot_name("0000000000000000004x.snapshot"), None);
    }
}
