//! Per-partition producer state for the idempotent producer (IO-free): for each producer id,
//! its epoch and the metadata of its last [`BATCHES_RETAINED`] batches in this partition.
//!
//! This is the state Kafka's `ProducerStateManager` keeps, with the checks its
//! `ProducerAppendInfo` makes on a client's append:
//! - an epoch below the producer's current one is refused (INVALID_PRODUCER_EPOCH);
//! - a batch that repeats one of the cached batches exactly (same epoch, same first and last
//!   sequence) is a duplicate: it is not appended, and the original's offsets are answered;
//! - a new (higher) epoch must start at sequence 0, unless the producer is unknown here;
//! - within an epoch, a batch must start right after the last sequence (wrapping from
//!   `i32::MAX` to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - a producer this partition does not know (never seen, expired, or its batches lost) is
//!   accepted at any sequence, as Kafka 4 does for idempotent producers (KIP-360: the broker no
//!   longer answers UNKNOWN_PRODUCER_ID; the producer's own epoch bump resolves gaps).
//!
//! Transactional batches are refused: transactions come in a later step.
//!
//! The map also knows the log offset it reflects (`end_offset`: every batch below it has been
//! applied, none at or above it), which is what a snapshot file is named after.
//!
//! Snapshot format (one file per snapshot, written by `producer_snapshot.rs`), all integers
//! big-endian:
//! ```text
//! magic      4 bytes  "SPSS"
//! version    u16      1
//! crc        u32      CRC-32C of every byte after this field
//! end_offset i64
//! count      u32      number of producers
//! count x producer:
//!   producer_id i64, epoch i16, last_timestamp i64, batch_count u8 (<= 5),
//!   batch_count x batch: first_seq i32, last_seq i32, first_offset i64, last_offset i64,
//!                        max_timestamp i64   (oldest batch first)
//! ```
//! Invariants: within an entry, the cached batches are in append order, at most
//! [`BATCHES_RETAINED`] of them, all of the entry's epoch; offsets never reach `end_offset`.

use std::collections::{BTreeMap, VecDeque};

use crate::protocol::record_batch::BatchHeader;

/// How many of a producer's latest batches are kept for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`; the producer keeps at most 5 requests in flight per partition).
pub const BATCHES_RETAINED: usize = 5;

/// Kafka's default `producer.id.expiration.ms` (one day, KIP-854).
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;

const SNAPSHOT_MAGIC: &[u8; 4] = b"SPSS";
const SNAPSHOT_VERSION: u16 = 1;
/// magic + version + crc.
const SNAPSHOT_PREFIX_LEN: usize = 4 + 2 + 4;
const ENTRY_FIXED_LEN: usize = 8 + 2 + 8 + 1;
const BATCH_LEN: usize = 4 + 4 + 8 + 8 + 8;

/// The producer fields of one batch, with the offsets it was (or will be) assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub is_transactional: bool,
}

impl ProducerBatch {
    /// The producer fields of a batch whose `base_offset` is set; `None` for a batch without a
    /// producer id (a plain, non-idempotent producer) and for control batches.
    pub fn from_header(header: &BatchHeader) -> Option<ProducerBatch> {
        if header.producer_id < 0 || header.is_control() {
            return None;
        }
        Some(ProducerBatch {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            first_seq: header.base_sequence,
            last_seq: increment_sequence(header.base_sequence, header.last_offset_delta),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
            is_transactional: header.is_transactional(),
        })
    }
}

/// `seq + increment`, wrapping past `i32::MAX` to 0 as Kafka's sequences do. A batch without
/// a sequence (-1) keeps none.
pub fn increment_sequence(seq: i32, increment: i32) -> i32 {
    if seq < 0 {
        return seq;
    }
    if seq > i32::MAX - increment {
        increment - (i32::MAX - seq) - 1
    } else {
        seq + increment
    }
}

/// Whether `next` directly follows `last` (with the wrap from `i32::MAX` to 0).
fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// What is kept of one appended batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// One producer's state in this partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first, at most [`BATCHES_RETAINED`].
    pub batches: VecDeque<BatchMetadata>,
    /// The max timestamp of the producer's latest batch; expiration counts from it, as
    /// Kafka's does.
    pub last_timestamp: i64,
}

