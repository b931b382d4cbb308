//! The log cleaner: compaction of `cleanup.policy=compact` logs, Kafka's `LogCleaner`.
//!
//! Owns: choosing what a pass cleans ([`Cleanable`]), the bounded map of each key's latest
//! offset ([`OffsetMap`]), the fate of every batch ([`decide`]), the rewrite of segment
//! groups into `.cleaned` files, their crash-safe swap into the log, the cleaner checkpoint,
//! and recovery's half of the swap ([`finish_interrupted_swaps`]).
//!
//! A pass over one log ([`Log::clean`]):
//! 1. The dirty section runs from the first dirty offset (the checkpoint's, or the log start
//!    if later) to the first uncleanable offset: the first segment that is active, not wholly
//!    below the high watermark and the durable end, or holding a record younger than
//!    `min.compaction.lag.ms`.
//! 2. The offset map is built from the dirty section's keys, batch by batch, while it fits in
//!    `log.cleaner.dedupe.buffer.size` (each entry costs its key's bytes plus
//!    [`OFFSET_MAP_ENTRY_OVERHEAD_BYTES`]); where it fills, the pass ends (`end`) and the
//!    next pass goes on from there: a log whose keys do not fit is cleaned in several passes.
//! 3. Every segment from the log start up to `end` is rewritten, in groups of consecutive
//!    segments whose sizes add up to at most `segment.bytes` (small cleaned segments merge).
//!    A record stays if its key's latest offset in the map is not above it, and, if it is a
//!    tombstone, while its batch's delete horizon (KIP-534) has not passed; a batch holding a
//!    tombstone without a horizon gets one (now + `delete.retention.ms`). Keyless records go.
//! 4. Each group whose contents change is written to `<base>.log.cleaned`, synced, and
//!    swapped in: renamed to `.swap` (the commit point), the old segments removed, then
//!    renamed to `<base>.log`.
//!
//! Invariants:
//! - Offsets are never renumbered. A rewritten batch keeps its base offset and last offset
//!   delta, producer id, epoch and base sequence, partition leader epoch, codec, timestamp
//!   type and its records' timestamps (see `BatchBuilder::rewriting`); only whole batches
//!   disappear, which is where a cleaned segment's offsets have gaps ([`Segment::gaps`]).
//! - The active segment, and anything not wholly below the high watermark and the durable
//!   end, is never cleaned.
//! - The last batch of each producer the producer state knows stays, empty if every record
//!   went (Kafka's `writeEmptyHeader`), so producer state rebuilt from the log still
//!   deduplicates that producer's retries.
//! - A crash at any point leaves the old segment set or the new one. Before any swap the
//!   checkpoint's `gaps_below` covers every segment the pass may rewrite (recovery accepts
//!   gaps only below it; a contiguous segment passes that rule too); the first dirty offset
//!   moves only after every swap of the pass, so a pass cut short is redone whole, with the
//!   map that removes what its swapped groups' tombstones shadow.
//! - A `.swap` file is complete and synced; recovery removes every segment whose base lies
//!   in its range and renames it into place. A `.cleaned` file is removed.
//!
//! Cleaner checkpoint format (`cleaner-offset-checkpoint`, text, one per log directory):
//! the version line `0`, the first dirty offset, then `gaps_below`, each on its own line. A
//! missing file means never cleaned (both 0). Kafka keeps one file per data directory
//! listing every partition's first dirty offset; Samsa keeps one per partition like its
//! other checkpoints, with `gaps_below` added for its stricter offset checks.

use super::segment::Segment;
use super::{recovery, Log, LogError, State};
use crate::protocol::record_batch::{self, BatchBuilder, BatchHeader, Record, BATCH_HEADER_LEN};
use crate::rt::disk::{join, Disk, File, OpenMode};
use crate::rt::fault::FaultPoint;
use crate::rt::latch::Latch;
use crate::rt::time::{self, Duration};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;

