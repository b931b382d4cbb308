//! The checks a partition leader makes on the records of one partition of a Produce request
//! before the log assigns them offsets: Kafka's `LogValidator`, together with the checks Kafka
//! makes on the same bytes just before it (`ProduceRequest.validateRecords` and
//! `UnifiedLog.analyzeAndValidateRecords`), for magic v2 batches and Produce v3 and later.
//!
//! This module owns the order of those checks and the Kafka error code each failure maps to. It
//! does no IO and reads the clock only through [`ValidatorConfig::now_ms`].
//!
//! What it checks, in Kafka's order:
//! 1. The records hold exactly one whole batch of magic 2 (`INVALID_RECORD`; a batch length
//!    below the smallest legal record or a magic outside 0..=2 is `CORRUPT_MESSAGE`, as Kafka's
//!    batch iterator reports them), and zstd only from Produce v7 (`UNSUPPORTED_COMPRESSION_TYPE`).
//! 2. The base offset is 0 (`INVALID_RECORD`), the batch is at most `max.message.bytes`
//!    (`MESSAGE_TOO_LARGE`), and its CRC-32C matches (`CORRUPT_MESSAGE`).
//! 3. The batch header: a positive records count equal to `lastOffsetDelta + 1`, not a control
//!    batch, a base sequence for an idempotent producer (all `INVALID_RECORD`), a known codec
//!    (`UNSUPPORTED_COMPRESSION_TYPE`).
//! 4. Every record, decompressed (bounded by [`ValidatorConfig::decompressed_bytes_max`]) if the
//!    batch is compressed, read in place without allocating: well-formed lengths and varints,
//!    the count the header announced, offset deltas `0..n` in order (`INVALID_RECORD`, thrown at
//!    the first malformed record). Then, per record, collected as KIP-467 record errors: a key on
//!    a compacted topic (`INVALID_RECORD`), and under CreateTime a timestamp within
//!    `[now - before_max, now + after_max]` (`INVALID_TIMESTAMP`); any timestamp error makes
//!    the whole answer `INVALID_TIMESTAMP`, as in Kafka.
//!
//! The mutations: like Kafka's `setMaxTimestamp`, the batch's `maxTimestamp` and timestamp
//! type are set in place and the CRC recomputed, to `now` under LogAppendTime, and to the
//! largest record timestamp under CreateTime when the producer's header disagrees. And, the
//! one exception to the rule that records are never re-encoded (design notes §4): on a topic
//! whose `compression.type` names a codec ([`ValidatorConfig::compression`]; `uncompressed`
//! is [`Compression::None`]), a batch in another codec is recompressed to it, as Kafka's
//! `LogValidator` does ([`record_batch::recompressed`]: every header field kept, the records'
//! bytes carried over uncompressed, only the codec bits, length and CRC new), and the result
//! is checked against `max.message.bytes` again (`MESSAGE_TOO_LARGE`), as Kafka re-checks a
//! batch whose size may have changed. Under `producer` (the default), or when the codec
//! already matches, a compressed batch is stored as it came.
//! The checks ([`check_produce`]) read only; the mutations are separate steps ([`stamp`],
//! [`recompress`]), so a batch that needs none (CreateTime with a consistent header and no
//! codec to change, what clients send) is appended as the request frame's own bytes, never
//! copied ([`validate_produce_bytes`]).
//!
//! Where Samsa differs from Kafka, deliberately (each because Samsa never re-encodes, or to
//! refuse what Kafka would mishandle):
//! - Bytes after the batch that do not form a batch are refused (`CORRUPT_MESSAGE`); Kafka
//!   silently trims them.
//! - Offset deltas must be `0..n` in order; Kafka ignores them in uncompressed batches and
//!   re-encodes compressed ones that break the rule.
//! - A batch from a client with the LogAppendTime bit set is refused (`INVALID_TIMESTAMP` for
//!   every record); Kafka does the same on LogAppendTime topics but, on CreateTime topics,
//!   checks the header's `maxTimestamp` in place of the record timestamps and clears the bit.
//! - Header keys must be UTF-8 (`INVALID_RECORD`), as everywhere in Samsa; Kafka replaces
//!   invalid sequences when it decodes them.
//! - An unknown codec id is `UNSUPPORTED_COMPRESSION_TYPE` and compressed data that does not
//!   decompress is `CORRUPT_MESSAGE`; Kafka answers both with `UNKNOWN_SERVER_ERROR`.
//!   Records that decompress to more than the limit are `MESSAGE_TOO_LARGE` (Kafka has no
//!   such limit).
//! - At most [`RECORD_ERRORS_MAX`] record errors are listed; the message gives the total.
//! - A record timestamp that overflows (`baseTimestamp + timestampDelta`) is `INVALID_TIMESTAMP`
//!   under either timestamp type, and the batch's `maxTimestamp` is the true maximum even below
//!   -1; Kafka wraps the sum and floors the maximum at -1.
//!
//! Invariants: on `Ok`, the batch passes [`record_batch::validate_with_limit`] with the same
//! decompression limit and its CRC is correct; on `Err`, the bytes are unchanged. Nothing here
//! panics on any input.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::protocol::compression::{self, CompressionError, Compressor};
use crate::protocol::error::ErrorCode;
use crate::protocol::record_batch::{
    self, BatchError, BatchHeader, Compression, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
    RECORD_LEN_MIN,
};

/// Whose clock a topic's record timestamps come from (`message.timestamp.type`). One type for
/// the batch attribute and the topic setting, which Kafka also share.
pub use crate::protocol::record_batch::TimestampType;

/// The most record errors one failed validation lists. Kafka lists them all; a batch of a
/// million keyless records would make a response of tens of megabytes.
pub const RECORD_ERRORS_MAX: usize = 1024;

/// The first Produce version that may carry zstd-compressed batches (KIP-110).
pub const ZSTD_PRODUCE_VERSION_MIN: i16 = 7;

/// Kafka's "no timestamp": a record with it is not range-checked.
pub const NO_TIMESTAMP: i64 = -1;

/// Kafka's "no producer id": a batch from a producer that is not idempotent.
pub const NO_PRODUCER_ID: i64 = -1;

/// The smallest `batchLength` Kafka's batch iterator accepts before it looks at the magic (the
/// overhead of a magic v0 record); anything smaller is corrupt whatever its format.
const LEGACY_RECORD_OVERHEAD_MIN: i32 = 14;

// Header fields read before the header is parsed, to order the checks as Kafka does.
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const COMPRESSION_MASK: i16 = 0x07;

/// The settings of one validation: the topic's configs, the request's version and the time.
#[derive(Clone, Debug)]
pub struct ValidatorConfig<'a> {
    /// The topic, named in messages with the partition as Kafka names them, `topic-partition`
    /// (formatted only when a message is built, not for every batch).
    pub topic: &'a str,
    pub partition: i32,
    /// The Produce request's version (3 or later; zstd needs 7).
    pub produce_version: i16,
    /// `max.message.bytes`: the largest batch accepted, counting its 12-byte log overhead.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`.
    pub timestamp_after_max_ms: i64,
    /// `cleanup.policy` includes `compact`: every record needs a key.
    pub compacted: bool,
    /// The broker's clock, used for the timestamp bounds and as the LogAppendTime.
    pub now_ms: i64,
    /// The most bytes a compressed batch's records may decompress to.
    pub decompressed_bytes_max: usize,
    /// The topic's `compression.type` when it names a codec (`uncompressed` is
    /// [`Compression::None`]), at the topic's level for it: a batch in another codec is
    /// recompressed to this one. `None` for `producer`: every batch is stored as produced.
    pub compression: Option<Compressor>,
}