impl ProducerEntry {
    fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    /// Records a batch; a new epoch forgets the batches of the old one.
    fn add(&mut self, batch: &ProducerBatch) {
        if batch.epoch != self.epoch {
            self.epoch = batch.epoch;
            self.batches.clear();
        }
        if self.batches.len() == BATCHES_RETAINED {
            self.batches.pop_front();
        }
        self.batches.push_back(BatchMetadata {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq,
            first_offset: batch.first_offset,
            last_offset: batch.last_offset,
            max_timestamp: batch.max_timestamp,
        });
        self.last_timestamp = batch.max_timestamp;
    }

    fn find_duplicate(&self, batch: &ProducerBatch) -> Option<BatchMetadata> {
        if batch.epoch != self.epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| b.first_seq == batch.first_seq && b.last_seq == batch.last_seq)
            .copied()
    }
}

/// Why a producer's append was refused. Handlers map these to Kafka's error codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProducerStateError {
    /// The batch's epoch is older than the producer's current one (a fenced "zombie").
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// A new epoch that does not start at sequence 0.
    NewEpochNotAtZero {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
        first_seq: i32,
    },
    /// A batch that does not continue the producer's sequence (a gap, or an old batch that
    /// is no longer among the cached ones).
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    },
    /// Transactions are not supported yet.
    Transactional { producer_id: i64 },
}

impl std::fmt::Display for ProducerStateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProducerStateError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current_epoch,
            } => write!(
                f,
                "producer {producer_id}: epoch {epoch} is older than the current epoch {current_epoch}"
            ),
            ProducerStateError::NewEpochNotAtZero {
                producer_id,
                epoch,
                current_epoch,
                first_seq,
            } => write!(
                f,
                "producer {producer_id}: new epoch {epoch} (after {current_epoch}) must start at \
                 sequence 0, not {first_seq}"
            ),
            ProducerStateError::OutOfOrderSequence {
                producer_id,
                epoch,
                first_seq,
                last_seq,
            } => write!(
                f,
                "producer {producer_id} epoch {epoch}: out of order sequence {first_seq}, \
                 expected the one after {last_seq}"
            ),
            ProducerStateError::Transactional { producer_id } => write!(
                f,
                "producer {producer_id}: transactional batches are not supported yet"
            ),
        }
    }
}

impl std::error::Error for ProducerStateError {}

/// The result of checking an append against the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// A retry of a batch already in the log: answer with its metadata, append nothing.
    Duplicate(BatchMetadata),
    /// The batches may be appended; apply the update once they are written.
    Append(PendingUpdate),
}

/// The entries an append changes, to be applied with [`ProducerStateMap::apply`] once the
/// batches are written (and dropped if the write fails).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingUpdate {
    entries: BTreeMap<i64, ProducerEntry>,
    end_offset: i64,
}

/// A snapshot that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotError(pub String);

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The producer state of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateMap {
    producers: BTreeMap<i64, ProducerEntry>,
    end_offset: i64,
}

impl ProducerStateMap {
    /// An empty map reflecting the log up to `end_offset` (nothing known).
    pub fn new(end_offset: i64) -> ProducerStateMap {
        ProducerStateMap {
            producers: BTreeMap::new(),
            end_offset,
        }
    }

    /// The log offset the map reflects: every batch below it has been applied.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer the state knows, by producer id.
    pub fn iter(&self) -> impl Iterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks a client's batches (in append order, offsets as they will be assigned). A batch
    /// that repeats a cached one makes the whole append a duplicate, as in Kafka (clients send
    /// one batch per partition and request).
    pub fn prepare(&self, batches: &[ProducerBatch]) -> Result<Prepared, ProducerStateError> {
        for batch in batches {
            if batch.is_transactional {
                return Err(ProducerStateError::Transactional {
                    producer_id: batch.producer_id,
                });
            }
            if let Some(duplicate) = self
                .producers
                .get(&batch.producer_id)
                .and_then(|entry| entry.find_duplicate(batch))
            {
                return Ok(Prepared::Duplicate(duplicate));
            }
        }
        let mut entries: BTreeMap<i64, ProducerEntry> = BTreeMap::new();
        let mut end_offset = self.end_offset;
        for batch in batches {
            let current = entries
                .get(&batch.producer_id)
                .or_else(|| self.producers.get(&batch.producer_id));
            check(current, batch)?;
            let mut updated = current.cloned().unwrap_or_else(|| ProducerEntry {
                epoch: batch.epoch,
                batches: VecDeque::new(),
                last_timestamp: batch.max_timestamp,
            });
            updated.add(batch);
            entries.insert(batch.producer_id, updated);
            end_offset = end_offset.max(batch.last_offset + 1);
        }
        Ok(Prepared::Append(PendingUpdate {
            entries,
            end_offset,
        }))
    }

