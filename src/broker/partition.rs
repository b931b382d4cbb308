//! One partition replica on this node: its log, its high watermark and its leader epoch.
//!
//! Handlers talk to a partition, never to a log directly, so that when replication arrives a
//! partition can answer "not the leader" or hold back its high watermark without a handler
//! changing. On a single node the partition is always its own leader and its in-sync replica
//! set is itself, so the high watermark is what this node may acknowledge: the synced log end
//! under sync-before-ack (design §5), the log end in page-cache mode.
//!
//! Corruption at rest. The broker's scrubber ([`Partition::scrub_step`]) verifies the batches
//! below the recovery point, which neither recovery nor the zero-copy read path checks. Once
//! it finds a corrupt batch the partition remembers its first offset ([`Partition::corrupt_from`])
//! and refuses every read at or beyond it ([`PartitionError::CorruptAtRest`], which handlers
//! answer with KAFKA_STORAGE_ERROR) until the log is reopened; reads below it and appends go
//! on. It is not an IO error: the log stays online and the log directory is not failed.
//!
//! Leadership. On a node with a metadata quorum the metadata publisher says whether the
//! committed image names this node the partition's leader ([`Partition::set_leading`]); a
//! partition that does not lead refuses appends and reads ([`PartitionError::NotLeader`],
//! NOT_LEADER_OR_FOLLOWER at the wire), so a fenced broker serves nothing. Without a
//! controller a partition always leads.
//!
//! Invariants: the high watermark never moves backwards and never passes the log end offset;
//! every advance wakes the fetches waiting in the purgatory; `corrupt_from` only moves down,
//! and no read returns a batch that ends above it.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::broker::config::{BrokerBugs, TopicConfig};
use crate::log::cleaner::{CleanOutcome, Cleanable, CleanerBugs, CleanerPolicy};
use crate::log::validator::ValidatedBatch;
use crate::log::{
    AppendInfo, FileRegion, FlushPolicy, Log, LogError, PendingAppend, ReadResult, RecoveryReport,
    RetentionOutcome, RetentionPolicy, ScrubCursor, ScrubStep,
};
use crate::protocol::wire::Uuid;
use crate::rt::latch::Latch;

/// Why a partition refused an operation.
#[derive(Debug)]
pub enum PartitionError {
    /// The topic was deleted while the request was in flight.
    Deleted { topic: String, partition: i32 },
    /// The committed metadata image does not name this node the partition's leader.
    NotLeader { topic: String, partition: i32 },
    Log {
        topic: String,
        partition: i32,
        source: LogError,
    },
    /// A read at or beyond `corrupt_from`, where the scrubber found a corrupt batch at rest.
    CorruptAtRest {
        topic: String,
        partition: i32,
        offset: i64,
        corrupt_from: i64,
    },
}

impl std::fmt::Display for PartitionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionError::Deleted { topic, partition } => {
                write!(f, "{topic}-{partition} was deleted")
            }
            PartitionError::NotLeader { topic, partition } => {
                write!(f, "this node does not lead {topic}-{partition}")
            }
            PartitionError::Log {
                topic,
                partition,
                source,
            } => write!(f, "{topic}-{partition}: {source}"),
            PartitionError::CorruptAtRest {
                topic,
                partition,
                offset,
                corrupt_from,
            } => write!(
                f,
                "{topic}-{partition}: cannot read offset {offset}: the data from offset \
                 {corrupt_from} on is corrupt on disk"
            ),
        }
    }
}

impl std::error::Error for PartitionError {}

/// Shared by every partition of a log directory: set when one of their logs fails with an
/// IO error. Kafka stops a broker whose only log directory failed; the owner of the broker
/// (the `samsa broker` command, the simulated node) waits on it and exits.
#[derive(Debug, Default)]
pub struct LogDirHealth {
    failed: Latch,
}

impl LogDirHealth {
    pub fn fail(&self, why: &str) {
        if self.failed.set() {
            tracing::error!("log directory failed: {why}");
        }
    }

    pub fn has_failed(&self) -> bool {
        self.failed.is_set()
    }

    /// Returns once the log directory has failed.
    pub async fn failed(&self) {
        self.failed.wait().await
    }
}

/// Where the high watermark bounds a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBound {
    /// Consumers read up to the high watermark.
    HighWatermark,
    /// Consumers read up to this high watermark, read earlier from this partition: the one
    /// their answer reports, so that no record of the answer lies at or above it (the high
    /// watermark only grows, so the current one is never lower).
    HighWatermarkOf(i64),
    /// Followers (step 11) read up to the log end.
    LogEnd,
}

