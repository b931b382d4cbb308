//! One segment of a partition log: a `.log` file of record batches plus its two indexes.
//!
//! File names are Kafka's: the segment's base offset as 20 decimal digits, then `.log`,
//! `.index` or `.timeindex`. The `.log` file is the concatenation of whole magic-v2 record
//! batches exactly as received, with base offsets assigned.
//!
//! Invariants: batches in a segment have strictly increasing, contiguous offsets starting at
//! `base_offset` (`next_offset` is one past the last); `size` is the byte length of the whole
//! batches in the file; every index entry points at the start of a batch in `[0, size)`.
//! A segment the log cleaner rewrote (`gaps`, see [`super::cleaner`]) keeps strictly
//! increasing offsets but may skip some: its first batch may begin above `base_offset` and a
//! batch may begin above the end of the one before, where the cleaner removed whole batches.
//! Every other segment keeps the contiguous rule, so step 5's offset-gap checks stay whole
//! on uncompacted logs.

use super::index::{OffsetEntry, OffsetIndex, TimeEntry, TimeIndex};
use super::LogError;
use crate::protocol::record_batch::{self, BatchHeader, BATCH_HEADER_LEN};
use crate::rt::disk::{join, Disk, File, OpenMode};
use bytes::Bytes;

/// Kafka's segment file name for a base offset and suffix.
pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// Parses `00000000000000000042.log` into 42; `None` for any other name.
pub fn parse_log_name(name: &str) -> Option<i64> {
    parse_base(name.strip_suffix(".log")?)
}

