//! Kafka's record batch format, magic v2: the unit in which Samsa receives records from
//! producers, stores them in the log and hands them back to consumers.
//!
//! This module owns the byte layout of a batch and of the records inside it, the zigzag varint
//! codec that layout uses, the checks a broker makes before it trusts a batch, and a builder for
//! batches. It never copies record data of an uncompressed batch: batches, keys and values come
//! back as `Bytes` slices of the caller's buffer. A compressed batch's records are decompressed
//! (by [`super::compression`], bounded by a limit so that a compression bomb is refused) into one
//! buffer, and keys and values are `Bytes` slices of that buffer. [`recompressed`] copies a
//! batch under another codec, for a topic whose `compression.type` names one.
//!
//! Invariants:
//! - A header returned by [`BatchHeader::parse`] has magic 2, a total size between
//!   [`BATCH_HEADER_LEN`] and [`BATCH_LEN_MAX`], a non-negative `last_offset_delta` and records
//!   count, and a `base_offset` whose last offset does not overflow, so `total_len`,
//!   `last_offset` and `next_offset` are exact for it.
//! - A batch that passes [`verify`] is complete and its stored CRC-32C matches its bytes.
//! - A batch that passes [`validate`] has, in addition, a records count equal to
//!   `last_offset_delta + 1` and a known compression codec; its records (after decompression,
//!   which yields at most [`DECOMPRESSED_BATCH_BYTES_MAX`] bytes or the limit given to
//!   [`validate_with_limit`]) hold exactly that many records with dense offset deltas `0..=last_offset_delta` in order, record
//!   lengths that match their fields, no trailing bytes, record timestamps that do not overflow,
//!   a `maxTimestamp` equal to the largest record timestamp under CreateTime, and UTF-8 header
//!   keys.
//! - Decoding never panics on input bytes and never allocates more than the bytes present
//!   justify: every length and count read from the wire is checked against the bytes that remain
//!   before it is acted on.
//! - Batches made by [`BatchBuilder`] pass [`validate`].

use std::fmt;
use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use super::compression::{self, CompressionError};

/// The bytes in front of every batch that are not counted by its `batchLength`: the
/// `baseOffset` (8) and the `batchLength` itself (4).
pub const LOG_OVERHEAD: usize = 12;

/// The size of a v2 batch header, from `baseOffset` up to and including the records count.
pub const BATCH_HEADER_LEN: usize = 61;

/// The only batch format this module understands.
pub const MAGIC_V2: i8 = 2;

/// A hard ceiling on one batch's total size. Brokers configure a lower limit
/// (`message.max.bytes`); this one exists so that no input can make us trust a length that
/// would be absurd for any configuration.
pub const BATCH_LEN_MAX: usize = 64 * 1024 * 1024;

/// The default limit on the decompressed size of one compressed batch's records, used by
/// [`validate`] and [`records`]: a batch whose records decompress to more is refused with
/// [`BatchError::Decompression`]. It equals [`BATCH_LEN_MAX`], so every batch that
/// [`BatchBuilder`] can make, compressed or not, is readable under it. Callers with a tighter
/// budget use [`validate_with_limit`] and [`records_with_limit`].
pub const DECOMPRESSED_BATCH_BYTES_MAX: usize = BATCH_LEN_MAX;

/// The smallest legal `batchLength`: a header with no records after it.
pub const BATCH_LENGTH_MIN: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;

/// The smallest encoded record: a one-byte length, attributes, timestamp delta, offset delta,
/// key length, value length and header count, each one byte. Dividing the bytes of a batch by
/// this bounds how many records it can possibly hold.
pub const RECORD_LEN_MIN: usize = 7;

/// The longest legal encoding of a 32-bit varint.
pub const VARINT_LEN_MAX: usize = 5;

/// The longest legal encoding of a 64-bit varlong.
pub const VARLONG_LEN_MAX: usize = 10;

/// The length of `baseOffset`, the batch's first field (bytes 0..8). It lies outside the CRC,
/// so the log may write a batch as a new base offset followed by the rest of its bytes.
pub const BASE_OFFSET_LEN: usize = 8;

// Where each header field starts within a batch.
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;

/// The CRC covers everything from the attributes onwards, which leaves the base offset and the
/// partition leader epoch outside it so that a broker can assign both without recomputing it.
const CRC_COVERED_FROM: usize = ATTRIBUTES_AT;

// Bits of the batch attributes.
const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
const DELETE_HORIZON_BIT: i16 = 0x40;

/// The compression codec named by the low three bits of a batch's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Every codec, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Maps a codec id (0-4) to its codec; the ids 5-7 that fit in the attribute bits are not
    /// assigned by Kafka, so they yield `None`.
    pub fn from_id(id: i16) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The codec id as stored in the attributes.
    pub fn id(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        })
    }
}

/// Whose clock the record timestamps of a batch come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamps, carried per record.
    CreateTime,
    /// The broker's append time, carried once as the batch's `max_timestamp`; the per-record
    /// timestamps are ignored.
    LogAppendTime,
}

/// Everything that can be wrong with a batch, each naming the field and the values involved so
/// that a log line or an error response explains itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// The buffer ends before the batch (or the field being read) does.
    Truncated { needed: usize, available: usize },
    /// The magic byte is not 2.
    InvalidMagic(i8),
    /// `batchLength` is smaller than the header that must follow it.
    InvalidBatchLength(i32),
    /// The batch's total size is above [`BATCH_LEN_MAX`].
    BatchTooLarge { len: usize, max: usize },
    /// `lastOffsetDelta` is negative.
    InvalidLastOffsetDelta(i32),
    /// The records count is negative.
    InvalidRecordsCount(i32),
    /// `baseOffset + lastOffsetDelta + 1` does not fit in an i64.
    OffsetOverflow {
        base_offset: i64,
        last_offset_delta: i32,
    },
    /// The stored CRC does not match the bytes.
    CrcMismatch { stored: u32, computed: u32 },
    /// The compression bits hold an unassigned codec id (5, 6 or 7).
    InvalidCompression(i16),
    /// The batch is compressed and this operation needs its records. [`validate`] and
    /// [`records`] decompress every codec and no longer return it.
    UnsupportedCompression(Compression),
    /// The records of a compressed batch cannot be decompressed, or decompress to more than the
    /// limit.
    Decompression(CompressionError),
    /// Compressing the records with another codec ([`recompressed`]) failed.
    Recompression(CompressionError),
    /// The records count disagrees with `lastOffsetDelta`, which must be one less.
    OffsetRangeMismatch {
        records_count: i32,
        last_offset_delta: i32,
    },
    /// The records count is larger than the batch's bytes could possibly hold.
    ImpossibleRecordCount { count: i32, bytes: usize },
    /// A record is malformed.
    InvalidRecord { index: usize, reason: &'static str },
    /// The records count disagrees with the records present.
    RecordCountMismatch { header: i32, actual: usize },
    /// A record's offset delta is not its position in the batch.
    InvalidOffsetDelta {
        index: usize,
        expected: i32,
        found: i32,
    },
    /// A timestamp cannot be computed.
    InvalidTimestamp { reason: &'static str },
    /// Under CreateTime, `maxTimestamp` is not the largest record timestamp.
    MaxTimestampMismatch { header: i64, actual: i64 },
    /// Bytes follow the last record the header announced.
    TrailingBytes { len: usize },
    /// A varint is longer than its maximum length or overflows its type.
    InvalidVarint,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Truncated { needed, available } => write!(
                f,
                "record batch truncated: {needed} bytes needed but only {available} available"
            ),
            BatchError::InvalidMagic(magic) => write!(
                f,
                "invalid magic {magic}: only magic {MAGIC_V2} record batches are supported"
            ),
            BatchError::InvalidBatchLength(len) => write!(
                f,
                "invalid batchLength {len}: must be at least {BATCH_LENGTH_MIN}"
            ),
            BatchError::BatchTooLarge { len, max } => write!(
                f,
                "record batch of {len} bytes exceeds the maximum of {max} bytes"
            ),
            BatchError::InvalidLastOffsetDelta(delta) => {
                write!(f, "invalid lastOffsetDelta {delta}: must not be negative")
            }
            BatchError::InvalidRecordsCount(count) => {
                write!(f, "invalid records count {count}: must not be negative")
            }
            BatchError::OffsetOverflow {
                base_offset,
                last_offset_delta,
            } => write!(
                f,
                "baseOffset {base_offset} with lastOffsetDelta {last_offset_delta} overflows a 64-bit offset"
            ),
            BatchError::CrcMismatch { stored, computed } => write!(
                f,
                "CRC mismatch: stored crc {stored:#010x}, computed {computed:#010x}"
            ),
            BatchError::InvalidCompression(id) => write!(
                f,
                "invalid compression codec {id} in batch attributes: valid codecs are 0 to 4"
            ),
            BatchError::UnsupportedCompression(codec) => write!(
                f,
                "records of {codec}-compressed batches cannot be read yet"
            ),
            BatchError::Decompression(err) => write!(f, "record batch records: {err}"),
            BatchError::Recompression(err) => {
                write!(f, "recompressing the record batch's records: {err}")
            }
            BatchError::OffsetRangeMismatch {
                records_count,
                last_offset_delta,
            } => write!(
                f,
                "records count {records_count} does not match lastOffsetDelta {last_offset_delta}: the count must be lastOffsetDelta + 1"
            ),
            BatchError::ImpossibleRecordCount { count, bytes } => write!(
                f,
                "records count {count} cannot fit in {bytes} bytes of records: each record takes at least {RECORD_LEN_MIN} bytes"
            ),
            BatchError::InvalidRecord { index, reason } => {
                write!(f, "invalid record at index {index}: {reason}")
            }
            BatchError::RecordCountMismatch { header, actual } => write!(
                f,
                "records count {header} in the header but the batch holds {actual} records"
            ),
            BatchError::InvalidOffsetDelta {
                index,
                expected,
                found,
            } => write!(
                f,
                "record at index {index} has offsetDelta {found}, expected {expected}"
            ),
            BatchError::InvalidTimestamp { reason } => write!(f, "invalid timestamp: {reason}"),
            BatchError::MaxTimestampMismatch { header, actual } => write!(
                f,
                "maxTimestamp {header} in the header does not match the largest record timestamp {actual}"
            ),
            BatchError::TrailingBytes { len } => write!(
                f,
                "{len} trailing bytes follow the last record of the batch"
            ),
            BatchError::InvalidVarint => f.write_str(
                "invalid varint: longer than its maximum length or overflowing its type",
            ),
        }
    }
}

impl std::error::Error for BatchError {}

