//! The partition log: an ordered, durable sequence of Kafka record batches on `rt`'s disk.
//!
//! A log is a directory of segments (see [`segment`]), a recovery-point checkpoint and, after a
//! clean shutdown, a clean-shutdown marker. Appends assign offsets in place and store the bytes
//! as received ([`AppendMode::Client`]); a leader's appends also stamp its epoch, and a
//! follower's keep the leader's offsets and epochs ([`AppendMode`]); the epochs' start
//! offsets are kept in the leader-epoch cache ([`leader_epoch`]). Reads return whole batches;
//! they hold the state lock to plan, not across their disk IO, and a truncation that crosses
//! one makes it read again ([`Log::read`]).
//!
//! Durability. Under [`FlushPolicy::SyncBeforeAck`] (the default) `append` returns only after
//! its bytes and any new segment's directory entry are synced; concurrent appends share syncs
//! (group commit: whoever holds the sync lock syncs everything written so far, and the appends
//! waiting behind it usually find their data already durable). Under
//! [`FlushPolicy::PageCache`] (Kafka's default) `append` returns once the bytes are in the page
//! cache and syncs happen every `flush_messages` records or `flush_ms`.
//!
//! Invariants (asserted where they change):
//! - `log_start_offset <= durable_end_offset <= log_end_offset`;
//! - every byte below `durable_end_offset` is synced, and so is the name of every segment file
//!   holding such bytes;
//! - the checkpointed recovery point never exceeds `durable_end_offset` at the time it was
//!   written, so recovery may trust every segment wholly below it;
//! - once an IO error has been seen the log is offline: every later call fails until the log
//!   is reopened (a failed sync leaves the page cache in an unknown state, see fsyncgate);
//! - the idempotent producers' state ([`producer_state`]) reflects exactly the batches below
//!   `log_end_offset`: it is checked and updated under the state lock with offset assignment,
//!   written as a snapshot at each roll and clean close, and rebuilt on open and after a
//!   truncation ([`producer_snapshot`]);
//! - along the log, leader epochs never decrease (appends that would are refused), and the
//!   leader-epoch cache names the first offset of each epoch that wrote to it;
//! - the log start offset only moves forward, never past the caller's high watermark, and
//!   the first segment's base offset is at or below it. It is checkpointed durably
//!   (`log-start-offset-checkpoint`) before any segment below it is unlinked, so a crash at
//!   any point leaves either the old start with every segment, or the new start with some
//!   segments below it that recovery removes.
//!
//! Retention (see [`Log::enforce_retention`] and [`Log::delete_records`]) deletes whole
//! segments from the front of the log, never the active one, and only segments that lie
//! wholly below the high watermark, so an unacknowledged append is never deleted. Producer
//! snapshots below the new start go with the segments (the newest one is kept).

pub mod cleaner;
pub mod leader_epoch;
// Unit tests on tokio and the in-memory disk; the sim build runs the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod leader_epoch_tests;
// Unit tests on tokio and the in-memory disk; the sim build runs the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod cleaner_tests;
mod index;
pub mod producer_snapshot;
pub mod producer_state;
mod recovery;
// Unit tests on tokio and the in-memory disk; the sim build runs the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod retention_tests;
pub mod scrubber;
pub mod segment;
pub mod validator;
// Unit tests on tokio and the in-memory disk; the sim build runs the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod zero_copy_tests;

pub use recovery::RecoveryReport;
pub use scrubber::{ScrubCorruption, ScrubCursor, ScrubStep};

use crate::protocol::record_batch::{self, BatchError, BASE_OFFSET_LEN};
use crate::rt::clock::Clock;
use crate::rt::disk::{join, Disk, File};
use crate::rt::fault::FaultPoint;
use crate::rt::time;
use bytes::Bytes;
use leader_epoch::{EpochEnd, EpochEntry, LeaderEpochCache};
use producer_state::{Prepared, ProducerBatch, ProducerStateError, ProducerStateMap};
use segment::{Segment, SegmentReader};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Mutex;

/// Name of the recovery-point checkpoint file in a log directory.
pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
/// Name of the log start offset checkpoint file in a log directory (one per partition;
/// Kafka keeps one per log directory listing every partition).
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
/// Name of the marker a clean shutdown leaves in a log directory (Kafka's name).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// A batch's first bytes that an append rewrites: base offset (0..8), batch length (8..12,
/// copied) and partition leader epoch (12..16). All lie before the CRC'd part (from the
/// attributes, byte 21), so the stored batch stays valid.
const BATCH_PREFIX_LEN: usize = 16;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const _: () = assert!(BATCH_PREFIX_LEN <= record_batch::BATCH_HEADER_LEN);
const _: () = assert!(BASE_OFFSET_LEN + 4 == PARTITION_LEADER_EPOCH_AT);

/// Segment sizes are bounded by the 32-bit positions of the offset index.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;
/// Below this a segment could not hold a single batch header.
pub const SEGMENT_BYTES_MIN: u64 = 1024;

/// When the log syncs its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Sync before acknowledging an append (Samsa's default), with group commit.
    SyncBeforeAck,
    /// Acknowledge once written to the page cache; sync after `flush_messages` records or
    /// `flush_ms` milliseconds (Kafka's `flush.messages` / `flush.ms`).
    PageCache { flush_messages: u64, flush_ms: u64 },
}

/// Who appends, which decides the offsets and the leader epochs of the batches (Kafka's
/// `AppendOrigin` with its `assignOffsets` flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendMode {
    /// A client's batches on a single node: offsets assigned, epochs left as sent and not
    /// recorded (a client's `partitionLeaderEpoch` is not the log's to trust).
    Client,
    /// The leader of `epoch`: offsets assigned and every batch stamped with the epoch,
    /// which the leader-epoch cache records where it begins.
    Leader { epoch: i32 },
    /// A follower copying the leader's batches: offsets and epochs kept as the leader wrote
    /// them. The first batch must start at the log end and each must follow the one before;
    /// epochs may not go below the log's latest. Producer state replays the batches without
    /// the client checks, as recovery does.
    Replica,
}

/// Per-log settings, named after Kafka's topic configs.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes`: roll to a new segment before this size would be exceeded.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a segment this long after its first append.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes of log between two offset-index entries.
    pub index_interval_bytes: u64,
    /// `segment.index.bytes`: roll when the offset index reaches this size.
    pub segment_index_bytes: u64,
    pub flush: FlushPolicy,
    /// Check every batch's CRC before serving it from [`Log::read`]. Off in the broker, in
    /// production and in simulation alike: reads are zero-copy and skip it like Kafka's
    /// (clients check CRCs, recovery and the scrubber find corruption at rest); tools that
    /// read a log offline may turn it on.
    pub verify_crc_on_read: bool,
    /// `log.flush.offset.checkpoint.interval.ms`: how often the recovery point is written.
    pub checkpoint_interval_ms: u64,
    /// `producer.id.expiration.ms` (broker-level, KIP-854): a producer idle this long (by its
    /// latest batch's timestamp) is forgotten by [`Log::remove_expired_producers`].
    pub producer_id_expiration_ms: i64,
    /// Check idempotent producers' batches (always, outside the simulation's broken-option
    /// test, which turns it off to show the duplicate checker fires without it). When off,
    /// batches are appended as if they had no producer id and no producer state is kept.
    pub producer_state_checks: bool,
    /// Deliberate bugs for the simulation's checker tests; all off in every real config.
    pub bugs: LogBugs,
}

/// Deliberately broken options of the log (no properties key reaches them): each plants one
/// bug that a simulation checker must report, so that every checker is shown to fire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogBugs {
    /// Recovery scans batches without checking their CRC (offline reads report it:
    /// corrupt-read).
    pub recovery_skips_crc: bool,
    /// Recovery truncates a torn batch but moves the log end past it as its header claims,
    /// leaving a hole in the offsets (offset-gap).
    pub torn_batch_leaves_hole: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 << 20,
            flush: FlushPolicy::SyncBeforeAck,
            verify_crc_on_read: false,
            checkpoint_interval_ms: 60_000,
            producer_id_expiration_ms: producer_state::PRODUCER_ID_EXPIRATION_MS_DEFAULT,
            producer_state_checks: true,
            bugs: LogBugs::default(),
        }
    }
}

