//! The leader-epoch cache of a log: for each leader epoch that wrote to the log, the offset
//! of its first batch (Kafka's `LeaderEpochFileCache`). A replica answers
//! OffsetForLeaderEpoch and a Raft voter validates a fetch's last fetched epoch with it: the
//! end offset of epoch E is the start offset of the first epoch after E, or the log end
//! offset for the latest epoch (KIP-101, KIP-279).
//!
//! On-disk format (`leader-epoch-checkpoint`, text, Kafka's): the version line `0`, a line
//! with the number of entries, then one `<epoch> <start offset>` line per entry in order. It
//! is replaced atomically (written aside, synced, renamed, directory synced).
//!
//! Invariants (asserted on every change):
//! - epochs and start offsets both strictly increase along the entries;
//! - every epoch and start offset is >= 0 (batches written before a leader stamped them
//!   carry epoch -1 and are not recorded);
//! - an empty log (log start == log end) has no epochs: the cache names epochs that wrote
//!   batches still in the log, and the log clears it when retention, DeleteRecords or a
//!   restart at an offset (`Log::truncate_fully_and_start_at`) empties the log, and at open.
//!
//! Crash safety: the log writes the checkpoint with a new entry before the batch that starts
//! the epoch, so the file names every epoch of the durable log, perhaps with entries past its
//! end that a crash cut off; opening the log trims those ([`LeaderEpochCache::truncate_from_end`]).

use super::LogError;
use crate::rt::disk::{join, Disk};
use crate::rt::fault::FaultPoint;

/// Name of the leader-epoch checkpoint file in a log directory (Kafka's name).
pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";
/// The checkpoint format version this code writes and reads.
pub const LEADER_EPOCH_FILE_VERSION: u32 = 0;
/// Entries a checkpoint may hold: one per leader epoch still in the log. Elections are rare
/// next to appends; a file claiming more is corrupt, not a reason to allocate.
pub const LEADER_EPOCH_ENTRIES_MAX: usize = 1 << 20;
/// Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET: what OffsetForLeaderEpoch answers for
/// an epoch the log cannot place.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One leader epoch and the offset of its first batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The answer to "where does epoch E end?" (OffsetForLeaderEpoch's EpochEndOffset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEnd {
    /// The largest epoch at or below the requested one that the log has, or
    /// [`UNDEFINED_EPOCH`].
    pub epoch: i32,
    /// The first offset after that epoch's batches, or [`UNDEFINED_EPOCH_OFFSET`].
    pub end_offset: i64,
}

impl EpochEnd {
    pub const UNDEFINED: EpochEnd = EpochEnd {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };
}

/// The in-memory cache; the log persists it with [`write`] after each change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// A cache of `entries`, which must satisfy the module's invariants.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<LeaderEpochCache, String> {
        for entry in &entries {
            if entry.epoch < 0 || entry.start_offset < 0 {
                return Err(format!(
                    "negative entry: epoch {} at offset {}",
                    entry.epoch, entry.start_offset
                ));
            }
        }
        for pair in entries.windows(2) {
            if pair[1].epoch <= pair[0].epoch || pair[1].start_offset <= pair[0].start_offset {
                return Err(format!(
                    "entries out of order: epoch {} at {} after epoch {} at {}",
                    pair[1].epoch, pair[1].start_offset, pair[0].epoch, pair[0].start_offset
                ));
            }
        }
        Ok(LeaderEpochCache { entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch that wrote to the log, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Whether a batch of `epoch` starting at `start_offset` begins a new epoch. Kafka's rule
    /// (`isUpdateNeeded`): anything but the latest epoch again at or after its start.
    pub fn is_update_needed(&self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        match self.entries.last() {
            None => true,
            Some(latest) => !(latest.epoch == epoch && start_offset >= latest.start_offset),
        }
    }

    /// Records that `epoch` starts at `start_offset`. An entry that the new one contradicts
    /// (an epoch at or above it, or a start at or above its start) is removed first, as
    /// Kafka's cache does; the log refuses such appends before they reach here, so it only
    /// happens when a caller truncated without telling the cache. Returns whether anything
    /// changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        assert!(start_offset >= 0, "an epoch starts at a negative offset");
        if !self.is_update_needed(epoch, start_offset) {
            return false;
        }
        let before = self.entries.len();
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        if self.entries.len() != before {
            tracing::warn!(
                epoch,
                start_offset,
                removed = before - self.entries.len(),
                "leader epoch cache: removed entries the new epoch contradicts"
            );
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.check();
        true
    }

    /// Where `epoch` ends for a log ending at `log_end_offset` (Kafka's `endOffsetFor`):
    /// - the latest epoch ends at the log end;
    /// - an earlier epoch the log has ends where the next one starts;
    /// - an epoch between two the log has is answered with the lower one and where the higher
    ///   one starts (the requester then truncates to that offset, KIP-279);
    /// - an epoch below the first is answered with itself and where the first starts;
    /// - an epoch above the latest, or [`UNDEFINED_EPOCH`], is undefined.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> EpochEnd {
        if epoch == UNDEFINED_EPOCH {
            return EpochEnd::UNDEFINED;
        }
        if self.latest_epoch() == Some(epoch) {
            return EpochEnd {
                epoch,
                end_offset: log_end_offset,
            };
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > epoch) else {
            return EpochEnd::UNDEFINED;
        };
        let floor = self.entries.iter().rev().find(|e| e.epoch <= epoch);
        EpochEnd {
            epoch: floor.map_or(epoch, |e| e.epoch),
            end_offset: higher.start_offset,
        }
    }

    /// The epoch of the batch holding `offset`: the latest entry starting at or below it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// The log was cut to end at `end_offset`: epochs starting at or above it go. Returns
    /// whether anything changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.check();
        self.entries.len() != before
    }

    /// The log now starts at `start_offset`: the epoch holding it starts there, and the epochs
    /// wholly below it go. Returns whether anything changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let below = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if below == 0 {
            return false;
        }
        let holding = self.entries[below - 1];
        if below == 1 && holding.start_offset == start_offset {
            return false;
        }
        self.entries.drain(..below - 1);
        self.entries[0] = EpochEntry {
            epoch: holding.epoch,
            start_offset,
        };
        self.check();
        true
    }

    /// The log was emptied and restarts at some offset: no epoch is known.
    pub fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }

    fn check(&self) {
        for entry in &self.entries {
            assert!(entry.epoch >= 0, "a negative epoch in the cache");
            assert!(entry.start_offset >= 0, "a negative start in the cache");
        }
        for pair in self.entries.windows(2) {
            assert!(pair[0].epoch < pair[1].epoch, "epochs out of order");
            assert!(
                pair[0].start_offset < pair[1].start_offset,
                "epoch start offsets out of order"
            );
        }
    }
}