/// What a validated batch holds, for the log's offset assignment and the producer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validated {
    /// The batch's size in bytes as received, which is the whole input.
    pub bytes: usize,
    pub record_count: u64,
    pub last_offset_delta: i32,
    /// The largest record timestamp, or `now_ms` under LogAppendTime: the batch's
    /// `maxTimestamp` after validation.
    pub max_timestamp: i64,
    /// The offset delta of the first record holding `max_timestamp` (0 under LogAppendTime).
    pub max_timestamp_offset_delta: i32,
    /// `Some(now_ms)` under LogAppendTime: the Produce response's `log_append_time_ms`.
    pub log_append_time_ms: Option<i64>,
    /// The codec the producer compressed the batch with.
    pub compression: Compression,
    /// The codec the batch is stored with: the topic's when its `compression.type` names one,
    /// else `compression`. When the two differ, [`recompress`] must rebuild the batch.
    pub stored_compression: Compression,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    /// Whether the header's `maxTimestamp` and timestamp type differ from `max_timestamp` and
    /// the topic's type, so that [`stamp`] must rewrite them (and the CRC with them) before the
    /// batch is stored. [`validate_produce`] has already done so when it returns.
    pub rewritten: bool,
}

impl<'a> ValidatorConfig<'a> {
    fn topic_partition(&self) -> TopicPartition<'a> {
        TopicPartition {
            topic: self.topic,
            partition: self.partition,
        }
    }
}

/// `topic-partition` for messages, formatted only when one is built.
#[derive(Clone, Copy, Debug)]
struct TopicPartition<'a> {
    topic: &'a str,
    partition: i32,
}

impl fmt::Display for TopicPartition<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// One rejected record (KIP-467): its index in the batch and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: Option<String>,
}

/// Why the records were refused: the Kafka error code for the partition's response, a message
/// naming what is wrong, and the rejected records when the failure is per record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    pub code: ErrorCode,
    pub message: String,
    pub record_errors: Vec<RecordError>,
}