/// Name of the cleaner checkpoint in a log directory (Kafka's name; see the module docs).
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Suffix of a segment the cleaner is writing (Kafka's).
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment being swapped in (Kafka's).
pub const SWAP_SUFFIX: &str = ".swap";
/// What an offset map entry costs besides its key's bytes: the offset and the map's own
/// bookkeeping (Kafka's entries are a 16-byte MD5 of the key and an 8-byte offset; Samsa
/// keeps whole keys, so no two keys can collide and drop a live value).
pub const OFFSET_MAP_ENTRY_OVERHEAD_BYTES: u64 = 40;
/// The smallest `log.cleaner.dedupe.buffer.size` accepted (Kafka's floor is 1 MiB per
/// cleaner thread).
pub const DEDUPE_BUFFER_BYTES_MIN: u64 = 1 << 20;
/// Bytes read from a segment at a time; a larger batch is read whole on its own.
pub const CLEANER_READ_CHUNK_BYTES: usize = 1 << 20;
/// Bytes of cleaned batches buffered before one write to the `.cleaned` file.
pub const CLEANER_WRITE_BUFFER_BYTES: usize = 1 << 20;

const _: () = assert!(CLEANER_READ_CHUNK_BYTES >= BATCH_HEADER_LEN);
const _: () = assert!(CLEANER_WRITE_BUFFER_BYTES >= BATCH_HEADER_LEN);
const _: () = assert!(DEDUPE_BUFFER_BYTES_MIN > OFFSET_MAP_ENTRY_OVERHEAD_BYTES);

/// The cleaner's checkpoint of one log (see the module docs for the file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    /// Below this the log has been cleaned (Kafka's first dirty offset).
    pub first_dirty_offset: i64,
    /// Segments whose base offset is below this were (or may have been) rewritten by the
    /// cleaner and may skip offsets. Never below `first_dirty_offset`.
    pub gaps_below: i64,
}

impl CleanerCheckpoint {
    pub fn encode(&self) -> String {
        format!("0\n{}\n{}\n", self.first_dirty_offset, self.gaps_below)
    }

    /// Parses the checkpoint file; `Err` says why it cannot be used.
    pub fn decode(bytes: &[u8]) -> Result<CleanerCheckpoint, String> {
        let mut lines = recovery::checkpoint_lines(bytes)?;
        let mut offset = |what: &str| -> Result<i64, String> {
            let line = lines.next().ok_or(format!("missing the {what} line"))?;
            let offset = line
                .trim()
                .parse::<i64>()
                .map_err(|e| format!("bad {what} {line:?}: {e}"))?;
            if offset < 0 {
                return Err(format!("negative {what} {offset}"));
            }
            Ok(offset)
        };
        let first_dirty_offset = offset("first dirty offset")?;
        let gaps_below = offset("gaps-below offset")?;
        if gaps_below < first_dirty_offset {
            return Err(format!(
                "gaps-below offset {gaps_below} is below the first dirty offset {first_dirty_offset}"
            ));
        }
        Ok(CleanerCheckpoint {
            first_dirty_offset,
            gaps_below,
        })
    }
}

/// Reads the cleaner checkpoint of the log in `dir` (listed in `names`). A missing file is
/// a log never cleaned. An unreadable one is an error: guessing `gaps_below` too low would
/// make recovery cut a cleaned log at its first gap.
pub(super) async fn read_checkpoint(
    disk: &Disk,
    dir: &str,
    names: &[String],
) -> Result<CleanerCheckpoint, LogError> {
    if !names.iter().any(|n| n == CLEANER_CHECKPOINT_FILE) {
        return Ok(CleanerCheckpoint::default());
    }
    let path = join(dir, CLEANER_CHECKPOINT_FILE);
    let bytes = disk
        .read_file(&path)
        .await
        .map_err(|e| LogError::io("read cleaner checkpoint", &path, e))?;
    CleanerCheckpoint::decode(&bytes).map_err(|why| LogError::Corrupt {
        segment: path,
        position: 0,
        reason: format!("unusable cleaner checkpoint: {why}"),
    })
}

pub(super) async fn write_checkpoint(
    disk: &Disk,
    dir: &str,
    checkpoint: CleanerCheckpoint,
) -> Result<(), LogError> {
    assert!(
        checkpoint.gaps_below >= checkpoint.first_dirty_offset,
        "gaps_below under the first dirty offset"
    );
    let path = join(dir, CLEANER_CHECKPOINT_FILE);
    disk.write_file_atomic(&path, checkpoint.encode().as_bytes())
        .await
        .map_err(|e| LogError::io("write cleaner checkpoint", &path, e))
}

/// Recovery's half of the swap: removes every `.cleaned` file (its swap never began) and
/// finishes every `.swap` (see the module docs). Returns how many swaps it finished.
pub(super) async fn finish_interrupted_swaps(
    disk: &Disk,
    dir: &str,
    names: &[String],
) -> Result<usize, LogError> {
    let io = |op: &'static str, path: &str| {
        let path = path.to_string();
        move |e| LogError::io(op, &path, e)
    };
    for name in names.iter().filter(|n| n.ends_with(CLEANED_SUFFIX)) {
        let path = join(dir, name);
        tracing::info!(%path, "removing a cleaned segment whose swap never began");
        disk.remove(&path).await.map_err(io("remove", &path))?;
    }
    let bases: Vec<i64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".log").and_then(super::segment::parse_base))
        .collect();
    let mut finished = 0;
    for name in names {
        let Some(base) = name
            .strip_suffix(SWAP_SUFFIX)
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(super::segment::parse_base)
        else {
            continue;
        };
        let path = join(dir, name);
        let file = disk
            .open(&path, OpenMode::Existing)
            .await
            .map_err(io("open", &path))?;
        let end = last_offset_in(&file, base).await?;
        for &old in bases
            .iter()
            .filter(|&&b| b >= base && b < end.max(base + 1))
        {
            tracing::info!(dir, base = old, swap = %path, "finishing a cleaner swap: removing a replaced segment");
            recovery::remove_segment(disk, dir, old).await?;
        }
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
        let target = Segment::path(dir, base, ".log");
        disk.rename(&path, &target)
            .await
            .map_err(io("rename", &path))?;
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
        finished += 1;
    }
    Ok(finished)
}

/// One past the last offset of the whole batches at the start of `file` (`base` if none).
async fn last_offset_in(file: &File, base: i64) -> Result<i64, LogError> {
    let len = file
        .len()
        .await
        .map_err(|e| LogError::io("stat", file.path(), e))?;
    let mut reader = BatchReader::new(file.clone(), len);
    let mut end = base;
    while let Some((_, header, _)) = reader.next().await? {
        end = header.next_offset();
    }
    Ok(end)
}

/// The cleaner settings of one pass: Kafka's topic configs and the broker's
/// `log.cleaner.*` settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanerPolicy {
    /// `min.cleanable.dirty.ratio`: clean once dirty bytes are this share of the cleanable
    /// log.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment holding a record younger than this is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: dirty data older than this is cleaned below the ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone stays after the cleaner first passed it.
    pub delete_retention_ms: i64,
    /// This pass's share of `log.cleaner.dedupe.buffer.size`.
    pub dedupe_buffer_bytes: u64,
    /// `log.cleaner.io.max.bytes.per.second` (read plus written); 0 is unlimited.
    pub io_max_bytes_per_second: u64,
    pub bugs: CleanerBugs,
}