/// The fixed 61-byte header of a v2 batch, field for field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the 61-byte header at the start of `buf`; checks magic == 2, batch_length >= 49
    /// and total size <= [`BATCH_LEN_MAX`], last_offset_delta >= 0, records_count >= 0, and that
    /// the batch's last offset fits in an i64. Does NOT check the CRC nor that `buf` holds the
    /// whole batch; [`verify`] does both.
    ///
    /// A buffer shorter than the header is `Truncated`, whatever its first bytes say, so that a
    /// caller reading a stream can always tell "wait for more bytes" from "this is garbage".
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        }
        // The magic is checked first because it decides how every other byte is read: an old
        // v0/v1 message set should be reported as such, not as a nonsensical length.
        let magic = i8::from_be_bytes(bytes_at(buf, MAGIC_AT)?);
        if magic != MAGIC_V2 {
            return Err(BatchError::InvalidMagic(magic));
        }
        let header = BatchHeader {
            base_offset: i64::from_be_bytes(bytes_at(buf, BASE_OFFSET_AT)?),
            batch_length: i32::from_be_bytes(bytes_at(buf, BATCH_LENGTH_AT)?),
            partition_leader_epoch: i32::from_be_bytes(bytes_at(buf, PARTITION_LEADER_EPOCH_AT)?),
            magic,
            crc: u32::from_be_bytes(bytes_at(buf, CRC_AT)?),
            attributes: i16::from_be_bytes(bytes_at(buf, ATTRIBUTES_AT)?),
            last_offset_delta: i32::from_be_bytes(bytes_at(buf, LAST_OFFSET_DELTA_AT)?),
            base_timestamp: i64::from_be_bytes(bytes_at(buf, BASE_TIMESTAMP_AT)?),
            max_timestamp: i64::from_be_bytes(bytes_at(buf, MAX_TIMESTAMP_AT)?),
            producer_id: i64::from_be_bytes(bytes_at(buf, PRODUCER_ID_AT)?),
            producer_epoch: i16::from_be_bytes(bytes_at(buf, PRODUCER_EPOCH_AT)?),
            base_sequence: i32::from_be_bytes(bytes_at(buf, BASE_SEQUENCE_AT)?),
            records_count: i32::from_be_bytes(bytes_at(buf, RECORDS_COUNT_AT)?),
        };
        if header.batch_length < BATCH_LENGTH_MIN {
            return Err(BatchError::InvalidBatchLength(header.batch_length));
        }
        let total = header.total_len();
        if total > BATCH_LEN_MAX {
            return Err(BatchError::BatchTooLarge {
                len: total,
                max: BATCH_LEN_MAX,
            });
        }
        if header.last_offset_delta < 0 {
            return Err(BatchError::InvalidLastOffsetDelta(header.last_offset_delta));
        }
        if header.records_count < 0 {
            return Err(BatchError::InvalidRecordsCount(header.records_count));
        }
        // Rejecting a batch whose next offset overflows here means every later offset
        // computation on a parsed header is exact.
        let next = header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta))
            .and_then(|last| last.checked_add(1));
        if next.is_none() {
            return Err(BatchError::OffsetOverflow {
                base_offset: header.base_offset,
                last_offset_delta: header.last_offset_delta,
            });
        }
        Ok(header)
    }

    /// The batch's size in bytes including the log overhead: `batch_length + 12`. A negative
    /// `batch_length` (possible only in a hand-made header) counts as zero.
    pub fn total_len(&self) -> usize {
        usize::try_from(self.batch_length)
            .unwrap_or(0)
            .saturating_add(LOG_OVERHEAD)
    }

    /// The offset of the batch's last record, `base_offset + last_offset_delta`. Exact for a
    /// parsed header; saturates for a hand-made one that would overflow.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset the next batch in the log starts at, `last_offset + 1`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// The codec named by the attributes; the unassigned ids 5, 6 and 7 are an error.
    pub fn compression(&self) -> Result<Compression, BatchError> {
        let id = self.attributes & COMPRESSION_MASK;
        Compression::from_id(id).ok_or(BatchError::InvalidCompression(id))
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Whether `base_timestamp` holds the delete horizon of a compacted batch (KIP-534).
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_BIT != 0
    }
}

/// Reads `N` bytes at `at`, or reports how many bytes would have been needed.
fn bytes_at<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], BatchError> {
    let end = at.saturating_add(N);
    buf.get(at..end)
        .and_then(|slice| <[u8; N]>::try_from(slice).ok())
        .ok_or(BatchError::Truncated {
            needed: end,
            available: buf.len(),
        })
}

/// CRC-32C over `batch[21..]`, i.e. from the attributes to the end of the slice, so pass
/// exactly one batch. A slice shorter than 21 bytes covers nothing and yields 0, the CRC-32C of
/// no bytes; such a slice cannot be a batch, and [`verify`] reports it as `Truncated` before
/// it ever gets here.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(CRC_COVERED_FROM..).unwrap_or(&[]))
}

/// Parses the header, checks the batch is complete (`buf.len() >= total_len`), and checks the
/// stored CRC against the one computed over exactly `total_len` bytes. Bytes after the batch
/// are ignored, so `buf` may be the start of a longer region.
pub fn verify(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let batch = whole_batch(buf, &header)?;
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// The first `total_len` bytes of `buf`, or `Truncated` if it is shorter.
fn whole_batch<'a>(buf: &'a [u8], header: &BatchHeader) -> Result<&'a [u8], BatchError> {
    let total = header.total_len();
    buf.get(..total).ok_or(BatchError::Truncated {
        needed: total,
        available: buf.len(),
    })
}

/// [`verify`] plus the checks a broker makes before appending a produced batch: the records
/// count is `last_offset_delta + 1` and the compression codec is a known one. It then parses
/// every record, after decompressing them if the batch is compressed: the count matches
/// `records_count`, the offset deltas are exactly `0..=last_offset_delta` in order, every
/// record's length matches its fields, nothing trails the last record, every
/// `base_timestamp + timestampDelta` fits in an i64, under CreateTime `max_timestamp` equals the
/// largest record timestamp, and header keys are UTF-8.
///
/// Compressed records may decompress to at most [`DECOMPRESSED_BATCH_BYTES_MAX`] bytes; see
/// [`validate_with_limit`]. The decompressed bytes are dropped: the batch is stored as it came.
/// Empty batches, which Kafka's log cleaner may leave behind but producers never send, fail the
/// count check; use [`verify`] for batches read back from a compacted log.
pub fn validate(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    validate_with_limit(buf, DECOMPRESSED_BATCH_BYTES_MAX)
}