impl LogConfig {
    /// Refuses settings the log cannot honour, naming the setting.
    pub fn validate(&self) -> Result<(), LogError> {
        let bad = |key: &str, why: String| Err(LogError::Config(format!("{key}: {why}")));
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            return bad(
                "segment.bytes",
                format!(
                    "{} is outside [{SEGMENT_BYTES_MIN}, {SEGMENT_BYTES_MAX}]",
                    self.segment_bytes
                ),
            );
        }
        if self.segment_ms <= 0 {
            return bad(
                "segment.ms",
                format!("{} must be positive", self.segment_ms),
            );
        }
        if self.index_interval_bytes == 0 {
            return bad("index.interval.bytes", "must be positive".into());
        }
        if self.segment_index_bytes < 8 {
            return bad(
                "segment.index.bytes",
                format!("{} cannot hold one 8-byte entry", self.segment_index_bytes),
            );
        }
        if self.producer_id_expiration_ms < 1 {
            return bad(
                "producer.id.expiration.ms",
                format!("{} must be positive", self.producer_id_expiration_ms),
            );
        }
        if let FlushPolicy::PageCache {
            flush_messages,
            flush_ms,
        } = self.flush
        {
            if flush_messages == 0 || flush_ms == 0 {
                return bad("flush.messages/flush.ms", "must be positive".into());
            }
        }
        Ok(())
    }
}

/// Errors of the log, each naming what failed.
#[derive(Debug)]
pub enum LogError {
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    InvalidBatch(BatchError),
    /// An append larger than one segment can hold.
    RecordsTooLarge {
        bytes: usize,
        max: u64,
    },
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// Data on disk failed a check; it is not served.
    Corrupt {
        segment: String,
        position: u64,
        reason: String,
    },
    /// An earlier IO error took the log offline; reopen it to recover.
    Offline {
        reason: String,
    },
    /// The log was truncated below an append while it waited for its sync.
    Truncated {
        offset: i64,
    },
    Config(String),
    /// An idempotent producer's batch was refused by the producer state checks.
    Producer(ProducerStateError),
    /// A log cleaner pass stopped for shutdown before changing anything.
    Aborted,
    /// A replica's append does not start at the log end or its batches do not follow each
    /// other (Kafka's UnexpectedAppendOffsetException).
    UnexpectedAppendOffset {
        expected: i64,
        found: i64,
    },
    /// A batch's leader epoch is below an epoch the log already holds: epochs never
    /// decrease along a log.
    EpochOutOfOrder {
        offset: i64,
        epoch: i32,
        latest_epoch: i32,
    },
}

impl LogError {
    pub fn io(op: &'static str, path: &str, source: std::io::Error) -> LogError {
        LogError::Io {
            op,
            path: path.to_string(),
            source,
        }
    }
}

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            LogError::InvalidBatch(e) => write!(f, "invalid record batch: {e}"),
            LogError::RecordsTooLarge { bytes, max } => {
                write!(f, "{bytes} bytes of records exceed the segment size {max}")
            }
            LogError::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
            ),
            LogError::Corrupt {
                segment,
                position,
                reason,
            } => write!(
                f,
                "corrupt data in {segment} at position {position}: {reason}"
            ),
            LogError::Offline { reason } => write!(f, "log is offline: {reason}"),
            LogError::Truncated { offset } => {
                write!(
                    f,
                    "log was truncated below offset {offset} before it was synced"
                )
            }
            LogError::Config(why) => write!(f, "invalid log config: {why}"),
            LogError::Producer(e) => write!(f, "{e}"),
            LogError::Aborted => write!(f, "log cleaner pass stopped for shutdown"),
            LogError::UnexpectedAppendOffset { expected, found } => write!(
                f,
                "a replica's batch at offset {found} where the log expects offset {expected}"
            ),
            LogError::EpochOutOfOrder {
                offset,
                epoch,
                latest_epoch,
            } => write!(
                f,
                "the batch at offset {offset} has leader epoch {epoch}, below the log's \
                 latest epoch {latest_epoch}"
            ),
        }
    }
}

impl std::error::Error for LogError {}

/// The retention settings of one check, Kafka's topic configs; -1 means no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// `retention.ms`: a segment whose largest timestamp is older than this may go.
    pub retention_ms: i64,
    /// `retention.bytes`: a segment may go while the log without it keeps at least this many
    /// bytes (counted below the high watermark).
    pub retention_bytes: i64,
    /// A deliberate bug for the simulation's checker test: delete one segment more than the
    /// settings allow (never the active one). Always false outside that test.
    pub delete_one_segment_too_many: bool,
}

impl RetentionPolicy {
    /// No limit by time or size: only the log start offset removes segments.
    pub const UNLIMITED: RetentionPolicy = RetentionPolicy {
        retention_ms: -1,
        retention_bytes: -1,
        delete_one_segment_too_many: false,
    };
}

/// What one retention pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start_offset: i64,
}

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// An append written but not yet acknowledged (see [`Log::append_unacknowledged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingAppend {
    pub info: AppendInfo,
    records_count: u64,
    /// A retry of a batch already in the log (idempotent producer): nothing was written and
    /// `info` is the original's (`max_timestamp` its max timestamp). Acknowledging it waits
    /// until the original may be acknowledged.
    pub duplicate: bool,
}