impl CleanerPolicy {
    /// Kafka's defaults, with the broker's 128 MiB dedupe buffer for one thread.
    pub const DEFAULT: CleanerPolicy = CleanerPolicy {
        min_cleanable_dirty_ratio: 0.5,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        delete_retention_ms: 86_400_000,
        dedupe_buffer_bytes: 128 << 20,
        io_max_bytes_per_second: 0,
        bugs: CleanerBugs::NONE,
    };
}

/// Deliberately broken options of the cleaner for the simulation's checker tests; all off
/// in every real config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerBugs {
    /// The newest record of a key is removed with the older ones (compaction checker).
    pub drops_latest_value: bool,
    /// A producer's last batch goes when all its records do (duplicate checker, after a
    /// restart rebuilds producer state from the log).
    pub drops_producer_last_batch: bool,
    /// The old segments are removed, durably, before the cleaned one is in place (a crash
    /// between loses them).
    pub swap_not_crash_safe: bool,
    /// A tombstone goes at the first pass, as if its delete horizon had passed (compaction
    /// checker: a tombstone younger than `delete.retention.ms` goes missing).
    pub ignores_delete_retention: bool,
}

impl CleanerBugs {
    pub const NONE: CleanerBugs = CleanerBugs {
        drops_latest_value: false,
        drops_producer_last_batch: false,
        swap_not_crash_safe: false,
        ignores_delete_retention: false,
    };
}

/// A closed segment as a pass sees it.
#[derive(Clone, Debug)]
pub struct SegmentInfo {
    pub base_offset: i64,
    /// The next segment's base offset (the log end for the last).
    pub next_base: i64,
    pub size: u64,
    pub max_timestamp: i64,
}

/// What a log offers the cleaner now (Kafka's `LogToClean`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cleanable {
    pub first_dirty_offset: i64,
    /// The first uncleanable offset: a segment boundary.
    pub end_offset: i64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// Dirty data older than `max.compaction.lag.ms` waits: clean below the ratio.
    pub overdue: bool,
}

impl Cleanable {
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Whether a pass is due under `policy`.
    pub fn due(&self, policy: &CleanerPolicy) -> bool {
        self.dirty_bytes > 0
            && (self.overdue || self.dirty_ratio() >= policy.min_cleanable_dirty_ratio)
    }
}

/// Kafka's `cleanableOffsets`: the dirty section of a log whose closed segments are
/// `segments` (in offset order, the active one excluded), that may be cleaned up to `bound`
/// (the high watermark or durable end, whichever is lower) at `now_ms`.
/// `first_dirty_timestamp` is the first dirty batch's timestamp, for `max.compaction.lag.ms`.
pub fn cleanable(
    segments: &[SegmentInfo],
    checkpoint: CleanerCheckpoint,
    log_start_offset: i64,
    bound: i64,
    now_ms: i64,
    first_dirty_timestamp: Option<i64>,
    policy: &CleanerPolicy,
) -> Cleanable {
    let first_dirty = checkpoint.first_dirty_offset.max(log_start_offset);
    let mut end = first_dirty;
    let mut clean_bytes = 0;
    let mut dirty_bytes = 0;
    for segment in segments {
        if segment.next_base <= first_dirty {
            clean_bytes += segment.size;
            continue;
        }
        let too_young = policy.min_compaction_lag_ms > 0
            && segment.max_timestamp >= 0
            && now_ms.saturating_sub(segment.max_timestamp) < policy.min_compaction_lag_ms;
        if segment.next_base > bound || too_young {
            break;
        }
        dirty_bytes += segment.size;
        end = segment.next_base;
    }
    let overdue = dirty_bytes > 0
        && first_dirty_timestamp
            .is_some_and(|ts| ts >= 0 && now_ms.saturating_sub(ts) > policy.max_compaction_lag_ms);
    Cleanable {
        first_dirty_offset: first_dirty,
        end_offset: end,
        clean_bytes,
        dirty_bytes,
        overdue,
    }
}

/// The latest offset of every key in a log's dirty section, within a byte budget.
#[derive(Debug)]
pub struct OffsetMap {
    latest: BTreeMap<Bytes, i64>,
    bytes: u64,
    bytes_max: u64,
}

impl OffsetMap {
    pub fn new(bytes_max: u64) -> OffsetMap {
        OffsetMap {
            latest: BTreeMap::new(),
            bytes: 0,
            bytes_max,
        }
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds one batch's keyed records (offset order), all of them or, if they might not fit,
    /// none (so the map always ends at a batch boundary). Returns whether they were added.
    pub fn insert_batch(&mut self, keyed: &[(Bytes, i64)]) -> bool {
        let worst: u64 = keyed
            .iter()
            .map(|(key, _)| key.len() as u64 + OFFSET_MAP_ENTRY_OVERHEAD_BYTES)
            .sum();
        if self.bytes + worst > self.bytes_max {
            return false;
        }
        for (key, offset) in keyed {
            match self.latest.get_mut(key) {
                Some(latest) => {
                    assert!(*offset > *latest, "offsets enter the map in order");
                    *latest = *offset;
                }
                None => {
                    // Own the key: a slice would pin the whole (decompressed) batch.
                    self.latest.insert(Bytes::copy_from_slice(key), *offset);
                    self.bytes += key.len() as u64 + OFFSET_MAP_ENTRY_OVERHEAD_BYTES;
                }
            }
        }
        assert!(self.bytes <= self.bytes_max, "offset map over its budget");
        true
    }

    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(key).copied()
    }
}