/// [`validate`] with a limit of `max_decompressed` bytes on what a compressed batch's records
/// may decompress to; a batch over it is [`BatchError::Decompression`] with
/// [`CompressionError::OutputTooLarge`], refused without decoding or allocating past the limit.
/// The limit does not apply to uncompressed batches, which are already in memory.
pub fn validate_with_limit(buf: &[u8], max_decompressed: usize) -> Result<BatchHeader, BatchError> {
    let header = verify(buf)?;
    if i64::from(header.records_count) != i64::from(header.last_offset_delta) + 1 {
        return Err(BatchError::OffsetRangeMismatch {
            records_count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let codec = header.compression()?;
    let stored = whole_batch(buf, &header)?
        .get(BATCH_HEADER_LEN..)
        .unwrap_or(&[]);
    let decompressed;
    let region = if codec == Compression::None {
        stored
    } else {
        decompressed = compression::decompress(codec, stored, max_decompressed)
            .map_err(BatchError::Decompression)?;
        &decompressed[..]
    };
    check_count_fits(&header, region.len())?;

    let mut cursor = Cursor::new(header.records_count, false);
    let mut expected_delta: i32 = 0;
    let mut max_seen: Option<i64> = None;
    while let Some(next) = cursor.next_raw(region) {
        let (index, raw) = next?;
        if raw.offset_delta != expected_delta {
            return Err(BatchError::InvalidOffsetDelta {
                index,
                expected: expected_delta,
                found: raw.offset_delta,
            });
        }
        expected_delta = expected_delta.saturating_add(1);
        let timestamp = record_timestamp(header.base_timestamp, raw.timestamp_delta)?;
        max_seen = Some(max_seen.map_or(timestamp, |max| max.max(timestamp)));
    }
    // Under LogAppendTime the broker's clock in max_timestamp overrides every record's
    // timestamp, so the record timestamps have nothing to agree with.
    if header.timestamp_type() == TimestampType::CreateTime {
        if let Some(actual) = max_seen {
            if actual != header.max_timestamp {
                return Err(BatchError::MaxTimestampMismatch {
                    header: header.max_timestamp,
                    actual,
                });
            }
        }
    }
    Ok(header)
}

fn record_timestamp(base_timestamp: i64, delta: i64) -> Result<i64, BatchError> {
    base_timestamp
        .checked_add(delta)
        .ok_or(BatchError::InvalidTimestamp {
            reason: "baseTimestamp plus a record's timestampDelta overflows a 64-bit timestamp",
        })
}

/// Fails fast when the header claims more records than the bytes could hold, so that a small
/// batch claiming two billion records is rejected before any record is read.
fn check_count_fits(header: &BatchHeader, records_len: usize) -> Result<(), BatchError> {
    let count = usize::try_from(header.records_count).unwrap_or(usize::MAX);
    if count > records_len / RECORD_LEN_MIN {
        return Err(BatchError::ImpossibleRecordCount {
            count: header.records_count,
            bytes: records_len,
        });
    }
    Ok(())
}

/// Overwrites `baseOffset` in place. The field is not covered by the CRC, so the CRC stays
/// valid; this is how a broker assigns offsets to a produced batch.
///
/// # Panics
/// If `batch` is shorter than 8 bytes, which is a caller bug: only parsed batches are patched.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    assert!(
        batch.len() >= BASE_OFFSET_AT + 8,
        "set_base_offset on a {}-byte slice, which cannot be a batch",
        batch.len()
    );
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites `partitionLeaderEpoch` in place. Like the base offset it is outside the CRC, so
/// the CRC stays valid.
///
/// # Panics
/// If `batch` is shorter than 16 bytes, which is a caller bug.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    assert!(
        batch.len() >= PARTITION_LEADER_EPOCH_AT + 4,
        "set_partition_leader_epoch on a {}-byte slice, which cannot be a batch",
        batch.len()
    );
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Sets the timestamp type bit and `maxTimestamp`, then recomputes the CRC, since both fields
/// are covered by it. A broker uses this to stamp a batch with LogAppendTime.
///
/// The batch's CRC is verified first: recomputing the CRC of a corrupt batch would otherwise
/// make the corruption look valid. Bytes after the batch in `batch` are left alone.
pub fn set_max_timestamp(
    batch: &mut [u8],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> Result<(), BatchError> {
    let header = verify(batch)?;
    let total = header.total_len();
    let attributes = match timestamp_type {
        TimestampType::CreateTime => header.attributes & !TIMESTAMP_TYPE_BIT,
        TimestampType::LogAppendTime => header.attributes | TIMESTAMP_TYPE_BIT,
    };
    let available = batch.len();
    let whole = batch.get_mut(..total).ok_or(BatchError::Truncated {
        needed: total,
        available,
    })?;
    // verify() proved the slice holds a whole batch, so these fixed header ranges exist.
    whole[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    whole[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = compute_crc(whole);
    whole[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// The batch at the start of `batch` with its records replaced by `records` compressed by
/// `compressor`, as a broker recompresses a produced batch for a topic whose
/// `compression.type` names another codec (Kafka's `LogValidator`, which rebuilds such a
/// batch). `records` must be the batch's own records uncompressed (a compressed batch's
/// decompressed, an uncompressed one's bytes after the header): record offsets and
/// timestamps are deltas from the header, so they carry over byte for byte.
///
/// Every header field is kept (base offset, partition leader epoch, `lastOffsetDelta`, base
/// and max timestamps, producer id, epoch and base sequence, records count, and the
/// attributes' timestamp type, transactional, control and delete-horizon bits) except
/// `batchLength`, the codec bits and the CRC, which is computed over the new bytes. The
/// header's CRC is not checked here: callers have validated the batch.
pub fn recompressed(
    batch: &[u8],
    records: &[u8],
    compressor: &compression::Compressor,
) -> Result<Vec<u8>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let compressed;
    let payload: &[u8] = if compressor.codec == Compression::None {
        records
    } else {
        compressed = compressor
            .compress(records)
            .map_err(BatchError::Recompression)?;
        &compressed
    };
    let total = BATCH_HEADER_LEN.saturating_add(payload.len());
    let batch_length = i32::try_from(total - LOG_OVERHEAD)
        .ok()
        .filter(|_| total <= BATCH_LEN_MAX)
        .ok_or(BatchError::BatchTooLarge {
            len: total,
            max: BATCH_LEN_MAX,
        })?;
    let attributes = (header.attributes & !COMPRESSION_MASK) | compressor.codec.id();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(batch.get(..BATCH_HEADER_LEN).unwrap_or(&[]));
    out.extend_from_slice(payload);
    // parse() proved the header is there, so these fixed ranges exist.
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&batch_length.to_be_bytes());
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// Iterates over consecutive batches in a buffer holding zero or more whole batches (a segment
/// file region, a produce request's records). Yields `Err` once, at the first incomplete or
/// invalid header, and then stops. Each item is a zero-copy slice of one batch and its parsed
/// header. CRCs are not checked; callers call [`verify`] when they need to.
#[derive(Clone, Debug)]
pub struct BatchIter {
    rest: Bytes,
    done: bool,
}

/// Iterates over the batches in `buf`; see [`BatchIter`].
pub fn batches(buf: Bytes) -> BatchIter {
    BatchIter {
        rest: buf,
        done: false,
    }
}

impl Iterator for BatchIter {
    type Item = Result<(BatchHeader, Bytes), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        let header = match BatchHeader::parse(&self.rest) {
            Ok(header) => header,
            Err(err) => {
                self.done = true;
                return Some(Err(err));
            }
        };
        let total = header.total_len();
        if self.rest.len() < total {
            self.done = true;
            return Some(Err(BatchError::Truncated {
                needed: total,
                available: self.rest.len(),
            }));
        }
        Some(Ok((header, self.rest.split_to(total))))
    }
}

/// One header of a record. Kafka requires header keys to be present and UTF-8; values may be
/// null.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Bytes>,
}

/// One decoded record, with its absolute offset and timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
}

/// Lazily decodes the records of a batch, with zero-copy `Bytes` slices for keys and values: of
/// `batch` itself when it is uncompressed, of the one buffer its records decompress to
/// otherwise. Compressed records are decompressed up front, to at most
/// [`DECOMPRESSED_BATCH_BYTES_MAX`] bytes (see [`records_with_limit`]); a batch over the limit, or
/// whose records do not decompress, is `Err(BatchError::Decompression)`.
///
/// The header is parsed and the batch must be complete, but the CRC is not checked and offset
/// deltas and timestamps are not cross-checked: that is [`validate`]'s job, and a batch read
/// back from the log has already passed it. Every record is still decoded defensively, so a
/// malformed one yields an `Err` (once, after which the iterator stops) rather than a panic.
/// Under LogAppendTime every record reports the batch's `max_timestamp`, as Kafka's clients do.
/// Bytes after the batch in `batch` are ignored.
pub fn records(batch: &Bytes) -> Result<RecordIter, BatchError> {
    records_with_limit(batch, DECOMPRESSED_BATCH_BYTES_MAX)
}

/// [`records`] with a limit of `max_decompressed` bytes on what a compressed batch's records may
/// decompress to; a batch over it is [`BatchError::Decompression`] with
/// [`CompressionError::OutputTooLarge`], refused without decoding or allocating past the limit.
pub fn records_with_limit(
    batch: &Bytes,
    max_decompressed: usize,
) -> Result<RecordIter, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let total = whole_batch(batch, &header)?.len();
    let codec = header.compression()?;
    let region = if codec == Compression::None {
        batch.slice(BATCH_HEADER_LEN..total)
    } else {
        compression::decompress(codec, &batch[BATCH_HEADER_LEN..total], max_decompressed)
            .map_err(BatchError::Decompression)?
    };
    check_count_fits(&header, region.len())?;
    let log_append_time = match header.timestamp_type() {
        TimestampType::CreateTime => None,
        TimestampType::LogAppendTime => Some(header.max_timestamp),
    };
    Ok(RecordIter {
        records: region,
        cursor: Cursor::new(header.records_count, true),
        base_offset: header.base_offset,
        base_timestamp: header.base_timestamp,
        log_append_time,
    })
}

/// The records of one batch; see [`records`].
#[derive(Clone, Debug)]
pub struct RecordIter {
    /// The batch's bytes after its header, decompressed if the batch is compressed.
    records: Bytes,
    cursor: Cursor,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
}

impl RecordIter {
    fn materialise(&self, index: usize, raw: RawRecord) -> Result<Record, BatchError> {
        let bad = |reason| BatchError::InvalidRecord { index, reason };
        let offset = self
            .base_offset
            .checked_add(i64::from(raw.offset_delta))
            .ok_or(bad("baseOffset plus offsetDelta overflows a 64-bit offset"))?;
        let timestamp = match self.log_append_time {
            Some(timestamp) => timestamp,
            None => record_timestamp(self.base_timestamp, raw.timestamp_delta)?,
        };
        let mut headers = Vec::with_capacity(raw.headers.len());
        for (key, value) in raw.headers {
            // decode_record already checked the key is UTF-8; this re-check only avoids an
            // unchecked conversion.
            let key = self
                .records
                .get(key)
                .and_then(|bytes| std::str::from_utf8(bytes).ok())
                .ok_or(bad("header key is not valid UTF-8"))?;
            headers.push(Header {
                key: key.to_owned(),
                value: value.map(|range| self.records.slice(range)),
            });
        }
        Ok(Record {
            offset,
            timestamp,
            key: raw.key.map(|range| self.records.slice(range)),
            value: raw.value.map(|range| self.records.slice(range)),
            headers,
        })
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (index, raw) = match self.cursor.next_raw(&self.records)? {
            Ok(next) => next,
            Err(err) => return Some(Err(err)),
        };
        let record = self.materialise(index, raw);
        if record.is_err() {
            self.cursor.done = true;
        }
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.cursor.done {
            (0, Some(0))
        } else {
            // One more item than records may come: the trailing-bytes error.
            (
                0,
                Some(self.cursor.count.saturating_sub(self.cursor.index) + 1),
            )
        }
    }
}

/// Walks the records region of a batch, shared by [`validate`] and [`scan_records`] (which
/// want the raw deltas) and [`RecordIter`] (which wants absolute values). It stops after the
/// first error.
#[derive(Clone, Debug)]
struct Cursor {
    pos: usize,
    index: usize,
    count: usize,
    header_count: i32,
    done: bool,
    /// Whether to keep the ranges of record headers. Validation checks the headers but does not
    /// keep them, so that it allocates nothing per record.
    keep_headers: bool,
}

impl Cursor {
    fn new(records_count: i32, keep_headers: bool) -> Cursor {
        Cursor {
            pos: 0,
            index: 0,
            count: usize::try_from(records_count).unwrap_or(0),
            header_count: records_count,
            done: false,
            keep_headers,
        }
    }

    fn next_raw(&mut self, region: &[u8]) -> Option<Result<(usize, RawRecord), BatchError>> {
        if self.done {
            return None;
        }
        let remaining = region.len().saturating_sub(self.pos);
        if self.index == self.count {
            self.done = true;
            if remaining > 0 {
                return Some(Err(BatchError::TrailingBytes { len: remaining }));
            }
            return None;
        }
        if remaining == 0 {
            self.done = true;
            return Some(Err(BatchError::RecordCountMismatch {
                header: self.header_count,
                actual: self.index,
            }));
        }
        let index = self.index;
        match decode_record(region, &mut self.pos, index, self.keep_headers) {
            Ok(raw) => {
                self.index += 1;
                Some(Ok((index, raw)))
            }
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

/// The fields of one record that a broker checks before appending it, read in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSummary {
    /// The record's position in its batch, from 0.
    pub index: usize,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// Whether the key is non-null (an empty key counts as present, as in Kafka).
    pub has_key: bool,
}

/// Walks the records of a batch without allocating; see [`scan_records`].
#[derive(Clone, Debug)]
pub struct RecordScan<'a> {
    region: &'a [u8],
    cursor: Cursor,
}

/// Walks the `records_count` records in `region` (a batch's bytes after its header,
/// decompressed if the batch is compressed), checking each record as [`validate`] does (lengths
/// within bounds, varints well formed, UTF-8 header keys) and yielding what a broker needs to
/// check next. It allocates nothing. After the last record, bytes left over are
/// [`BatchError::TrailingBytes`]; a region that ends early is
/// [`BatchError::RecordCountMismatch`]. It yields at most one `Err`, then stops.
///
/// Offset deltas and timestamps are not cross-checked: the caller does that with the values
/// yielded.
pub fn scan_records(region: &[u8], records_count: i32) -> RecordScan<'_> {
    RecordScan {
        region,
        cursor: Cursor::new(records_count, false),
    }
}

impl Iterator for RecordScan<'_> {
    type Item = Result<RecordSummary, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.cursor.next_raw(self.region)?;
        Some(item.map(|(index, raw)| RecordSummary {
            index,
            timestamp_delta: raw.timestamp_delta,
            offset_delta: raw.offset_delta,
            has_key: raw.key.is_some(),
        }))
    }
}

/// A record as it is on the wire: deltas, and ranges into the records region.
#[derive(Debug)]
struct RawRecord {
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    headers: Vec<(Range<usize>, Option<Range<usize>>)>,
}

/// Reads the fields of one record, confined to the bytes its length prefix claims so that a
/// field can never borrow bytes from the next record.
struct RecordReader<'a> {
    /// The records region cut off at the end of this record.
    body: &'a [u8],
    pos: usize,
    index: usize,
}

impl RecordReader<'_> {
    fn bad(&self, reason: &'static str) -> BatchError {
        BatchError::InvalidRecord {
            index: self.index,
            reason,
        }
    }

    fn varint(&mut self, reason: &'static str) -> Result<i32, BatchError> {
        read_varint(self.body, &mut self.pos).map_err(|_| self.bad(reason))
    }

    fn varlong(&mut self, reason: &'static str) -> Result<i64, BatchError> {
        read_varlong(self.body, &mut self.pos).map_err(|_| self.bad(reason))
    }

    fn take(&mut self, len: usize, reason: &'static str) -> Result<Range<usize>, BatchError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.body.len())
            .ok_or(self.bad(reason))?;
        let range = self.pos..end;
        self.pos = end;
        Ok(range)
    }

    /// A length-prefixed byte string where length -1 means null.
    fn nullable(
        &mut self,
        malformed: &'static str,
        negative: &'static str,
        overrun: &'static str,
    ) -> Result<Option<Range<usize>>, BatchError> {
        match self.varint(malformed)? {
            -1 => Ok(None),
            len => {
                let len = usize::try_from(len).map_err(|_| self.bad(negative))?;
                self.take(len, overrun).map(Some)
            }
        }
    }
}