impl ValidationError {
    fn new(code: ErrorCode, message: String) -> ValidationError {
        ValidationError {
            code,
            message,
            record_errors: Vec::new(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ValidationError {}

/// Validates the records of one partition of a Produce request; see the module docs for the
/// checks and their error codes. On success the batch may have had its `maxTimestamp`,
/// timestamp type and CRC rewritten in place, or have been replaced by its recompressed copy;
/// on failure it is unchanged.
pub fn validate_produce(
    records: &mut Vec<u8>,
    cfg: &ValidatorConfig<'_>,
) -> Result<Validated, ValidationError> {
    let (validated, decompressed) = check(records, cfg)?;
    match recompress(records, decompressed.as_deref(), &validated, cfg)? {
        Some(rebuilt) => *records = rebuilt,
        None => stamp(records, &validated, cfg)?,
    }
    Ok(validated)
}

/// [`validate_produce`] on a shared buffer (a slice of the request frame): returns the bytes
/// to append. They are `records` itself, uncopied, unless the batch's header must be rewritten
/// ([`Validated::rewritten`]: always under LogAppendTime, under CreateTime only when the
/// producer's `maxTimestamp` is wrong), when the batch is copied and stamped, or the topic's
/// codec is not the batch's, when it is rebuilt ([`recompress`]).
///
/// Appending the uncopied slice is safe because the log changes only the base offset (bytes
/// 0..8), which lies outside the CRC: the CRC covers the attributes (byte 21) onwards. The bytes
/// stored are therefore exactly those a copy would have held.
pub fn validate_produce_bytes(
    records: Bytes,
    cfg: &ValidatorConfig<'_>,
) -> Result<(Validated, ValidatedBatch), ValidationError> {
    let (validated, decompressed) = check(&records, cfg)?;
    if let Some(rebuilt) = recompress(&records, decompressed.as_deref(), &validated, cfg)? {
        let records = Bytes::from(rebuilt);
        return Ok((validated, ValidatedBatch { records }));
    }
    if !validated.rewritten {
        return Ok((validated, ValidatedBatch { records }));
    }
    let mut copy = records
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    stamp(&mut copy, &validated, cfg)?;
    let records = copy.freeze();
    Ok((validated, ValidatedBatch { records }))
}

/// One batch as [`validate_produce_bytes`] accepted (and stamped) it, ready to append. Only
/// this module makes one, so [`crate::log::Log::append_validated_unacknowledged`] can skip
/// the CRC pass [`crate::log::Log::append_unacknowledged`] makes: [`check_produce`] verified
/// the CRC of these very bytes ([`stamp`] recomputed it), and `Bytes` cannot change.
#[derive(Clone, Debug)]
pub struct ValidatedBatch {
    /// Exactly one whole magic-v2 batch with a correct CRC, nothing after it.
    pub(super) records: Bytes,
}

impl ValidatedBatch {
    /// The batch's bytes: a slice of the request frame unless it was stamped.
    pub fn bytes(&self) -> &Bytes {
        &self.records
    }
}

/// The checks of [`validate_produce`] without its mutations: `records` is only read. When
/// [`Validated::stored_compression`] differs from [`Validated::compression`], [`recompress`]
/// must follow before the batch is stored, else [`stamp`] when [`Validated::rewritten`] is
/// set.
pub fn check_produce(
    records: &[u8],
    cfg: &ValidatorConfig<'_>,
) -> Result<Validated, ValidationError> {
    check(records, cfg).map(|(validated, _)| validated)
}

/// [`check_produce`], also returning a compressed batch's records as it decompressed them.
fn check(
    records: &[u8],
    cfg: &ValidatorConfig<'_>,
) -> Result<(Validated, Option<Bytes>), ValidationError> {
    let tp = cfg.topic_partition();
    let version = cfg.produce_version;
    let invalid = |message: String| Err(ValidationError::new(ErrorCode::INVALID_RECORD, message));

    // 1. What ProduceRequest.validateRecords sees through Kafka's batch iterator.
    let Some((magic, total)) = next_batch(records, 0)? else {
        return invalid(format!(
            "Produce requests with version {version} must have at least one record batch per \
             partition: {} bytes for {tp} hold no whole batch{}",
            records.len(),
            claimed_len(records)
        ));
    };
    if magic != MAGIC_V2 {
        return invalid(format!(
            "Produce requests with version {version} are only allowed to contain record batches \
             with magic version 2: the batch for {tp} has magic {magic}"
        ));
    }
    if version < ZSTD_PRODUCE_VERSION_MIN && codec_id(records) == Some(Compression::Zstd.id()) {
        return Err(ValidationError::new(
            ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
            format!(
                "Produce requests with version {version} are not allowed to use ZStandard \
                 compression (batch for {tp}); zstd needs version {ZSTD_PRODUCE_VERSION_MIN}"
            ),
        ));
    }
    match next_batch(records, total)? {
        Some(_) => {
            return invalid(format!(
                "Produce requests with version {version} are only allowed to contain exactly one \
                 record batch per partition: a second batch for {tp} starts at byte {total}"
            ))
        }
        None if records.len() > total => {
            return Err(ValidationError::new(
                ErrorCode::CORRUPT_MESSAGE,
                format!(
                    "{} bytes after the record batch for {tp} (of {total} bytes) do not form a \
                     whole batch",
                    records.len() - total
                ),
            ))
        }
        None => {}
    }

    // 2. UnifiedLog.analyzeAndValidateRecords: base offset, size, CRC.
    if total < BATCH_HEADER_LEN {
        return Err(ValidationError::new(
            ErrorCode::CORRUPT_MESSAGE,
            format!(
                "Record batch for {tp} is corrupt: its size {total} is smaller than the \
                 {BATCH_HEADER_LEN}-byte header"
            ),
        ));
    }
    let base_offset = read_i64(records, 0);
    if base_offset != 0 {
        return invalid(format!(
            "The baseOffset of the record batch in the append to {tp} should be 0, but it is \
             {base_offset}"
        ));
    }
    if total > cfg.max_message_bytes {
        return Err(ValidationError::new(
            ErrorCode::MESSAGE_TOO_LARGE,
            format!(
                "The record batch size in the append to {tp} is {total} bytes which exceeds the \
                 maximum configured value of {} (max.message.bytes)",
                cfg.max_message_bytes
            ),
        ));
    }
    let stored_crc = read_u32(records, CRC_AT);
    let computed_crc = record_batch::compute_crc(records);
    if stored_crc != computed_crc {
        return Err(ValidationError::new(
            ErrorCode::CORRUPT_MESSAGE,
            format!(
                "Record batch for {tp} is corrupt: stored crc {stored_crc:#010x}, computed crc \
                 {computed_crc:#010x}"
            ),
        ));
    }

    // 3. LogValidator.validateBatch, on a header whose bytes the CRC vouches for.
    let header = BatchHeader::parse(records).map_err(|err| header_error(err, tp))?;
    let count = header.records_count;
    if count <= 0 {
        return invalid(format!(
            "Invalid reported count for record batch: {count} in topic partition {tp}"
        ));
    }
    if i64::from(count) != i64::from(header.last_offset_delta) + 1 {
        return invalid(format!(
            "Inconsistent batch offset range [0, {}] and count of records {count} in topic \
             partition {tp}",
            header.last_offset_delta
        ));
    }
    if header.is_control() {
        return invalid(format!(
            "Clients are not allowed to write control records in topic partition {tp}"
        ));
    }
    if header.producer_id > NO_PRODUCER_ID && header.base_sequence < 0 {
        return invalid(format!(
            "Invalid sequence number {} in record batch with producerId {} in topic partition \
             {tp}",
            header.base_sequence, header.producer_id
        ));
    }
    let codec = header.compression().map_err(|err| {
        ValidationError::new(
            ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
            format!("Record batch for {tp}: {err}"),
        )
    })?;

    // 4. The records, in place or decompressed into one buffer.
    let stored = records.get(BATCH_HEADER_LEN..).unwrap_or(&[]);
    let decompressed = if codec == Compression::None {
        None
    } else {
        Some(
            compression::decompress(codec, stored, cfg.decompressed_bytes_max)
                .map_err(|err| decompression_error(err, tp))?,
        )
    };
    let region: &[u8] = decompressed.as_deref().unwrap_or(stored);
    let count_max = region.len() / RECORD_LEN_MIN;
    if usize::try_from(count).unwrap_or(usize::MAX) > count_max {
        return invalid(format!(
            "Record batch for {tp} claims {count} records but its {} bytes of records hold at \
             most {count_max}",
            region.len()
        ));
    }
    let outcome = check_records(region, &header, cfg)?;

    // The one mutation, as Kafka's setMaxTimestamp: only when the header differs.
    let (timestamp_type, max_timestamp) = match cfg.timestamp_type {
        TimestampType::LogAppendTime => (TimestampType::LogAppendTime, cfg.now_ms),
        TimestampType::CreateTime => (TimestampType::CreateTime, outcome.max_timestamp),
    };
    let rewritten =
        header.max_timestamp != max_timestamp || header.timestamp_type() != timestamp_type;
    let validated = Validated {
        bytes: total,
        record_count: u64::try_from(count).unwrap_or(0),
        last_offset_delta: header.last_offset_delta,
        max_timestamp,
        // Under LogAppendTime every record has the same timestamp, so the first holds it.
        max_timestamp_offset_delta: match cfg.timestamp_type {
            TimestampType::LogAppendTime => 0,
            TimestampType::CreateTime => outcome.max_timestamp_offset_delta,
        },
        log_append_time_ms: match cfg.timestamp_type {
            TimestampType::LogAppendTime => Some(cfg.now_ms),
            TimestampType::CreateTime => None,
        },
        compression: codec,
        stored_compression: cfg.compression.map_or(codec, |target| target.codec),
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        base_sequence: header.base_sequence,
        is_transactional: header.is_transactional(),
        rewritten,
    };
    Ok((validated, decompressed))
}

/// The recompression of [`validate_produce`], after [`check_produce`] accepted `records`:
/// `None` when the batch keeps its codec ([`Validated::stored_compression`] is
/// [`Validated::compression`]); otherwise the batch rebuilt with the topic's codec and level
/// from its uncompressed records (`decompressed` for a compressed batch, its own bytes for
/// an uncompressed one), stamped as [`stamp`] would, and no larger than `max.message.bytes`
/// (`MESSAGE_TOO_LARGE`, as Kafka re-checks a recompressed batch).
pub fn recompress(
    records: &[u8],
    decompressed: Option<&[u8]>,
    validated: &Validated,
    cfg: &ValidatorConfig<'_>,
) -> Result<Option<Vec<u8>>, ValidationError> {
    let tp = cfg.topic_partition();
    let Some(target) = cfg.compression else {
        return Ok(None);
    };
    if target.codec == validated.compression {
        return Ok(None);
    }
    let batch = records.get(..validated.bytes).unwrap_or(records);
    let uncompressed = match decompressed {
        Some(region) => region,
        None => batch.get(BATCH_HEADER_LEN..).unwrap_or(&[]),
    };
    let too_large = |len: usize| {
        ValidationError::new(
            ErrorCode::MESSAGE_TOO_LARGE,
            format!(
                "The record batch in the append to {tp} is {len} bytes once recompressed from \
                 {} to {} (the topic's compression.type), which exceeds the maximum \
                 configured size of {} bytes",
                validated.compression, target.codec, cfg.max_message_bytes
            ),
        )
    };
    let mut rebuilt =
        record_batch::recompressed(batch, uncompressed, &target).map_err(|err| match err {
            BatchError::BatchTooLarge { len, .. } => too_large(len),
            err => ValidationError::new(
                ErrorCode::UNKNOWN_SERVER_ERROR,
                format!("Record batch for {tp}: {err}"),
            ),
        })?;
    if rebuilt.len() > cfg.max_message_bytes {
        return Err(too_large(rebuilt.len()));
    }
    stamp(&mut rebuilt, validated, cfg)?;
    Ok(Some(rebuilt))
}

/// The timestamp mutation of [`validate_produce`], after [`check_produce`] accepted `records`
/// (or [`recompress`] rebuilt them): when [`Validated::rewritten`], sets the header's
/// `maxTimestamp` and timestamp type (LogAppendTime exactly when
/// [`Validated::log_append_time_ms`] is set) and recomputes the CRC; otherwise leaves the
/// bytes alone.
pub fn stamp(
    records: &mut [u8],
    validated: &Validated,
    cfg: &ValidatorConfig<'_>,
) -> Result<(), ValidationError> {
    if !validated.rewritten {
        return Ok(());
    }
    let timestamp_type = match validated.log_append_time_ms {
        Some(_) => TimestampType::LogAppendTime,
        None => TimestampType::CreateTime,
    };
    // The CRC was checked by check_produce on these same bytes (or computed by recompress over
    // the rebuilt ones), so this cannot fail; the error path exists only to keep a failure
    // (say, other bytes passed in) from passing silently.
    record_batch::set_max_timestamp(records, timestamp_type, validated.max_timestamp).map_err(
        |err| {
            ValidationError::new(
                ErrorCode::CORRUPT_MESSAGE,
                format!("Record batch for {}: {err}", cfg.topic_partition()),
            )
        },
    )
}

/// What the record walk found in a batch that passed it.
struct RecordsOutcome {
    max_timestamp: i64,
    max_timestamp_offset_delta: i32,
}

/// Walks every record: a malformed one fails at once, as Kafka's record iterator throws; key
/// and timestamp failures are collected over the whole batch, as Kafka's `validateRecord`.
fn check_records(
    region: &[u8],
    header: &BatchHeader,
    cfg: &ValidatorConfig<'_>,
) -> Result<RecordsOutcome, ValidationError> {
    let tp = cfg.topic_partition();
    let check_create_time = cfg.timestamp_type == TimestampType::CreateTime;
    let producer_log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    // The largest record timestamp and the first record holding it. Kafka starts it at -1
    // ("no timestamp"), so it never goes below -1; Samsa keeps the true maximum, which
    // `record_batch::validate` requires of a stored batch (they differ only for a batch whose
    // records are all timestamped before -1).
    let mut max_timestamp: Option<i64> = None;
    let mut max_timestamp_offset_delta = 0;
    let mut record_errors: Vec<RecordError> = Vec::new();
    let mut error_count: u64 = 0;
    let mut timestamp_errors = false;

    for item in record_batch::scan_records(region, header.records_count) {
        let record = item.map_err(|err| {
            ValidationError::new(
                ErrorCode::INVALID_RECORD,
                format!("Record batch for {tp} has a malformed record: {err}"),
            )
        })?;
        let index = record.index;
        let delta = i32::try_from(index).unwrap_or(i32::MAX);
        if record.offset_delta != delta {
            return Err(ValidationError::new(
                ErrorCode::INVALID_RECORD,
                format!(
                    "Record {index} of the record batch for {tp} has offsetDelta {}, expected \
                     {delta}: offset deltas must run from 0 in steps of 1",
                    record.offset_delta
                ),
            ));
        }
        let timestamp = header.base_timestamp.checked_add(record.timestamp_delta);
        if let Some(timestamp) = timestamp {
            if max_timestamp.is_none_or(|max| timestamp > max) {
                max_timestamp = Some(timestamp);
                max_timestamp_offset_delta = delta;
            }
        }
        let mut error = None;
        if cfg.compacted && !record.has_key {
            error = Some(format!(
                "Compacted topic cannot accept message without key in topic partition {tp}"
            ));
        } else if producer_log_append_time {
            timestamp_errors = true;
            error = Some(format!(
                "Invalid timestamp type in record {index} of the batch for {tp}: producers \
                 must not set the timestamp type to LogAppendTime"
            ));
        } else {
            match timestamp {
                // Kafka's arithmetic wraps; a timestamp that cannot be computed is refused
                // whatever the topic's timestamp type, so no stored batch holds one.
                None => {
                    timestamp_errors = true;
                    error = Some(format!(
                        "Timestamp of record {index} overflows: baseTimestamp {} plus \
                         timestampDelta {}",
                        header.base_timestamp, record.timestamp_delta
                    ));
                }
                Some(timestamp)
                    if check_create_time
                        && timestamp != NO_TIMESTAMP
                        && !timestamp_in_range(timestamp, cfg) =>
                {
                    timestamp_errors = true;
                    error = Some(format!(
                        "Timestamp {timestamp} of record {index} (offset delta {delta}) is out \
                         of range: it should be within [{}, {}]",
                        i128::from(cfg.now_ms) - i128::from(cfg.timestamp_before_max_ms),
                        i128::from(cfg.now_ms) + i128::from(cfg.timestamp_after_max_ms)
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(message) = error {
            error_count += 1;
            if record_errors.len() < RECORD_ERRORS_MAX {
                record_errors.push(RecordError {
                    batch_index: delta,
                    message: Some(message),
                });
            }
        }
    }

    if error_count > 0 {
        let shown = record_errors
            .iter()
            .take(3)
            .filter_map(|e| {
                e.message
                    .as_deref()
                    .map(|m| format!("{}: {m}", e.batch_index))
            })
            .collect::<Vec<_>>()
            .join("; ");
        let (code, what) = if timestamp_errors {
            (ErrorCode::INVALID_TIMESTAMP, "invalid timestamp or key")
        } else {
            (ErrorCode::INVALID_RECORD, "record errors")
        };
        return Err(ValidationError {
            code,
            message: format!(
                "{error_count} of {} records in the batch for {tp} were rejected ({what}); the \
                 first at most three: {shown}",
                header.records_count
            ),
            record_errors,
        });
    }
    Ok(RecordsOutcome {
        // A batch that got here has at least one record, and its timestamp was computed.
        max_timestamp: max_timestamp.unwrap_or(NO_TIMESTAMP),
        max_timestamp_offset_delta,
    })
}

/// Kafka's bounds: `now - timestamp <= before_max` and `timestamp - now <= after_max`, in
/// 128-bit arithmetic so that no configuration or timestamp can overflow.
fn timestamp_in_range(timestamp: i64, cfg: &ValidatorConfig<'_>) -> bool {
    let diff = i128::from(cfg.now_ms) - i128::from(timestamp);
    diff <= i128::from(cfg.timestamp_before_max_ms)
        && -diff <= i128::from(cfg.timestamp_after_max_ms)
}

/// Kafka's batch iterator (`ByteBufferLogInputStream.nextBatch`) on `records[at..]`: `None`
/// when no whole batch is there, the magic and size of the batch when one is, and
/// `CORRUPT_MESSAGE` for a length or magic that cannot be any batch.
fn next_batch(records: &[u8], at: usize) -> Result<Option<(i8, usize)>, ValidationError> {
    let rest = records.get(at..).unwrap_or(&[]);
    let Some(length) = rest.get(BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4) else {
        return Ok(None);
    };
    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    if length < LEGACY_RECORD_OVERHEAD_MIN {
        return Err(ValidationError::new(
            ErrorCode::CORRUPT_MESSAGE,
            format!(
                "Record batch at byte {at} has batchLength {length}, less than the minimum \
                 record overhead ({LEGACY_RECORD_OVERHEAD_MIN})"
            ),
        ));
    }
    let Some(&magic) = rest.get(MAGIC_AT) else {
        return Ok(None);
    };
    let magic = magic as i8;
    if !(0..=MAGIC_V2).contains(&magic) {
        return Err(ValidationError::new(
            ErrorCode::CORRUPT_MESSAGE,
            format!("Invalid magic {magic} found in the record batch at byte {at}"),
        ));
    }
    // length >= 14 here, so the conversion cannot fail.
    let total = usize::try_from(length)
        .unwrap_or(usize::MAX)
        .saturating_add(LOG_OVERHEAD);
    if rest.len() < total {
        return Ok(None);
    }
    Ok(Some((magic, total)))
}

/// For the "no whole batch" message: what the first batch claims, if that much is readable.
fn claimed_len(records: &[u8]) -> String {
    match records.get(BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4) {
        Some(b) => {
            let length = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            format!(
                " (its batchLength {length} needs {} bytes)",
                i64::from(length) + LOG_OVERHEAD as i64
            )
        }
        None => format!(" (a batch needs at least {BATCH_HEADER_LEN} bytes)"),
    }
}

/// The codec id in the attributes, if the bytes reach them.
fn codec_id(records: &[u8]) -> Option<i16> {
    let b = records.get(ATTRIBUTES_AT..ATTRIBUTES_AT + 2)?;
    Some(i16::from_be_bytes([b[0], b[1]]) & COMPRESSION_MASK)
}

/// Reads a big-endian i64 at `at`; callers have checked the header is present.
fn read_i64(buf: &[u8], at: usize) -> i64 {
    let mut bytes = [0u8; 8];
    if let Some(src) = buf.get(at..at + 8) {
        bytes.copy_from_slice(src);
    }
    i64::from_be_bytes(bytes)
}

/// Reads a big-endian u32 at `at`; callers have checked the header is present.
fn read_u32(buf: &[u8], at: usize) -> u32 {
    let mut bytes = [0u8; 4];
    if let Some(src) = buf.get(at..at + 4) {
        bytes.copy_from_slice(src);
    }
    u32::from_be_bytes(bytes)
}

/// Maps a header that passed the CRC but not [`BatchHeader::parse`].
fn header_error(err: BatchError, tp: TopicPartition<'_>) -> ValidationError {
    let code = match err {
        BatchError::BatchTooLarge { .. } => ErrorCode::MESSAGE_TOO_LARGE,
        BatchError::Truncated { .. } | BatchError::InvalidBatchLength(_) => {
            ErrorCode::CORRUPT_MESSAGE
        }
        _ => ErrorCode::INVALID_RECORD,
    };
    ValidationError::new(code, format!("Record batch for {tp}: {err}"))
}

fn decompression_error(err: CompressionError, tp: TopicPartition<'_>) -> ValidationError {
    let code = match err {
        CompressionError::OutputTooLarge { .. } => ErrorCode::MESSAGE_TOO_LARGE,
        CompressionError::Corrupt { .. } | CompressionError::CompressFailed { .. } => {
            ErrorCode::CORRUPT_MESSAGE
        }
    };
    ValidationError::new(code, format!("Record batch for {tp}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::BatchBuilder;
    use proptest::prelude::*;

    const NOW_MS: i64 = 1_700_000_000_000;

    fn cfg() -> ValidatorConfig<'static> {
        ValidatorConfig {
            topic: "orders",
            partition: 3,
            produce_version: 9,
            max_message_bytes: 1 << 20,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            compacted: false,
            now_ms: NOW_MS,
            decompressed_bytes_max: 64 << 20,
            compression: None,
        }
    }

    /// Three keyed records, the middle one with the largest timestamp.
    fn batch_with(codec: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(0)
            .producer(42, 3, 7)
            .transactional(true)
            .compression(codec);
        b.push(NOW_MS - 10, Some(b"k0"), Some(b"v0"), &[]);
        b.push(NOW_MS + 5, Some(b"k1"), Some(b"v1"), &[("h", Some(b"x"))]);
        b.push(NOW_MS - 3, Some(b"k2"), None, &[]);
        b.build().to_vec()
    }

    fn batch() -> Vec<u8> {
        batch_with(Compression::None)
    }

    fn fix_crc(batch: &mut [u8]) {
        let crc = record_batch::compute_crc(batch);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }

    fn put(batch: &mut [u8], at: usize, bytes: &[u8]) {
        batch[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Validates a copy and checks a failure leaves the bytes alone.
    fn check(records: &[u8], cfg: &ValidatorConfig<'_>) -> Result<Validated, ValidationError> {
        let mut copy = records.to_vec();
        let result = validate_produce(&mut copy, cfg);
        if result.is_err() {
            assert_eq!(copy, records, "a refused batch must be left unchanged");
        }
        result
    }

    fn rejected(records: &[u8], cfg: &ValidatorConfig<'_>, code: ErrorCode, text: &str) {
        match check(records, cfg) {
            Ok(v) => panic!("expected {code} ({text}), got {v:?}"),
            Err(e) => {
                assert_eq!(e.code, code, "{e}");
                assert!(
                    e.message.contains(text),
                    "message {:?} lacks {text:?}",
                    e.message
                );
            }
        }
    }

    #[test]
    fn log_validator_accepts_a_built_batch_and_reports_its_fields() {
        let records = batch();
        let mut copy = records.clone();
        let v = validate_produce(&mut copy, &cfg()).expect("valid");
        assert_eq!(copy, records, "nothing to rewrite");
        assert_eq!(
            v,
            Validated {
                bytes: records.len(),
                record_count: 3,
                last_offset_delta: 2,
                max_timestamp: NOW_MS + 5,
                max_timestamp_offset_delta: 1,
                log_append_time_ms: None,
                compression: Compression::None,
                stored_compression: Compression::None,
                producer_id: 42,
                producer_epoch: 3,
                base_sequence: 7,
                is_transactional: true,
                rewritten: false,
            }
        );
    }

    #[test]
    fn log_validator_refuses_empty_and_truncated_input() {
        let c = cfg();
        rejected(
            &[],
            &c,
            ErrorCode::INVALID_RECORD,
            "at least one record batch",
        );
        let records = batch();
        for len in [5, 12, 20, 60, records.len() - 1] {
            rejected(
                &records[..len],
                &c,
                ErrorCode::INVALID_RECORD,
                "at least one record batch",
            );
        }
    }

    #[test]
    fn log_validator_refuses_trailing_bytes_and_a_second_batch() {
        let c = cfg();
        let one = batch();
        for extra in [1, 11, 30, one.len() - 1] {
            let mut records = one.clone();
            records.extend_from_slice(&one[..extra]);
            rejected(
                &records,
                &c,
                ErrorCode::CORRUPT_MESSAGE,
                "do not form a whole batch",
            );
        }
        let mut two = one.clone();
        two.extend_from_slice(&one);
        rejected(
            &two,
            &c,
            ErrorCode::INVALID_RECORD,
            "exactly one record batch",
        );
        // A second header that cannot be a batch at all is corrupt, as Kafka's iterator says.
        let mut bad = one.clone();
        bad.extend_from_slice(&[0u8; 8]);
        bad.extend_from_slice(&5i32.to_be_bytes());
        rejected(
            &bad,
            &c,
            ErrorCode::CORRUPT_MESSAGE,
            "minimum record overhead",
        );
    }

    #[test]
    fn log_validator_refuses_impossible_lengths_and_magics() {
        let c = cfg();
        let mut records = batch();
        put(&mut records, BATCH_LENGTH_AT, &13i32.to_be_bytes());
        rejected(
            &records,
            &c,
            ErrorCode::CORRUPT_MESSAGE,
            "minimum record overhead",
        );

        let mut records = batch();
        let short = 40i32;
        put(&mut records, BATCH_LENGTH_AT, &short.to_be_bytes());
        records.truncate(short as usize + LOG_OVERHEAD);
        rejected(
            &records,
            &c,
            ErrorCode::CORRUPT_MESSAGE,
            "smaller than the 61-byte header",
        );

        for (magic, code, text) in [
            (1i8, ErrorCode::INVALID_RECORD, "magic version 2"),
            (0, ErrorCode::INVALID_RECORD, "magic version 2"),
            (3, ErrorCode::CORRUPT_MESSAGE, "Invalid magic 3"),
            (-1, ErrorCode::CORRUPT_MESSAGE, "Invalid magic -1"),
        ] {
            let mut records = batch();
            records[MAGIC_AT] = magic as u8;
            rejected(&records, &c, code, text);
        }
    }

    #[test]
    fn log_validator_refuses_zstd_before_produce_v7() {
        let records = batch_with(Compression::Zstd);
        let mut c = cfg();
        c.produce_version = 6;
        rejected(
            &records,
            &c,
            ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
            "ZStandard",
        );
        c.produce_version = 7;
        assert!(check(&records, &c).is_ok());
    }

    #[test]
    fn log_validator_refuses_a_nonzero_base_offset() {
        let mut records = batch();
        record_batch::set_base_offset(&mut records, 5);
        rejected(
            &records,
            &cfg(),
            ErrorCode::INVALID_RECORD,
            "should be 0, but it is 5",
        );
    }

    #[test]
    fn log_validator_compares_the_batch_size_with_max_message_bytes() {
        let records = batch();
        let mut c = cfg();
        c.max_message_bytes = records.len();
        assert!(check(&records, &c).is_ok());
        c.max_message_bytes = records.len() - 1;
        rejected(
            &records,
            &c,
            ErrorCode::MESSAGE_TOO_LARGE,
            &format!("is {} bytes", records.len()),
        );
    }

    #[test]
    fn log_validator_refuses_a_crc_mismatch() {
        let mut records = batch();
        let last = records.len() - 1;
        records[last] ^= 1;
        rejected(&records, &cfg(), ErrorCode::CORRUPT_MESSAGE, "stored crc");
    }

    #[test]
    fn log_validator_refuses_bad_counts_and_offset_ranges() {
        let c = cfg();
        let cases: [(i32, i32, &str); 4] = [
            (0, 0, "Invalid reported count for record batch: 0"),
            (
                2,
                2,
                "Inconsistent batch offset range [0, 2] and count of records 2",
            ),
            (3, -1, "lastOffsetDelta -1"),
            // Both agree, but the bytes hold three records, not four.
            (4, 3, "malformed record"),
        ];
        for (count, last_offset_delta, text) in cases {
            let mut records = batch();
            put(&mut records, 57, &count.to_be_bytes());
            put(&mut records, 23, &last_offset_delta.to_be_bytes());
            fix_crc(&mut records);
            rejected(&records, &c, ErrorCode::INVALID_RECORD, text);
        }
        // A count no bytes could hold is refused before any record is read.
        let mut records = batch();
        put(&mut records, 57, &1000i32.to_be_bytes());
        put(&mut records, 23, &999i32.to_be_bytes());
        fix_crc(&mut records);
        rejected(
            &records,
            &c,
            ErrorCode::INVALID_RECORD,
            "claims 1000 records",
        );
    }

    #[test]
    fn log_validator_refuses_control_batches_and_missing_sequences() {
        let c = cfg();
        let mut records = batch();
        records[ATTRIBUTES_AT + 1] |= 0x20;
        fix_crc(&mut records);
        rejected(&records, &c, ErrorCode::INVALID_RECORD, "control records");

        let mut records = batch();
        put(&mut records, 53, &(-1i32).to_be_bytes());
        fix_crc(&mut records);
        rejected(
            &records,
            &c,
            ErrorCode::INVALID_RECORD,
            "Invalid sequence number -1 in record batch with producerId 42",
        );
        // Without a producer id, no sequence is needed.
        let mut b = BatchBuilder::new(0);
        b.push(NOW_MS, None, Some(b"v"), &[]);
        assert!(check(&b.build(), &c).is_ok());
    }

    #[test]
    fn log_validator_refuses_unknown_codecs() {
        for id in 5..=7u8 {
            let mut records = batch();
            records[ATTRIBUTES_AT + 1] = (records[ATTRIBUTES_AT + 1] & !0x07) | id;
            fix_crc(&mut records);
            rejected(
                &records,
                &cfg(),
                ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
                &format!("invalid compression codec {id}"),
            );
        }
    }

    /// Two records with one-byte fields, so offsets into them are easy to compute.
    fn small_batch() -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        b.push(NOW_MS, Some(b"a"), Some(b"b"), &[]);
        b.push(NOW_MS, Some(b"c"), Some(b"d"), &[]);
        b.build().to_vec()
    }

    #[test]
    fn log_validator_refuses_malformed_records_and_bad_offset_deltas() {
        let c = cfg();
        // Each record: its length 8 (one byte), then attributes, timestampDelta 0, offsetDelta,
        // key length, key, value length, value, headers count: 9 bytes.
        let second = BATCH_HEADER_LEN + 9;
        let records = small_batch();
        assert_eq!(records.len(), second + 9);
        assert_eq!(records[second], 16, "second record's length 8, zigzag 16");
        assert_eq!(
            records[second + 3],
            2,
            "second record's offsetDelta 1, zigzag 2"
        );

        let mut bad = records.clone();
        bad[second + 3] = 10; // offsetDelta 5
        fix_crc(&mut bad);
        rejected(
            &bad,
            &c,
            ErrorCode::INVALID_RECORD,
            "Record 1 of the record batch for orders-3 has offsetDelta 5, expected 1",
        );

        let mut bad = records.clone();
        bad[second] = 40; // record length 20, past the end
        fix_crc(&mut bad);
        rejected(
            &bad,
            &c,
            ErrorCode::INVALID_RECORD,
            "invalid record at index 1",
        );

        let mut bad = records.clone();
        bad[second + 4] = 0x7f; // key length: a varint that does not end
        fix_crc(&mut bad);
        rejected(
            &bad,
            &c,
            ErrorCode::INVALID_RECORD,
            "invalid record at index 1",
        );
    }

    #[test]
    fn log_validator_checks_create_time_bounds_per_record() {
        let mut b = BatchBuilder::new(0);
        b.push(NOW_MS - 2_000, Some(b"k"), None, &[]); // too old
        b.push(NOW_MS, Some(b"k"), None, &[]);
        b.push(NOW_MS + 2_000, Some(b"k"), None, &[]); // too new
        b.push(NOW_MS + 1_000, Some(b"k"), None, &[]); // exactly at the bound
        let records = b.build().to_vec();
        let mut c = cfg();
        c.timestamp_before_max_ms = 1_000;
        c.timestamp_after_max_ms = 1_000;
        let err = check(&records, &c).expect_err("out of range");
        assert_eq!(err.code, ErrorCode::INVALID_TIMESTAMP);
        let indices: Vec<i32> = err.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indices, vec![0, 2]);
        let first = err.record_errors[0].message.as_deref().unwrap_or("");
        assert!(
            first.contains(&format!("Timestamp {} of record 0", NOW_MS - 2_000))
                && first.contains(&format!("[{}, {}]", NOW_MS - 1_000, NOW_MS + 1_000)),
            "{first}"
        );
        assert!(err.message.contains("2 of 4 records"), "{}", err.message);

        // Under LogAppendTime the producer's timestamps are not checked.
        c.timestamp_type = TimestampType::LogAppendTime;
        assert!(check(&records, &c).is_ok());
    }

    #[test]
    fn log_validator_skips_records_without_timestamps() {
        let mut b = BatchBuilder::new(0);
        b.push(NO_TIMESTAMP, Some(b"k"), None, &[]);
        let records = b.build().to_vec();
        let mut c = cfg();
        c.timestamp_before_max_ms = 0;
        c.timestamp_after_max_ms = 0;
        let v = check(&records, &c).expect("-1 is not range-checked");
        assert_eq!(v.max_timestamp, NO_TIMESTAMP);
    }

    #[test]
    fn log_validator_refuses_timestamp_overflow_under_either_type() {
        let mut b = BatchBuilder::new(0);
        b.push(i64::MAX - 1, Some(b"k"), None, &[]);
        b.push(i64::MAX, Some(b"k"), None, &[]);
        let mut records = b.build().to_vec();
        // Record 1's timestampDelta is 1: from a base of i64::MAX it overflows.
        put(&mut records, 27, &i64::MAX.to_be_bytes());
        fix_crc(&mut records);
        for timestamp_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            let mut c = cfg();
            c.timestamp_type = timestamp_type;
            let err = check(&records, &c).expect_err("overflow");
            assert_eq!(err.code, ErrorCode::INVALID_TIMESTAMP);
            let indices: Vec<i32> = err.record_errors.iter().map(|e| e.batch_index).collect();
            assert_eq!(indices, vec![1], "{err}");
        }
    }

    #[test]
    fn log_validator_keeps_the_true_maximum_below_minus_one() {
        let mut b = BatchBuilder::new(0);
        b.push(-5, Some(b"k"), None, &[]);
        b.push(-3, Some(b"k"), None, &[]);
        let mut records = b.build().to_vec();
        let v = validate_produce(&mut records, &cfg()).expect("valid");
        assert_eq!((v.max_timestamp, v.max_timestamp_offset_delta), (-3, 1));
        assert!(!v.rewritten);
        record_batch::validate(&records).expect("consistent with the stored-batch rules");
    }

    #[test]
    fn log_validator_requires_keys_on_compacted_topics() {
        let mut b = BatchBuilder::new(0);
        b.push(NOW_MS, Some(b"k"), None, &[]);
        b.push(NOW_MS, None, Some(b"v"), &[]);
        b.push(NOW_MS, Some(b""), None, &[]); // an empty key is a key
        let records = b.build().to_vec();
        let mut c = cfg();
        assert!(check(&records, &c).is_ok());
        c.compacted = true;
        let err = check(&records, &c).expect_err("keyless record");
        assert_eq!(err.code, ErrorCode::INVALID_RECORD);
        assert_eq!(
            err.record_errors,
            vec![RecordError {
                batch_index: 1,
                message: Some(
                    "Compacted topic cannot accept message without key in topic partition orders-3"
                        .into()
                ),
            }]
        );
    }

    #[test]
    fn log_validator_lists_at_most_record_errors_max() {
        let mut b = BatchBuilder::new(0);
        let n = RECORD_ERRORS_MAX + 100;
        for _ in 0..n {
            b.push(NOW_MS, None, None, &[]);
        }
        let records = b.build().to_vec();
        let mut c = cfg();
        c.compacted = true;
        let err = check(&records, &c).expect_err("keyless records");
        assert_eq!(err.record_errors.len(), RECORD_ERRORS_MAX);
        assert!(
            err.message.contains(&format!("{n} of {n} records")),
            "{}",
            err.message
        );
    }

    #[test]
    fn log_validator_refuses_producer_log_append_time() {
        let mut records = batch();
        record_batch::set_max_timestamp(&mut records, TimestampType::LogAppendTime, NOW_MS)
            .expect("valid batch");
        for timestamp_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            let mut c = cfg();
            c.timestamp_type = timestamp_type;
            let err = check(&records, &c).expect_err("producer LogAppendTime");
            assert_eq!(err.code, ErrorCode::INVALID_TIMESTAMP);
            assert_eq!(err.record_errors.len(), 3);
        }
    }

    #[test]
    fn log_validator_stamps_log_append_time_and_recomputes_the_crc() {
        for codec in [Compression::None, Compression::Lz4] {
            let original = batch_with(codec);
            let mut records = original.clone();
            let mut c = cfg();
            c.timestamp_type = TimestampType::LogAppendTime;
            let v = validate_produce(&mut records, &c).expect("valid");
            assert!(v.rewritten);
            assert_eq!(v.max_timestamp, NOW_MS);
            assert_eq!(v.log_append_time_ms, Some(NOW_MS));
            assert_eq!(v.max_timestamp_offset_delta, 0);
            let header = record_batch::verify(&records).expect("CRC recomputed");
            assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
            assert_eq!(header.max_timestamp, NOW_MS);
            assert_eq!(header.base_timestamp, NOW_MS - 10, "base timestamp kept");
            record_batch::validate(&records).expect("still a valid batch");
            // Only the attributes, maxTimestamp and CRC changed.
            for (i, (a, b)) in original.iter().zip(&records).enumerate() {
                let changed = (CRC_AT..CRC_AT + 4).contains(&i)
                    || (ATTRIBUTES_AT..ATTRIBUTES_AT + 2).contains(&i)
                    || (35..43).contains(&i);
                if !changed {
                    assert_eq!(a, b, "byte {i} changed");
                }
            }
            // Validating the stamped bytes again, a second later, stamps them again.
            c.now_ms += 1_000;
            let mut again = records.clone();
            // The producer's LogAppendTime bit is refused, as Kafka refuses it.
            assert!(validate_produce(&mut again, &c).is_err());
        }
    }

    #[test]
    fn log_validator_rewrites_a_wrong_create_time_max_timestamp() {
        let mut records = batch();
        put(&mut records, 35, &(NOW_MS + 99).to_be_bytes());
        fix_crc(&mut records);
        let v = validate_produce(&mut records, &cfg()).expect("valid");
        assert!(v.rewritten);
        assert_eq!(v.max_timestamp, NOW_MS + 5);
        let header = record_batch::validate(&records).expect("consistent now");
        assert_eq!(header.max_timestamp, NOW_MS + 5);
        assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
    }

    #[test]
    fn log_validator_accepts_every_codec_and_checks_inner_records() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let records = batch_with(codec);
            let v = check(&records, &cfg()).unwrap_or_else(|e| panic!("{codec}: {e}"));
            assert_eq!(v.compression, codec);
            assert_eq!(v.record_count, 3);
            assert_eq!(v.max_timestamp, NOW_MS + 5);
            assert!(!v.rewritten);

            let mut b = BatchBuilder::new(0).compression(codec);
            b.push(NOW_MS, None, Some(b"v"), &[]);
            let keyless = b.build().to_vec();
            let mut c = cfg();
            c.compacted = true;
            let err = check(&keyless, &c).expect_err("keyless inside compressed batch");
            assert_eq!(err.code, ErrorCode::INVALID_RECORD, "{codec}");
        }
    }

    const ALL_CODECS: [Compression; 5] = Compression::ALL;

    fn with_compression(codec: Compression) -> ValidatorConfig<'static> {
        ValidatorConfig {
            compression: Some(Compressor::new(codec)),
            ..cfg()
        }
    }

    fn stored_records(batch: &[u8]) -> Vec<record_batch::Record> {
        record_batch::records(&Bytes::copy_from_slice(batch))
            .expect("records")
            .map(|r| r.expect("record"))
            .collect()
    }

    #[test]
    fn log_validator_recompresses_to_the_topics_codec_keeping_everything_else() {
        for from in ALL_CODECS {
            let original = batch_with(from);
            let before = BatchHeader::parse(&original).unwrap();
            for to in ALL_CODECS {
                let mut stored = original.clone();
                let v = validate_produce(&mut stored, &with_compression(to))
                    .unwrap_or_else(|e| panic!("{from} to {to}: {e}"));
                assert_eq!((v.compression, v.stored_compression), (from, to));
                let after = record_batch::validate(&stored).expect("a valid batch");
                assert_eq!(after.compression(), Ok(to));
                // record_batch::recompressed keeps every other header field (its own test).
                let producer = |h: &BatchHeader| (h.producer_id, h.producer_epoch, h.base_sequence);
                assert_eq!(producer(&after), producer(&before), "{from} to {to}");
                assert!(after.is_transactional());
                assert_eq!(stored_records(&stored), stored_records(&original));
                assert_eq!(v.bytes, original.len(), "the size as received");
                if from == to {
                    assert_eq!(stored, original, "{from}: the same codec is not re-encoded");
                }
            }
        }
    }

    #[test]
    fn log_validator_keeps_the_frame_slice_unless_the_codec_changes() {
        for from in ALL_CODECS {
            let frame = Bytes::from(batch_with(from));
            for to in ALL_CODECS {
                for c in [cfg(), with_compression(to)] {
                    let (v, stored) = validate_produce_bytes(frame.clone(), &c).expect("valid");
                    let same = c.compression.is_none() || from == to;
                    assert_eq!(
                        stored.bytes().as_ptr() == frame.as_ptr(),
                        same,
                        "{from} to {to} under {:?}",
                        c.compression
                    );
                    if same {
                        assert_eq!(stored.bytes(), &frame);
                        assert_eq!(v.stored_compression, from);
                    } else {
                        let header = record_batch::validate(stored.bytes()).expect("valid");
                        assert_eq!(header.compression(), Ok(to));
                    }
                }
            }
        }
    }

    #[test]
    fn log_validator_recompresses_and_stamps_log_append_time() {
        let original = batch_with(Compression::Snappy);
        let mut stored = original.clone();
        let mut c = with_compression(Compression::Zstd);
        c.timestamp_type = TimestampType::LogAppendTime;
        let v = validate_produce(&mut stored, &c).expect("valid");
        assert!(v.rewritten);
        let header = record_batch::validate(&stored).expect("CRC recomputed");
        assert_eq!(header.compression(), Ok(Compression::Zstd));
        assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(header.max_timestamp, NOW_MS);
        assert_eq!(header.base_timestamp, NOW_MS - 10, "base timestamp kept");
    }

    #[test]
    fn log_validator_rechecks_max_message_bytes_after_recompression() {
        // 64 KiB of zeros gzip to a few hundred bytes; stored uncompressed they do not fit.
        let mut b = BatchBuilder::new(0).compression(Compression::Gzip);
        b.push(NOW_MS, Some(b"k"), Some(&[0u8; 65_536]), &[]);
        let original = b.build().to_vec();
        let mut c = with_compression(Compression::None);
        c.max_message_bytes = 4096;
        assert!(original.len() < c.max_message_bytes);
        rejected(
            &original,
            &c,
            ErrorCode::MESSAGE_TOO_LARGE,
            "once recompressed from gzip to none",
        );
        c.max_message_bytes = 1 << 20;
        let mut stored = original.clone();
        validate_produce(&mut stored, &c).expect("fits");
        assert!(stored.len() > 65_536);
        assert_eq!(
            record_batch::validate(&stored).unwrap().compression(),
            Ok(Compression::None)
        );
    }

    #[test]
    fn log_validator_recompresses_at_the_topics_level() {
        let mut b = BatchBuilder::new(0);
        for i in 0..200u32 {
            let value = format!("record {i} of a compressible batch, record {i} of it");
            b.push(NOW_MS, None, Some(value.as_bytes()), &[]);
        }
        let original = b.build().to_vec();
        let size_at = |codec: Compression, level: i32| {
            let mut stored = original.clone();
            let c = ValidatorConfig {
                compression: Some(Compressor::with_level(codec, level)),
                ..cfg()
            };
            validate_produce(&mut stored, &c).expect("valid");
            assert_eq!(stored_records(&stored), stored_records(&original));
            stored.len()
        };
        assert!(size_at(Compression::Gzip, 9) < size_at(Compression::Gzip, 1));
        assert!(size_at(Compression::Zstd, 19) < size_at(Compression::Zstd, -5));
    }

    #[test]
    fn log_validator_bounds_decompression_and_refuses_corrupt_payloads() {
        let mut b = BatchBuilder::new(0).compression(Compression::Gzip);
        for i in 0..1000 {
            b.push(NOW_MS, Some(b"key"), Some(&[i as u8; 100]), &[]);
        }
        let records = b.build().to_vec();
        let mut c = cfg();
        c.decompressed_bytes_max = 10_000;
        rejected(
            &records,
            &c,
            ErrorCode::MESSAGE_TOO_LARGE,
            "decompresses to more than",
        );

        let mut corrupt = records.clone();
        corrupt[BATCH_HEADER_LEN + 12] ^= 0xff;
        fix_crc(&mut corrupt);
        rejected(
            &corrupt,
            &cfg(),
            ErrorCode::CORRUPT_MESSAGE,
            "corrupt gzip data",
        );
    }

    fn record_strategy() -> impl Strategy<Value = (i64, Vec<u8>, Option<Vec<u8>>, bool)> {
        (
            -100_000i64..100_000,
            proptest::collection::vec(any::<u8>(), 0..8),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            any::<bool>(),
        )
    }

    fn codec_strategy() -> impl Strategy<Value = Compression> {
        prop_oneof![
            Just(Compression::None),
            Just(Compression::Gzip),
            Just(Compression::Snappy),
            Just(Compression::Lz4),
            Just(Compression::Zstd),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn log_validator_valid_batches_pass_and_corruption_never_passes_unnoticed(
            records in proptest::collection::vec(record_strategy(), 1..20),
            codec in codec_strategy(),
            producer in any::<bool>(),
            log_append_time in any::<bool>(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut b = BatchBuilder::new(0).compression(codec);
            if producer {
                b = b.producer(1, 0, 0);
            }
            for (delta, key, value, header) in &records {
                let headers: &[(&str, Option<&[u8]>)] =
                    if *header { &[("h", Some(b"1"))] } else { &[] };
                b.push(NOW_MS + delta, Some(key), value.as_deref(), headers);
            }
            let built = b.build().to_vec();
            let mut c = cfg();
            c.compacted = true;
            if log_append_time {
                c.timestamp_type = TimestampType::LogAppendTime;
            }
            let mut ok = built.clone();
            let v = validate_produce(&mut ok, &c);
            prop_assert!(v.is_ok(), "{:?}", v);
            let stored = record_batch::validate_with_limit(&ok, c.decompressed_bytes_max);
            prop_assert!(stored.is_ok(), "{:?}", stored);

            let mut corrupt = built.clone();
            let i = at.index(corrupt.len());
            prop_assume!(corrupt[i] != byte);
            corrupt[i] = byte;
            let before = corrupt.clone();
            match validate_produce(&mut corrupt, &c) {
                Err(_) => prop_assert_eq!(&corrupt, &before),
                Ok(_) => {
                    // Only bytes outside the CRC may change undetected: the partition leader
                    // epoch (12..16). Anything else passing would be a missed corruption.
                    prop_assert!((12..16).contains(&i), "corruption at byte {} passed", i);
                    let stored =
                        record_batch::validate_with_limit(&corrupt, c.decompressed_bytes_max);
                    prop_assert!(stored.is_ok(), "{:?}", stored);
                }
            }
        }
    }
}