/// Whole batches returned by a read.
#[derive(Clone, Debug)]
pub struct ReadResult {
    /// Zero or more whole batches. The first may start below the requested offset (readers
    /// skip records before it, as Kafka clients do).
    pub records: Bytes,
    /// One past the last offset returned (the requested offset if nothing was returned).
    pub next_offset: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// A byte range of one segment's log file holding whole batches, with an open handle to the
/// file (see [`Log::read_regions`]).
#[derive(Clone, Debug)]
pub struct FileRegion {
    pub file: File,
    pub position: u64,
    pub len: usize,
}

impl FileRegion {
    /// Reads the region's bytes: the copying path, for small fetches.
    pub async fn read(&self) -> Result<Bytes, LogError> {
        let bytes = self
            .file
            .read_at(self.position, self.len)
            .await
            .map_err(|e| LogError::io("read", self.file.path(), e))?;
        if bytes.len() != self.len {
            return Err(LogError::Corrupt {
                segment: self.file.path().to_string(),
                position: self.position,
                reason: format!("short read: {} of {} bytes", bytes.len(), self.len),
            });
        }
        Ok(bytes)
    }
}

/// Whole batches returned by [`Log::read_regions`], as file regions instead of bytes.
#[derive(Clone, Debug)]
pub struct ReadRegions {
    /// In log order; empty when nothing is returned. (Reads come from one segment, so there
    /// is at most one region today; callers must not rely on that.)
    pub regions: Vec<FileRegion>,
    /// The sum of the regions' lengths.
    pub total_len: usize,
    /// One past the last offset returned (the requested offset if nothing was returned).
    pub next_offset: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// What the lookup shared by [`Log::read`] and [`Log::read_regions`] found: the batches as
/// (segment base offset, position, length), if any, and the offsets to report.
struct Located {
    /// The segment, the position and the length of the batches to return.
    range: Option<(SegmentReader, u64, usize)>,
    next_offset: i64,
    log_start_offset: i64,
    log_end_offset: i64,
}

/// Checks every batch's CRC in bytes read from `segment` at `start`, refusing the read at the
/// first that fails (`verify_crc_on_read`).
fn verify_batches(segment: &SegmentReader, start: u64, records: &Bytes) -> Result<(), LogError> {
    let mut at = start;
    for item in record_batch::batches(records.clone()) {
        let verified = item.and_then(|(_, batch)| record_batch::verify(&batch).map(|_| batch));
        match verified {
            Ok(batch) => at += batch.len() as u64,
            Err(e) => {
                let err = segment.corrupt(at, e.to_string());
                tracing::error!(error = %err, "refusing to serve corrupt batch");
                return Err(err);
            }
        }
    }
    Ok(())
}

#[derive(Debug)]
struct State {
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
    durable_end_offset: i64,
    /// Files written since their last sync, besides the active segment's log file, with the
    /// sequence number at which they were added.
    dirty: Vec<(u64, File)>,
    dirty_seq: u64,
    /// Sequence number of the last unsynced change to the directory's names (0: none).
    dir_dirty_seq: u64,
    offline: Option<String>,
    /// Records appended since the last sync (page-cache mode).
    unflushed_records: u64,
    last_flush: time::Instant,
    last_checkpoint: time::Instant,
    rolled_since_checkpoint: bool,
    /// The recovery point last checkpointed: every byte below it was synced, and a closed
    /// segment wholly below it never changes again short of a truncation (the scrubber
    /// verifies exactly those segments).
    recovery_point: i64,
    /// Truncations since the log was opened. A truncation may cut below the recovery point
    /// and a later roll may reuse a segment's base offset, so a scrub cursor taken before
    /// one no longer names a batch boundary.
    truncations: u64,
    /// The idempotent producers' state, always reflecting the log up to `log_end_offset`:
    /// checked and updated under this lock, in the order offsets are assigned.
    producers: ProducerStateMap,
    /// The log cleaner's checkpoint as last written ([`cleaner`]).
    cleaner: cleaner::CleanerCheckpoint,
    /// The leader epochs of the log ([`leader_epoch`]); the checkpoint file holds at least
    /// these, perhaps with entries below the log start or at and past the log end, which the
    /// next open trims.
    epochs: LeaderEpochCache,
}

impl State {
    fn online(&self) -> Result<(), LogError> {
        match &self.offline {
            Some(reason) => Err(LogError::Offline {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Takes the log offline if `err` is an IO error (called with the lock still held).
    fn offline_after(&mut self, dir: &str, err: &LogError) {
        if matches!(err, LogError::Io { .. }) && self.offline.is_none() {
            tracing::error!(dir, error = %err, "log going offline after IO error");
            self.offline = Some(err.to_string());
        }
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }

    fn check_invariants(&self) {
        assert!(
            self.log_start_offset <= self.durable_end_offset,
            "log start above durable end"
        );
        assert!(
            self.durable_end_offset <= self.log_end_offset,
            "durable end above log end"
        );
        assert!(
            self.recovery_point <= self.durable_end_offset,
            "recovery point above durable end"
        );
        assert_eq!(
            self.active().next_offset,
            self.log_end_offset,
            "active segment disagrees with log end"
        );
        assert!(
            self.segments
                .keys()
                .next()
                .is_some_and(|&first| first <= self.log_start_offset),
            "the first segment begins above the log start offset"
        );
    }

    /// Bytes of the log below `offset` (a batch boundary at or below the log end, such as the
    /// high watermark): whole segments, plus the part of the segment holding `offset`.
    async fn bytes_below(&self, offset: i64) -> Result<u64, LogError> {
        let mut total = 0;
        for segment in self.segments.values() {
            if segment.next_offset <= offset {
                total += segment.size;
            } else if segment.base_offset < offset {
                let found = segment.seek(offset, |h| h.next_offset() > offset).await?;
                total += found.map_or(segment.size, |(position, _)| position);
            }
        }
        Ok(total)
    }
}

/// A partition log. Share it behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Log {
    disk: Disk,
    dir: String,
    config: LogConfig,
    clock: Clock,
    state: Mutex<State>,
    /// Held by whoever is syncing; appends waiting for durability queue here (group commit).
    sync_lock: Mutex<()>,
    /// Held while the log start offset advances (retention, DeleteRecords), so checkpoints
    /// are written in order and two passes never delete the same segment.
    retention_lock: Mutex<()>,
    log_end_offset: AtomicI64,
    durable_end_offset: AtomicI64,
    /// Truncations begun since the log was opened, bumped under the state lock before a
    /// cut's first change. A read that did its IO without the lock trusts its bytes only if
    /// this did not move meanwhile.
    cuts: AtomicU64,
}

/// Reads that do their IO without the state lock, each checked against the truncation
/// count, before a read holds the lock throughout (a log truncated under every attempt).
pub const READ_ATTEMPTS_MAX: u32 = 4;

/// What a read found under the state lock, to do its IO without it.
struct ReadPlan {
    offset: i64,
    /// The segment holding `offset` and, where it may end in a gap (a cleaned segment), the
    /// later ones a read may move on to.
    readers: Vec<SegmentReader>,
    hint: (u64, i64),
    bound: i64,
    log_start_offset: i64,
    log_end_offset: i64,
    cuts: u64,
}

impl Log {
    /// Opens (recovering if needed) or creates the log in `dir`.
    pub async fn open(
        disk: Disk,
        dir: &str,
        config: LogConfig,
        clock: Clock,
    ) -> Result<(Arc<Log>, RecoveryReport), LogError> {
        config.validate()?;
        let (segments, report) = recovery::recover(&disk, dir, &config).await?;
        let log_start_offset = report.log_start_offset;
        let mut producers = producer_snapshot::load(
            &disk,
            dir,
            &segments,
            log_start_offset,
            report.log_end_offset,
        )
        .await?;
        producers.remove_expired(clock.now_ms(), config.producer_id_expiration_ms);
        // The checkpoint may name epochs a crash cut off (it is written before the batch
        // that starts an epoch) and epochs below the log start (not rewritten when
        // retention advances it).
        let mut epochs = leader_epoch::load(&disk, dir).await?;
        epochs.truncate_from_end(report.log_end_offset);
        epochs.truncate_from_start(log_start_offset);
        if report.log_end_offset == log_start_offset {
            // An empty log has no epochs (see `leader_epoch`).
            epochs.clear();
        }
        let now = time::now();
        let state = State {
            log_start_offset,
            log_end_offset: report.log_end_offset,
            durable_end_offset: report.log_end_offset,
            segments,
            dirty: Vec::new(),
            dirty_seq: 0,
            dir_dirty_seq: 0,
            offline: None,
            unflushed_records: 0,
            last_flush: now,
            last_checkpoint: now,
            rolled_since_checkpoint: false,
            // Recovery checkpoints the log end before it returns.
            recovery_point: report.log_end_offset,
            truncations: 0,
            producers,
            cleaner: report.cleaner,
            epochs,
        };
        state.check_invariants();
        let log = Log {
            disk,
            dir: dir.to_string(),
            config,
            clock,
            log_end_offset: AtomicI64::new(state.log_end_offset),
            durable_end_offset: AtomicI64::new(state.durable_end_offset),
            state: Mutex::new(state),
            sync_lock: Mutex::new(()),
            retention_lock: Mutex::new(()),
            cuts: AtomicU64::new(0),
        };
        Ok((Arc::new(log), report))
    }

    pub fn dir(&self) -> &str {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// One past the last offset written (LogEndOffset).
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// One past the last offset known to be on disk.
    pub fn durable_end_offset(&self) -> i64 {
        self.durable_end_offset.load(Ordering::Acquire)
    }

    pub async fn log_start_offset(&self) -> i64 {
        self.state.lock().await.log_start_offset
    }

    /// Number of segments (for tests and metrics).
    pub async fn segment_count(&self) -> usize {
        self.state.lock().await.segments.len()
    }

    /// The bytes of record batches in every segment (DescribeLogDirs' partition size; the
    /// index files are not counted, as Kafka's `Log.size`).
    pub async fn size_bytes(&self) -> u64 {
        self.state
            .lock()
            .await
            .segments
            .values()
            .map(|segment| segment.size)
            .sum()
    }

    /// Takes the log offline after an IO error and returns the error for the caller.
    async fn go_offline(&self, err: LogError) -> LogError {
        if let LogError::Io { .. } = err {
            self.state.lock().await.offline_after(&self.dir, &err);
        }
        err
    }

    /// Appends one or more whole record batches, assigning their offsets. Returns once the
    /// flush policy allows acknowledging them.
    pub async fn append(&self, records: Bytes) -> Result<AppendInfo, LogError> {
        let pending = self.append_unacknowledged(records).await?;
        self.acknowledge(pending).await
    }

    /// [`Log::append`] by the leader of `leader_epoch` ([`AppendMode::Leader`]).
    pub async fn append_as_leader(
        &self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        let pending = self
            .append_in_mode(
                records,
                AppendMode::Leader {
                    epoch: leader_epoch,
                },
            )
            .await?;
        self.acknowledge(pending).await
    }

    /// [`Log::append`] of a leader's batches by a follower ([`AppendMode::Replica`]).
    pub async fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo, LogError> {
        let pending = self.append_in_mode(records, AppendMode::Replica).await?;
        self.acknowledge(pending).await
    }

    /// The first half of [`Log::append`]: validates the batches, assigns their offsets and
    /// writes them, without waiting for the flush policy. A connection uses it so that the
    /// requests it pipelines are appended in the order they arrived while their syncs are
    /// shared (group commit); [`Log::acknowledge`] is the second half.
    pub async fn append_unacknowledged(&self, records: Bytes) -> Result<PendingAppend, LogError> {
        self.append_in_mode(records, AppendMode::Client).await
    }

    /// [`Log::append_unacknowledged`] in any [`AppendMode`].
    pub async fn append_in_mode(
        &self,
        records: Bytes,
        mode: AppendMode,
    ) -> Result<PendingAppend, LogError> {
        // Validate before taking any lock: a bad batch never reaches the disk.
        let mut headers = Vec::new();
        for item in record_batch::batches(records.clone()) {
            let (header, batch) = item.map_err(LogError::InvalidBatch)?;
            record_batch::verify(&batch).map_err(LogError::InvalidBatch)?;
            headers.push(header);
        }
        self.append_checked(records, headers, mode).await
    }

    /// [`Log::append_unacknowledged`] for a batch the produce validator accepted: its CRC was
    /// verified on these same (immutable) bytes, so only its header is parsed again, sparing
    /// a second CRC pass over the batch on the produce path.
    /// The batch is appended by the leader of `leader_epoch` ([`AppendMode::Leader`]).
    pub async fn append_validated_unacknowledged(
        &self,
        batch: &validator::ValidatedBatch,
        leader_epoch: i32,
    ) -> Result<PendingAppend, LogError> {
        let header =
            record_batch::BatchHeader::parse(&batch.records).map_err(LogError::InvalidBatch)?;
        let mode = AppendMode::Leader {
            epoch: leader_epoch,
        };
        self.append_checked(batch.records.clone(), vec![header], mode)
            .await
    }

    /// The rest of an append once every batch in `records` is known whole and CRC-valid, with
    /// `headers` parsed from them in order.
    async fn append_checked(
        &self,
        records: Bytes,
        mut headers: Vec<record_batch::BatchHeader>,
        mode: AppendMode,
    ) -> Result<PendingAppend, LogError> {
        if headers.is_empty() {
            return Err(LogError::InvalidBatch(BatchError::Truncated {
                needed: record_batch::BATCH_HEADER_LEN,
                available: records.len(),
            }));
        }
        if records.len() as u64 > self.config.segment_bytes {
            return Err(LogError::RecordsTooLarge {
                bytes: records.len(),
                max: self.config.segment_bytes,
            });
        }
        let records_count: u64 = headers.iter().map(|h| h.records_count.max(0) as u64).sum();
        // `records` is often a slice of a request frame shared with the rest of the request;
        // it is written as it is, with only the base offsets patched on the way (see append_to).
        let (info, duplicate) = self.append_locked(&records, &mut headers, mode).await?;
        Ok(PendingAppend {
            info,
            records_count: if duplicate { 0 } else { records_count },
            duplicate,
        })
    }

    /// Waits until the flush policy allows acknowledging an append: with
    /// [`FlushPolicy::SyncBeforeAck`] until it is synced, in page-cache mode at once unless
    /// `flush.messages` is due.
    pub async fn acknowledge(&self, pending: PendingAppend) -> Result<AppendInfo, LogError> {
        let info = pending.info;
        match self.config.flush {
            FlushPolicy::SyncBeforeAck => self.flush_to(info.last_offset + 1).await?,
            FlushPolicy::PageCache { flush_messages, .. } => {
                let due = {
                    let mut state = self.state.lock().await;
                    state.unflushed_records += pending.records_count;
                    state.unflushed_records >= flush_messages
                };
                if due {
                    self.flush_to(info.last_offset + 1).await?;
                }
            }
        }
        Ok(info)
    }

    /// Appends under the state lock. An IO error takes the log offline before the lock is
    /// released: a half-done append (bytes written, offsets not advanced) must never be
    /// followed by another append that would reuse its offsets.
    async fn append_locked(
        &self,
        records: &[u8],
        headers: &mut [record_batch::BatchHeader],
        mode: AppendMode,
    ) -> Result<(AppendInfo, bool), LogError> {
        let mut state = self.state.lock().await;
        state.online()?;
        let result = self.append_to(&mut state, records, headers, mode).await;
        if let Err(err) = &result {
            state.offline_after(&self.dir, err);
        }
        result
    }

    async fn append_to(
        &self,
        state: &mut State,
        records: &[u8],
        headers: &mut [record_batch::BatchHeader],
        mode: AppendMode,
    ) -> Result<(AppendInfo, bool), LogError> {
        let now_ms = self.clock.now_ms();
        let total = records.len() as u64;
        let base_offset = state.log_end_offset;
        let count: i64 = headers
            .iter()
            .map(|h| i64::from(h.last_offset_delta) + 1)
            .sum();
        // Place the batches and settle their epochs before anything is written: a refused
        // append leaves no trace.
        let mut next = base_offset;
        let mut latest_epoch = state.epochs.latest_epoch().unwrap_or(-1);
        // A copy of the cache only when this append starts an epoch (rare next to appends).
        let mut epochs: Option<LeaderEpochCache> = None;
        for header in headers.iter_mut() {
            match mode {
                AppendMode::Client => {}
                AppendMode::Leader { epoch } => {
                    assert!(epoch >= 0, "a leader with a negative epoch");
                    header.partition_leader_epoch = epoch;
                }
                AppendMode::Replica => {
                    if header.base_offset != next {
                        return Err(LogError::UnexpectedAppendOffset {
                            expected: next,
                            found: header.base_offset,
                        });
                    }
                }
            }
            if mode != AppendMode::Client {
                if header.partition_leader_epoch < latest_epoch {
                    return Err(LogError::EpochOutOfOrder {
                        offset: next,
                        epoch: header.partition_leader_epoch,
                        latest_epoch,
                    });
                }
                latest_epoch = header.partition_leader_epoch;
                let current = epochs.as_ref().unwrap_or(&state.epochs);
                if current.is_update_needed(latest_epoch, next) {
                    epochs
                        .get_or_insert_with(|| state.epochs.clone())
                        .assign(latest_epoch, next);
                }
            }
            let mut placed = *header;
            placed.base_offset = next;
            next = placed.next_offset();
        }
        // Check the idempotent producers' batches with the offsets they are about to get,
        // before anything is written: a refused or duplicate append leaves no trace.
        let mut producer_batches = Vec::new();
        let mut next = base_offset;
        for header in headers.iter() {
            let mut placed = *header;
            placed.base_offset = next;
            next = placed.next_offset();
            producer_batches.extend(ProducerBatch::from_header(&placed));
        }
        let replica = mode == AppendMode::Replica;
        let producer_update =
            if producer_batches.is_empty() || !self.config.producer_state_checks || replica {
                None
            } else {
                match state
                    .producers
                    .prepare(&producer_batches)
                    .map_err(LogError::Producer)?
                {
                    Prepared::Duplicate(original) => {
                        let info = AppendInfo {
                            base_offset: original.first_offset,
                            last_offset: original.last_offset,
                            max_timestamp: original.max_timestamp,
                        };
                        return Ok((info, true));
                    }
                    Prepared::Append(update) => Some(update),
                }
            };
        if self.should_roll(state.active(), total, base_offset + count, now_ms) {
            self.roll(state, base_offset).await?;
        }
        // A new epoch is checkpointed before its first batch is written, so the file names
        // every epoch of the durable log (see `leader_epoch`).
        if let Some(epochs) = epochs {
            leader_epoch::write(&self.disk, &self.dir, &epochs).await?;
            state.epochs = epochs;
        }
        // Assign offsets on the way to the file: each batch is written as its new base offset
        // (bytes 0..8) followed by the rest of its bytes as received, in one vectored write.
        // The base offset lies outside the CRC (which covers the attributes, byte 21, onwards),
        // so the stored batch stays valid, and the file holds exactly the bytes that patching
        // a copy in place would have given, without copying `records` (often a slice of the
        // request frame, shared).
        let mut next = base_offset;
        let mut max_timestamp = -1;
        // The partition leader epoch (bytes 12..16) lies outside the CRC too; the prefix
        // carries the base offset, the batch length as received and the epoch.
        let mut prefixes: Vec<[u8; BATCH_PREFIX_LEN]> = Vec::with_capacity(headers.len());
        for header in headers.iter_mut() {
            header.base_offset = next;
            let mut prefix = [0u8; BATCH_PREFIX_LEN];
            prefix[..BASE_OFFSET_LEN].copy_from_slice(&next.to_be_bytes());
            prefix[BASE_OFFSET_LEN..PARTITION_LEADER_EPOCH_AT]
                .copy_from_slice(&header.batch_length.to_be_bytes());
            prefix[PARTITION_LEADER_EPOCH_AT..]
                .copy_from_slice(&header.partition_leader_epoch.to_be_bytes());
            prefixes.push(prefix);
            next = header.next_offset();
            max_timestamp = max_timestamp.max(header.max_timestamp);
        }
        let mut parts: Vec<&[u8]> = Vec::with_capacity(2 * headers.len());
        let mut position = 0usize;
        for (header, prefix) in headers.iter().zip(&prefixes) {
            let end = position + header.total_len();
            // Validation parsed every batch from `records`, so each lies wholly inside it.
            let rest = records
                .get(position + BATCH_PREFIX_LEN..end)
                .expect("validated batches lie inside the appended records");
            parts.push(prefix);
            parts.push(rest);
            position = end;
        }
        assert_eq!(
            position,
            records.len(),
            "validated batches cover the records"
        );
        let interval = self.config.index_interval_bytes;
        let segment = state.active_mut();
        let start = segment.size;
        segment
            .log
            .write_vectored_at(start, &parts)
            .await
            .map_err(|e| LogError::io("write", segment.log.path(), e))?;
        segment.size += total;
        segment.first_append_ms.get_or_insert(now_ms);
        let mut batch_position = start;
        for header in headers.iter() {
            segment
                .index_batch(header, batch_position, interval)
                .await?;
            batch_position += header.total_len() as u64;
        }
        segment.next_offset = next;
        state.log_end_offset = next;
        self.log_end_offset.store(next, Ordering::Release);
        match producer_update {
            Some(update) => state.producers.apply(update, next),
            None if replica && self.config.producer_state_checks => {
                for batch in &producer_batches {
                    state.producers.replay(batch);
                }
                state.producers.advance_to(next);
            }
            None => state.producers.advance_to(next),
        }
        state.check_invariants();
        Ok((
            AppendInfo {
                base_offset,
                last_offset: next - 1,
                max_timestamp,
            },
            false,
        ))
    }

    fn should_roll(&self, active: &Segment, bytes: u64, end_offset: i64, now_ms: i64) -> bool {
        if active.size == 0 {
            return false;
        }
        let full = active.size + bytes > self.config.segment_bytes;
        let old = active
            .first_append_ms
            .is_some_and(|first| now_ms.saturating_sub(first) >= self.config.segment_ms);
        let index_full = (active.index.len() as u64 + 1) * 8 > self.config.segment_index_bytes;
        let offsets_overflow = end_offset - active.base_offset > i64::from(i32::MAX);
        full || old || index_full || offsets_overflow
    }

    /// Starts a new active segment at `base_offset`. The old one's files join the dirty list
    /// so the next sync covers them, and the directory must be synced before anything in the
    /// new segment is acknowledged.
    async fn roll(&self, state: &mut State, base_offset: i64) -> Result<(), LogError> {
        state.active_mut().seal_time_index().await?;
        // Kafka's snapshot at roll: the producer state as of the new segment's base offset,
        // so a later open replays at most the segments from here on.
        assert_eq!(
            state.producers.end_offset(),
            base_offset,
            "producer state out of step with the log end at roll"
        );
        producer_snapshot::write(&self.disk, &self.dir, &state.producers).await?;
        let old = state.active();
        let old_files = [
            old.log.clone(),
            old.index_file.clone(),
            old.time_index_file.clone(),
        ];
        let segment = Segment::create(&self.disk, &self.dir, base_offset).await?;
        self.disk
            .fault(FaultPoint::LogRoll)
            .await
            .map_err(|e| LogError::io("roll", &self.dir, e))?;
        tracing::debug!(dir = %self.dir, base_offset, "rolled to a new segment");
        for file in old_files {
            state.dirty_seq += 1;
            let seq = state.dirty_seq;
            state.dirty.push((seq, file));
        }
        state.dirty_seq += 1;
        state.dir_dirty_seq = state.dirty_seq;
        state.rolled_since_checkpoint = true;
        state.segments.insert(base_offset, segment);
        Ok(())
    }

    /// Makes everything written before this call durable if `durable_end_offset < target`.
    pub async fn flush_to(&self, target: i64) -> Result<(), LogError> {
        let _sync = self.sync_lock.lock().await;
        let (end, seq, files, dir_dirty, checkpoint_due) = {
            let state = self.state.lock().await;
            state.online()?;
            if state.durable_end_offset >= target {
                return Ok(());
            }
            let mut files: Vec<File> = state.dirty.iter().map(|(_, f)| f.clone()).collect();
            files.push(state.active().log.clone());
            let due = state.rolled_since_checkpoint
                || state.last_checkpoint.elapsed().as_millis()
                    >= u128::from(self.config.checkpoint_interval_ms);
            (
                state.log_end_offset,
                state.dirty_seq,
                files,
                state.dir_dirty_seq > 0,
                due,
            )
        };
        for file in &files {
            if let Err(e) = file.sync().await {
                return Err(self.go_offline(LogError::io("sync", file.path(), e)).await);
            }
        }
        if dir_dirty {
            if let Err(e) = self.disk.sync_dir(&self.dir).await {
                return Err(self
                    .go_offline(LogError::io("sync directory", &self.dir, e))
                    .await);
            }
        }
        {
            let mut state = self.state.lock().await;
            state.online()?;
            state.dirty.retain(|(s, _)| *s > seq);
            if state.dir_dirty_seq <= seq {
                state.dir_dirty_seq = 0;
            }
            // A truncation while we synced may have lowered the log end below `end`.
            let durable = end.min(state.log_end_offset).max(state.durable_end_offset);
            assert!(
                durable >= state.durable_end_offset,
                "durable end moved backwards"
            );
            state.durable_end_offset = durable;
            self.durable_end_offset.store(durable, Ordering::Release);
            state.unflushed_records = 0;
            state.last_flush = time::now();
            state.check_invariants();
            if durable < target {
                return Err(LogError::Truncated { offset: target });
            }
        }
        if checkpoint_due {
            self.write_checkpoint(end).await?;
        }
        Ok(())
    }

    /// In page-cache mode, syncs when `flush_ms` has passed since the last sync. Owners call
    /// this periodically.
    pub async fn flush_if_due(&self) -> Result<(), LogError> {
        let FlushPolicy::PageCache { flush_ms, .. } = self.config.flush else {
            return Ok(());
        };
        let due = {
            let state = self.state.lock().await;
            state.durable_end_offset < state.log_end_offset
                && state.last_flush.elapsed().as_millis() >= u128::from(flush_ms)
        };
        if due {
            self.flush_to(self.log_end_offset()).await?;
        }
        Ok(())
    }

    /// Writes the recovery point durably. Callers hold the sync lock, so checkpoints are
    /// written in order, and pass an offset that is durable.
    async fn write_checkpoint(&self, recovery_point: i64) -> Result<(), LogError> {
        assert!(
            recovery_point <= self.durable_end_offset(),
            "checkpoint above durable end"
        );
        if let Err(e) = recovery::write_checkpoint(&self.disk, &self.dir, recovery_point).await {
            return Err(self.go_offline(e).await);
        }
        let mut state = self.state.lock().await;
        state.last_checkpoint = time::now();
        state.rolled_since_checkpoint = false;
        // Checkpoints are written in order under the sync lock; a truncation (which also holds
        // it) may have lowered the log end since `recovery_point` was chosen.
        state.recovery_point = recovery_point.min(state.log_end_offset);
        Ok(())
    }

    /// Reads whole batches holding offsets from `offset` on, up to about `max_bytes` (but at
    /// least one batch, KIP-74), never returning a batch that ends above `max_offset` (the
    /// caller's high watermark). Reads come from one segment at a time.
    ///
    /// The state lock is held only to plan the read, not across its disk IO, so reads
    /// (follower fetches among them) neither wait for one another's IO nor hold up appends.
    /// A truncation that begins meanwhile could cut the bytes under the read: the read is
    /// then done again, at most [`READ_ATTEMPTS_MAX`] times, and at last under the lock.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<ReadResult, LogError> {
        let (found, records) = self.planned(offset, max_offset, max_bytes, true).await?;
        Ok(ReadResult {
            records,
            next_offset: found.next_offset,
            log_start_offset: found.log_start_offset,
            log_end_offset: found.log_end_offset,
        })
    }

    /// The lookup (and, `with_bytes`, the read) on a plan made under the state lock, done
    /// without the lock; if a truncation began meanwhile, again (at most
    /// [`READ_ATTEMPTS_MAX`] times), and then under the lock.
    async fn planned(
        &self,
        offset: i64,
        max_offset: i64,
        max_bytes: usize,
        with_bytes: bool,
    ) -> Result<(Located, Bytes), LogError> {
        for _ in 0..READ_ATTEMPTS_MAX {
            let plan = {
                let state = self.state.lock().await;
                self.plan_read(&state, offset, max_offset)?
            };
            let cuts = plan.cuts;
            let result = self.run_plan(plan, max_bytes, with_bytes).await;
            if self.cuts.load(Ordering::Acquire) == cuts {
                return result;
            }
            tracing::debug!(dir = %self.dir, offset, "a truncation crossed a read; reading again");
        }
        let state = self.state.lock().await;
        let plan = self.plan_read(&state, offset, max_offset)?;
        self.run_plan(plan, max_bytes, with_bytes).await
    }

    async fn run_plan(
        &self,
        plan: ReadPlan,
        max_bytes: usize,
        with_bytes: bool,
    ) -> Result<(Located, Bytes), LogError> {
        let found = self.locate(plan, max_bytes).await?;
        let records = match &found.range {
            Some((segment, start, len)) if with_bytes => {
                let records = segment.read(*start, *len).await?;
                if self.config.verify_crc_on_read {
                    verify_batches(segment, *start, &records)?;
                }
                records
            }
            _ => Bytes::new(),
        };
        Ok((found, records))
    }

    /// [`Log::read`] without reading: the same batches (same boundaries, KIP-74 and
    /// `max_offset` rules, because both are built on one lookup), returned as regions of the
    /// segment file for a zero-copy send.
    ///
    /// The regions outlive the state lock. Each holds an open handle to its file, so a
    /// segment removed meanwhile (retention, topic deletion) stays readable through it. A
    /// truncation below a region would change the bytes under it; callers prevent that by
    /// bounding `max_offset` by the high watermark, below which a single node never truncates
    /// (replication, which can truncate above a follower's high watermark, must keep its own
    /// reads on [`Log::read`] or check again). A send that finds its file shorter than the
    /// region fails rather than pad (see `rt::net::ResponseWriter::send_file_region`); the
    /// bound matters even after a send returns, because `sendfile` passes page-cache pages
    /// by reference and a later truncation can still change bytes in flight.
    ///
    /// The CRC is not checked here: with `verify_crc_on_read` callers use [`Log::read`].
    pub async fn read_regions(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<ReadRegions, LogError> {
        // As `read`: the lookup's header reads run without the state lock, and are redone if
        // a truncation crossed them.
        let (found, _) = self.planned(offset, max_offset, max_bytes, false).await?;
        let mut regions = Vec::new();
        let mut total_len = 0;
        if let Some((segment, position, len)) = found.range {
            regions.push(FileRegion {
                file: segment.log,
                position,
                len,
            });
            total_len = len;
        }
        Ok(ReadRegions {
            regions,
            total_len,
            next_offset: found.next_offset,
            log_start_offset: found.log_start_offset,
            log_end_offset: found.log_end_offset,
        })
    }

    /// The lookup behind [`Log::read`] and [`Log::read_regions`]: the byte range of whole
    /// batches to return, and the offsets to report.
    /// The part of a read's lookup done under the state lock, without IO: the range checks,
    /// and readers of the segments the read may touch. `Err(Located)` is a read that
    /// returns nothing.
    fn plan_read(&self, state: &State, offset: i64, max_offset: i64) -> Result<ReadPlan, LogError> {
        state.online()?;
        if offset < state.log_start_offset || offset > state.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: state.log_start_offset,
                log_end_offset: state.log_end_offset,
            });
        }
        let bound = max_offset.min(state.log_end_offset);
        let mut readers = Vec::new();
        if offset < bound {
            let mut later = state
                .segments
                .range(..=offset)
                .next_back()
                .into_iter()
                .chain(state.segments.range(offset + 1..));
            for (_, segment) in later.by_ref() {
                readers.push(segment.reader());
                if !segment.gaps {
                    break;
                }
            }
        }
        let hint = match state.segments.range(..=offset).next_back() {
            Some((_, segment)) => segment.index_hint(offset),
            None => (0, offset),
        };
        Ok(ReadPlan {
            offset,
            readers,
            hint,
            bound,
            log_start_offset: state.log_start_offset,
            log_end_offset: state.log_end_offset,
            cuts: self.cuts.load(Ordering::Acquire),
        })
    }

    /// The lookup behind [`Log::read`] and [`Log::read_regions`], on a plan and without the
    /// state lock: the byte range of whole batches to return, and the offsets to report.
    async fn locate(&self, plan: ReadPlan, max_bytes: usize) -> Result<Located, LogError> {
        let ReadPlan {
            offset,
            readers,
            hint,
            bound,
            log_start_offset,
            log_end_offset,
            ..
        } = plan;
        let mut found = Located {
            range: None,
            next_offset: offset,
            log_start_offset,
            log_end_offset,
        };
        if offset >= bound {
            return Ok(found);
        }
        let mut readers = readers.into_iter();
        let Some(mut segment) = readers.next() else {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            });
        };
        // Find the batch holding `offset` (or, in a compacted log, the first batch after it),
        // starting from the index's hint.
        let mut found_batch = segment
            .seek_from(hint, |h| h.next_offset() > offset)
            .await?;
        // A cleaned segment may end below the next one's base: an offset in that gap is read
        // from the next segment that holds a batch.
        while found_batch.is_none() && segment.gaps {
            let Some(next) = readers.next() else {
                break;
            };
            segment = next;
            // Every batch of a later segment lies above `offset`: its first one is the answer.
            let start = (0, segment.base_offset);
            found_batch = segment
                .seek_from(start, |h| h.next_offset() > offset)
                .await?;
        }
        let Some((position, first)) = found_batch else {
            return Err(segment.corrupt(
                segment.size,
                format!("offset {offset} not found before the end of the segment"),
            ));
        };
        if first.next_offset() > log_end_offset {
            // Batches end exactly at the log end; one that claims to end beyond it has a
            // damaged header. Refuse it rather than report "nothing yet" forever.
            let err = segment.corrupt(
                position,
                format!(
                    "batch at offset {} claims to end at {}, beyond the log end {}",
                    first.base_offset,
                    first.next_offset(),
                    log_end_offset
                ),
            );
            tracing::error!(error = %err, "refusing to serve corrupt batch");
            return Err(err);
        }
        if first.next_offset() > bound {
            return Ok(found);
        }
        // Extend over whole batches while they fit in max_bytes and stay below the bound.
        let start = position;
        let mut end = position + first.total_len() as u64;
        let mut next_offset = first.next_offset();
        while end < segment.size {
            let header = segment.read_header(end).await?;
            let len = header.total_len() as u64;
            // A batch that does not continue the offsets is left for the next read to refuse.
            if !segment::continues(segment.gaps, header.base_offset, next_offset)
                || header.next_offset() > bound
                || (end + len - start) as usize > max_bytes
            {
                break;
            }
            end += len;
            next_offset = header.next_offset();
        }
        let len = usize::try_from(end - start)
            .map_err(|_| segment.corrupt(start, format!("a read of {} bytes", end - start)))?;
        found.range = Some((segment, start, len));
        found.next_offset = next_offset;
        Ok(found)
    }