/// What happens to one batch in a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchFate {
    /// Written back as it is.
    Keep,
    /// Removed whole: its offsets become a gap.
    Drop,
    /// Every record went, but the batch is its producer's last: Kafka's empty batch stays.
    Empty,
    /// Rewritten with the records at these indices (in order), and this delete horizon.
    Rewrite {
        keep: Vec<usize>,
        delete_horizon_ms: Option<i64>,
    },
}

/// What [`decide`] needs besides the batch.
#[derive(Clone, Copy, Debug)]
pub struct DecideContext<'a> {
    pub map: &'a OffsetMap,
    /// The end of the pass: batches at or above it are not this pass's to clean.
    pub end_offset: i64,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    /// The last offset of the batch's producer's last batch, if the producer state knows
    /// the producer.
    pub producer_last_offset: Option<i64>,
    pub bugs: CleanerBugs,
}

/// The fate of a batch with these records (Kafka's `shouldRetainRecord` and
/// `MemoryRecords.filterTo`; see the module docs).
pub fn decide(header: &BatchHeader, records: &[Record], cx: &DecideContext<'_>) -> BatchFate {
    if header.base_offset >= cx.end_offset || header.is_control() {
        // Control batches (transaction markers) stay until transactions bring their rules.
        return BatchFate::Keep;
    }
    let last_of_producer = header.producer_id >= 0
        && cx.producer_last_offset == Some(header.last_offset())
        && !cx.bugs.drops_producer_last_batch;
    if records.is_empty() {
        return if last_of_producer {
            BatchFate::Keep
        } else {
            BatchFate::Drop
        };
    }
    let horizon = header.has_delete_horizon().then_some(header.base_timestamp);
    let mut keep = Vec::with_capacity(records.len());
    let mut tombstone_kept = false;
    for (index, record) in records.iter().enumerate() {
        let Some(key) = &record.key else {
            continue; // Kafka's cleaner drops keyless records.
        };
        let latest = cx.map.get(key);
        let superseded = match latest {
            Some(latest) if cx.bugs.drops_latest_value => record.offset <= latest,
            Some(latest) => record.offset < latest,
            None => false,
        };
        if superseded {
            continue;
        }
        if record.value.is_none() {
            if horizon.is_some_and(|h| cx.now_ms >= h) || cx.bugs.ignores_delete_retention {
                continue; // The tombstone's horizon has passed.
            }
            tombstone_kept = true;
        }
        keep.push(index);
    }
    let new_horizon = (horizon.is_none() && tombstone_kept)
        .then(|| cx.now_ms.saturating_add(cx.delete_retention_ms));
    if keep.len() == records.len() && new_horizon.is_none() {
        return BatchFate::Keep;
    }
    if keep.is_empty() {
        return if last_of_producer {
            BatchFate::Empty
        } else {
            BatchFate::Drop
        };
    }
    BatchFate::Rewrite {
        keep,
        delete_horizon_ms: horizon.or(new_horizon),
    }
}

/// The batch that [`BatchFate::Rewrite`] writes.
pub fn rewrite(
    header: &BatchHeader,
    records: &[Record],
    keep: &[usize],
    delete_horizon_ms: Option<i64>,
) -> Result<BytesMut, record_batch::BatchError> {
    let mut builder = BatchBuilder::rewriting(header)?;
    if let Some(horizon) = delete_horizon_ms {
        builder = builder.delete_horizon(horizon);
    }
    for &index in keep {
        let Some(record) = records.get(index) else {
            continue;
        };
        let delta = i32::try_from(record.offset - header.base_offset).map_err(|_| {
            record_batch::BatchError::InvalidRecord {
                index,
                reason: "record offset outside its batch",
            }
        })?;
        let headers: Vec<(&str, Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|h| (h.key.as_str(), h.value.as_deref()))
            .collect();
        builder.push_at(
            delta,
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        );
    }
    Ok(builder.build())
}