/// Parses a base offset written as 20 decimal digits.
pub fn parse_base(digits: &str) -> Option<i64> {
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Index files larger than this cannot be ours (the log rolls segments long before); such a
/// file is refused and rebuilt instead of read into memory.
pub const INDEX_FILE_BYTES_MAX: u64 = 64 << 20;

/// Reads a whole (small) file, refusing one larger than `max` bytes.
async fn read_whole(file: &File, max: u64) -> Result<Bytes, String> {
    let len = file
        .len()
        .await
        .map_err(|e| format!("{}: {e}", file.path()))?;
    if len > max {
        return Err(format!(
            "{}: {len} bytes is larger than the {max} allowed",
            file.path()
        ));
    }
    file.read_at(0, len as usize)
        .await
        .map_err(|e| format!("reading {}: {e}", file.path()))
}

#[derive(Debug)]
pub struct Segment {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    pub log: File,
    pub index_file: File,
    pub time_index_file: File,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Bytes of the index files written so far (they are append-only between rebuilds).
    pub index_bytes: u64,
    pub time_index_bytes: u64,
    pub bytes_since_index: u64,
    pub max_timestamp: i64,
    /// Base offset of the batch that holds `max_timestamp`.
    pub max_timestamp_offset: i64,
    /// Wall-clock time of the segment's first append, for roll by time.
    pub first_append_ms: Option<i64>,
    /// The log cleaner rewrote this segment: its offsets may have gaps (see the module
    /// docs). Set by recovery for segments below the cleaner checkpoint, and by the swap.
    pub gaps: bool,
}

/// Whether a batch beginning at `base` may follow a log that continues at `expected`: exactly
/// there, or, in a segment with gaps, anywhere above (compaction removes whole batches and
/// leaves their offsets unused; offsets never go backwards).
pub fn continues(gaps: bool, base: i64, expected: i64) -> bool {
    if gaps {
        base >= expected
    } else {
        base == expected
    }
}

/// What a scan of a segment found.
#[derive(Debug, Default)]
pub struct ScanOutcome {
    pub batches: u64,
    /// Set when the scan stopped before the end of the file: (position, reason).
    pub invalid_at: Option<(u64, String)>,
}

/// The checks that recovery's scan and the scrubber make of a batch whose header was read at
/// `position` of a segment file `file_len` bytes long, where the log continues at `expected`:
/// the whole batch lies in the file, and it continues the offsets. (Its CRC is
/// `record_batch::verify`'s to check.)
pub(super) fn check_batch_place(
    header: &BatchHeader,
    position: u64,
    file_len: u64,
    expected: i64,
    gaps: bool,
) -> Result<(), String> {
    let len = header.total_len() as u64;
    if position + len > file_len {
        return Err(format!(
            "batch of {len} bytes is cut off at the end of the file"
        ));
    }
    if !continues(gaps, header.base_offset, expected) {
        return Err(format!(
            "batch base offset {} does not continue the log at {expected}",
            header.base_offset
        ));
    }
    Ok(())
}

impl Segment {
    pub fn path(dir: &str, base_offset: i64, suffix: &str) -> String {
        join(dir, &file_name(base_offset, suffix))
    }

    /// Creates an empty segment, replacing any stale files of the same name.
    pub async fn create(disk: &Disk, dir: &str, base_offset: i64) -> Result<Segment, LogError> {
        let open = |suffix: &'static str| {
            let path = Segment::path(dir, base_offset, suffix);
            async move {
                disk.open(&path, OpenMode::Truncate)
                    .await
                    .map_err(|e| LogError::io("create segment", &path, e))
            }
        };
        let (log, index_file, time_index_file) = (
            open(".log").await?,
            open(".index").await?,
            open(".timeindex").await?,
        );
        Ok(Segment::unindexed(
            base_offset,
            0,
            log,
            index_file,
            time_index_file,
        ))
    }

    /// A segment over its three files with nothing indexed or walked yet: recovery fills in
    /// the indexes and the offsets, appends do for a new segment.
    pub(super) fn unindexed(
        base_offset: i64,
        size: u64,
        log: File,
        index_file: File,
        time_index_file: File,
    ) -> Segment {
        Segment {
            base_offset,
            next_offset: base_offset,
            size,
            log,
            index_file,
            time_index_file,
            index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            index_bytes: 0,
            time_index_bytes: 0,
            bytes_since_index: 0,
            max_timestamp: -1,
            max_timestamp_offset: base_offset,
            first_append_ms: None,
            gaps: false,
        }
    }

    /// Opens an existing segment's files without reading them (see recovery).
    pub async fn open_files(disk: &Disk, dir: &str, base_offset: i64) -> Result<Segment, LogError> {
        let log_path = Segment::path(dir, base_offset, ".log");
        let log = disk
            .open(&log_path, OpenMode::Existing)
            .await
            .map_err(|e| LogError::io("open segment", &log_path, e))?;
        let size = log
            .len()
            .await
            .map_err(|e| LogError::io("stat segment", &log_path, e))?;
        let open = |suffix: &'static str| {
            let path = Segment::path(dir, base_offset, suffix);
            async move {
                disk.open(&path, OpenMode::Create)
                    .await
                    .map_err(|e| LogError::io("open index", &path, e))
            }
        };
        let (index_file, time_index_file) = (open(".index").await?, open(".timeindex").await?);
        Ok(Segment::unindexed(
            base_offset,
            size,
            log,
            index_file,
            time_index_file,
        ))
    }

    pub fn relative(&self, offset: i64) -> u32 {
        let rel = offset - self.base_offset;
        assert!(
            rel >= 0,
            "offset {offset} below segment base {}",
            self.base_offset
        );
        u32::try_from(rel).unwrap_or(u32::MAX)
    }

    /// A reader of the segment as it is now ([`SegmentReader`]).
    pub fn reader(&self) -> SegmentReader {
        SegmentReader {
            base_offset: self.base_offset,
            size: self.size,
            gaps: self.gaps,
            log: self.log.clone(),
        }
    }

    /// Reads and parses the batch header at `position` ([`SegmentReader::read_header`]).
    pub async fn read_header(&self, position: u64) -> Result<BatchHeader, LogError> {
        self.reader().read_header(position).await
    }

    /// [`SegmentReader::read_header_expecting`].
    pub async fn read_header_expecting(
        &self,
        position: u64,
        expected: i64,
        gaps_allowed: bool,
    ) -> Result<BatchHeader, LogError> {
        self.reader()
            .read_header_expecting(position, expected, gaps_allowed)
            .await
    }

    /// Walks the batches from the index's hint for `from_offset` until `found` accepts one
    /// ([`SegmentReader::seek_from`]).
    pub async fn seek(
        &self,
        from_offset: i64,
        found: impl Fn(&BatchHeader) -> bool,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let hint = self.index_hint(from_offset);
        self.reader().seek_from(hint, found).await
    }

    pub fn corrupt(&self, position: u64, reason: String) -> LogError {
        LogError::Corrupt {
            segment: self.log.path().to_string(),
            position,
            reason,
        }
    }

    /// Reads `len` bytes at `position`.
    pub async fn read(&self, position: u64, len: usize) -> Result<Bytes, LogError> {
        self.reader().read(position, len).await
    }

    /// Where a walk to `offset` starts: the position and base offset of the last indexed batch
    /// at or below it, or the start of the segment.
    pub fn index_hint(&self, offset: i64) -> (u64, i64) {
        match self.index.floor(self.relative(offset)) {
            Some(e) => (
                u64::from(e.position),
                self.base_offset + i64::from(e.relative_offset),
            ),
            None => (0, self.base_offset),
        }
    }

    /// Records a batch appended at `position` in the in-memory indexes and appends any new
    /// index entries to the index files (unsynced: recovery rebuilds what it cannot trust).
    pub async fn index_batch(
        &mut self,
        header: &BatchHeader,
        position: u64,
        index_interval_bytes: u64,
    ) -> Result<(), LogError> {
        let (offset_entry, time_entry) = self.note_batch(header, position, index_interval_bytes);
        if let Some(entry) = time_entry {
            let bytes = entry.encode();
            self.time_index_file
                .write_at(self.time_index_bytes, &bytes)
                .await
                .map_err(|e| LogError::io("write", self.time_index_file.path(), e))?;
            self.time_index_bytes += bytes.len() as u64;
        }
        if let Some(entry) = offset_entry {
            let bytes = entry.encode();
            self.index_file
                .write_at(self.index_bytes, &bytes)
                .await
                .map_err(|e| LogError::io("write", self.index_file.path(), e))?;
            self.index_bytes += bytes.len() as u64;
        }
        Ok(())
    }

    /// Walks the batches from `position` to the end of the file, rebuilding the in-memory
    /// indexes for them. With `verify`, each batch's CRC is checked too. Stops at the first
    /// batch that is incomplete, invalid, or does not continue the offsets; the caller decides
    /// whether to truncate there.
    pub async fn scan(
        &mut self,
        mut position: u64,
        verify: bool,
        index_interval_bytes: u64,
    ) -> Result<ScanOutcome, LogError> {
        let mut outcome = ScanOutcome::default();
        let file_len = self.size;
        while position < file_len {
            let header_bytes = self
                .log
                .read_at(position, BATCH_HEADER_LEN)
                .await
                .map_err(|e| LogError::io("read", self.log.path(), e))?;
            let header = match BatchHeader::parse(&header_bytes) {
                Ok(h) => h,
                Err(e) => {
                    outcome.invalid_at = Some((position, e.to_string()));
                    break;
                }
            };
            let len = header.total_len() as u64;
            if let Err(why) =
                check_batch_place(&header, position, file_len, self.next_offset, self.gaps)
            {
                outcome.invalid_at = Some((position, why));
                break;
            }
            if verify {
                let batch = self
                    .log
                    .read_at(position, header.total_len())
                    .await
                    .map_err(|e| LogError::io("read", self.log.path(), e))?;
                if let Err(e) = record_batch::verify(&batch) {
                    outcome.invalid_at = Some((position, e.to_string()));
                    break;
                }
            }
            self.note_batch(&header, position, index_interval_bytes);
            self.next_offset = header.next_offset();
            position += len;
            outcome.batches += 1;
        }
        self.size = position.min(file_len);
        Ok(outcome)
    }

    /// Adds a batch appended at `position` to the in-memory indexes and returns the entries
    /// it added, so the append path can write them to the index files.
    pub(super) fn note_batch(
        &mut self,
        header: &BatchHeader,
        position: u64,
        interval: u64,
    ) -> (Option<OffsetEntry>, Option<TimeEntry>) {
        let len = header.total_len() as u64;
        let rel = self.relative(header.base_offset);
        let due = self.bytes_since_index + len >= interval;
        let mut added = (None, None);
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.max_timestamp_offset = header.base_offset;
            if due
                && self
                    .time_index
                    .last()
                    .is_none_or(|e| header.max_timestamp > e.timestamp)
            {
                let entry = TimeEntry {
                    timestamp: header.max_timestamp,
                    relative_offset: rel,
                };
                self.time_index.push(entry);
                added.1 = Some(entry);
            }
        }
        // Position 0 needs no entry: a lookup that finds nothing starts at 0 anyway.
        if due && position > 0 {
            let entry = OffsetEntry {
                relative_offset: rel,
                position: u32::try_from(position).unwrap_or(u32::MAX),
            };
            self.index.push(entry);
            added.0 = Some(entry);
            self.bytes_since_index = 0;
        } else {
            self.bytes_since_index += len;
        }
        added
    }

    /// Adds a time-index entry for the segment's largest timestamp unless the index already
    /// ends with it, as Kafka does when a segment stops being active: the time index then
    /// names the maximum, so a reopen need not walk the segment to find it. Returns the entry
    /// added, for the caller to write.
    pub fn final_time_entry(&mut self) -> Option<TimeEntry> {
        if self.max_timestamp < 0
            || self
                .time_index
                .last()
                .is_some_and(|e| e.timestamp >= self.max_timestamp)
        {
            return None;
        }
        let entry = TimeEntry {
            timestamp: self.max_timestamp,
            relative_offset: self.relative(self.max_timestamp_offset),
        };
        self.time_index.push(entry);
        Some(entry)
    }

    /// [`Segment::final_time_entry`], written to the time index file.
    pub async fn seal_time_index(&mut self) -> Result<(), LogError> {
        if let Some(entry) = self.final_time_entry() {
            let bytes = entry.encode();
            self.time_index_file
                .write_at(self.time_index_bytes, &bytes)
                .await
                .map_err(|e| LogError::io("write", self.time_index_file.path(), e))?;
            self.time_index_bytes += bytes.len() as u64;
        }
        Ok(())
    }

    /// Rewrites both index files from the in-memory indexes.
    pub async fn write_indexes(&mut self) -> Result<(), LogError> {
        let index = self.index.encode_all();
        let time_index = self.time_index.encode_all();
        for (file, bytes) in [
            (&self.index_file, &index),
            (&self.time_index_file, &time_index),
        ] {
            file.set_len(0)
                .await
                .map_err(|e| LogError::io("truncate", file.path(), e))?;
            file.write_at(0, bytes)
                .await
                .map_err(|e| LogError::io("write", file.path(), e))?;
        }
        self.index_bytes = index.len() as u64;
        self.time_index_bytes = time_index.len() as u64;
        Ok(())
    }

    /// Loads the index files and checks them against the log file; `Err` names why they cannot
    /// be trusted.
    pub async fn load_indexes(&mut self) -> Result<(), String> {
        let index_bytes = read_whole(&self.index_file, INDEX_FILE_BYTES_MAX).await?;
        let time_bytes = read_whole(&self.time_index_file, INDEX_FILE_BYTES_MAX).await?;
        let index = OffsetIndex::decode(&index_bytes, self.size)
            .map_err(|e| format!("{}: {e}", self.index_file.path()))?;
        let time_index = TimeIndex::decode(&time_bytes, u32::MAX)
            .map_err(|e| format!("{}: {e}", self.time_index_file.path()))?;
        self.index = index;
        self.time_index = time_index;
        self.index_bytes = index_bytes.len() as u64;
        self.time_index_bytes = time_bytes.len() as u64;
        Ok(())
    }

    /// Sets `next_offset`, `max_timestamp` and the index bookkeeping by walking the batch
    /// headers from the last index entry on (usually about one index interval). Any
    /// inconsistency is returned as the reason the segment needs a full scan.
    ///
    /// The walk starts early enough to also cover every batch from the last time-index entry
    /// on: that entry is the segment's largest timestamp only up to its batch, and a later batch
    /// that raised the maximum without being due for an index entry has no entry of its own.
    /// (Without a time-index entry the walk covers the whole segment.) The last time-index
    /// entry must name a batch the walk meets, with that batch's max timestamp.
    ///
    /// `next_base` is the base offset of the following segment (`None` for the last one).
    pub async fn load_tail(&mut self, next_base: Option<i64>) -> Result<(), String> {
        let time_last = self.time_index.last();
        let index_last = self.index.last();
        let tail_from = index_last.map_or(0, |e| u64::from(e.position));
        let start = match time_last {
            Some(t) => self.index.floor(t.relative_offset),
            None => None,
        };
        let (mut position, mut next) = match start {
            Some(e) => (
                u64::from(e.position),
                self.base_offset + i64::from(e.relative_offset),
            ),
            None => (0, self.base_offset),
        };
        let mut max_timestamp = time_last.map_or(-1, |t| t.timestamp);
        self.max_timestamp_offset = time_last.map_or(self.base_offset, |t| {
            self.base_offset + i64::from(t.relative_offset)
        });
        let mut time_entry_seen = time_last.is_none();
        let mut index_entry_seen = index_last.is_none();
        let mut since_index = 0;
        while position < self.size {
            let header = self
                .read_header(position)
                .await
                .map_err(|e| e.to_string())?;
            if !continues(self.gaps, header.base_offset, next) {
                return Err(format!(
                    "{}: batch at position {position} has base offset {} where {next} was expected",
                    self.log.path(),
                    header.base_offset
                ));
            }
            if let Some(e) = index_last.filter(|e| u64::from(e.position) == position) {
                if header.base_offset != self.base_offset + i64::from(e.relative_offset) {
                    return Err(format!(
                        "{}: last entry {e:?} names a batch with base offset {}",
                        self.index_file.path(),
                        header.base_offset
                    ));
                }
                index_entry_seen = true;
            }
            if let Some(t) = time_last {
                if header.base_offset == self.base_offset + i64::from(t.relative_offset) {
                    if header.max_timestamp != t.timestamp {
                        return Err(format!(
                            "{}: time index entry {t:?} disagrees with the batch's max timestamp {}",
                            self.time_index_file.path(),
                            header.max_timestamp
                        ));
                    }
                    time_entry_seen = true;
                }
            }
            if header.max_timestamp > max_timestamp {
                max_timestamp = header.max_timestamp;
                self.max_timestamp_offset = header.base_offset;
            }
            next = header.next_offset();
            if position + header.total_len() as u64 >= self.size
                && next_base != Some(header.next_offset())
            {
                // The last batch sets the segment's next offset; unless the next segment's
                // name confirms it, check the batch is the one that was written (its
                // lastOffsetDelta is under the CRC).
                let batch = self
                    .read(position, header.total_len())
                    .await
                    .map_err(|e| e.to_string())?;
                record_batch::verify(&batch).map_err(|e| {
                    format!(
                        "{}: last batch at position {position}: {e}",
                        self.log.path()
                    )
                })?;
            }
            if position >= tail_from {
                since_index += header.total_len() as u64;
            }
            position += header.total_len() as u64;
        }
        if !index_entry_seen {
            return Err(format!(
                "{}: the last entry {index_last:?} points inside a batch",
                self.index_file.path()
            ));
        }
        if !time_entry_seen {
            return Err(format!(
                "{}: the last entry {time_last:?} names no batch of the segment",
                self.time_index_file.path()
            ));
        }
        self.next_offset = next;
        self.max_timestamp = max_timestamp;
        self.bytes_since_index = since_index;
        Ok(())
    }
}