    /// The base offset of the first batch whose max timestamp is >= `timestamp`, or `None` if
    /// no batch is that late. (Record-level precision inside a batch comes with ListOffsets.)
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<i64>, LogError> {
        let state = self.state.lock().await;
        state.online()?;
        for segment in state.segments.values() {
            if segment.max_timestamp < timestamp {
                continue;
            }
            let rel = segment.time_index.lookup(timestamp);
            let from = segment.base_offset + i64::from(rel);
            if let Some((_, header)) = segment.seek(from, |h| h.max_timestamp >= timestamp).await? {
                // A batch straddling the log start: its records below the start are gone.
                return Ok(Some(header.base_offset.max(state.log_start_offset)));
            }
        }
        Ok(None)
    }

    /// Deletes old segments as `policy` allows (Kafka's retention check): first the longest
    /// run of segments from the front whose largest timestamp is more than `retention_ms`
    /// before `now_ms`, then the longest further run that leaves at least `retention_bytes`
    /// in the log; the log start offset moves to the first segment kept. Never deletes the
    /// active segment, nor one that is not wholly below `high_watermark`; sizes are counted
    /// below `high_watermark` too, so data that a crash could still take away never counts
    /// toward what retention keeps. Also removes segments wholly below the log start offset
    /// (after [`Log::delete_records`]).
    ///
    /// A segment without any timestamp (every batch with timestamp -1) is kept by time
    /// retention, and stops its run: Kafka would fall back to the file's modification time,
    /// which the disk layer does not expose.
    pub async fn enforce_retention(
        &self,
        policy: RetentionPolicy,
        high_watermark: i64,
        now_ms: i64,
    ) -> Result<RetentionOutcome, LogError> {
        let _retention = self.retention_lock.lock().await;
        let target = {
            let state = self.state.lock().await;
            state.online()?;
            let mut candidates = Vec::new();
            let mut bases = state.segments.keys().skip(1);
            for segment in state.segments.values() {
                let Some(&next_base) = bases.next() else {
                    break; // The active segment is never deleted.
                };
                if next_base > high_watermark {
                    break;
                }
                candidates.push((next_base, segment.size, segment.max_timestamp));
            }
            let mut deletable = 0;
            if policy.retention_ms >= 0 {
                deletable = candidates
                    .iter()
                    .take_while(|(_, _, max_timestamp)| {
                        *max_timestamp >= 0
                            && now_ms.saturating_sub(*max_timestamp) > policy.retention_ms
                    })
                    .count();
            }
            if policy.retention_bytes >= 0 {
                let size = state.bytes_below(high_watermark).await?;
                let mut left: u64 = candidates
                    .iter()
                    .take(deletable)
                    .fold(size, |left, (_, bytes, _)| left.saturating_sub(*bytes));
                let retention_bytes = policy.retention_bytes.unsigned_abs();
                for (_, bytes, _) in candidates.iter().skip(deletable) {
                    if left.saturating_sub(*bytes) < retention_bytes || *bytes > left {
                        break;
                    }
                    left -= bytes;
                    deletable += 1;
                }
            }
            if policy.delete_one_segment_too_many && deletable > 0 {
                deletable = (deletable + 1).min(candidates.len());
            }
            let first_kept = match deletable.checked_sub(1) {
                Some(last) => candidates.get(last).map(|(next_base, _, _)| *next_base),
                None => None,
            };
            first_kept.unwrap_or(state.log_start_offset)
        };
        self.advance_log_start(target).await
    }