/// Kafka's `groupSegmentsBySize`: consecutive runs of `sizes` (bytes, with each segment's
/// offset span) whose bytes add up to at most `segment_bytes` and whose offsets span at most
/// `i32::MAX` (the index's relative offsets), as index ranges. A segment larger than the
/// limit is a group of its own.
pub fn group_segments(segments: &[SegmentInfo], segment_bytes: u64) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let first = &segments[start];
        let mut bytes = first.size;
        let mut end = start + 1;
        while let Some(next) = segments.get(end) {
            let span = next.next_base - first.base_offset;
            if bytes + next.size > segment_bytes || span > i64::from(i32::MAX) {
                break;
            }
            bytes += next.size;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// Reads the whole batches of a segment file in order, in chunks, checking each one's
/// length, place and CRC: the cleaner never copies damage into a cleaned segment.
struct BatchReader {
    file: File,
    size: u64,
    position: u64,
    chunk: Bytes,
    /// File position of `chunk[0]`.
    chunk_at: u64,
}

impl BatchReader {
    fn new(file: File, size: u64) -> BatchReader {
        BatchReader {
            file,
            size,
            position: 0,
            chunk: Bytes::new(),
            chunk_at: 0,
        }
    }

    /// A reader of one of the pass's closed segments.
    fn of(files: &BTreeMap<i64, File>, segment: &SegmentInfo) -> BatchReader {
        let file = files
            .get(&segment.base_offset)
            .expect("closed segments come from the state's segments");
        BatchReader::new(file.clone(), segment.size)
    }

    /// [`BatchReader::next`] inside a pass: stops once `abort` is set, and counts and
    /// throttles what it reads.
    async fn next_in_pass(
        &mut self,
        abort: &Latch,
        throttle: &mut Throttle,
        outcome: &mut CleanOutcome,
    ) -> Result<Option<(BatchHeader, Bytes)>, LogError> {
        if abort.is_set() {
            return Err(LogError::Aborted);
        }
        let Some((_, header, batch)) = self.next().await? else {
            return Ok(None);
        };
        throttle.spend(batch.len() as u64).await;
        outcome.bytes_read += batch.len() as u64;
        Ok(Some((header, batch)))
    }

    fn corrupt(&self, reason: String) -> LogError {
        LogError::Corrupt {
            segment: self.file.path().to_string(),
            position: self.position,
            reason,
        }
    }

    async fn read(&self, at: u64, len: usize) -> Result<Bytes, LogError> {
        let bytes = self
            .file
            .read_at_in_background(at, len)
            .await
            .map_err(|e| LogError::io("cleaner read", self.file.path(), e))?;
        if bytes.len() < len {
            return Err(self.corrupt(format!("short read: {} of {len} bytes", bytes.len())));
        }
        Ok(bytes)
    }

    /// The next batch: its position, header and bytes; `None` at the end of the file.
    async fn next(&mut self) -> Result<Option<(u64, BatchHeader, Bytes)>, LogError> {
        if self.position >= self.size {
            return Ok(None);
        }
        let mut offset_in_chunk = (self.position - self.chunk_at) as usize;
        if self.position < self.chunk_at || offset_in_chunk + BATCH_HEADER_LEN > self.chunk.len() {
            let want = (self.size - self.position).min(CLEANER_READ_CHUNK_BYTES as u64) as usize;
            if want < BATCH_HEADER_LEN {
                return Err(self.corrupt(format!("{want} bytes at the end hold no batch header")));
            }
            self.chunk = self.read(self.position, want).await?;
            self.chunk_at = self.position;
            offset_in_chunk = 0;
        }
        let rest = self.chunk.slice(offset_in_chunk..);
        let header = BatchHeader::parse(&rest).map_err(|e| self.corrupt(e.to_string()))?;
        let total = header.total_len();
        if self.position + total as u64 > self.size {
            return Err(self.corrupt(format!(
                "batch of {total} bytes runs past the end of the file"
            )));
        }
        let batch = if rest.len() >= total {
            rest.slice(..total)
        } else if total > CLEANER_READ_CHUNK_BYTES {
            self.read(self.position, total).await?
        } else {
            let want = (self.size - self.position).min(CLEANER_READ_CHUNK_BYTES as u64) as usize;
            self.chunk = self.read(self.position, want).await?;
            self.chunk_at = self.position;
            self.chunk.slice(..total)
        };
        record_batch::verify(&batch).map_err(|e| self.corrupt(e.to_string()))?;
        let position = self.position;
        self.position += total as u64;
        Ok(Some((position, header, batch)))
    }
}

/// Keeps a pass's reads and writes under `log.cleaner.io.max.bytes.per.second`.
struct Throttle {
    bytes_per_second: u64,
    started: time::Instant,
    bytes: u64,
}

impl Throttle {
    fn new(bytes_per_second: u64) -> Throttle {
        Throttle {
            bytes_per_second,
            started: time::now(),
            bytes: 0,
        }
    }

    async fn spend(&mut self, bytes: u64) {
        self.bytes += bytes;
        if self.bytes_per_second == 0 {
            return;
        }
        let due_us = u128::from(self.bytes) * 1_000_000 / u128::from(self.bytes_per_second);
        let elapsed_us = self.started.elapsed().as_micros();
        if due_us > elapsed_us {
            let wait_us = u64::try_from(due_us - elapsed_us).unwrap_or(u64::MAX);
            time::sleep(Duration::from_micros(wait_us)).await;
        }
    }
}

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    pub first_dirty_offset: i64,
    /// Where the pass ended: the new first dirty offset.
    pub end_offset: i64,
    pub keys: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    pub batches_dropped: u64,
    pub batches_rewritten: u64,
    pub batches_emptied: u64,
    pub records_removed: u64,
}

/// What every group of a pass is cleaned with.
#[derive(Clone, Copy)]
struct Pass<'a> {
    files: &'a BTreeMap<i64, File>,
    /// Each producer's last batch's last offset.
    producers: &'a BTreeMap<i64, i64>,
    cx: &'a DecideContext<'a>,
    abort: &'a Latch,
}

/// A group's cleaned file, ready to swap in.
struct Cleaned {
    /// The replaced segments' base offsets (the first names the cleaned one).
    bases: Vec<i64>,
    sizes: Vec<u64>,
    path: String,
    /// The cleaned batches' headers and positions, to rebuild the indexes from.
    batches: Vec<(BatchHeader, u64)>,
    size: u64,
}