/// What a read needs of a segment, taken under the log's state lock and used without it:
/// the file handle (which keeps a removed or replaced file readable) and the segment's size
/// at that moment (appends after it are not seen). A truncation can still cut the file
/// under it; the log detects that by its truncation count and reads again.
#[derive(Clone, Debug)]
pub struct SegmentReader {
    pub base_offset: i64,
    pub size: u64,
    pub gaps: bool,
    pub log: File,
}

impl SegmentReader {
    /// Reads and parses the batch header at `position`.
    pub async fn read_header(&self, position: u64) -> Result<BatchHeader, LogError> {
        let bytes = self
            .log
            .read_at(position, BATCH_HEADER_LEN)
            .await
            .map_err(|e| LogError::io("read", self.log.path(), e))?;
        let header =
            BatchHeader::parse(&bytes).map_err(|e| self.corrupt(position, e.to_string()))?;
        if position + header.total_len() as u64 > self.size {
            return Err(self.corrupt(
                position,
                format!(
                    "batch of {} bytes runs past the end of the segment",
                    header.total_len()
                ),
            ));
        }
        Ok(header)
    }

    /// [`SegmentReader::read_header`], checking that the batch starts at offset `expected` (or, with
    /// `gaps_allowed`, at or above it). The base offset is outside the CRC, so continuing the
    /// previous batch is its only check.
    pub async fn read_header_expecting(
        &self,
        position: u64,
        expected: i64,
        gaps_allowed: bool,
    ) -> Result<BatchHeader, LogError> {
        let header = self.read_header(position).await?;
        if !continues(gaps_allowed, header.base_offset, expected) {
            return Err(self.corrupt(
                position,
                format!(
                    "batch base offset {} where {expected} was expected",
                    header.base_offset
                ),
            ));
        }
        Ok(header)
    }