    /// Kafka's DeleteRecords: moves the log start offset to `offset` (records below it can no
    /// longer be read) and deletes the segments wholly below it. `offset` may not pass
    /// `high_watermark`; one at or below the current start changes nothing. Returns the log
    /// start offset (the new low watermark) once its checkpoint is durable.
    pub async fn delete_records(&self, offset: i64, high_watermark: i64) -> Result<i64, LogError> {
        let _retention = self.retention_lock.lock().await;
        {
            let state = self.state.lock().await;
            state.online()?;
            if offset > high_watermark.min(state.log_end_offset) || offset < 0 {
                return Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start_offset: state.log_start_offset,
                    log_end_offset: high_watermark.min(state.log_end_offset),
                });
            }
        }
        Ok(self.advance_log_start(offset).await?.log_start_offset)
    }

    /// Moves the log start offset forward to `target` (if it is ahead) and deletes every
    /// segment wholly below the start. Callers hold the retention lock.
    ///
    /// Crash safety: the bytes below `target` are made durable first (so recovery cannot end
    /// the log below its new start), then the new start is checkpointed durably, then the
    /// segments leave the state (reads below the start are refused from here on) and their
    /// files are unlinked, `.log` last. A crash after the checkpoint leaves segments below the
    /// start, which recovery removes.
    async fn advance_log_start(&self, target: i64) -> Result<RetentionOutcome, LogError> {
        let current = {
            let state = self.state.lock().await;
            state.online()?;
            state.log_start_offset
        };
        if target > current {
            self.flush_to(target).await?;
            if let Err(e) =
                recovery::write_log_start_checkpoint(&self.disk, &self.dir, target).await
            {
                return Err(self.go_offline(e).await);
            }
            if let Err(e) = self.disk.fault(FaultPoint::RetentionDelete).await {
                let e = LogError::io("delete segments", &self.dir, e);
                return Err(self.go_offline(e).await);
            }
        }
        let doomed: Vec<Segment> = {
            let mut state = self.state.lock().await;
            state.online()?;
            if target > state.log_start_offset {
                if target > state.durable_end_offset {
                    // Only a truncation racing this call can get here (a single node never
                    // truncates below its high watermark). The checkpoint already names the
                    // new start; recovery restarts a log that ends below its start.
                    return Err(LogError::Truncated { offset: target });
                }
                state.log_start_offset = target;
                // In memory only: entries below the start in the file are harmless and
                // trimmed at the next open.
                state.epochs.truncate_from_start(target);
                if target == state.log_end_offset {
                    state.epochs.clear();
                }
            }
            let start = state.log_start_offset;
            let mut doomed_bases = Vec::new();
            let mut bases = state.segments.keys().skip(1);
            for &base in state.segments.keys() {
                match bases.next() {
                    Some(&next_base) if next_base <= start => doomed_bases.push(base),
                    _ => break,
                }
            }
            let doomed: Vec<Segment> = doomed_bases
                .iter()
                .filter_map(|base| state.segments.remove(base))
                .collect();
            let State {
                dirty, segments, ..
            } = &mut *state;
            dirty.retain(|(_, f)| state_has(segments, f));
            state.check_invariants();
            doomed
        };
        let mut outcome = RetentionOutcome {
            segments_deleted: doomed.len(),
            bytes_deleted: doomed.iter().map(|s| s.size).sum(),
            log_start_offset: target.max(current),
        };
        for segment in &doomed {
            tracing::info!(
                dir = %self.dir,
                base_offset = segment.base_offset,
                next_offset = segment.next_offset,
                log_start_offset = outcome.log_start_offset,
                "deleting a segment below the log start offset"
            );
            // Open handles (a zero-copy send in flight) keep the file readable after unlink.
            for file in [&segment.index_file, &segment.time_index_file, &segment.log] {
                match self.disk.remove(file.path()).await {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(self
                            .go_offline(LogError::io("remove", file.path(), e))
                            .await)
                    }
                }
            }
        }
        if !doomed.is_empty() {
            // Producer snapshots below the new start go with the segments (the newest stays:
            // producer state outlives its batches until it expires).
            if let Err(e) = self
                .remove_producer_snapshots_below(outcome.log_start_offset)
                .await
            {
                return Err(self.go_offline(e).await);
            }
            if let Err(e) = self.disk.sync_dir(&self.dir).await {
                return Err(self
                    .go_offline(LogError::io("sync directory", &self.dir, e))
                    .await);
            }
        }
        outcome.log_start_offset = self.log_start_offset().await;
        Ok(outcome)
    }

    /// Removes every batch at or above `offset`. If `offset` falls inside a batch the whole
    /// batch goes, so the new log end may be below `offset`; it is returned.
    pub async fn truncate_to(&self, offset: i64) -> Result<i64, LogError> {
        let _sync = self.sync_lock.lock().await;
        let mut state = self.state.lock().await;
        state.online()?;
        // The state lock is held throughout, so no append can interleave with the cut, and an
        // IO error takes the log offline before anyone else sees the half-done truncation.
        let result = self.truncate_locked(&mut state, offset).await;
        if let Err(err) = &result {
            state.offline_after(&self.dir, err);
        }
        result
    }

    async fn truncate_locked(&self, state: &mut State, offset: i64) -> Result<i64, LogError> {
        if offset >= state.log_end_offset {
            return Ok(state.log_end_offset);
        }
        if offset < state.log_start_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: state.log_start_offset,
                log_end_offset: state.log_end_offset,
            });
        }
        // Find the cut: the start of the first batch whose last offset is >= offset.
        let (&base, segment) = state
            .segments
            .range(..=offset)
            .next_back()
            .expect("offset is at or above the log start");
        let Some((position, cut)) = segment.seek(offset, |h| h.next_offset() > offset).await?
        else {
            return Err(segment.corrupt(
                segment.size,
                format!("offset {offset} not found before the end of the segment"),
            ));
        };
        let new_end = cut.base_offset;
        // The cleaner's checkpoint may not name offsets the log no longer has.
        let cleaner = cleaner::CleanerCheckpoint {
            first_dirty_offset: state.cleaner.first_dirty_offset.min(new_end),
            gaps_below: state.cleaner.gaps_below.min(new_end),
        };
        if cleaner != state.cleaner {
            cleaner::write_checkpoint(&self.disk, &self.dir, cleaner).await?;
            state.cleaner = cleaner;
        }
        // Lower the recovery point first: a crash half-way must not trust the cut data.
        let recovery_point = new_end.min(state.durable_end_offset);
        recovery::write_checkpoint(&self.disk, &self.dir, recovery_point).await?;
        state.recovery_point = recovery_point;
        state.truncations += 1;
        // Before the cut's first change: a read that did its IO without the lock sees this
        // and reads again.
        self.cuts.fetch_add(1, Ordering::AcqRel);
        let doomed: Vec<i64> = state.segments.range(base + 1..).map(|(b, _)| *b).collect();
        for b in doomed {
            if let Some(seg) = state.segments.remove(&b) {
                self.remove_segment_files(&seg).await?;
            }
        }
        let segment = state
            .segments
            .get_mut(&base)
            .expect("the segment holding the cut exists");
        segment
            .log
            .set_len(position)
            .await
            .map_err(|e| LogError::io("truncate", segment.log.path(), e))?;
        segment.size = position;
        segment.next_offset = new_end;
        segment.index.truncate_to_position(position);
        let rel = segment.relative(new_end);
        segment.time_index.truncate_to_offset(rel);
        // The cut may have removed the batch with the segment's largest timestamp: recompute
        // the tail state (max timestamp, bytes since the last index entry) from what is left.
        segment.max_timestamp = -1;
        segment.max_timestamp_offset = segment.base_offset;
        segment
            .load_tail(None)
            .await
            .map_err(|reason| segment.corrupt(position, reason))?;
        segment.write_indexes().await?;
        segment
            .log
            .sync()
            .await
            .map_err(|e| LogError::io("sync", segment.log.path(), e))?;
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(|e| LogError::io("sync directory", &self.dir, e))?;
        let State {
            dirty, segments, ..
        } = state;
        dirty.retain(|(_, f)| state_has(segments, f));
        // Rebuild the producer state without the cut batches: from the newest snapshot at or
        // below the new end, replaying the batches after it.
        let log_start_offset = state.log_start_offset;
        state.producers = producer_snapshot::load(
            &self.disk,
            &self.dir,
            &state.segments,
            log_start_offset,
            new_end,
        )
        .await?;
        state
            .producers
            .remove_expired(self.clock.now_ms(), self.config.producer_id_expiration_ms);
        // After the cut, so a crash before this write leaves entries past the end, which
        // the next open trims (see `leader_epoch`).
        if state.epochs.truncate_from_end(new_end) {
            leader_epoch::write(&self.disk, &self.dir, &state.epochs).await?;
        }
        state.log_end_offset = new_end;
        state.durable_end_offset = state.durable_end_offset.min(new_end);
        self.log_end_offset.store(new_end, Ordering::Release);
        self.durable_end_offset
            .store(state.durable_end_offset, Ordering::Release);
        state.check_invariants();
        Ok(new_end)
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`): a
    /// follower whose log ends below the leader's log start, or that loads a snapshot its
    /// log disagrees with, starts over there. `offset` may lie anywhere at or above the log
    /// start. Producer state, producer snapshots and leader epochs go with the data.
    ///
    /// Crash safety: the batches at and above `offset` are cut first (a truncation), then
    /// the producer snapshots go (a crash here leaves the old log, whose producer state is
    /// rebuilt from its batches), then the new log start is checkpointed durably: the commit
    /// point, after which recovery finds a log ending at or below its start and restarts it
    /// there empty. The segments are removed and the epochs cleared after it.
    pub async fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), LogError> {
        // Retention and the cleaner move the log start under this lock; neither may write
        // an older start over this one.
        let _retention = self.retention_lock.lock().await;
        let _sync = self.sync_lock.lock().await;
        let mut state = self.state.lock().await;
        state.online()?;
        if offset < state.log_start_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: state.log_start_offset,
                log_end_offset: state.log_end_offset,
            });
        }
        let result = self.restart_locked(&mut state, offset).await;
        if let Err(err) = &result {
            state.offline_after(&self.dir, err);
        }
        result
    }

    async fn restart_locked(&self, state: &mut State, offset: i64) -> Result<(), LogError> {
        if offset < state.log_end_offset {
            self.truncate_locked(state, offset).await?;
        }
        assert!(state.log_end_offset <= offset, "data left at the new start");
        let snapshots = producer_snapshot::list(&self.disk, &self.dir).await?;
        producer_snapshot::remove(&self.disk, &self.dir, &snapshots).await?;
        recovery::write_log_start_checkpoint(&self.disk, &self.dir, offset).await?;
        // From here a crash leaves an empty log at `offset` (recovery restarts it there).
        state.truncations += 1;
        self.cuts.fetch_add(1, Ordering::AcqRel);
        let fresh = Segment::create(&self.disk, &self.dir, offset).await?;
        let old = std::mem::take(&mut state.segments);
        state.segments.insert(offset, fresh);
        for (base, segment) in old {
            if base == offset {
                continue; // `create` replaced its files in place
            }
            self.remove_segment_files(&segment).await?;
        }
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(|e| LogError::io("sync directory", &self.dir, e))?;
        recovery::write_checkpoint(&self.disk, &self.dir, offset).await?;
        if state.epochs.clear() {
            leader_epoch::write(&self.disk, &self.dir, &state.epochs).await?;
        }
        // Nothing is cleaned and no segment lies below the new start.
        let cleaner = cleaner::CleanerCheckpoint {
            first_dirty_offset: offset,
            gaps_below: offset,
        };
        if cleaner != state.cleaner {
            cleaner::write_checkpoint(&self.disk, &self.dir, cleaner).await?;
            state.cleaner = cleaner;
        }
        state.dirty.clear();
        state.dir_dirty_seq = 0;
        state.unflushed_records = 0;
        state.producers = ProducerStateMap::new(offset);
        state.log_start_offset = offset;
        state.log_end_offset = offset;
        state.durable_end_offset = offset;
        state.recovery_point = offset;
        self.log_end_offset.store(offset, Ordering::Release);
        self.durable_end_offset.store(offset, Ordering::Release);
        state.check_invariants();
        Ok(())
    }

    /// Unlinks a segment's three files (the caller syncs the directory).
    async fn remove_segment_files(&self, segment: &Segment) -> Result<(), LogError> {
        for file in [&segment.log, &segment.index_file, &segment.time_index_file] {
            self.disk
                .remove(file.path())
                .await
                .map_err(|e| LogError::io("remove", file.path(), e))?;
        }
        Ok(())
    }

    /// Forgets the producers idle for `producer.id.expiration.ms` (by the timestamp of their
    /// latest batch, as Kafka); owners call it every
    /// `producer.id.expiration.check.interval.ms`. Returns how many were removed.
    pub async fn remove_expired_producers(&self) -> Result<usize, LogError> {
        let mut state = self.state.lock().await;
        state.online()?;
        let now_ms = self.clock.now_ms();
        Ok(state
            .producers
            .remove_expired(now_ms, self.config.producer_id_expiration_ms))
    }

    /// The hook for retention and DeleteRecords: once segments below `log_start_offset` are
    /// deleted, the producer snapshots below it are removed too, except the newest (producer
    /// state outlives the batches it came from until it expires, as in Kafka since KIP-360).
    pub async fn remove_producer_snapshots_below(
        &self,
        log_start_offset: i64,
    ) -> Result<usize, LogError> {
        let _state = self.state.lock().await;
        producer_snapshot::remove_below(&self.disk, &self.dir, log_start_offset).await
    }

    /// The latest leader epoch that wrote to the log.
    pub async fn latest_epoch(&self) -> Option<i32> {
        self.state.lock().await.epochs.latest_epoch()
    }

    /// Where `epoch` ends in this log (OffsetForLeaderEpoch, see
    /// [`LeaderEpochCache::end_offset_for`]).
    pub async fn end_offset_for_epoch(&self, epoch: i32) -> EpochEnd {
        let state = self.state.lock().await;
        state.epochs.end_offset_for(epoch, state.log_end_offset)
    }

    /// The epoch of the batch holding `offset`, if the log records one.
    pub async fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.state.lock().await.epochs.epoch_for_offset(offset)
    }

    /// The leader-epoch cache's entries (for tests and DescribeQuorum-style tools).
    pub async fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.state.lock().await.epochs.entries().to_vec()
    }

    /// A copy of the producer state (for tests, metrics and DescribeProducers later).
    pub async fn producer_state(&self) -> ProducerStateMap {
        self.state.lock().await.producers.clone()
    }

    /// Syncs everything, checkpoints the log end as the recovery point and leaves the
    /// clean-shutdown marker, so the next open skips the recovery scan. The log is offline
    /// afterwards. Both locks are held throughout, so no append can land between the final
    /// sync and the checkpoint that vouches for it.
    pub async fn close(&self) -> Result<(), LogError> {
        let _sync = self.sync_lock.lock().await;
        let mut state = self.state.lock().await;
        state.online()?;
        let result = self.close_locked(&mut state).await;
        match &result {
            Ok(()) => state.offline = Some("closed".to_string()),
            Err(err) => state.offline_after(&self.dir, err),
        }
        result
    }

    async fn close_locked(&self, state: &mut State) -> Result<(), LogError> {
        state.active_mut().seal_time_index().await?;
        let active = state.active();
        let mut files: Vec<File> = state.dirty.iter().map(|(_, f)| f.clone()).collect();
        files.extend([
            active.log.clone(),
            active.index_file.clone(),
            active.time_index_file.clone(),
        ]);
        for file in &files {
            file.sync()
                .await
                .map_err(|e| LogError::io("sync", file.path(), e))?;
        }
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(|e| LogError::io("sync directory", &self.dir, e))?;
        state.dirty.clear();
        state.dir_dirty_seq = 0;
        let end = state.log_end_offset;
        state.durable_end_offset = end;
        self.durable_end_offset.store(end, Ordering::Release);
        state.check_invariants();
        recovery::write_checkpoint(&self.disk, &self.dir, end).await?;
        state.recovery_point = end;
        // The producer state at the log end, so the next open replays nothing.
        producer_snapshot::write(&self.disk, &self.dir, &state.producers).await?;
        let marker = join(&self.dir, CLEAN_SHUTDOWN_FILE);
        self.disk
            .write_file_atomic(&marker, b"")
            .await
            .map_err(|e| LogError::io("write clean shutdown marker", &marker, e))
    }
}

/// Whether a dirty file still belongs to a live segment (after a truncation removed some).
fn state_has(segments: &BTreeMap<i64, Segment>, file: &File) -> bool {
    segments.values().any(|s| {
        s.log.path() == file.path()
            || s.index_file.path() == file.path()
            || s.time_index_file.path() == file.path()
    })
}