impl Log {
    /// The closed segments and what the cleaner may do with this log now (see
    /// [`cleanable`]); `high_watermark` bounds it.
    pub async fn cleanable(
        &self,
        policy: &CleanerPolicy,
        high_watermark: i64,
        now_ms: i64,
    ) -> Result<Cleanable, LogError> {
        let (segments, checkpoint, log_start, bound, first_dirty_segment) = {
            let state = self.state.lock().await;
            state.online()?;
            let segments = closed_segments(&state);
            let first_dirty = state.cleaner.first_dirty_offset.max(state.log_start_offset);
            let first_dirty_segment = state
                .segments
                .range(..=first_dirty)
                .next_back()
                .filter(|(base, _)| **base != state.active().base_offset)
                .map(|(_, s)| (s.log.clone(), s.size));
            (
                segments,
                state.cleaner,
                state.log_start_offset,
                high_watermark.min(state.durable_end_offset),
                first_dirty_segment,
            )
        };
        // The first dirty batch's timestamp (its first record's under CreateTime), for
        // max.compaction.lag.ms; a read of one header.
        let mut first_dirty_timestamp = None;
        if let Some((file, size)) = first_dirty_segment {
            if size >= BATCH_HEADER_LEN as u64 {
                let bytes = file
                    .read_at(0, BATCH_HEADER_LEN)
                    .await
                    .map_err(|e| LogError::io("read", file.path(), e))?;
                if let Ok(header) = BatchHeader::parse(&bytes) {
                    first_dirty_timestamp = Some(if header.has_delete_horizon() {
                        header.max_timestamp
                    } else {
                        header.base_timestamp
                    });
                }
            }
        }
        Ok(cleanable(
            &segments,
            checkpoint,
            log_start,
            bound,
            now_ms,
            first_dirty_timestamp,
            policy,
        ))
    }

    /// The cleaner's checkpoint now.
    pub async fn cleaner_checkpoint(&self) -> CleanerCheckpoint {
        self.state.lock().await.cleaner
    }