/// The checkpoint's bytes.
pub fn encode(cache: &LeaderEpochCache) -> String {
    let mut out = format!("{LEADER_EPOCH_FILE_VERSION}\n{}\n", cache.entries.len());
    for entry in &cache.entries {
        out.push_str(&format!("{} {}\n", entry.epoch, entry.start_offset));
    }
    out
}

/// Parses a checkpoint; `Err` says what is wrong with it.
pub fn decode(bytes: &[u8]) -> Result<LeaderEpochCache, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let mut lines = text.lines();
    let version = lines.next().ok_or("empty")?.trim();
    if version != LEADER_EPOCH_FILE_VERSION.to_string() {
        return Err(format!("unknown version {version:?}"));
    }
    let count: usize = lines
        .next()
        .ok_or("missing the entry count")?
        .trim()
        .parse()
        .map_err(|e| format!("bad entry count: {e}"))?;
    if count > LEADER_EPOCH_ENTRIES_MAX {
        return Err(format!(
            "{count} entries exceed the limit {LEADER_EPOCH_ENTRIES_MAX}"
        ));
    }
    let mut entries = Vec::with_capacity(count);
    for n in 0..count {
        let line = lines
            .next()
            .ok_or_else(|| format!("{count} entries announced, {n} found"))?;
        let mut fields = line.split_whitespace();
        let (Some(epoch), Some(offset), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("entry {n} is not `<epoch> <offset>`: {line:?}"));
        };
        entries.push(EpochEntry {
            epoch: epoch
                .parse()
                .map_err(|e| format!("entry {n}: bad epoch {epoch:?}: {e}"))?,
            start_offset: offset
                .parse()
                .map_err(|e| format!("entry {n}: bad offset {offset:?}: {e}"))?,
        });
    }
    if let Some(extra) = lines.find(|l| !l.trim().is_empty()) {
        return Err(format!("a line after the {count} entries: {extra:?}"));
    }
    LeaderEpochCache::from_entries(entries)
}

/// Writes the checkpoint of the log in `dir` durably and atomically.
pub(super) async fn write(
    disk: &Disk,
    dir: &str,
    cache: &LeaderEpochCache,
) -> Result<(), LogError> {
    let path = join(dir, LEADER_EPOCH_FILE);
    disk.fault(FaultPoint::CheckpointWrite)
        .await
        .map_err(|e| LogError::io("write leader epoch checkpoint", &path, e))?;
    disk.write_file_atomic(&path, encode(cache).as_bytes())
        .await
        .map_err(|e| LogError::io("write leader epoch checkpoint", &path, e))
}