    /// Applies a checked append after its batches were written at `end_offset` and below.
    pub fn apply(&mut self, update: PendingUpdate, end_offset: i64) {
        assert!(
            update.end_offset <= end_offset,
            "producer state update beyond the written log end"
        );
        self.producers.extend(update.entries);
        self.end_offset = end_offset;
    }

    /// Records a batch read back from the log (recovery), without the client checks: the
    /// log is the truth, as in Kafka's load from the log.
    pub fn replay(&mut self, batch: &ProducerBatch) {
        if !batch.is_transactional {
            let entry = self
                .producers
                .entry(batch.producer_id)
                .or_insert_with(|| ProducerEntry {
                    epoch: batch.epoch,
                    batches: VecDeque::new(),
                    last_timestamp: batch.max_timestamp,
                });
            entry.add(batch);
        }
        self.end_offset = self.end_offset.max(batch.last_offset + 1);
    }

    /// Moves the reflected offset forward over batches without producer state.
    pub fn advance_to(&mut self, end_offset: i64) {
        self.end_offset = self.end_offset.max(end_offset);
    }

    /// Forgets producers whose latest batch is `expiration_ms` or more older than `now_ms`
    /// (`producer.id.expiration.ms`); returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, entry| now_ms.saturating_sub(entry.last_timestamp) < expiration_ms);
        before - self.producers.len()
    }

    /// Encodes the map in the snapshot format (module docs).
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&self.end_offset.to_be_bytes());
        let count = u32::try_from(self.producers.len()).unwrap_or(u32::MAX);
        body.extend_from_slice(&count.to_be_bytes());
        for (producer_id, entry) in self.producers.iter().take(count as usize) {
            body.extend_from_slice(&producer_id.to_be_bytes());
            body.extend_from_slice(&entry.epoch.to_be_bytes());
            body.extend_from_slice(&entry.last_timestamp.to_be_bytes());
            // At most BATCHES_RETAINED (asserted by the entry's invariant), so it fits a u8.
            assert!(entry.batches.len() <= BATCHES_RETAINED);
            body.push(entry.batches.len() as u8);
            for batch in &entry.batches {
                body.extend_from_slice(&batch.first_seq.to_be_bytes());
                body.extend_from_slice(&batch.last_seq.to_be_bytes());
                body.extend_from_slice(&batch.first_offset.to_be_bytes());
                body.extend_from_slice(&batch.last_offset.to_be_bytes());
                body.extend_from_slice(&batch.max_timestamp.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(SNAPSHOT_PREFIX_LEN + body.len());
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a snapshot, checking its magic, version, CRC and every count against the bytes
    /// present before allocating.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<ProducerStateMap, SnapshotError> {
        let bad = |why: String| Err(SnapshotError(why));
        if bytes.len() < SNAPSHOT_PREFIX_LEN {
            return bad(format!("{} bytes is shorter than the header", bytes.len()));
        }
        if &bytes[..4] != SNAPSHOT_MAGIC {
            return bad("bad magic".to_string());
        }
        let mut r = Cursor {
            buf: &bytes[4..],
            at: 0,
        };
        let version = r.u16()?;
        if version != SNAPSHOT_VERSION {
            return bad(format!("unknown version {version}"));
        }
        let crc = r.u32()?;
        let body = &bytes[SNAPSHOT_PREFIX_LEN..];
        let actual = crc32c::crc32c(body);
        if crc != actual {
            return bad(format!(
                "CRC mismatch: stored {crc:#010x}, computed {actual:#010x}"
            ));
        }
        let mut r = Cursor { buf: body, at: 0 };
        let end_offset = r.i64()?;
        let count = r.u32()? as usize;
        if count.saturating_mul(ENTRY_FIXED_LEN) > r.remaining() {
            return bad(format!("{count} producers cannot fit in the file"));
        }
        let mut producers = BTreeMap::new();
        for _ in 0..count {
            let producer_id = r.i64()?;
            let epoch = r.i16()?;
            let last_timestamp = r.i64()?;
            let batch_count = usize::from(r.u8()?);
            if batch_count > BATCHES_RETAINED {
                return bad(format!(
                    "producer {producer_id} has {batch_count} batches, more than {BATCHES_RETAINED}"
                ));
            }
            if batch_count * BATCH_LEN > r.remaining() {
                return bad(format!(
                    "producer {producer_id}: {batch_count} batches cannot fit"
                ));
            }
            let mut batches = VecDeque::with_capacity(batch_count);
            for _ in 0..batch_count {
                let batch = BatchMetadata {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    max_timestamp: r.i64()?,
                };
                if batch.last_offset >= end_offset || batch.first_offset > batch.last_offset {
                    return bad(format!(
                        "producer {producer_id}: batch offsets {}..={} outside the snapshot's end {end_offset}",
                        batch.first_offset, batch.last_offset
                    ));
                }
                batches.push_back(batch);
            }
            producers.insert(
                producer_id,
                ProducerEntry {
                    epoch,
                    batches,
                    last_timestamp,
                },
            );
        }
        if r.remaining() != 0 {
            return bad(format!("{} bytes after the last producer", r.remaining()));
        }
        Ok(ProducerStateMap {
            producers,
            end_offset,
        })
    }
}

/// The client checks of Kafka's `ProducerAppendInfo` for one batch against the producer's
/// current entry (`None`: unknown here).
fn check(current: Option<&ProducerEntry>, batch: &ProducerBatch) -> Result<(), ProducerStateError> {
    let Some(current) = current else {
        // Unknown producer: accept any sequence (see the module docs).
        return Ok(());
    };
    if batch.epoch < current.epoch {
        return Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: batch.producer_id,
            epoch: batch.epoch,
            current_epoch: current.epoch,
        });
    }
    if batch.epoch != current.epoch {
        if batch.first_seq != 0 {
            return Err(ProducerStateError::NewEpochNotAtZero {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                current_epoch: current.epoch,
                first_seq: batch.first_seq,
            });
        }
        return Ok(());
    }
    match current.last_seq() {
        // An entry with no batches (all expired from the cache cannot happen, but a loaded
        // entry might carry none): nothing to continue from.
        None => Ok(()),
        Some(last) if in_sequence(last, batch.first_seq) => Ok(()),
        Some(last) => Err(ProducerStateError::OutOfOrderSequence {
            producer_id: batch.producer_id,
            epoch: batch.epoch,
            first_seq: batch.first_seq,
            last_seq: last,
        }),
    }
}