/// Records read for a response (see [`Partition::read_for_send`]).
#[derive(Clone, Debug)]
pub enum SendRecords {
    /// Copied into memory.
    Bytes(Bytes),
    /// Regions of segment files, in log order, `total_len` bytes in all.
    Regions {
        regions: Vec<FileRegion>,
        total_len: usize,
    },
}

impl SendRecords {
    /// The bytes of records, wherever they are.
    pub fn len(&self) -> usize {
        match self {
            SendRecords::Bytes(bytes) => bytes.len(),
            SendRecords::Regions { total_len, .. } => *total_len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One partition of a topic, led by this node.
#[derive(Debug)]
pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    log: Arc<Log>,
    /// The topic's effective config, replaced whole when AlterConfigs changes it; readers
    /// take a cheap `Arc` clone under a read lock that is never held across an await.
    config: std::sync::RwLock<Arc<TopicConfig>>,
    /// The leader epoch: 0 until replication brings elections.
    leader_epoch: i32,
    high_watermark: AtomicI64,
    deleted: AtomicBool,
    /// Whether the committed metadata names this node the leader (always, without one).
    leading: AtomicBool,
    /// Notified on every high watermark advance; fetches wait on it.
    data_arrived: Arc<Notify>,
    health: Arc<LogDirHealth>,
    /// The first offset of the first corrupt batch the scrubber found ([`NOT_CORRUPT`] until
    /// then): reads at or beyond it are refused until the log is reopened.
    corrupt_from: AtomicI64,
    /// Where the scrubber continues in this log. Only the broker's one scrubber task steps
    /// it, and the lock is never held across an await.
    scrub_cursor: Mutex<ScrubCursor>,
    /// What recovery found when the log was opened.
    pub recovery: RecoveryReport,
    /// Deliberate bugs (all off outside the simulation's checker tests).
    bugs: BrokerBugs,
}

/// What one cleaner thread brings to every pass, from the broker's `log.cleaner.*`.
#[derive(Clone, Copy, Debug)]
pub struct CleanerShare {
    /// `log.cleaner.dedupe.buffer.size` divided among `log.cleaner.threads`.
    pub dedupe_buffer_bytes: u64,
    /// `log.cleaner.io.max.bytes.per.second`; 0: no limit.
    pub io_max_bytes_per_second: u64,
    pub bugs: CleanerBugs,
}

/// `Partition::corrupt_from` before any finding: above every offset.
const NOT_CORRUPT: i64 = i64::MAX;

impl Partition {
    pub fn new(
        (topic, topic_id, index): (String, Uuid, i32),
        (log, recovery): (Arc<Log>, RecoveryReport),
        config: TopicConfig,
        data_arrived: Arc<Notify>,
        health: Arc<LogDirHealth>,
        bugs: BrokerBugs,
    ) -> Partition {
        // After recovery everything in the log is on disk (recovery only keeps what it read
        // back), so all of it may be served.
        let high_watermark = if bugs.high_watermark_from_recovery_point {
            recovery.recovery_point.min(log.log_end_offset())
        } else {
            log.log_end_offset()
        };
        Partition {
            topic,
            topic_id,
            index,
            log,
            config: std::sync::RwLock::new(Arc::new(config)),
            leader_epoch: 0,
            high_watermark: AtomicI64::new(high_watermark),
            deleted: AtomicBool::new(false),
            leading: AtomicBool::new(true),
            data_arrived,
            health,
            corrupt_from: AtomicI64::new(NOT_CORRUPT),
            scrub_cursor: Mutex::new(ScrubCursor::START),
            recovery,
            bugs,
        }
    }

    /// The topic's effective config now (a later AlterConfigs does not change this copy).
    pub fn config(&self) -> Arc<TopicConfig> {
        // A poisoned lock only means a writer panicked between two whole-Arc stores; the
        // Arc inside is always a complete config.
        self.config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Replaces the topic's effective config (AlterConfigs, IncrementalAlterConfigs, a
    /// dynamic broker default). Produce validation and retention read the new values from
    /// the next request on. The log's own settings (segment size and age, index interval,
    /// flush policy) were fixed when the log was opened and change at the next start.
    pub fn set_config(&self, config: TopicConfig) {
        *self
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(config);
    }

    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Kafka's HighWatermark: the end of what has been acknowledged and may be read.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Kafka's LogEndOffset: one past the last offset written.
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    pub async fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset().await
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Marks the partition deleted: later appends and reads are refused.
    pub fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.data_arrived.notify_waiters();
    }

    /// Whether this node serves the partition (see the module doc).
    pub fn is_leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// Puts what the committed metadata says of this node's leadership in force; waiting
    /// fetches re-check.
    pub fn set_leading(&self, leading: bool) {
        if self.leading.swap(leading, Ordering::AcqRel) != leading {
            tracing::debug!(topic = %self.topic, partition = self.index, leading, "leadership changed");
            self.data_arrived.notify_waiters();
        }
    }

    fn check_leader(&self) -> Result<(), PartitionError> {
        if !self.is_leading() {
            return Err(PartitionError::NotLeader {
                topic: self.topic.clone(),
                partition: self.index,
            });
        }
        Ok(())
    }

    fn check_live(&self) -> Result<(), PartitionError> {
        if self.is_deleted() {
            return Err(PartitionError::Deleted {
                topic: self.topic.clone(),
                partition: self.index,
            });
        }
        Ok(())
    }

    fn log_error(&self, source: LogError) -> PartitionError {
        if matches!(source, LogError::Io { .. } | LogError::Offline { .. }) && !self.is_deleted() {
            self.health
                .fail(&format!("{}-{}: {source}", self.topic, self.index));
        }
        PartitionError::Log {
            topic: self.topic.clone(),
            partition: self.index,
            source,
        }
    }

    /// Appends a batch the produce validator accepted (its offsets assigned as it is written)
    /// without waiting for the flush policy; [`Partition::acknowledge`] completes it. Callers
    /// append in request order.
    pub async fn append(&self, batch: &ValidatedBatch) -> Result<PendingAppend, PartitionError> {
        self.check_live()?;
        self.check_leader()?;
        let pending = self
            .log
            .append_validated_unacknowledged(batch)
            .await
            .map_err(|e| self.log_error(e))?;
        // The log's flush policy, not the (possibly altered) topic config's: the two must
        // agree on when an append is acknowledged, and the log's is fixed until reopened.
        if matches!(self.log.config().flush, FlushPolicy::PageCache { .. }) {
            // In page-cache mode an append is acknowledged once written: the sole replica
            // has it, so the high watermark moves at once.
            self.advance_high_watermark(self.log.log_end_offset());
        }
        Ok(pending)
    }

    /// Waits until an append may be acknowledged and advances the high watermark over it.
    pub async fn acknowledge(&self, pending: PendingAppend) -> Result<AppendInfo, PartitionError> {
        let info = self
            .log
            .acknowledge(pending)
            .await
            .map_err(|e| self.log_error(e))?;
        let acknowledged_end = match self.log.config().flush {
            FlushPolicy::SyncBeforeAck if self.bugs.high_watermark_by_log_end => {
                self.log.log_end_offset()
            }
            FlushPolicy::SyncBeforeAck => self.log.durable_end_offset(),
            FlushPolicy::PageCache { .. } => self.log.log_end_offset(),
        };
        assert!(
            acknowledged_end > info.last_offset,
            "an acknowledged append must lie below the acknowledged end"
        );
        self.advance_high_watermark(acknowledged_end);
        Ok(info)
    }

    fn advance_high_watermark(&self, to: i64) {
        let log_end = self.log.log_end_offset();
        assert!(to <= log_end, "high watermark {to} above log end {log_end}");
        if matches!(self.log.config().flush, FlushPolicy::SyncBeforeAck)
            && !self.bugs.high_watermark_by_log_end
        {
            // Sync before ack: the sole replica acknowledges only what it has synced, so the
            // high watermark never covers bytes a power loss could take (design §5).
            let durable_end = self.log.durable_end_offset();
            assert!(
                to <= durable_end,
                "high watermark {to} above the durable end {durable_end} under sync-before-ack"
            );
        }
        let before = self.high_watermark.fetch_max(to, Ordering::AcqRel);
        if to > before {
            self.data_arrived.notify_waiters();
        }
    }

    /// The offset a read with `bound` must not return records from.
    fn max_offset(&self, bound: ReadBound) -> i64 {
        match bound {
            _ if self.bugs.read_bound_log_end => self.log.log_end_offset(),
            ReadBound::HighWatermark => self.high_watermark(),
            ReadBound::HighWatermarkOf(high_watermark) => {
                let now = self.high_watermark();
                assert!(
                    high_watermark <= now,
                    "a reported high watermark {high_watermark} above the current {now}"
                );
                high_watermark
            }
            ReadBound::LogEnd => self.log.log_end_offset(),
        }
    }

    /// The first offset of the corrupt batch the scrubber found (or, when its header was
    /// unreadable, the end of the last good batch before it), if it found one since the log
    /// was opened. Reads at and beyond it are refused with [`PartitionError::CorruptAtRest`].
    pub fn corrupt_from(&self) -> Option<i64> {
        let from = self.corrupt_from.load(Ordering::Acquire);
        (from != NOT_CORRUPT).then_some(from)
    }

    /// Refuses a read at or beyond `corrupt_from`; otherwise the bound for the read, lowered
    /// to `corrupt_from` so that no batch ending above it is returned.
    fn check_readable(&self, offset: i64, max_offset: i64) -> Result<i64, PartitionError> {
        let corrupt_from = if self.bugs.ignore_scrubber_findings {
            NOT_CORRUPT
        } else {
            self.corrupt_from.load(Ordering::Acquire)
        };
        if offset >= corrupt_from {
            return Err(PartitionError::CorruptAtRest {
                topic: self.topic.clone(),
                partition: self.index,
                offset,
                corrupt_from,
            });
        }
        Ok(max_offset.min(corrupt_from))
    }

    /// One step of the background scrubber over this partition's log, reading about
    /// `budget_bytes` from where the last step stopped (see [`Log::scrub_step`]). A finding is
    /// logged at error level and lowers [`Partition::corrupt_from`].
    pub async fn scrub_step(&self, budget_bytes: u64) -> Result<ScrubStep, PartitionError> {
        self.check_live()?;
        let cursor = *self
            .scrub_cursor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let step = self
            .log
            .scrub_step(cursor, budget_bytes)
            .await
            .map_err(|e| self.log_error(e))?;
        *self
            .scrub_cursor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = step.cursor;
        if let Some(found) = &step.corrupt {
            let before = self.corrupt_from.fetch_min(found.offset, Ordering::AcqRel);
            tracing::error!(
                topic = %self.topic,
                partition = self.index,
                file = %found.segment,
                position = found.position,
                offset = found.offset,
                reason = %found.reason,
                "scrubber found a corrupt batch at rest; reads at and beyond this offset are \
                 refused until the log is reopened"
            );
            assert!(
                self.corrupt_from.load(Ordering::Acquire) <= before,
                "corrupt_from moved up"
            );
        }
        Ok(step)
    }

    /// Reads whole batches from `offset`, at most about `max_bytes` (at least one batch).
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
    ) -> Result<ReadResult, PartitionError> {
        self.check_live()?;
        self.check_leader()?;
        let max_offset = self.check_readable(offset, self.max_offset(bound))?;
        self.log
            .read(offset, max_bytes, max_offset)
            .await
            .map_err(|e| self.log_error(e))
    }

    /// [`Partition::read`] for a response on its way to a socket: the batches as regions of
    /// the segment file, to be sent without a copy, when there are at least `copy_below_bytes`
    /// of them; copied bytes otherwise (a small copy is cheaper than a `sendfile` call each),
    /// and always with `verify_crc_on_read`, whose check needs the bytes in memory.
    ///
    /// Regions are sent after the log's lock is released. With [`ReadBound::HighWatermark`]
    /// or [`ReadBound::HighWatermarkOf`] that is safe: a single node never truncates below its high watermark, so the bytes
    /// under a region cannot change (see [`Log::read_regions`]). [`ReadBound::LogEnd`] reads
    /// (followers) can race a truncation, so they always take the copying path, which reads
    /// under the lock.
    pub async fn read_for_send(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        copy_below_bytes: usize,
    ) -> Result<SendRecords, PartitionError> {
        if self.log.config().verify_crc_on_read || bound == ReadBound::LogEnd {
            let read = self.read(offset, max_bytes, bound).await?;
            return Ok(SendRecords::Bytes(read.records));
        }
        self.check_live()?;
        self.check_leader()?;
        let max_offset = self.check_readable(offset, self.max_offset(bound))?;
        let mut read = self
            .log
            .read_regions(offset, max_bytes, max_offset)
            .await
            .map_err(|e| self.log_error(e))?;
        if read.total_len >= copy_below_bytes {
            if self.bugs.zero_copy_read_bound_log_end {
                // The planted bug: a zero-copy answer bounded by the log end.
                read = self
                    .log
                    .read_regions(offset, max_bytes, self.log.log_end_offset())
                    .await
                    .map_err(|e| self.log_error(e))?;
            }
            return Ok(SendRecords::Regions {
                regions: read.regions,
                total_len: read.total_len,
            });
        }
        let bytes = match read.regions.as_slice() {
            [] => Bytes::new(),
            [one] => one.read().await.map_err(|e| self.log_error(e))?,
            many => {
                let mut bytes = bytes::BytesMut::with_capacity(read.total_len);
                for region in many {
                    bytes.extend_from_slice(&region.read().await.map_err(|e| self.log_error(e))?);
                }
                bytes.freeze()
            }
        };
        Ok(SendRecords::Bytes(bytes))
    }

    /// Syncs in page-cache mode when `flush.ms` has passed (Kafka's log flusher).
    pub async fn flush_if_due(&self) -> Result<(), PartitionError> {
        self.check_live()?;
        self.log
            .flush_if_due()
            .await
            .map_err(|e| self.log_error(e))?;
        // Nothing to advance: page-cache mode acknowledges at append.
        Ok(())
    }

    /// Kafka's retention check for this partition, with the topic's current `retention.ms`
    /// and `retention.bytes` (read at each call, so a config change applies at the next
    /// check). Time and size limits apply only when `cleanup.policy` includes `delete`;
    /// segments below the log start offset go in any case. `now_ms` is the node's wall clock.
    pub async fn enforce_retention(
        &self,
        now_ms: i64,
        delete_one_segment_too_many: bool,
    ) -> Result<RetentionOutcome, PartitionError> {
        self.check_live()?;
        let config = self.config();
        let policy = if config.cleanup_policy.deletes() {
            RetentionPolicy {
                retention_ms: config.retention_ms,
                retention_bytes: config.retention_bytes,
                delete_one_segment_too_many,
            }
        } else {
            RetentionPolicy::UNLIMITED
        };
        self.log
            .enforce_retention(policy, self.high_watermark(), now_ms)
            .await
            .map_err(|e| self.log_error(e))
    }

    /// The cleaner settings for this partition now: the topic's current config (read at each
    /// call, so AlterConfigs applies at the next pass) with the broker's share of the dedupe
    /// buffer and IO limit. `None` unless `cleanup.policy` includes `compact`.
    pub fn cleaner_policy(&self, broker: &CleanerShare) -> Option<CleanerPolicy> {
        let config = self.config();
        config.cleanup_policy.compacts().then_some(CleanerPolicy {
            min_cleanable_dirty_ratio: config.min_cleanable_dirty_ratio,
            min_compaction_lag_ms: config.min_compaction_lag_ms,
            max_compaction_lag_ms: config.max_compaction_lag_ms,
            delete_retention_ms: config.delete_retention_ms,
            dedupe_buffer_bytes: broker.dedupe_buffer_bytes,
            io_max_bytes_per_second: broker.io_max_bytes_per_second,
            bugs: broker.bugs,
        })
    }

    /// What the log cleaner may do here now, below the high watermark.
    pub async fn cleanable(
        &self,
        policy: &CleanerPolicy,
        now_ms: i64,
    ) -> Result<Cleanable, PartitionError> {
        self.check_live()?;
        self.log
            .cleanable(policy, self.high_watermark(), now_ms)
            .await
            .map_err(|e| self.log_error(e))
    }

    /// One log cleaner pass over this partition, below the high watermark; `abort` stops it
    /// before it changes anything (shutdown).
    pub async fn clean(
        &self,
        policy: &CleanerPolicy,
        now_ms: i64,
        abort: &Latch,
    ) -> Result<CleanOutcome, PartitionError> {
        self.check_live()?;
        self.log
            .clean(policy, self.high_watermark(), now_ms, abort)
            .await
            .map_err(|e| self.log_error(e))
    }

    /// Kafka's DeleteRecords: moves the log start offset to `offset` (at most the high
    /// watermark) and returns the new low watermark once it is durable.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, PartitionError> {
        self.check_live()?;
        self.log
            .delete_records(offset, self.high_watermark())
            .await
            .map_err(|e| self.log_error(e))
    }

    /// Forgets idle idempotent producers (`producer.id.expiration.ms`); returns how many.
    pub async fn remove_expired_producers(&self) -> Result<usize, PartitionError> {
        self.check_live()?;
        self.log
            .remove_expired_producers()
            .await
            .map_err(|e| self.log_error(e))
    }

    /// The first offset whose batch has a timestamp at or after `timestamp`, if any.
    pub async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<i64>, PartitionError> {
        self.check_live()?;
        self.log
            .offset_for_timestamp(timestamp)
            .await
            .map_err(|e| self.log_error(e))
    }
}