/// Decodes the record at `pos`, checking every field. Header ranges are kept only if
/// `keep_headers`; either way the headers are checked.
fn decode_record(
    region: &[u8],
    pos: &mut usize,
    index: usize,
    keep_headers: bool,
) -> Result<RawRecord, BatchError> {
    let bad = |reason| BatchError::InvalidRecord { index, reason };
    let mut start = *pos;
    let length = read_varint(region, &mut start)
        .map_err(|_| bad("record length is truncated or malformed"))?;
    let length = usize::try_from(length).map_err(|_| bad("record length is negative"))?;
    let end = start
        .checked_add(length)
        .filter(|&end| end <= region.len())
        .ok_or(bad("record length runs past the end of the batch"))?;
    let mut r = RecordReader {
        body: region.get(..end).unwrap_or(&[]),
        pos: start,
        index,
    };
    // Record attributes are unused; Kafka ignores their value, so do we.
    r.take(1, "record is too short for its attributes")?;
    let timestamp_delta = r.varlong("timestampDelta is truncated or malformed")?;
    let offset_delta = r.varint("offsetDelta is truncated or malformed")?;
    let key = r.nullable(
        "keyLength is truncated or malformed",
        "keyLength is below -1",
        "key runs past the record's length",
    )?;
    let value = r.nullable(
        "valueLength is truncated or malformed",
        "valueLength is below -1",
        "value runs past the record's length",
    )?;
    let header_count = r.varint("headers count is truncated or malformed")?;
    let header_count =
        usize::try_from(header_count).map_err(|_| bad("headers count is negative"))?;
    // Each header takes at least two bytes (an empty key's length and a null value's length),
    // which bounds the allocation by the bytes present rather than by the claimed count.
    let mut headers = if keep_headers {
        Vec::with_capacity(header_count.min(end.saturating_sub(r.pos) / 2))
    } else {
        Vec::new()
    };
    for _ in 0..header_count {
        let key_len = r.varint("headerKeyLength is truncated or malformed")?;
        let key_len = usize::try_from(key_len).map_err(|_| bad("headerKeyLength is negative"))?;
        let key = r.take(key_len, "header key runs past the record's length")?;
        let key_bytes = r.body.get(key.clone()).unwrap_or(&[]);
        if std::str::from_utf8(key_bytes).is_err() {
            return Err(bad("header key is not valid UTF-8"));
        }
        let value = r.nullable(
            "headerValueLength is truncated or malformed",
            "headerValueLength is below -1",
            "header value runs past the record's length",
        )?;
        if keep_headers {
            headers.push((key, value));
        }
    }
    if r.pos != end {
        return Err(bad("record length is longer than its fields"));
    }
    *pos = end;
    Ok(RawRecord {
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
    })
}

/// Builds a magic-v2 batch with a correct CRC, encoding each record as it is pushed so that
/// `build` only has to compress them (if a codec is set) and prepend the header.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    base_offset: i64,
    compression: Compression,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    /// Kafka's control bit: the batch holds control records (transaction markers, KRaft's
    /// LeaderChange and voter records), which consumers skip.
    control: bool,
    /// KIP-534's delete horizon: when set, the batch's base timestamp (and attribute bit
    /// 0x40).
    delete_horizon_ms: Option<i64>,
    /// Set by [`BatchBuilder::rewriting`]: what a rewritten batch keeps of the original.
    kept: Option<Kept>,
    records: BytesMut,
    count: usize,
    /// The offset delta the next [`BatchBuilder::push`] takes, and the last one pushed.
    next_offset_delta: i32,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// A builder with Kafka's "no producer" values: producer id, epoch and base sequence -1,
    /// partition leader epoch -1, CreateTime, not transactional.
    pub fn new(base_offset: i64) -> Self {
        BatchBuilder {
            base_offset,
            compression: Compression::None,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            delete_horizon_ms: None,
            kept: None,
            records: BytesMut::new(),
            count: 0,
            next_offset_delta: 0,
            last_offset_delta: -1,
            base_timestamp: 0,
            max_timestamp: 0,
        }
    }

    /// A builder for a batch the log cleaner rewrites from `original` with some of its
    /// records: it keeps the base offset, the last offset delta (so the batch still ends
    /// where it did, and the producer's last sequence read back from it is unchanged: the
    /// reason magic v2 stores `lastOffsetDelta`), the partition leader epoch, the producer
    /// id, epoch and base sequence, the codec, the timestamp type and the transactional and
    /// control bits. Under LogAppendTime the original max timestamp stays (it is every
    /// record's timestamp); under CreateTime it is the largest kept record's, as Kafka's
    /// cleaner writes it. Records are pushed with [`BatchBuilder::push_at`] at their own
    /// offset deltas.
    ///
    /// # Errors
    /// If `original`'s codec is unknown.
    pub fn rewriting(original: &BatchHeader) -> Result<Self, BatchError> {
        let mut builder = BatchBuilder::new(original.base_offset)
            .partition_leader_epoch(original.partition_leader_epoch)
            .producer(
                original.producer_id,
                original.producer_epoch,
                original.base_sequence,
            )
            .compression(original.compression()?)
            .transactional(original.is_transactional());
        builder.kept = Some(Kept {
            last_offset_delta: original.last_offset_delta,
            log_append_time: (original.timestamp_type() == TimestampType::LogAppendTime)
                .then_some(original.max_timestamp),
            control: original.is_control(),
        });
        Ok(builder)
    }

    /// Sets the partition leader epoch the batch was written in (a rewritten batch keeps its
    /// own).
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Stamps the batch with a delete horizon (KIP-534, what the log cleaner does the first
    /// time it passes a batch holding tombstones): attribute bit 0x40 is set and the base
    /// timestamp is `horizon_ms`, record timestamps being stored as deltas from it.
    pub fn delete_horizon(mut self, horizon_ms: i64) -> Self {
        assert!(
            self.is_empty(),
            "the delete horizon is set before any record"
        );
        self.delete_horizon_ms = Some(horizon_ms);
        self
    }

    /// Sets the idempotent producer's identity and the sequence of the batch's first record.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Compresses the records with `codec` when the batch is built, in the form Kafka's Java
    /// client writes (see [`compression::compress`]); the CRC covers the compressed bytes.
    pub fn compression(mut self, codec: Compression) -> Self {
        self.compression = codec;
        self
    }

    pub fn transactional(mut self, yes: bool) -> Self {
        self.transactional = yes;
        self
    }

    /// Marks the batch as one of control records.
    pub fn control(mut self, yes: bool) -> Self {
        self.control = yes;
        self
    }

    /// Appends a record. The first record's timestamp becomes the batch's base timestamp, and
    /// later ones are stored as deltas from it (negative deltas are fine).
    ///
    /// # Panics
    /// If the batch would grow past [`BATCH_LEN_MAX`], or if a timestamp is so far from the
    /// first one that their difference overflows an i64; both are caller bugs, since no real
    /// batch comes near either.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) {
        self.push_at(self.next_offset_delta, timestamp, key, value, headers);
    }

    /// [`BatchBuilder::push`] at `offset_delta` from the base offset, which must be above the
    /// previous record's: a batch rewritten by the log cleaner keeps its records' offsets,
    /// with gaps where records were cleaned away.
    ///
    /// # Panics
    /// As `push`, and if `offset_delta` is not above the previous record's.
    pub fn push_at(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) {
        assert!(
            offset_delta >= self.next_offset_delta,
            "offset delta {offset_delta} is not above the previous record's ({})",
            self.last_offset_delta
        );
        if self.count == 0 {
            self.base_timestamp = self.delete_horizon_ms.unwrap_or(timestamp);
            self.max_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let Some(timestamp_delta) = timestamp.checked_sub(self.base_timestamp) else {
            panic!(
                "record timestamp {timestamp} is too far from the batch's base timestamp {}",
                self.base_timestamp
            );
        };
        let key_len = key.map_or(-1, |key| builder_len(key.len()));
        let value_len = value.map_or(-1, |value| builder_len(value.len()));
        let header_count = builder_len(headers.len());

        let mut body_len = 1
            + varlong_len(timestamp_delta)
            + varint_len(offset_delta)
            + varint_len(key_len)
            + key.map_or(0, <[u8]>::len)
            + varint_len(value_len)
            + value.map_or(0, <[u8]>::len)
            + varint_len(header_count);
        for (header_key, header_value) in headers {
            let value_len = header_value.map_or(-1, |value| builder_len(value.len()));
            body_len += varint_len(builder_len(header_key.len()))
                + header_key.len()
                + varint_len(value_len)
                + header_value.map_or(0, <[u8]>::len);
        }
        let body_len_i32 = builder_len(body_len);
        let record_len = varint_len(body_len_i32) + body_len;
        assert!(
            BATCH_HEADER_LEN + self.records.len() + record_len <= BATCH_LEN_MAX,
            "record batch would exceed BATCH_LEN_MAX ({BATCH_LEN_MAX} bytes)"
        );

        self.records.reserve(record_len);
        write_varint(&mut self.records, body_len_i32);
        self.records.put_u8(0);
        write_varlong(&mut self.records, timestamp_delta);
        write_varint(&mut self.records, offset_delta);
        put_nullable(&mut self.records, key);
        put_nullable(&mut self.records, value);
        write_varint(&mut self.records, header_count);
        for (header_key, header_value) in headers {
            put_nullable(&mut self.records, Some(header_key.as_bytes()));
            put_nullable(&mut self.records, *header_value);
        }
        self.count += 1;
        self.last_offset_delta = offset_delta;
        self.next_offset_delta = offset_delta.saturating_add(1);
    }

    /// The number of records pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Compresses the records if a codec is set, prepends the header and fills in the CRC. The
    /// base timestamp is the first record's timestamp and the max timestamp the largest one.
    ///
    /// # Panics
    /// If no record was pushed: an empty batch has no valid `lastOffsetDelta`. If compression
    /// fails, which the in-memory encoders never do, or makes the batch larger than
    /// [`BATCH_LEN_MAX`].
    pub fn build(self) -> BytesMut {
        assert!(
            !self.is_empty(),
            "cannot build a record batch with no records"
        );
        let compressed;
        let payload: &[u8] = if self.compression == Compression::None {
            &self.records
        } else {
            compressed = compression::compress(self.compression, &self.records)
                .unwrap_or_else(|e| panic!("building a record batch: {e}"));
            &compressed
        };
        let total = BATCH_HEADER_LEN + payload.len();
        assert!(
            total <= BATCH_LEN_MAX,
            "compressed record batch of {total} bytes exceeds BATCH_LEN_MAX ({BATCH_LEN_MAX} bytes)"
        );
        let count = builder_len(self.count);
        let mut attributes: i16 = self.compression.id();
        if self.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.delete_horizon_ms.is_some() {
            attributes |= DELETE_HORIZON_BIT;
        }
        if self.control {
            attributes |= CONTROL_BIT;
        }
        let mut last_offset_delta = self.last_offset_delta;
        let mut max_timestamp = self.max_timestamp;
        if let Some(kept) = self.kept {
            assert!(
                kept.last_offset_delta >= self.last_offset_delta,
                "a rewritten batch keeps records only from its own offset range"
            );
            last_offset_delta = kept.last_offset_delta;
            if let Some(log_append_time) = kept.log_append_time {
                attributes |= TIMESTAMP_TYPE_BIT;
                max_timestamp = log_append_time;
            }
            if kept.control {
                attributes |= CONTROL_BIT;
            }
        }
        let mut out = BytesMut::with_capacity(total);
        out.put_i64(self.base_offset);
        out.put_i32(builder_len(total - LOG_OVERHEAD));
        out.put_i32(self.partition_leader_epoch);
        out.put_i8(MAGIC_V2);
        out.put_u32(0); // The CRC, filled in once the bytes it covers are in place.
        out.put_i16(attributes);
        out.put_i32(last_offset_delta);
        out.put_i64(self.base_timestamp);
        out.put_i64(max_timestamp);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.base_sequence);
        out.put_i32(count);
        out.extend_from_slice(payload);
        let crc = compute_crc(&out);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

/// What [`BatchBuilder::rewriting`] keeps of the original batch besides the plain fields.
#[derive(Clone, Copy, Debug)]
struct Kept {
    last_offset_delta: i32,
    /// The original max timestamp, under LogAppendTime.
    log_append_time: Option<i64>,
    control: bool,
}

/// The batch Kafka's log cleaner leaves when it cleans away every record of a batch that
/// must stay (the last batch of a producer, so that producer state rebuilt from the log still
/// knows it): `header`'s base offset and last offset delta (the next offset is unchanged),
/// producer id, epoch and base sequence, partition leader epoch, timestamp type and
/// transactional and control bits, no records, no compression, base timestamp -1 and
/// `header`'s max timestamp (Kafka's `DefaultRecordBatch.writeEmptyHeader`).
pub fn empty_batch(header: &BatchHeader) -> BytesMut {
    let kept = TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT;
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN);
    out.put_i64(header.base_offset);
    out.put_i32(builder_len(BATCH_HEADER_LEN - LOG_OVERHEAD));
    out.put_i32(header.partition_leader_epoch);
    out.put_i8(MAGIC_V2);
    out.put_u32(0); // The CRC, filled in below.
    out.put_i16(header.attributes & kept);
    out.put_i32(header.last_offset_delta);
    out.put_i64(-1);
    out.put_i64(header.max_timestamp);
    out.put_i64(header.producer_id);
    out.put_i16(header.producer_epoch);
    out.put_i32(header.base_sequence);
    out.put_i32(0);
    let crc = compute_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Converts a builder-side length to the i32 the format stores. Anything that passes the
/// BATCH_LEN_MAX check fits, so a failure here is a caller pushing an absurdly large record.
fn builder_len(len: usize) -> i32 {
    match i32::try_from(len) {
        Ok(len) if (len as usize) <= BATCH_LEN_MAX => len,
        _ => panic!("length {len} exceeds BATCH_LEN_MAX ({BATCH_LEN_MAX} bytes)"),
    }
}

fn put_nullable(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(bytes) => {
            write_varint(out, builder_len(bytes.len()));
            out.extend_from_slice(bytes);
        }
    }
}