/// A bounds-checked big-endian reader over a snapshot.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let bytes = self
            .buf
            .get(self.at..self.at + N)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or_else(|| SnapshotError(format!("truncated at byte {}", self.at)))?;
        self.at += N;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, SnapshotError> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    fn i16(&mut self) -> Result<i16, SnapshotError> {
        Ok(i16::from_be_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn batch(pid: i64, epoch: i16, first_seq: i32, count: i32, offset: i64) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq,
            last_seq: increment_sequence(first_seq, count - 1),
            first_offset: offset,
            last_offset: offset + i64::from(count) - 1,
            max_timestamp: 1_000 + offset,
            is_transactional: false,
        }
    }

    /// Prepares and applies one batch; returns the outcome.
    fn append(
        map: &mut ProducerStateMap,
        b: ProducerBatch,
    ) -> Result<Prepared, ProducerStateError> {
        let prepared = map.prepare(&[b])?;
        if let Prepared::Append(update) = &prepared {
            map.apply(update.clone(), b.last_offset + 1);
        }
        Ok(prepared)
    }

    #[test]
    fn sequence_increments_wrap_at_i32_max() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(-1, 3), -1);
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(i32::MAX, i32::MIN));
    }

    #[test]
    fn each_of_the_last_five_batches_is_a_duplicate_and_the_sixth_is_out_of_order() {
        let mut map = ProducerStateMap::new(0);
        for i in 0..6 {
            let b = batch(7, 0, i * 2, 2, i64::from(i) * 2);
            assert!(matches!(append(&mut map, b), Ok(Prepared::Append(_))));
        }
        for i in 1..6 {
            let retry = batch(7, 0, i * 2, 2, 999);
            match map.prepare(&[retry]) {
                Ok(Prepared::Duplicate(meta)) => {
                    assert_eq!(meta.first_offset, i64::from(i) * 2);
                    assert_eq!(meta.last_offset, i64::from(i) * 2 + 1);
                }
                other => panic!("retry of batch {i}: {other:?}"),
            }
        }
        let oldest = batch(7, 0, 0, 2, 999);
        assert!(matches!(
            map.prepare(&[oldest]),
            Err(ProducerStateError::OutOfOrderSequence { .. })
        ));
        // A retry with the right first sequence but a different length is no duplicate.
        assert!(matches!(
            map.prepare(&[batch(7, 0, 10, 1, 999)]),
            Err(ProducerStateError::OutOfOrderSequence { .. })
        ));
    }

    #[test]
    fn gaps_epochs_and_unknown_producers() {
        let mut map = ProducerStateMap::new(0);
        // Unknown producer: any sequence is accepted.
        append(&mut map, batch(1, 3, 42, 1, 0)).unwrap();
        // Gap.
        assert!(matches!(
            map.prepare(&[batch(1, 3, 44, 1, 1)]),
            Err(ProducerStateError::OutOfOrderSequence { last_seq: 42, .. })
        ));
        // Old epoch.
        assert!(matches!(
            map.prepare(&[batch(1, 2, 43, 1, 1)]),
            Err(ProducerStateError::InvalidProducerEpoch {
                current_epoch: 3,
                ..
            })
        ));
        // New epoch must start at 0.
        assert!(matches!(
            map.prepare(&[batch(1, 4, 43, 1, 1)]),
            Err(ProducerStateError::NewEpochNotAtZero { .. })
        ));
        append(&mut map, batch(1, 4, 0, 1, 1)).unwrap();
        assert_eq!(
            map.get(1).unwrap().batches.len(),
            1,
            "old epoch's batches forgotten"
        );
        // A duplicate of the old epoch's batch is not a duplicate any more: it is fenced.
        assert!(matches!(
            map.prepare(&[batch(1, 3, 42, 1, 5)]),
            Err(ProducerStateError::InvalidProducerEpoch { .. })
        ));
        // Transactional batches are refused.
        let mut txn = batch(9, 0, 0, 1, 2);
        txn.is_transactional = true;
        assert!(matches!(
            map.prepare(&[txn]),
            Err(ProducerStateError::Transactional { producer_id: 9 })
        ));
    }

    #[test]
    fn sequence_wraps_from_max_to_zero() {
        let mut map = ProducerStateMap::new(0);
        append(&mut map, batch(1, 0, i32::MAX - 1, 2, 0)).unwrap();
        assert_eq!(map.get(1).unwrap().last_seq(), Some(i32::MAX));
        append(&mut map, batch(1, 0, 0, 3, 2)).unwrap();
        // A batch spanning the wrap.
        let mut map = ProducerStateMap::new(0);
        append(&mut map, batch(1, 0, i32::MAX - 1, 4, 0)).unwrap();
        assert_eq!(map.get(1).unwrap().last_seq(), Some(1));
        append(&mut map, batch(1, 0, 2, 1, 4)).unwrap();
    }

    #[test]
    fn several_batches_in_one_append_are_checked_in_order() {
        let map = ProducerStateMap::new(0);
        let ok = [batch(1, 0, 0, 2, 0), batch(1, 0, 2, 2, 2)];
        assert!(matches!(map.prepare(&ok), Ok(Prepared::Append(_))));
        let gap = [batch(1, 0, 0, 2, 0), batch(1, 0, 3, 2, 2)];
        assert!(map.prepare(&gap).is_err());
        assert!(map.is_empty(), "a refused append changes nothing");
    }

    #[test]
    fn expiration_counts_from_the_last_timestamp() {
        let mut map = ProducerStateMap::new(0);
        append(&mut map, batch(1, 0, 0, 1, 0)).unwrap(); // timestamp 1000
        append(&mut map, batch(2, 0, 0, 1, 1)).unwrap(); // timestamp 1001
        assert_eq!(map.remove_expired(1_500, 501), 0);
        assert_eq!(map.remove_expired(1_501, 501), 1);
        assert!(map.get(1).is_none() && map.get(2).is_some());
        // Once expired, the producer is unknown again: any sequence goes.
        append(&mut map, batch(1, 0, 77, 1, 2)).unwrap();
    }

    #[test]
    fn snapshots_round_trip_and_refuse_damage() {
        let mut map = ProducerStateMap::new(0);
        for i in 0..8 {
            append(&mut map, batch(1, 0, i, 1, 10 * i64::from(i))).unwrap();
            append(
                &mut map,
                batch(i64::from(i) + 10, 2, 0, 3, 10 * i64::from(i) + 1),
            )
            .unwrap();
        }
        let bytes = map.encode_snapshot();
        assert_eq!(ProducerStateMap::decode_snapshot(&bytes), Ok(map.clone()));
        for at in [0, 5, 9, 12, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(
                ProducerStateMap::decode_snapshot(&damaged).is_err(),
                "flip at {at}"
            );
        }
        for len in 0..bytes.len() {
            assert!(ProducerStateMap::decode_snapshot(&bytes[..len]).is_err());
        }
    }

    /// A reference model: per producer, every batch ever appended in the current epoch.
    #[derive(Default)]
    struct Model {
        producers: BTreeMap<i64, (i16, Vec<BatchMetadata>)>,
    }

    proptest! {
        /// Random retries, gaps and epoch bumps: the map agrees with a model that keeps every
        /// batch (duplicates only among the last five), and a snapshot round-trips at any point.
        #[test]
        fn state_machine_agrees_with_model(ops in proptest::collection::vec((0i64..3, 0u8..10, 1i32..4), 1..120)) {
            let mut map = ProducerStateMap::new(0);
            let mut model = Model::default();
            let mut next_offset = 0i64;
            for (pid, op, count) in ops {
                let (epoch, history) = model.producers.get(&pid).cloned().unwrap_or((0, Vec::new()));
                let next_seq = history.last().map_or(0, |b| increment_sequence(b.last_seq, 1));
                let b = match op {
                    // A retry of one of the last batches (or an older one).
                    0..=2 if !history.is_empty() => {
                        let back = usize::from(op) * 3 % history.len().max(1) + 1;
                        let old = history[history.len() - back.min(history.len())];
                        ProducerBatch { producer_id: pid, epoch, first_seq: old.first_seq, last_seq: old.last_seq,
                            first_offset: next_offset, last_offset: next_offset + i64::from(old.last_seq - old.first_seq),
                            max_timestamp: 0, is_transactional: false }
                    }
                    3 => batch(pid, epoch, next_seq + 1, count, next_offset), // gap
                    4 => batch(pid, epoch + 1, 0, count, next_offset),        // epoch bump
                    _ => batch(pid, epoch, next_seq, count, next_offset),
                };
                let known = model.producers.contains_key(&pid);
                let expected_dup = if known && b.epoch == epoch {
                    history.iter().rev().take(BATCHES_RETAINED)
                        .find(|h| h.first_seq == b.first_seq && h.last_seq == b.last_seq).copied()
                } else {
                    None
                };
                let expected_ok = !known || (b.epoch > epoch && b.first_seq == 0)
                    || (b.epoch == epoch && history.last().is_none_or(|l| in_sequence(l.last_seq, b.first_seq)));
                match map.prepare(&[b]) {
                    Err(e) => prop_assert!(!expected_ok && expected_dup.is_none(), "refused: {}", e),
                    Ok(Prepared::Duplicate(meta)) => prop_assert_eq!(Some(meta), expected_dup),
                    Ok(Prepared::Append(update)) => {
                        prop_assert!(expected_dup.is_none() && expected_ok);
                        map.apply(update, b.last_offset + 1);
                        next_offset = b.last_offset + 1;
                        let meta = BatchMetadata { first_seq: b.first_seq, last_seq: b.last_seq,
                            first_offset: b.first_offset, last_offset: b.last_offset, max_timestamp: b.max_timestamp };
                        let entry = model.producers.entry(pid).or_insert((b.epoch, Vec::new()));
                        if entry.0 != b.epoch { *entry = (b.epoch, Vec::new()); }
                        entry.1.push(meta);
                    }
                }
                let decoded = ProducerStateMap::decode_snapshot(&map.encode_snapshot());
                prop_assert_eq!(decoded.as_ref(), Ok(&map));
            }
        }
    }
}