/// Reads the checkpoint of the log in `dir`: empty when there is none. A checkpoint that
/// cannot be parsed is an error naming the file and the problem: guessing the epochs of a
/// replica's log could let it answer OffsetForLeaderEpoch wrongly and keep a diverged suffix.
pub(super) async fn load(disk: &Disk, dir: &str) -> Result<LeaderEpochCache, LogError> {
    let path = join(dir, LEADER_EPOCH_FILE);
    let exists = disk
        .exists(&path)
        .await
        .map_err(|e| LogError::io("look for leader epoch checkpoint", &path, e))?;
    if !exists {
        return Ok(LeaderEpochCache::default());
    }
    let bytes = disk
        .read_file(&path)
        .await
        .map_err(|e| LogError::io("read leader epoch checkpoint", &path, e))?;
    decode(&bytes).map_err(|reason| LogError::Corrupt {
        segment: path,
        position: 0,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(
            entries
                .iter()
                .map(|&(epoch, start_offset)| EpochEntry {
                    epoch,
                    start_offset,
                })
                .collect(),
        )
        .expect("a valid cache")
    }

    fn end(epoch: i32, end_offset: i64) -> EpochEnd {
        EpochEnd { epoch, end_offset }
    }

    #[test]
    fn end_offsets_follow_kafkas_rules() {
        // Epochs 1 at 0, 3 at 10, 4 at 20; the log ends at 30.
        let c = cache(&[(1, 0), (3, 10), (4, 20)]);
        assert_eq!(
            c.end_offset_for(4, 30),
            end(4, 30),
            "the latest ends at the log end"
        );
        assert_eq!(
            c.end_offset_for(3, 30),
            end(3, 20),
            "an earlier one where the next starts"
        );
        assert_eq!(c.end_offset_for(1, 30), end(1, 10));
        assert_eq!(
            c.end_offset_for(2, 30),
            end(1, 10),
            "a missing epoch: the one below"
        );
        assert_eq!(
            c.end_offset_for(0, 30),
            end(0, 0),
            "below the first: where it starts"
        );
        assert_eq!(
            c.end_offset_for(5, 30),
            EpochEnd::UNDEFINED,
            "above the latest"
        );
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, 30), EpochEnd::UNDEFINED);
        assert_eq!(
            LeaderEpochCache::default().end_offset_for(0, 30),
            EpochEnd::UNDEFINED
        );
        assert_eq!(c.epoch_for_offset(0), Some(1));
        assert_eq!(c.epoch_for_offset(19), Some(3));
        assert_eq!(c.epoch_for_offset(25), Some(4));
    }

    #[test]
    fn assign_records_only_new_epochs_and_removes_what_it_contradicts() {
        let mut c = LeaderEpochCache::default();
        assert!(c.assign(0, 0));
        assert!(!c.assign(0, 5), "the same epoch again");
        assert!(
            !c.is_update_needed(-1, 7),
            "unstamped batches are not recorded"
        );
        assert!(c.assign(2, 10));
        assert_eq!(c, cache(&[(0, 0), (2, 10)]));
        // Epoch 1 at 8 contradicts epoch 2 at 10 (a later epoch at a later offset): it goes.
        assert!(c.assign(1, 8));
        assert_eq!(c, cache(&[(0, 0), (1, 8)]));
        // Epoch 3 at 4 contradicts epoch 1 at 8 (an earlier start for a later epoch).
        assert!(c.assign(3, 4));
        assert_eq!(c, cache(&[(0, 0), (3, 4)]));
    }

    #[test]
    fn truncation_from_either_end() {
        let mut c = cache(&[(1, 0), (3, 10), (4, 20)]);
        assert!(
            !c.truncate_from_end(21),
            "the cut keeps every epoch's start"
        );
        assert!(c.truncate_from_end(20));
        assert_eq!(c, cache(&[(1, 0), (3, 10)]));
        assert!(c.truncate_from_start(12));
        assert_eq!(
            c,
            cache(&[(3, 12)]),
            "the epoch holding the new start starts there"
        );
        assert!(!c.truncate_from_start(12));
        assert!(
            !c.truncate_from_start(5),
            "a start below the first epoch changes nothing"
        );
        let mut c = cache(&[(1, 0), (3, 10)]);
        assert!(c.truncate_from_start(10));
        assert_eq!(c, cache(&[(3, 10)]));
        assert!(c.clear());
        assert_eq!(c.latest_epoch(), None);
    }

    #[test]
    fn the_checkpoint_round_trips_and_bad_files_say_why() {
        let c = cache(&[(0, 0), (2, 150), (7, 9_000)]);
        let text = encode(&c);
        assert_eq!(text, "0\n3\n0 0\n2 150\n7 9000\n");
        assert_eq!(decode(text.as_bytes()), Ok(c));
        assert_eq!(decode(b"0\n0\n"), Ok(LeaderEpochCache::default()));
        let bad: [(&[u8], &str); 8] = [
            (b"", "empty"),
            (b"1\n0\n", "unknown version"),
            (b"0\n", "missing the entry count"),
            (b"0\n2\n0 0\n", "2 entries announced, 1 found"),
            (b"0\n1\n0\n", "is not `<epoch> <offset>`"),
            (b"0\n1\n0 x\n", "bad offset"),
            (b"0\n2\n3 0\n2 5\n", "out of order"),
            (b"0\n1\n0 0\n1 5\n", "a line after the 1 entries"),
        ];
        for (bytes, why) in bad {
            let err = decode(bytes).expect_err("a bad checkpoint");
            assert!(err.contains(why), "{err:?} should say {why:?}");
        }
        assert!(decode(b"0\n99999999999\n")
            .expect_err("too many")
            .contains("exceed the limit"));
    }
}