    /// Walks the batches from `hint` (an index entry's position and base offset) until `found` accepts one, and
    /// returns its position and header; `None` if the segment ends first. The index is only
    /// a hint: if the walk from a hinted position meets a batch that does not fit, the walk is
    /// redone from the start of the segment, and only a failure there is corruption.
    pub async fn seek_from(
        &self,
        hint: (u64, i64),
        found: impl Fn(&BatchHeader) -> bool,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        match self.walk(hint, &found).await {
            Err(LogError::Corrupt { reason, .. }) if hint.0 > 0 => {
                tracing::warn!(
                    segment = %self.log.path(), hint = hint.0, reason,
                    "offset index hint is wrong; walking the segment from its start"
                );
                self.walk((0, self.base_offset), &found).await
            }
            result => result,
        }
    }

    async fn walk(
        &self,
        (mut position, mut expected): (u64, i64),
        found: &impl Fn(&BatchHeader) -> bool,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        // An index entry names its batch's exact base offset; only the start of a segment
        // with gaps, and every batch after the first, may begin above what is expected.
        let mut gaps_allowed = self.gaps && position == 0;
        while position < self.size {
            let header = self
                .read_header_expecting(position, expected, gaps_allowed)
                .await?;
            gaps_allowed = self.gaps;
            if found(&header) {
                return Ok(Some((position, header)));
            }
            position += header.total_len() as u64;
            expected = header.next_offset();
        }
        Ok(None)
    }

    pub fn corrupt(&self, position: u64, reason: String) -> LogError {
        LogError::Corrupt {
            segment: self.log.path().to_string(),
            position,
            reason,
        }
    }

    /// Reads `len` bytes at `position`.
    pub async fn read(&self, position: u64, len: usize) -> Result<Bytes, LogError> {
        let bytes = self
            .log
            .read_at(position, len)
            .await
            .map_err(|e| LogError::io("read", self.log.path(), e))?;
        if bytes.len() != len {
            return Err(self.corrupt(
                position,
                format!("short read: {} of {len} bytes", bytes.len()),
            ));
        }
        Ok(bytes)
    }
}
