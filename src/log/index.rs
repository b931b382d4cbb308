//! The sparse offset index and the time index of one segment, in memory and on disk.
//!
//! On-disk formats (Kafka's):
//! - `.index`: 8-byte entries, `relative_offset: u32 BE` then `position: u32 BE`, mapping the
//!   base offset of a batch (relative to the segment's base offset) to the batch's byte
//!   position in the `.log` file. One entry per `index_interval_bytes` of log data.
//! - `.timeindex`: 12-byte entries, `timestamp: i64 BE` then `relative_offset: u32 BE`: the
//!   largest timestamp seen so far in the segment and the batch where it was seen.
//!
//! Invariants: offset entries are strictly increasing in both fields; time entries are
//! strictly increasing in timestamp and non-decreasing in offset. Indexes are hints: a reader
//! always confirms what it finds at an indexed position by parsing the batch header there, and
//! recovery rebuilds an index that is missing or fails [`OffsetIndex::decode`]'s checks.

pub const OFFSET_ENTRY_BYTES: usize = 8;
pub const TIME_ENTRY_BYTES: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

#[derive(Clone, Debug, Default)]
pub struct OffsetIndex {
    entries: Vec<OffsetEntry>,
}

#[derive(Clone, Debug, Default)]
pub struct TimeIndex {
    entries: Vec<TimeEntry>,
}

impl OffsetEntry {
    pub fn encode(&self) -> [u8; OFFSET_ENTRY_BYTES] {
        let mut out = [0u8; OFFSET_ENTRY_BYTES];
        out[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..].copy_from_slice(&self.position.to_be_bytes());
        out
    }
}

impl TimeEntry {
    pub fn encode(&self) -> [u8; TIME_ENTRY_BYTES] {
        let mut out = [0u8; TIME_ENTRY_BYTES];
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..].copy_from_slice(&self.relative_offset.to_be_bytes());
        out
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(bytes);
    u32::from_be_bytes(b)
}

impl OffsetIndex {
    /// Parses an index file, checking that it could have been written for a log of
    /// `log_bytes` bytes. Returns why it cannot be trusted otherwise.
    pub fn decode(bytes: &[u8], log_bytes: u64) -> Result<OffsetIndex, String> {
        if bytes.len() % OFFSET_ENTRY_BYTES != 0 {
            return Err(format!(
                "length {} is not a multiple of {OFFSET_ENTRY_BYTES}",
                bytes.len()
            ));
        }
        let mut index = OffsetIndex::default();
        for chunk in bytes.chunks_exact(OFFSET_ENTRY_BYTES) {
            let entry = OffsetEntry {
                relative_offset: be_u32(&chunk[..4]),
                position: be_u32(&chunk[4..]),
            };
            if u64::from(entry.position) >= log_bytes {
                return Err(format!(
                    "entry points at position {} beyond the log's {log_bytes} bytes",
                    entry.position
                ));
            }
            if let Some(last) = index.entries.last() {
                if entry.relative_offset <= last.relative_offset || entry.position <= last.position
                {
                    return Err(format!(
                        "entries not increasing at {entry:?} after {last:?}"
                    ));
                }
            }
            index.entries.push(entry);
        }
        Ok(index)
    }

    pub fn push(&mut self, entry: OffsetEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.relative_offset > last.relative_offset,
                "offset index not increasing"
            );
            assert!(
                entry.position > last.position,
                "offset index positions not increasing"
            );
        }
        self.entries.push(entry);
    }

    /// The last entry whose relative offset is <= `relative_offset`, if any.
    pub fn floor(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let n = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    pub fn last(&self) -> Option<OffsetEntry> {
        self.entries.last().copied()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops every entry at or beyond `position` (after the log was truncated there).
    pub fn truncate_to_position(&mut self, position: u64) {
        self.entries.retain(|e| u64::from(e.position) < position);
    }

    pub fn encode_all(&self) -> Vec<u8> {
        self.entries.iter().flat_map(|e| e.encode()).collect()
    }
}

impl TimeIndex {
    /// Parses a time index file; `max_relative_offset` bounds its offsets.
    pub fn decode(bytes: &[u8], max_relative_offset: u32) -> Result<TimeIndex, String> {
        if bytes.len() % TIME_ENTRY_BYTES != 0 {
            return Err(format!(
                "length {} is not a multiple of {TIME_ENTRY_BYTES}",
                bytes.len()
            ));
        }
        let mut index = TimeIndex::default();
        for chunk in bytes.chunks_exact(TIME_ENTRY_BYTES) {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&chunk[..8]);
            let entry = TimeEntry {
                timestamp: i64::from_be_bytes(ts),
                relative_offset: be_u32(&chunk[8..]),
            };
            if entry.relative_offset > max_relative_offset {
                return Err(format!("entry {entry:?} beyond the segment's last offset"));
            }
            if let Some(last) = index.entries.last() {
                if entry.timestamp <= last.timestamp || entry.relative_offset < last.relative_offset
                {
                    return Err(format!(
                        "entries not increasing at {entry:?} after {last:?}"
                    ));
                }
            }
            index.entries.push(entry);
        }
        Ok(index)
    }

    pub fn push(&mut self, entry: TimeEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.timestamp > last.timestamp,
                "time index not increasing"
            );
            assert!(
                entry.relative_offset >= last.relative_offset,
                "time index offsets decrease"
            );
        }
        self.entries.push(entry);
    }

    pub fn last(&self) -> Option<TimeEntry> {
        self.entries.last().copied()
    }

    /// The relative offset of the last entry whose timestamp is < `timestamp`: a batch at or
    /// after it is the first that may hold a timestamp >= `timestamp`.
    pub fn lookup(&self, timestamp: i64) -> u32 {
        let n = self.entries.partition_point(|e| e.timestamp < timestamp);
        if n == 0 {
            0
        } else {
            self.entries[n - 1].relative_offset
        }
    }

    /// Drops every entry for offsets at or beyond `relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        self.entries.retain(|e| e.relative_offset < relative_offset);
    }

    pub fn encode_all(&self) -> Vec<u8> {
        self.entries.iter().flat_map(|e| e.encode()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_round_trips_and_looks_up_the_floor() {
        let mut index = OffsetIndex::default();
        index.push(OffsetEntry {
            relative_offset: 10,
            position: 100,
        });
        index.push(OffsetEntry {
            relative_offset: 20,
            position: 200,
        });
        let decoded = OffsetIndex::decode(&index.encode_all(), 1000).unwrap();
        let lookup = |rel| decoded.floor(rel).map_or(0, |e| e.position);
        assert_eq!(lookup(5), 0);
        assert_eq!(lookup(10), 100);
        assert_eq!(lookup(19), 100);
        assert_eq!(lookup(25), 200);
    }

    #[test]
    fn garbage_indexes_are_refused_with_a_reason() {
        assert!(OffsetIndex::decode(&[0; 7], 10)
            .unwrap_err()
            .contains("multiple"));
        let beyond = OffsetEntry {
            relative_offset: 1,
            position: 50,
        }
        .encode();
        assert!(OffsetIndex::decode(&beyond, 10)
            .unwrap_err()
            .contains("beyond"));
        let mut twice = beyond.to_vec();
        twice.extend_from_slice(&beyond);
        assert!(OffsetIndex::decode(&twice, 100)
            .unwrap_err()
            .contains("increasing"));
        let t = TimeEntry {
            timestamp: 5,
            relative_offset: 9,
        }
        .encode();
        assert!(TimeIndex::decode(&t, 3).unwrap_err().contains("beyond"));
    }
}