    /// One cleaner pass over this log (see the module docs), up to what
    /// [`Log::cleanable`] offers; does nothing if that is empty. `high_watermark` bounds
    /// the pass, `now_ms` is the wall clock (delete horizons and compaction lags). Once
    /// `abort` is set the pass stops before its swaps ([`LogError::Aborted`]), leaving the
    /// log as it was.
    pub async fn clean(
        &self,
        policy: &CleanerPolicy,
        high_watermark: i64,
        now_ms: i64,
        abort: &Latch,
    ) -> Result<CleanOutcome, LogError> {
        // Retention and DeleteRecords wait for the pass: neither may remove a segment that
        // is being rewritten.
        let _retention = self.retention_lock.lock().await;
        let offered = self.cleanable(policy, high_watermark, now_ms).await?;
        let mut outcome = CleanOutcome {
            first_dirty_offset: offered.first_dirty_offset,
            end_offset: offered.first_dirty_offset,
            ..CleanOutcome::default()
        };
        if offered.dirty_bytes == 0 {
            return Ok(outcome);
        }
        let (segments, files, producers, checkpoint) = {
            let state = self.state.lock().await;
            state.online()?;
            let files: BTreeMap<i64, File> = state
                .segments
                .iter()
                .map(|(base, s)| (*base, s.log.clone()))
                .collect();
            let producers: BTreeMap<i64, i64> = state
                .producers
                .iter()
                .filter_map(|(id, entry)| entry.batches.back().map(|b| (*id, b.last_offset)))
                .collect();
            (closed_segments(&state), files, producers, state.cleaner)
        };
        outcome.segments_before = segments.len();
        let mut throttle = Throttle::new(policy.io_max_bytes_per_second);

        // Build the offset map from the dirty section, batch by batch, until it is full.
        let mut map = OffsetMap::new(policy.dedupe_buffer_bytes);
        let mut end = offered.first_dirty_offset;
        'segments: for segment in segments.iter().filter(|s| {
            s.next_base > offered.first_dirty_offset && s.next_base <= offered.end_offset
        }) {
            let mut reader = BatchReader::of(&files, segment);
            while let Some((header, batch)) = reader
                .next_in_pass(abort, &mut throttle, &mut outcome)
                .await?
            {
                if header.next_offset() <= offered.first_dirty_offset || header.is_control() {
                    end = end.max(header.next_offset());
                    continue;
                }
                let mut keyed = Vec::new();
                for record in
                    record_batch::records(&batch).map_err(|e| reader.corrupt(e.to_string()))?
                {
                    let record = record.map_err(|e| reader.corrupt(e.to_string()))?;
                    if let Some(key) = record.key {
                        keyed.push((key, record.offset));
                    }
                }
                if !map.insert_batch(&keyed) {
                    if map.is_empty() {
                        return Err(LogError::Config(format!(
                            "log.cleaner.dedupe.buffer.size: {} bytes cannot hold the keys of the batch at offset {} of {}",
                            policy.dedupe_buffer_bytes, header.base_offset, self.dir
                        )));
                    }
                    break 'segments;
                }
                end = header.next_offset();
            }
            end = end.max(segment.next_base);
        }
        outcome.keys = map.len();
        outcome.end_offset = end;
        if end <= offered.first_dirty_offset {
            return Ok(outcome);
        }

        // Rewrite every segment with base below the end, group by group.
        let to_clean: Vec<SegmentInfo> = segments
            .iter()
            .filter(|s| s.base_offset < end)
            .cloned()
            .collect();
        let cx = DecideContext {
            map: &map,
            end_offset: end,
            now_ms,
            delete_retention_ms: policy.delete_retention_ms,
            producer_last_offset: None,
            bugs: policy.bugs,
        };
        let pass = Pass {
            files: &files,
            producers: &producers,
            cx: &cx,
            abort,
        };
        let mut cleaned = Vec::new();
        for group in group_segments(&to_clean, self.config.segment_bytes) {
            let group = &to_clean[group];
            let done = self
                .clean_group(group, &pass, &mut throttle, &mut outcome)
                .await;
            match done {
                Ok(done) => cleaned.extend(done),
                Err(e) => {
                    // Nothing was swapped: the pass leaves no trace (recovery would remove
                    // the files too).
                    for group in &cleaned {
                        let _ = self.disk.remove(&group.path).await;
                    }
                    return Err(e);
                }
            }
        }

        // Swap the cleaned groups in, then move the first dirty offset.
        let gaps = CleanerCheckpoint {
            first_dirty_offset: checkpoint.first_dirty_offset,
            gaps_below: checkpoint.gaps_below.max(end),
        };
        if !cleaned.is_empty() && gaps != checkpoint {
            write_checkpoint(&self.disk, &self.dir, gaps).await?;
            self.state.lock().await.cleaner = gaps;
        }
        for group in cleaned {
            if let Err(e) = self.swap_in(group, policy.bugs).await {
                return Err(self.go_offline(e).await);
            }
        }
        let done = CleanerCheckpoint {
            first_dirty_offset: end,
            gaps_below: gaps.gaps_below,
        };
        write_checkpoint(&self.disk, &self.dir, done).await?;
        {
            let mut state = self.state.lock().await;
            state.cleaner = done;
            outcome.segments_after = closed_segments(&state).len();
        }
        tracing::info!(
            dir = %self.dir,
            first_dirty = outcome.first_dirty_offset,
            end = outcome.end_offset,
            keys = outcome.keys,
            read = outcome.bytes_read,
            written = outcome.bytes_written,
            segments_before = outcome.segments_before,
            segments_after = outcome.segments_after,
            records_removed = outcome.records_removed,
            "log cleaner pass"
        );
        Ok(outcome)
    }

    /// Writes one group's cleaned segment to `<base>.log.cleaned` and syncs it; `None` if
    /// the group would come out unchanged (one segment, every batch kept). On an error the
    /// file is removed.
    async fn clean_group(
        &self,
        group: &[SegmentInfo],
        pass: &Pass<'_>,
        throttle: &mut Throttle,
        outcome: &mut CleanOutcome,
    ) -> Result<Option<Cleaned>, LogError> {
        let Some(first) = group.first() else {
            return Ok(None);
        };
        let path = format!(
            "{}{CLEANED_SUFFIX}",
            Segment::path(&self.dir, first.base_offset, ".log")
        );
        let result = self
            .write_group(&path, group, pass, throttle, outcome)
            .await;
        if !matches!(result, Ok(Some(_))) {
            match self.disk.remove(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if result.is_ok() => return Err(LogError::io("remove", &path, e)),
                Err(_) => {}
            }
        }
        result
    }

    async fn write_group(
        &self,
        path: &str,
        group: &[SegmentInfo],
        pass: &Pass<'_>,
        throttle: &mut Throttle,
        outcome: &mut CleanOutcome,
    ) -> Result<Option<Cleaned>, LogError> {
        let Pass {
            files,
            producers,
            cx,
            abort,
        } = *pass;
        let path = path.to_string();
        let out = self
            .disk
            .open(&path, OpenMode::Truncate)
            .await
            .map_err(|e| LogError::io("create cleaned segment", &path, e))?;
        let mut changed = group.len() > 1;
        let mut buffer = BytesMut::with_capacity(CLEANER_WRITE_BUFFER_BYTES);
        let mut written = 0u64;
        let mut batches = Vec::new();
        for segment in group {
            let mut reader = BatchReader::of(files, segment);
            while let Some((header, batch)) = reader.next_in_pass(abort, throttle, outcome).await? {
                let records: Vec<Record> =
                    if header.base_offset < cx.end_offset && !header.is_control() {
                        record_batch::records(&batch)
                            .map_err(|e| reader.corrupt(e.to_string()))?
                            .collect::<Result<_, _>>()
                            .map_err(|e| reader.corrupt(e.to_string()))?
                    } else {
                        Vec::new()
                    };
                let batch_cx = DecideContext {
                    producer_last_offset: producers.get(&header.producer_id).copied(),
                    ..*cx
                };
                // `decide` keeps batches at or above the end, and control batches, itself.
                let fate = decide(&header, &records, &batch_cx);
                let kept: Bytes = match fate {
                    BatchFate::Keep => batch,
                    BatchFate::Drop => {
                        changed = true;
                        outcome.batches_dropped += 1;
                        outcome.records_removed += records.len() as u64;
                        continue;
                    }
                    BatchFate::Empty => {
                        changed = true;
                        outcome.batches_emptied += 1;
                        outcome.records_removed += records.len() as u64;
                        record_batch::empty_batch(&header).freeze()
                    }
                    BatchFate::Rewrite {
                        keep,
                        delete_horizon_ms,
                    } => {
                        changed = true;
                        outcome.batches_rewritten += 1;
                        outcome.records_removed += (records.len() - keep.len()) as u64;
                        rewrite(&header, &records, &keep, delete_horizon_ms)
                            .map_err(|e| reader.corrupt(e.to_string()))?
                            .freeze()
                    }
                };
                let kept_header =
                    BatchHeader::parse(&kept).map_err(|e| reader.corrupt(e.to_string()))?;
                assert_eq!(
                    kept_header.base_offset, header.base_offset,
                    "cleaning renumbered a batch"
                );
                assert_eq!(
                    kept_header.last_offset_delta, header.last_offset_delta,
                    "cleaning moved a batch's end"
                );
                batches.push((kept_header, written + buffer.len() as u64));
                buffer.extend_from_slice(&kept);
                if buffer.len() >= CLEANER_WRITE_BUFFER_BYTES {
                    self.write_cleaned(&out, &mut written, &mut buffer, throttle)
                        .await?;
                }
            }
        }
        if !changed {
            return Ok(None);
        }
        self.write_cleaned(&out, &mut written, &mut buffer, throttle)
            .await?;
        out.sync()
            .await
            .map_err(|e| LogError::io("sync", &path, e))?;
        outcome.bytes_written += written;
        Ok(Some(Cleaned {
            bases: group.iter().map(|s| s.base_offset).collect(),
            sizes: group.iter().map(|s| s.size).collect(),
            path,
            batches,
            size: written,
        }))
    }

    async fn write_cleaned(
        &self,
        out: &File,
        written: &mut u64,
        buffer: &mut BytesMut,
        throttle: &mut Throttle,
    ) -> Result<(), LogError> {
        if buffer.is_empty() {
            return Ok(());
        }
        out.write_at(*written, buffer)
            .await
            .map_err(|e| LogError::io("write", out.path(), e))?;
        throttle.spend(buffer.len() as u64).await;
        *written += buffer.len() as u64;
        buffer.clear();
        Ok(())
    }

    /// Syncs the log directory's names.
    async fn sync_dir(&self) -> Result<(), LogError> {
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(|e| LogError::io("sync directory", &self.dir, e))
    }

    /// Swaps one cleaned group into the log (module docs), under the state lock so that no
    /// read sees half of it; reads in flight keep their open handles to the old files.
    async fn swap_in(&self, cleaned: Cleaned, bugs: CleanerBugs) -> Result<(), LogError> {
        let io = |op: &'static str, path: &str| {
            let path = path.to_string();
            move |e| LogError::io(op, &path, e)
        };
        let mut state = self.state.lock().await;
        state.online()?;
        let unchanged = cleaned
            .bases
            .iter()
            .zip(&cleaned.sizes)
            .all(|(base, size)| state.segments.get(base).is_some_and(|s| s.size == *size))
            && cleaned
                .bases
                .last()
                .is_some_and(|last| *last != state.active().base_offset);
        if !unchanged {
            // Only a truncation can have changed a closed segment: leave it be.
            tracing::warn!(dir = %self.dir, path = %cleaned.path, "segments changed under the cleaner; dropping its output");
            drop(state);
            self.disk
                .remove(&cleaned.path)
                .await
                .map_err(io("remove", &cleaned.path))?;
            return Ok(());
        }
        let base = cleaned.bases[0];
        let target = Segment::path(&self.dir, base, ".log");
        let swap = format!("{target}{SWAP_SUFFIX}");
        if bugs.swap_not_crash_safe {
            // The planted bug: the old segments go, durably, before the new one is in place.
            for &old in &cleaned.bases {
                recovery::remove_segment(&self.disk, &self.dir, old).await?;
            }
            self.sync_dir().await?;
            self.disk
                .fault(FaultPoint::CleanerSwap)
                .await
                .map_err(io("swap", &cleaned.path))?;
            self.disk
                .rename(&cleaned.path, &target)
                .await
                .map_err(io("rename", &cleaned.path))?;
        } else {
            self.disk
                .rename(&cleaned.path, &swap)
                .await
                .map_err(io("rename", &cleaned.path))?;
            self.sync_dir().await?;
            // The commit point is behind us: recovery finishes the swap from here.
            self.disk
                .fault(FaultPoint::CleanerSwap)
                .await
                .map_err(io("swap", &swap))?;
            for &old in &cleaned.bases[1..] {
                recovery::remove_segment(&self.disk, &self.dir, old).await?;
            }
            for suffix in [".index", ".timeindex"] {
                let path = Segment::path(&self.dir, base, suffix);
                self.disk.remove(&path).await.map_err(io("remove", &path))?;
            }
            // The removals are durable before the rename can be: a crash never shows the
            // new segment next to an old one it overlaps.
            self.sync_dir().await?;
            self.disk
                .rename(&swap, &target)
                .await
                .map_err(io("rename", &swap))?;
        }
        self.sync_dir().await?;
        let mut segment = Segment::open_files(&self.disk, &self.dir, base).await?;
        assert_eq!(segment.size, cleaned.size, "the swapped segment's size");
        segment.gaps = true;
        let interval = self.config.index_interval_bytes;
        for (header, position) in &cleaned.batches {
            segment.note_batch(header, *position, interval);
            segment.next_offset = header.next_offset();
        }
        segment.final_time_entry();
        segment.write_indexes().await?;
        for file in [&segment.index_file, &segment.time_index_file] {
            file.sync().await.map_err(io("sync", file.path()))?;
        }
        for old in &cleaned.bases {
            state.segments.remove(old);
        }
        state.segments.insert(base, segment);
        // Scrub cursors name byte positions of the old files.
        state.truncations += 1;
        let State {
            dirty, segments, ..
        } = &mut *state;
        dirty.retain(|(_, f)| super::state_has(segments, f));
        state.check_invariants();
        Ok(())
    }
}

/// The closed segments of the log (every one but the active), as the cleaner sees them.
fn closed_segments(state: &State) -> Vec<SegmentInfo> {
    let mut out = Vec::new();
    let mut bases = state.segments.keys().skip(1);
    for segment in state.segments.values() {
        let Some(&next_base) = bases.next() else {
            break;
        };
        out.push(SegmentInfo {
            base_offset: segment.base_offset,
            next_base,
            size: segment.size,
            max_timestamp: segment.max_timestamp,
        });
    }
    out
}