/// Reads an unsigned LEB128 number of at most `len_max` bytes whose last byte may be at most
/// `last_byte_max` (the bits that still fit the target type). Advances `pos` only on success.
fn read_leb128(
    buf: &[u8],
    pos: &mut usize,
    len_max: usize,
    last_byte_max: u8,
) -> Result<u64, BatchError> {
    let mut value: u64 = 0;
    for i in 0..len_max {
        let at = pos.saturating_add(i);
        let byte = *buf.get(at).ok_or(BatchError::Truncated {
            needed: at.saturating_add(1),
            available: buf.len(),
        })?;
        if i + 1 == len_max && byte > last_byte_max {
            return Err(BatchError::InvalidVarint);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *pos = at + 1;
            return Ok(value);
        }
    }
    Err(BatchError::InvalidVarint)
}

fn put_leb128(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn leb128_len(mut value: u64) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

fn zigzag32(value: i32) -> u32 {
    ((value << 1) ^ (value >> 31)) as u32
}

fn zigzag64(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Reads a zigzag-encoded varint at `pos`, advancing `pos` past it on success and leaving it
/// alone on error. Encodings longer than 5 bytes, or whose fifth byte carries bits beyond 32,
/// are `InvalidVarint`; a buffer that ends mid-varint is `Truncated`.
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, BatchError> {
    let raw = read_leb128(buf, pos, VARINT_LEN_MAX, 0x0f)? as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zigzag-encoded varlong at `pos`, like [`read_varint`] but for 64 bits and at most 10
/// bytes.
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, BatchError> {
    let raw = read_leb128(buf, pos, VARLONG_LEN_MAX, 0x01)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Reads an unsigned (not zigzag) varint of at most 5 bytes, as used by the compact strings
/// and arrays of Kafka's flexible protocol versions.
pub fn read_unsigned_varint(buf: &[u8], pos: &mut usize) -> Result<u32, BatchError> {
    Ok(read_leb128(buf, pos, VARINT_LEN_MAX, 0x0f)? as u32)
}

pub fn write_varint(out: &mut BytesMut, value: i32) {
    put_leb128(out, u64::from(zigzag32(value)));
}

pub fn write_varlong(out: &mut BytesMut, value: i64) {
    put_leb128(out, zigzag64(value));
}

pub fn write_unsigned_varint(out: &mut BytesMut, value: u32) {
    put_leb128(out, u64::from(value));
}

/// The encoded size of `value` as a zigzag varint.
pub fn varint_len(value: i32) -> usize {
    leb128_len(u64::from(zigzag32(value)))
}

/// The encoded size of `value` as a zigzag varlong.
pub fn varlong_len(value: i64) -> usize {
    leb128_len(zigzag64(value))
}

/// The encoded size of `value` as an unsigned varint.
pub fn unsigned_varint_len(value: u32) -> usize {
    leb128_len(u64::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The batch worked out by hand in `fixture_matches_hand_encoding`.
    #[rustfmt::skip]
    const FIXTURE: [u8; 70] = [
        0, 0, 0, 0, 0, 0, 0, 0, // baseOffset 0
        0, 0, 0, 58, // batchLength: 70 - 12
        0xff, 0xff, 0xff, 0xff, // partitionLeaderEpoch -1
        2,    // magic
        0xfe, 0x91, 0x7c, 0xab, // crc, computed independently of this module
        0, 0, // attributes: no compression, CreateTime
        0, 0, 0, 0, // lastOffsetDelta 0
        0, 0, 0, 0, 0, 0, 0, 0, // baseTimestamp 0
        0, 0, 0, 0, 0, 0, 0, 0, // maxTimestamp 0
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producerId -1
        0xff, 0xff, // producerEpoch -1
        0xff, 0xff, 0xff, 0xff, // baseSequence -1
        0, 0, 0, 1, // records count 1
        0x10, // record length 8, zigzag 16
        0,    // record attributes
        0,    // timestampDelta 0
        0,    // offsetDelta 0
        0x02, b'k', // keyLength 1, key
        0x02, b'v', // valueLength 1, value
        0,    // headers count 0
    ];

    fn sample_batch() -> BytesMut {
        let mut builder = BatchBuilder::new(0).producer(42, 3, 7).transactional(true);
        builder.push(1_000, Some(b"k0"), Some(b"v0"), &[]);
        builder.push(
            999,
            None,
            Some(b"value without key"),
            &[("h1", Some(b"x")), ("h2", None)],
        );
        builder.push(1_005, Some(b"key without value"), None, &[("", Some(b""))]);
        builder.push(1_002, None, None, &[]);
        builder.build()
    }

    /// Assembles a batch around hand-made record bytes with a correct CRC, so tests can reach
    /// record-level checks behind the CRC check.
    fn raw_batch(
        count: i32,
        last_offset_delta: i32,
        max_timestamp: i64,
        records: &[u8],
    ) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.put_i64(0);
        out.put_i32((BATCH_HEADER_LEN - LOG_OVERHEAD + records.len()) as i32);
        out.put_i32(-1);
        out.put_i8(MAGIC_V2);
        out.put_u32(0);
        out.put_i16(0);
        out.put_i32(last_offset_delta);
        out.put_i64(100);
        out.put_i64(max_timestamp);
        out.put_i64(-1);
        out.put_i16(-1);
        out.put_i32(-1);
        out.put_i32(count);
        out.extend_from_slice(records);
        fix_crc(&mut out);
        out.to_vec()
    }

    fn fix_crc(batch: &mut [u8]) {
        let crc = compute_crc(batch);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }

    /// Encodes one record body from raw field bytes, prefixing its true length.
    fn raw_record(body: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        write_varint(&mut out, body.len() as i32);
        out.extend_from_slice(body);
        out.to_vec()
    }

    /// What the log cleaner writes: records at their original offsets, with gaps, in a
    /// batch that keeps its producer fields and partition leader epoch.
    #[test]
    fn a_batch_keeps_gapped_offset_deltas_and_its_producer_fields() {
        let mut b = BatchBuilder::new(100)
            .producer(7, 2, 40)
            .partition_leader_epoch(5);
        b.push_at(0, 1_000, Some(b"a"), Some(b"1"), &[]);
        b.push_at(3, 1_003, Some(b"b"), Some(b"2"), &[]);
        b.push_at(7, 1_002, Some(b"c"), None, &[]);
        let batch = b.build().freeze();
        let header = verify(&batch).unwrap();
        assert_eq!((header.records_count, header.last_offset_delta), (3, 7));
        assert_eq!(header.next_offset(), 108);
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (7, 2, 40)
        );
        assert_eq!(header.partition_leader_epoch, 5);
        assert!(!header.has_delete_horizon());
        let offsets: Vec<(i64, i64)> = records(&batch)
            .unwrap()
            .map(|r| r.map(|r| (r.offset, r.timestamp)).unwrap())
            .collect();
        assert_eq!(offsets, [(100, 1_000), (103, 1_003), (107, 1_002)]);
    }

    #[test]
    #[should_panic(expected = "is not above the previous record's")]
    fn offset_deltas_only_grow() {
        let mut b = BatchBuilder::new(0);
        b.push_at(2, 0, None, Some(b"x"), &[]);
        b.push_at(2, 0, None, Some(b"y"), &[]);
    }

    /// KIP-534: a delete horizon sets attribute bit 0x40 and becomes the base timestamp;
    /// the records keep their own timestamps.
    #[test]
    fn a_delete_horizon_is_the_base_timestamp_and_bit_0x40() {
        let mut b = BatchBuilder::new(0)
            .compression(Compression::Lz4)
            .delete_horizon(90_000);
        b.push_at(1, 1_000, Some(b"k"), None, &[]);
        b.push_at(4, 2_000, Some(b"j"), Some(b"v"), &[]);
        let batch = b.build().freeze();
        let header = verify(&batch).unwrap();
        assert!(header.has_delete_horizon());
        assert_eq!(header.attributes & DELETE_HORIZON_BIT, DELETE_HORIZON_BIT);
        assert_eq!(header.compression().unwrap(), Compression::Lz4);
        assert_eq!(
            (header.base_timestamp, header.max_timestamp),
            (90_000, 2_000)
        );
        let times: Vec<i64> = records(&batch)
            .unwrap()
            .map(|r| r.unwrap().timestamp)
            .collect();
        assert_eq!(times, [1_000, 2_000]);
    }

    /// Kafka's `writeEmptyHeader`: the batch a cleaner leaves for a producer whose records
    /// are all gone keeps the offsets it spanned and who wrote it.
    #[test]
    fn an_empty_batch_keeps_the_offset_range_and_the_producer() {
        let mut b = BatchBuilder::new(50)
            .producer(9, 1, 12)
            .partition_leader_epoch(3)
            .compression(Compression::Gzip)
            .transactional(true);
        for i in 0..4 {
            b.push(5_000 + i, Some(b"k"), Some(b"v"), &[]);
        }
        let original = BatchHeader::parse(&b.build()).unwrap();
        let empty = empty_batch(&original).freeze();
        let header = verify(&empty).unwrap();
        assert_eq!(header.total_len(), BATCH_HEADER_LEN);
        assert_eq!(header.records_count, 0);
        assert_eq!((header.base_offset, header.last_offset()), (50, 53));
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (9, 1, 12)
        );
        assert_eq!(header.partition_leader_epoch, 3);
        assert_eq!(header.compression().unwrap(), Compression::None);
        assert!(header.is_transactional());
        assert_eq!((header.base_timestamp, header.max_timestamp), (-1, 5_003));
        assert_eq!(records(&empty).unwrap().count(), 0);
    }

    #[test]
    fn crc32c_known_answer() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        // compute_crc must start exactly at byte 21.
        let mut batch = vec![0xAAu8; CRC_COVERED_FROM];
        batch.extend_from_slice(b"123456789");
        assert_eq!(compute_crc(&batch), 0xE306_9283);
        assert_eq!(compute_crc(&[1, 2, 3]), 0);
    }

    #[test]
    fn fixture_matches_hand_encoding() {
        let mut builder = BatchBuilder::new(0);
        builder.push(0, Some(b"k"), Some(b"v"), &[]);
        let built = builder.build();
        assert_eq!(built.len(), FIXTURE.len());
        assert_eq!(&built[..CRC_AT], &FIXTURE[..CRC_AT]);
        assert_eq!(&built[CRC_AT + 4..], &FIXTURE[CRC_AT + 4..]);
        let stored = u32::from_be_bytes([built[17], built[18], built[19], built[20]]);
        assert_eq!(stored, compute_crc(&built));
        assert_eq!(stored, 0xfe91_7cab);
        assert_eq!(&built[..], &FIXTURE[..]);

        let header = validate(&FIXTURE).expect("fixture is valid");
        assert_eq!(header.total_len(), 70);
        assert_eq!(header.records_count, 1);
        let records: Vec<Record> = records(&Bytes::from_static(&FIXTURE))
            .expect("uncompressed")
            .collect::<Result<_, _>>()
            .expect("records decode");
        assert_eq!(
            records,
            vec![Record {
                offset: 0,
                timestamp: 0,
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::from_static(b"v")),
                headers: vec![],
            }]
        );
    }

    #[test]
    fn round_trip_through_builder_validate_and_records() {
        let mut batch = sample_batch();
        let header = validate(&batch).expect("built batch is valid");
        assert_eq!(header.base_offset, 0);
        assert_eq!(header.magic, MAGIC_V2);
        assert_eq!(header.records_count, 4);
        assert_eq!(header.last_offset_delta, 3);
        assert_eq!(header.base_timestamp, 1_000);
        assert_eq!(header.max_timestamp, 1_005);
        assert_eq!(header.producer_id, 42);
        assert_eq!(header.producer_epoch, 3);
        assert_eq!(header.base_sequence, 7);
        assert_eq!(header.partition_leader_epoch, -1);
        assert!(header.is_transactional());
        assert!(!header.is_control());
        assert!(!header.has_delete_horizon());
        assert_eq!(header.compression(), Ok(Compression::None));
        assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
        assert_eq!(header.total_len(), batch.len());

        set_base_offset(&mut batch, 1_000_000);
        set_partition_leader_epoch(&mut batch, 9);
        let header = validate(&batch).expect("offset and epoch are outside the CRC");
        assert_eq!(header.base_offset, 1_000_000);
        assert_eq!(header.partition_leader_epoch, 9);
        assert_eq!(header.last_offset(), 1_000_003);
        assert_eq!(header.next_offset(), 1_000_004);

        let bytes = batch.freeze();
        let records: Vec<Record> = records(&bytes)
            .expect("uncompressed")
            .collect::<Result<_, _>>()
            .expect("records decode");
        let b = Bytes::from_static;
        assert_eq!(
            records,
            vec![
                Record {
                    offset: 1_000_000,
                    timestamp: 1_000,
                    key: Some(b(b"k0")),
                    value: Some(b(b"v0")),
                    headers: vec![],
                },
                Record {
                    offset: 1_000_001,
                    timestamp: 999,
                    key: None,
                    value: Some(b(b"value without key")),
                    headers: vec![
                        Header {
                            key: "h1".into(),
                            value: Some(b(b"x")),
                        },
                        Header {
                            key: "h2".into(),
                            value: None,
                        },
                    ],
                },
                Record {
                    offset: 1_000_002,
                    timestamp: 1_005,
                    key: Some(b(b"key without value")),
                    value: None,
                    headers: vec![Header {
                        key: String::new(),
                        value: Some(b(b"")),
                    }],
                },
                Record {
                    offset: 1_000_003,
                    timestamp: 1_002,
                    key: None,
                    value: None,
                    headers: vec![],
                },
            ]
        );
    }

    #[test]
    fn every_byte_flip_in_crc_region_fails_verify() {
        let batch = sample_batch();
        for at in CRC_AT..batch.len() {
            for mask in [0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff] {
                let mut corrupt = batch.to_vec();
                corrupt[at] ^= mask;
                let result = verify(&corrupt);
                assert!(result.is_err(), "flip {mask:#04x} at {at} passed verify");
                if BatchHeader::parse(&corrupt).is_ok() {
                    assert!(
                        matches!(result, Err(BatchError::CrcMismatch { .. })),
                        "flip {mask:#04x} at {at}: {result:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_truncation_is_reported_as_truncated() {
        let batch = sample_batch().freeze();
        for len in 0..batch.len() {
            let cut = &batch[..len];
            assert!(
                matches!(verify(cut), Err(BatchError::Truncated { .. })),
                "verify at {len}"
            );
            assert!(
                matches!(validate(cut), Err(BatchError::Truncated { .. })),
                "validate at {len}"
            );
            assert!(
                matches!(
                    records(&batch.slice(..len)),
                    Err(BatchError::Truncated { .. })
                ),
                "records at {len}"
            );
            let mut iter = batches(batch.slice(..len));
            if len > 0 {
                assert!(matches!(
                    iter.next(),
                    Some(Err(BatchError::Truncated { .. }))
                ));
            }
            assert!(iter.next().is_none());
        }
        assert_eq!(
            verify(&batch[..BATCH_HEADER_LEN + 1]),
            Err(BatchError::Truncated {
                needed: batch.len(),
                available: BATCH_HEADER_LEN + 1
            })
        );
    }

    #[test]
    fn huge_records_count_fails_fast() {
        let mut batch = sample_batch().to_vec();
        batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
            .copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        fix_crc(&mut batch);
        let expected = BatchError::ImpossibleRecordCount {
            count: i32::MAX,
            bytes: batch.len() - BATCH_HEADER_LEN,
        };
        assert!(verify(&batch).is_ok());
        assert_eq!(validate(&batch), Err(expected.clone()));
        // records() refuses up front, before a single record is decoded, so nothing is sized
        // by the claimed count.
        assert_eq!(records(&Bytes::from(batch)).err(), Some(expected));

        // The same claim one level down: a record announcing 2^31-1 headers in a few bytes.
        let mut body = vec![0, 0, 0, 1, 1];
        let mut count = BytesMut::new();
        write_varint(&mut count, i32::MAX);
        body.extend_from_slice(&count);
        body.extend_from_slice(&[0, 1]);
        let batch = raw_batch(1, 0, 100, &raw_record(&body));
        assert!(matches!(
            validate(&batch),
            Err(BatchError::InvalidRecord { index: 0, .. })
        ));
        let mut iter = records(&Bytes::from(batch)).expect("count fits");
        assert!(matches!(
            iter.next(),
            Some(Err(BatchError::InvalidRecord { index: 0, .. }))
        ));
        assert!(iter.next().is_none());
    }

    #[test]
    fn header_field_checks() {
        let good = sample_batch().to_vec();
        let patched = |at: usize, bytes: &[u8]| {
            let mut b = good.clone();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            b
        };
        assert_eq!(
            BatchHeader::parse(&patched(MAGIC_AT, &[1])),
            Err(BatchError::InvalidMagic(1))
        );
        assert_eq!(
            BatchHeader::parse(&patched(BATCH_LENGTH_AT, &48i32.to_be_bytes())),
            Err(BatchError::InvalidBatchLength(48))
        );
        assert_eq!(
            BatchHeader::parse(&patched(BATCH_LENGTH_AT, &(-1i32).to_be_bytes())),
            Err(BatchError::InvalidBatchLength(-1))
        );
        assert_eq!(
            BatchHeader::parse(&patched(BATCH_LENGTH_AT, &i32::MAX.to_be_bytes())),
            Err(BatchError::BatchTooLarge {
                len: i32::MAX as usize + LOG_OVERHEAD,
                max: BATCH_LEN_MAX
            })
        );
        assert_eq!(
            BatchHeader::parse(&patched(LAST_OFFSET_DELTA_AT, &(-1i32).to_be_bytes())),
            Err(BatchError::InvalidLastOffsetDelta(-1))
        );
        assert_eq!(
            BatchHeader::parse(&patched(RECORDS_COUNT_AT, &(-5i32).to_be_bytes())),
            Err(BatchError::InvalidRecordsCount(-5))
        );
        assert_eq!(
            BatchHeader::parse(&patched(BASE_OFFSET_AT, &(i64::MAX - 3).to_be_bytes())),
            Err(BatchError::OffsetOverflow {
                base_offset: i64::MAX - 3,
                last_offset_delta: 3
            })
        );
        let header = BatchHeader::parse(&patched(BASE_OFFSET_AT, &(i64::MAX - 4).to_be_bytes()))
            .expect("last offset fits");
        assert_eq!(header.next_offset(), i64::MAX);
    }

    #[test]
    fn compression_codecs() {
        let with_attributes = |attributes: i16| {
            let mut b = sample_batch().to_vec();
            b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
            fix_crc(&mut b);
            b
        };
        for id in 5..=7 {
            let b = with_attributes(id);
            let header = verify(&b).expect("verify ignores the codec");
            assert_eq!(
                header.compression(),
                Err(BatchError::InvalidCompression(id))
            );
            assert_eq!(validate(&b), Err(BatchError::InvalidCompression(id)));
            assert_eq!(
                records(&Bytes::from(b)).err(),
                Some(BatchError::InvalidCompression(id))
            );
        }
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert_eq!(Compression::from_id(codec.id()), Some(codec));
            let b = with_attributes(codec.id() | TRANSACTIONAL_BIT);
            // Uncompressed records behind a codec's bits do not decompress.
            let header = verify(&b).expect("verify ignores the codec");
            assert_eq!(header.compression(), Ok(codec));
            assert!(matches!(
                validate(&b),
                Err(BatchError::Decompression(CompressionError::Corrupt { codec: c, .. })) if c == codec
            ));
            assert!(matches!(
                records(&Bytes::from(b)).err(),
                Some(BatchError::Decompression(CompressionError::Corrupt { codec: c, .. })) if c == codec
            ));
        }
    }

    #[test]
    fn log_append_time_overrides_record_timestamps() {
        let mut batch = sample_batch();
        set_max_timestamp(&mut batch, TimestampType::LogAppendTime, 77).expect("valid batch");
        let header = validate(&batch).expect("still valid with a fresh CRC");
        assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(header.max_timestamp, 77);
        let bytes = batch.clone().freeze();
        for record in records(&bytes).expect("uncompressed") {
            assert_eq!(record.expect("decodes").timestamp, 77);
        }
        set_max_timestamp(&mut batch, TimestampType::CreateTime, 1_005).expect("valid batch");
        assert_eq!(
            validate(&batch).map(|h| h.timestamp_type()),
            Ok(TimestampType::CreateTime)
        );

        // A corrupt batch is refused rather than given a CRC that hides the corruption.
        let mut corrupt = sample_batch();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        assert!(matches!(
            set_max_timestamp(&mut corrupt, TimestampType::LogAppendTime, 1),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn validate_checks_records() {
        let rec = |offset_delta: u8| raw_record(&[0, 0, offset_delta, 1, 1, 0]);
        let ok = [rec(0), rec(2)].concat();
        assert!(validate(&raw_batch(2, 1, 100, &ok)).is_ok());

        assert_eq!(
            validate(&raw_batch(2, 1, 100, &[rec(0), rec(4)].concat())),
            Err(BatchError::InvalidOffsetDelta {
                index: 1,
                expected: 1,
                found: 2
            })
        );
        assert_eq!(
            validate(&raw_batch(2, 1, 101, &ok)),
            Err(BatchError::MaxTimestampMismatch {
                header: 101,
                actual: 100
            })
        );
        // Two records with ten-byte values leave room for a third by size alone, so the count
        // check passes and the decoder runs out of records instead.
        let big = raw_record(&[0, 0, 0, 1, 20, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]);
        let big2 = raw_record(&[0, 0, 2, 1, 20, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]);
        assert_eq!(
            validate(&raw_batch(3, 2, 100, &[big, big2].concat())),
            Err(BatchError::RecordCountMismatch {
                header: 3,
                actual: 2
            })
        );
        assert_eq!(
            validate(&raw_batch(3, 2, 100, &ok)),
            Err(BatchError::ImpossibleRecordCount {
                count: 3,
                bytes: 14
            })
        );
        assert_eq!(
            validate(&raw_batch(1, 0, 100, &[rec(0), vec![0; 7]].concat())),
            Err(BatchError::TrailingBytes { len: 7 })
        );
        assert_eq!(
            validate(&raw_batch(2, 0, 100, &ok)),
            Err(BatchError::OffsetRangeMismatch {
                records_count: 2,
                last_offset_delta: 0
            })
        );
        assert_eq!(
            validate(&raw_batch(0, 0, 100, &[])),
            Err(BatchError::OffsetRangeMismatch {
                records_count: 0,
                last_offset_delta: 0
            })
        );

        let invalid = |body: &[u8]| match validate(&raw_batch(1, 0, 100, body)) {
            Err(BatchError::InvalidRecord { index: 0, reason }) => reason,
            other => panic!("expected InvalidRecord, got {other:?}"),
        };
        // A record length one longer than its fields.
        assert_eq!(
            invalid(&raw_record(&[0, 0, 0, 1, 1, 0, 0])),
            "record length is longer than its fields"
        );
        // A record whose fields run past its length.
        assert_eq!(
            invalid(&[0x08, 0, 0, 0, 2, b'k', 1, 0]),
            "key runs past the record's length"
        );
        assert_eq!(
            invalid(&[0x01, 0, 0, 0, 1, 1, 0]),
            "record length is negative"
        );
        assert_eq!(
            invalid(&raw_record(&[0, 0, 0, 3, 1, 0])),
            "keyLength is below -1"
        );
        assert_eq!(
            invalid(&raw_record(&[0, 0, 0, 1, 1, 2, 2, 0xff, 1])),
            "header key is not valid UTF-8"
        );
        assert_eq!(
            invalid(&raw_record(&[
                0, 0, 0, 1, 1, 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01
            ])),
            "headerKeyLength is truncated or malformed"
        );
        assert_eq!(
            invalid(&raw_record(&[0, 0, 0, 1, 1, 2, 1])),
            "headerKeyLength is negative"
        );

        // A timestamp delta that overflows against the base timestamp.
        let mut body = BytesMut::new();
        body.put_u8(0);
        write_varlong(&mut body, i64::MAX);
        body.extend_from_slice(&[0, 1, 1, 0]);
        assert!(matches!(
            validate(&raw_batch(1, 0, 100, &raw_record(&body))),
            Err(BatchError::InvalidTimestamp { .. })
        ));
    }

    #[test]
    fn batch_iter_splits_consecutive_batches() {
        let mut first = BatchBuilder::new(0);
        first.push(1, None, Some(b"a"), &[]);
        let first = first.build();
        let second = sample_batch();
        let mut region = BytesMut::new();
        region.extend_from_slice(&first);
        region.extend_from_slice(&second);
        region.extend_from_slice(&first);
        let region = region.freeze();

        let items: Vec<_> = batches(region.clone()).collect();
        assert_eq!(items.len(), 3);
        let (h0, b0) = items[0].clone().expect("first");
        assert_eq!((h0.records_count, &b0[..]), (1, &first[..]));
        let (h1, b1) = items[1].clone().expect("second");
        assert_eq!((h1.records_count, &b1[..]), (4, &second[..]));
        assert!(items[2].is_ok());
        for item in items {
            let (_, batch) = item.expect("whole batch");
            assert!(verify(&batch).is_ok());
        }

        // A torn tail yields one error and then nothing.
        let torn = region.slice(..region.len() - 1);
        let mut iter = batches(torn);
        assert!(iter.next().expect("first").is_ok());
        assert!(iter.next().expect("second").is_ok());
        assert_eq!(
            iter.next(),
            Some(Err(BatchError::Truncated {
                needed: first.len(),
                available: first.len() - 1
            }))
        );
        assert_eq!(iter.next(), None);
        assert_eq!(batches(Bytes::new()).next(), None);

        // Garbage stops iteration too.
        let mut iter = batches(Bytes::from(vec![0u8; 100]));
        assert_eq!(iter.next(), Some(Err(BatchError::InvalidMagic(0))));
        assert_eq!(iter.next(), None);
    }

    #[test]
    fn varint_encodings() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (300, &[0xd8, 0x04]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(value, encoded) in cases {
            let mut out = BytesMut::new();
            write_varint(&mut out, value);
            assert_eq!(&out[..], encoded, "encoding {value}");
            assert_eq!(varint_len(value), encoded.len());
            let mut pos = 0;
            assert_eq!(read_varint(encoded, &mut pos), Ok(value));
            assert_eq!(pos, encoded.len());
        }
        // Non-canonical but in-range encodings are accepted, as Kafka does.
        let mut pos = 0;
        assert_eq!(read_varint(&[0x80, 0x00], &mut pos), Ok(0));

        let mut pos = 0;
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], &mut pos),
            Err(BatchError::InvalidVarint)
        );
        assert_eq!(
            read_varint(&[0xff, 0xff, 0xff, 0xff, 0x1f], &mut pos),
            Err(BatchError::InvalidVarint)
        );
        assert_eq!(
            read_varint(&[0x80, 0x80], &mut pos),
            Err(BatchError::Truncated {
                needed: 3,
                available: 2
            })
        );
        assert_eq!(pos, 0, "pos is untouched on error");

        let mut out = BytesMut::new();
        write_varlong(&mut out, i64::MIN);
        assert_eq!(
            &out[..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert_eq!(read_varlong(&out, &mut pos), Ok(i64::MIN));
        let mut pos = 0;
        let mut eleven = vec![0x80u8; 10];
        eleven.push(0);
        assert_eq!(
            read_varlong(&eleven, &mut pos),
            Err(BatchError::InvalidVarint)
        );
        let mut overflow = vec![0xffu8; 9];
        overflow.push(0x02);
        assert_eq!(
            read_varlong(&overflow, &mut pos),
            Err(BatchError::InvalidVarint)
        );

        let mut out = BytesMut::new();
        write_unsigned_varint(&mut out, u32::MAX);
        assert_eq!(&out[..], &[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(unsigned_varint_len(u32::MAX), 5);
        assert_eq!(read_unsigned_varint(&out, &mut pos), Ok(u32::MAX));
    }

    #[test]
    fn errors_name_their_values() {
        let shown = |e: BatchError| e.to_string();
        assert!(shown(BatchError::CrcMismatch {
            stored: 0xdead_beef,
            computed: 1
        })
        .contains("0xdeadbeef"));
        assert!(shown(BatchError::InvalidOffsetDelta {
            index: 3,
            expected: 3,
            found: 9
        })
        .contains("offsetDelta 9, expected 3"));
        assert!(shown(BatchError::Truncated {
            needed: 70,
            available: 12
        })
        .contains("70 bytes needed but only 12"));
        assert!(shown(BatchError::UnsupportedCompression(Compression::Zstd)).contains("zstd"));
        assert!(shown(BatchError::InvalidRecord {
            index: 4,
            reason: "keyLength is below -1"
        })
        .contains("index 4: keyLength is below -1"));
    }

    #[test]
    #[should_panic(expected = "no records")]
    fn building_an_empty_batch_panics() {
        let _ = BatchBuilder::new(0).build();
    }

    const ALL_CODECS: [Compression; 5] = Compression::ALL;

    fn compressed_batch(codec: Compression, values: &[&[u8]]) -> Bytes {
        let mut builder = BatchBuilder::new(100).producer(7, 1, 0).compression(codec);
        for (i, value) in values.iter().enumerate() {
            let key = format!("key-{i}");
            builder.push(
                1_700_000_000_000 + i as i64,
                Some(key.as_bytes()),
                Some(value),
                &[("h", Some(b"v".as_slice()))],
            );
        }
        builder.build().freeze()
    }

    #[test]
    fn protocol_compressed_batches_round_trip_every_codec() {
        let values: Vec<Vec<u8>> = (0..50)
            .map(|i| format!("value {i} ").repeat(i + 1).into_bytes())
            .collect();
        let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let plain = compressed_batch(Compression::None, &values);
        for codec in ALL_CODECS {
            let batch = compressed_batch(codec, &values);
            let header = validate(&batch).unwrap_or_else(|e| panic!("{codec}: {e}"));
            assert_eq!(header.compression(), Ok(codec));
            assert_eq!(header.records_count, 50);
            assert_eq!(header.max_timestamp, 1_700_000_000_049);
            assert_eq!(header.producer_id, 7);
            if codec != Compression::None {
                assert!(batch.len() < plain.len(), "{codec} did not compress");
            }
            let decoded: Vec<Record> = records(&batch)
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("{codec}: {e}"));
            assert_eq!(decoded.len(), values.len());
            for (i, record) in decoded.iter().enumerate() {
                assert_eq!(record.offset, 100 + i as i64);
                assert_eq!(record.timestamp, 1_700_000_000_000 + i as i64);
                assert_eq!(record.key.as_deref(), Some(format!("key-{i}").as_bytes()));
                assert_eq!(record.value.as_deref(), Some(values[i]));
                assert_eq!(record.headers[0].key, "h");
            }
            // Keys and values are slices of one buffer (the batch, or its decompressed
            // records), in order: no copy per record.
            let span_start = decoded[0].key.as_ref().unwrap().as_ptr() as usize;
            let last = decoded[49].value.as_ref().unwrap();
            let span_end = last.as_ptr() as usize + last.len();
            assert!(span_end > span_start && span_end - span_start < plain.len());
        }
    }

    #[test]
    fn protocol_compressed_batch_crc_covers_the_compressed_bytes() {
        for codec in ALL_CODECS {
            let mut batch = compressed_batch(codec, &[b"some value", b"another value"]).to_vec();
            let header = verify(&batch).unwrap();
            assert_eq!(header.crc, compute_crc(&batch));
            let last = batch.len() - 1;
            batch[last] ^= 0x01;
            assert!(matches!(
                verify(&batch),
                Err(BatchError::CrcMismatch { .. })
            ));
            // With the CRC repaired, the damage is found by decompression or record checks,
            // except in snappy, which has no checksum of its own: its last byte is a literal
            // of the last header value, and the batch CRC is all that protects it.
            fix_crc(&mut batch);
            if codec != Compression::None && codec != Compression::Snappy {
                assert!(
                    validate(&batch).is_err(),
                    "{codec}: damaged payload validated"
                );
            }
        }
    }

    #[test]
    fn protocol_compressed_batch_bomb_is_refused_under_the_limit() {
        let zeros = vec![0u8; 8 * 1024 * 1024];
        for codec in ALL_CODECS.into_iter().skip(1) {
            let batch = compressed_batch(codec, &[&zeros]);
            assert!(batch.len() < 1024 * 1024, "{codec}: {} bytes", batch.len());
            let refused = BatchError::Decompression(CompressionError::OutputTooLarge {
                codec,
                limit: 1024 * 1024,
            });
            assert_eq!(
                validate_with_limit(&batch, 1024 * 1024),
                Err(refused.clone())
            );
            assert_eq!(
                records_with_limit(&batch, 1024 * 1024).err(),
                Some(refused.clone())
            );
            assert!(refused.to_string().contains(&codec.to_string()));
            // Under the default limit the same batch is fine.
            validate(&batch).unwrap();
            let record = records(&batch).unwrap().next().unwrap().unwrap();
            assert_eq!(record.value.map(|v| v.len()), Some(zeros.len()));
        }
    }

    #[test]
    fn protocol_recompressed_batch_keeps_every_header_field_and_record() {
        let values: [&[u8]; 3] = [b"first value", b"", b"third value, a little longer"];
        for from in ALL_CODECS {
            let mut original = compressed_batch(from, &values).to_vec();
            // Fields a broker or producer may have set: all carried over.
            set_partition_leader_epoch(&mut original, 9);
            original[ATTRIBUTES_AT + 1] |= TRANSACTIONAL_BIT as u8;
            fix_crc(&mut original);
            let before = validate(&original).unwrap();
            let region =
                compression::decompress(from, &original[BATCH_HEADER_LEN..], 1 << 20).unwrap();
            let expected: Vec<Record> = records(&Bytes::from(original.clone()))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            for to in ALL_CODECS {
                let compressor = compression::Compressor::new(to);
                let rebuilt = recompressed(&original, &region, &compressor).unwrap();
                let after = validate(&rebuilt).unwrap_or_else(|e| panic!("{from} to {to}: {e}"));
                assert_eq!(after.compression(), Ok(to), "{from} to {to}");
                assert_eq!(after.total_len(), rebuilt.len());
                assert_eq!(
                    BatchHeader {
                        batch_length: before.batch_length,
                        crc: before.crc,
                        attributes: before.attributes,
                        ..after
                    },
                    before,
                    "{from} to {to}: only the length, CRC and codec change"
                );
                assert_eq!(
                    after.attributes & !COMPRESSION_MASK,
                    before.attributes & !COMPRESSION_MASK
                );
                assert!(after.is_transactional());
                let got: Vec<Record> = records(&Bytes::from(rebuilt.clone()))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                assert_eq!(got, expected, "{from} to {to}");
                if to == from && from == Compression::None {
                    assert_eq!(
                        rebuilt, original,
                        "uncompressed to uncompressed is the same"
                    );
                }
            }
        }
        assert!(matches!(
            recompressed(
                &[0u8; 10],
                b"",
                &compression::Compressor::new(Compression::Zstd)
            ),
            Err(BatchError::Truncated { .. })
        ));
    }

    #[test]
    fn protocol_compressed_batch_record_checks_apply_after_decompression() {
        // A compressed batch whose header claims one record more than it holds.
        for codec in ALL_CODECS.into_iter().skip(1) {
            let mut batch = compressed_batch(codec, &[b"a", b"b"]).to_vec();
            batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
                .copy_from_slice(&2i32.to_be_bytes());
            batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&3i32.to_be_bytes());
            fix_crc(&mut batch);
            assert_eq!(
                validate(&batch),
                Err(BatchError::RecordCountMismatch {
                    header: 3,
                    actual: 2
                }),
                "{codec}"
            );
            // A wrong maxTimestamp is caught inside compressed batches too.
            let mut batch = compressed_batch(codec, &[b"a", b"b"]).to_vec();
            batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&5i64.to_be_bytes());
            fix_crc(&mut batch);
            assert!(
                matches!(
                    validate(&batch),
                    Err(BatchError::MaxTimestampMismatch { .. })
                ),
                "{codec}"
            );
        }
    }

    /// A record to push: timestamp, key, value and headers.
    type ArbRecord = (
        i64,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Vec<(String, Option<Vec<u8>>)>,
    );

    fn arb_record() -> impl Strategy<Value = ArbRecord> {
        (
            -1_000_000_000_000i64..1_000_000_000_000,
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
            proptest::collection::vec(
                (
                    ".{0,8}",
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                ),
                0..4,
            ),
        )
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let bytes = Bytes::from(data);
            let _ = BatchHeader::parse(&bytes);
            let _ = verify(&bytes);
            let _ = validate(&bytes);
            if let Ok(iter) = records(&bytes) {
                for record in iter {
                    let _ = record;
                }
            }
            let mut errors = 0;
            for item in batches(bytes) {
                if item.is_err() {
                    errors += 1;
                }
            }
            prop_assert!(errors <= 1);
        }

        #[test]
        fn mutated_batches_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            // Mutations behind a repaired CRC reach the record decoder, which random bytes
            // almost never do.
            let mut batch = sample_batch().to_vec();
            for (at, byte) in edits {
                let at = at.index(batch.len());
                batch[at] = byte;
            }
            fix_crc(&mut batch);
            let len = cut.index(batch.len() + 1);
            let bytes = Bytes::from(batch).slice(..len);
            let _ = validate(&bytes);
            if let Ok(iter) = records(&bytes) {
                for record in iter {
                    let _ = record;
                }
            }
            for item in batches(bytes) {
                let _ = item;
            }
        }

        #[test]
        fn protocol_compressed_builder_round_trips(
            codec in prop::sample::select(ALL_CODECS.to_vec()),
            recs in proptest::collection::vec(arb_record(), 1..20),
        ) {
            let mut builder = BatchBuilder::new(0).compression(codec);
            for (timestamp, key, value, headers) in &recs {
                let headers: Vec<(&str, Option<&[u8]>)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_deref()))
                    .collect();
                builder.push(*timestamp, key.as_deref(), value.as_deref(), &headers);
            }
            let batch = builder.build().freeze();
            let header = validate(&batch).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(header.compression(), Ok(codec));
            let decoded: Vec<Record> = records(&batch)
                .and_then(|iter| iter.collect::<Result<Vec<Record>, BatchError>>())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decoded.len(), recs.len());
            for (record, (timestamp, key, value, _)) in decoded.iter().zip(&recs) {
                prop_assert_eq!(record.timestamp, *timestamp);
                prop_assert_eq!(record.key.as_deref(), key.as_deref());
                prop_assert_eq!(record.value.as_deref(), value.as_deref());
            }
        }

        #[test]
        fn protocol_mutated_compressed_batches_never_panic(
            codec in prop::sample::select(ALL_CODECS.to_vec()),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        ) {
            // Damage behind a repaired CRC reaches the decompressor and the record decoder.
            let mut batch = compressed_batch(codec, &[b"first value", b"second value"]).to_vec();
            for (at, byte) in edits {
                let at = BATCH_HEADER_LEN + at.index(batch.len() - BATCH_HEADER_LEN);
                batch[at] = byte;
            }
            fix_crc(&mut batch);
            let bytes = Bytes::from(batch);
            let _ = validate_with_limit(&bytes, 64 * 1024);
            if let Ok(iter) = records_with_limit(&bytes, 64 * 1024) {
                for record in iter {
                    let _ = record;
                }
            }
        }

        #[test]
        fn builder_round_trips(
            base_offset in 0i64..i64::MAX / 2,
            recs in proptest::collection::vec(arb_record(), 1..20),
        ) {
            let mut builder = BatchBuilder::new(base_offset);
            for (timestamp, key, value, headers) in &recs {
                let headers: Vec<(&str, Option<&[u8]>)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_deref()))
                    .collect();
                builder.push(*timestamp, key.as_deref(), value.as_deref(), &headers);
            }
            prop_assert_eq!(builder.len(), recs.len());
            let batch = builder.build().freeze();
            let header = validate(&batch).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(header.records_count as usize, recs.len());
            prop_assert_eq!(header.max_timestamp, recs.iter().map(|r| r.0).max().unwrap_or(0));
            let decoded: Vec<Record> = records(&batch)
                .and_then(|iter| iter.collect::<Result<Vec<Record>, BatchError>>())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decoded.len(), recs.len());
            for (i, (record, (timestamp, key, value, headers))) in decoded.iter().zip(&recs).enumerate() {
                prop_assert_eq!(record.offset, base_offset + i as i64);
                prop_assert_eq!(record.timestamp, *timestamp);
                prop_assert_eq!(record.key.as_deref(), key.as_deref());
                prop_assert_eq!(record.value.as_deref(), value.as_deref());
                prop_assert_eq!(record.headers.len(), headers.len());
                for (h, (k, v)) in record.headers.iter().zip(headers) {
                    prop_assert_eq!(&h.key, k);
                    prop_assert_eq!(h.value.as_deref(), v.as_deref());
                }
            }
        }

        #[test]
        fn varints_round_trip(v32 in any::<i32>(), v64 in any::<i64>(), u in any::<u32>()) {
            let mut out = BytesMut::new();
            write_varint(&mut out, v32);
            write_varlong(&mut out, v64);
            write_unsigned_varint(&mut out, u);
            prop_assert_eq!(out.len(), varint_len(v32) + varlong_len(v64) + unsigned_varint_len(u));
            let mut pos = 0;
            prop_assert_eq!(read_varint(&out, &mut pos), Ok(v32));
            prop_assert_eq!(read_varlong(&out, &mut pos), Ok(v64));
            prop_assert_eq!(read_unsigned_varint(&out, &mut pos), Ok(u));
            prop_assert_eq!(pos, out.len());
        }
    }
}
