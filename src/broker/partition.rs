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
//! on. A follower instead truncates its log at the corrupt batch and fetches it again from
//! the leader ([`Partition::truncate_corrupt_tail`], called by the replica fetcher); the
//! leader takes it out of the ISR at once, since it fetches below the high watermark. It is
//! not an IO error: the log stays online and the log directory is not failed. A leader
//! whose corrupt batch lies below the high watermark while another ISR member holds it
//! ([`Partition::leads_over_corrupt_acknowledged_records`]) can neither serve those records
//! nor let its followers fetch past them: the broker halts, its clean-shutdown marker
//! withdrawn (`Broker::run_scrubber`), so that leadership moves and it comes back as a
//! follower outside every ISR and ELR. A lone replica keeps leading.
//!
//! Leadership and replication. The partition's replication state is a
//! [`crate::replication::replica::Replica`] core under a lock never held across an await. On a
//! node with a metadata quorum the metadata publisher gives it what the committed image says
//! of the partition ([`Partition::apply_metadata`]): leader, follower, or neither (a fenced
//! broker leads nothing). A partition that does not lead refuses appends and client reads
//! ([`PartitionError::NotLeader`], NOT_LEADER_OR_FOLLOWER at the wire); a follower takes the
//! leader's batches from the replica fetcher ([`Partition::append_as_follower`]). Without a
//! controller a partition leads alone (its ISR is itself). The high watermark is the core's:
//! on a leader the minimum over the ISR of what each member holds durably (design §5).
//!
//! Invariants: the high watermark never moves backwards and never passes the log end offset;
//! every advance wakes the fetches waiting in the purgatory; `corrupt_from` only moves down
//! (except back to none when a follower truncates its log at it: the corrupt batch is gone),
//! and no read returns a batch that ends above it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::broker::config::{BrokerBugs, TopicConfig};
use crate::log::cleaner::{CleanOutcome, Cleanable, CleanerBugs, CleanerPolicy};
use crate::log::leader_epoch::EpochEnd;
use crate::log::validator::ValidatedBatch;
use crate::log::{
    AppendInfo, FileRegion, FlushPolicy, Log, LogError, PendingAppend, ReadResult, RecoveryReport,
    RetentionOutcome, RetentionPolicy, ScrubCursor, ScrubStep,
};
use crate::protocol::wire::Uuid;
use crate::replication::replica::{
    AlterPartitionRefusal, BrokerState, FetchRefusal, IsrProposal, PartitionState, Replica,
    ReplicaConfig,
};
use crate::rt::latch::Latch;

/// Why a partition refused an operation.
#[derive(Debug)]
pub enum PartitionError {
    /// The topic was deleted while the request was in flight.
    Deleted { topic: String, partition: i32 },
    /// The committed metadata image does not name this node the partition's leader.
    NotLeader { topic: String, partition: i32 },
    /// A replica's fetch in another leader epoch than this leader's, or from a broker that
    /// is not a replica.
    ReplicaFetch {
        topic: String,
        partition: i32,
        refusal: FetchRefusal,
    },
    /// acks=all while the ISR is smaller than `min.insync.replicas` (before the append).
    NotEnoughReplicas {
        topic: String,
        partition: i32,
        isr: usize,
        min_insync_replicas: usize,
    },
    /// acks=all appended, and then the ISR shrank below `min.insync.replicas`.
    NotEnoughReplicasAfterAppend {
        topic: String,
        partition: i32,
        isr: usize,
        min_insync_replicas: usize,
    },
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
            PartitionError::ReplicaFetch {
                topic,
                partition,
                refusal,
            } => write!(f, "{topic}-{partition}: replica fetch refused: {refusal:?}"),
            PartitionError::NotEnoughReplicas {
                topic,
                partition,
                isr,
                min_insync_replicas,
            } => write!(
                f,
                "{topic}-{partition}: the ISR has {isr} member(s), below min.insync.replicas {min_insync_replicas}"
            ),
            PartitionError::NotEnoughReplicasAfterAppend {
                topic,
                partition,
                isr,
                min_insync_replicas,
            } => write!(
                f,
                "{topic}-{partition}: appended, but the ISR shrank to {isr} member(s), below min.insync.replicas {min_insync_replicas}"
            ),
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
/// (the `samsa broker` command, the simulated node) waits on it and exits. It also keeps
/// whether the directory's logs may claim to be clean while the process runs
/// ([`RunningMarker`]).
#[derive(Debug, Default)]
pub struct LogDirHealth {
    failed: Latch,
    pub running_marker: crate::broker::clean_shutdown::RunningMarker,
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
    /// The replication core (see the module doc); never locked across an await.
    replica: Mutex<Replica>,
    /// The core's leader epoch, role and high watermark, copied out after every step for
    /// lock-free reads.
    leader_epoch: AtomicI32,
    high_watermark: AtomicI64,
    deleted: AtomicBool,
    /// Whether the core leads (always, without a controller).
    leading: AtomicBool,
    /// An ISR change the core decided, for the broker's AlterPartition task, with the time
    /// it was taken; `isr_changes` wakes that task.
    outbox: Mutex<Option<IsrProposal>>,
    isr_changes: Arc<Notify>,
    /// The high watermark last written to the checkpoint (-1: never).
    checkpointed: AtomicI64,
    /// The latest `now_ms` a step was given.
    now_ms: std::sync::atomic::AtomicU64,
    /// The planted `high_watermark_from_recovery_point` bug: what this replica may
    /// acknowledge is capped at the recovery point until its first new append is acknowledged
    /// (`i64::MAX`: no cap).
    acknowledgeable_cap: AtomicI64,
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
    /// A partition leading alone (its own ISR, leader epoch 0) until the metadata publisher
    /// says otherwise. `checkpointed` is the high watermark checkpoint's value, if any.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        (topic, topic_id, index): (String, Uuid, i32),
        (log, recovery): (Arc<Log>, RecoveryReport),
        config: TopicConfig,
        (node_id, replication): (i32, crate::broker::config::ReplicationSettings),
        checkpointed: Option<i64>,
        (data_arrived, isr_changes): (Arc<Notify>, Arc<Notify>),
        health: Arc<LogDirHealth>,
        bugs: BrokerBugs,
    ) -> Partition {
        let log_end = log.log_end_offset();
        // A checkpoint may predate a truncation; without one nothing is known acknowledged
        // beyond what this replica alone may acknowledge, which leading alone gives below.
        let high_watermark = checkpointed.unwrap_or(0).min(log_end);
        let replica_config = ReplicaConfig {
            node_id,
            replica_lag_time_max_ms: replication.replica_lag_time_max_ms,
            min_insync_replicas: usize::try_from(config.min_insync_replicas.max(1)).unwrap_or(1),
        };
        let mut replica = Replica::new(replica_config, high_watermark, bugs.replica);
        // After recovery everything in the log is on disk (recovery only keeps what it read
        // back), so all of it may be served by a partition that is its own ISR.
        let acknowledgeable_end = if bugs.high_watermark_from_recovery_point {
            recovery.recovery_point.min(log_end)
        } else {
            log_end
        };
        replica.apply_state(
            0,
            PartitionState {
                replicas: vec![node_id],
                isr: vec![node_id],
                elr: Vec::new(),
                leader: node_id,
                leader_epoch: 0,
                partition_epoch: 0,
            },
            BTreeMap::new(),
            (log_end, acknowledgeable_end),
        );
        let high_watermark = replica.high_watermark();
        let _ = replica.ready(0);
        let acknowledgeable_cap = if bugs.high_watermark_from_recovery_point {
            acknowledgeable_end
        } else {
            i64::MAX
        };
        Partition {
            topic,
            topic_id,
            index,
            log,
            config: std::sync::RwLock::new(Arc::new(config)),
            replica: Mutex::new(replica),
            leader_epoch: AtomicI32::new(0),
            high_watermark: AtomicI64::new(high_watermark),
            deleted: AtomicBool::new(false),
            leading: AtomicBool::new(true),
            outbox: Mutex::new(None),
            isr_changes,
            checkpointed: AtomicI64::new(checkpointed.unwrap_or(-1)),
            now_ms: std::sync::atomic::AtomicU64::new(0),
            acknowledgeable_cap: AtomicI64::new(acknowledgeable_cap),
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
        let min = usize::try_from(config.min_insync_replicas.max(1)).unwrap_or(1);
        self.step(0, |core| core.set_min_insync_replicas(min));
        *self
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(config);
    }

    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
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

    fn core(&self) -> std::sync::MutexGuard<'_, Replica> {
        // A poisoned lock means a release assertion fired inside the core, which stops the
        // broker; what is left is still the last whole state.
        self.replica
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `step` on the core and carries out its outputs: the high watermark, the role and
    /// epoch copies, an ISR change for the AlterPartition task. Waiters are woken when
    /// anything they wait on moved.
    fn step<T>(&self, now_ms: u64, step: impl FnOnce(&mut Replica) -> T) -> T {
        // Steps without a clock of their own (appends, truncations) use the latest time seen.
        let now_ms = self.now_ms.fetch_max(now_ms, Ordering::AcqRel).max(now_ms);
        let (out, ready, leading, epoch, high_watermark) = {
            let mut core = self.core();
            let out = step(&mut core);
            let ready = core.ready(now_ms);
            (
                out,
                ready,
                core.is_leader(),
                core.leader_epoch(),
                core.high_watermark(),
            )
        };
        let was_leading = self.leading.swap(leading, Ordering::AcqRel);
        let old_epoch = self.leader_epoch.swap(epoch, Ordering::AcqRel);
        if let Some(to) = ready.high_watermark {
            assert_eq!(to, high_watermark, "the core's moved high watermark");
        }
        let before = self.high_watermark.swap(high_watermark, Ordering::AcqRel);
        if let Some(proposal) = ready.alter_partition {
            *self
                .outbox
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(proposal);
            self.isr_changes.notify_one();
        }
        if was_leading != leading || old_epoch != epoch || before != high_watermark {
            if was_leading != leading {
                tracing::debug!(topic = %self.topic, partition = self.index, leading, epoch, "leadership changed");
            }
            self.data_arrived.notify_waiters();
        }
        out
    }

    /// The ends the core counts for this replica: the log end, and what it may acknowledge
    /// (the synced end under sync-before-ack, the log end in page-cache mode).
    fn ends(&self) -> (i64, i64) {
        let log_end = self.log.log_end_offset();
        let acknowledgeable = match self.log.config().flush {
            FlushPolicy::SyncBeforeAck if self.bugs.high_watermark_by_log_end => log_end,
            FlushPolicy::SyncBeforeAck => self.log.durable_end_offset().min(log_end),
            FlushPolicy::PageCache { .. } => log_end,
        };
        let cap = self.acknowledgeable_cap.load(Ordering::Acquire);
        (log_end, acknowledgeable.min(cap))
    }

    /// Puts what the committed metadata says of this partition and of the brokers in force
    /// (`None`: this broker leads nothing of it, e.g. it is fenced). Waiting fetches and
    /// produces re-check.
    pub fn apply_metadata(
        &self,
        now_ms: u64,
        state: Option<PartitionState>,
        brokers: BTreeMap<i32, BrokerState>,
    ) {
        let ends = self.ends();
        self.step(now_ms, |core| match state {
            Some(state) => core.apply_state(now_ms, state, brokers, ends),
            None => core.resign(),
        });
    }

    /// Stops leading (and following) until the metadata publisher says otherwise.
    pub fn resign(&self) {
        self.step(0, |core| core.resign());
    }

    /// The partition's committed state as the core has it (None before any).
    pub fn replica_state(&self) -> Option<PartitionState> {
        self.core().state().cloned()
    }

    /// Where this leader's epoch began; None unless it leads (see
    /// [`Replica::leader_epoch_start_offset`]).
    pub fn leader_epoch_start_offset(&self) -> Option<i64> {
        self.core().leader_epoch_start_offset()
    }

    /// Whom this replica follows, if it follows.
    pub fn following(&self) -> Option<i32> {
        match self.core().role() {
            crate::replication::replica::Role::Follower { leader } => Some(*leader),
            _ => None,
        }
    }

    /// The core's maximal ISR (KIP-497), for tests and tools.
    pub fn maximal_isr(&self) -> Vec<i32> {
        self.core().maximal_isr()
    }

    /// The time passed: ISR shrink proposals, resends.
    pub fn tick(&self, now_ms: u64) {
        self.step(now_ms, |core| core.tick(now_ms));
    }

    /// Takes the ISR change waiting to be sent, if any.
    pub fn take_isr_proposal(&self) -> Option<IsrProposal> {
        self.outbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// The controller's answer to the ISR change sent last.
    pub fn isr_proposal_answered(
        &self,
        now_ms: u64,
        answer: Result<PartitionState, AlterPartitionRefusal>,
    ) {
        self.step(now_ms, |core| core.alter_partition_answered(now_ms, answer));
    }

    /// Whether an acks=all produce may be appended (the ISR has `min.insync.replicas`).
    pub fn check_enough_replicas(&self) -> Result<(), PartitionError> {
        let core = self.core();
        // A partition this broker does not lead is refused by the append itself
        // (NOT_LEADER_OR_FOLLOWER, which sends the client to the leader).
        if !core.is_leader() || core.enough_replicas() {
            return Ok(());
        }
        Err(PartitionError::NotEnoughReplicas {
            topic: self.topic.clone(),
            partition: self.index,
            isr: core.isr_len(),
            min_insync_replicas: core.config().min_insync_replicas,
        })
    }

    /// Waits until the high watermark passes `last_offset` (acks=all): every member of the
    /// ISR holds it durably. Fails once this broker stops leading, or when the ISR shrinks
    /// below `min.insync.replicas` (the high watermark would not move until it grows again).
    pub async fn wait_replicated(&self, last_offset: i64) -> Result<(), PartitionError> {
        self.wait_data(|| {
            self.check_live()?;
            if self.high_watermark() > last_offset {
                return Ok(Some(()));
            }
            self.check_leader()?;
            let core = self.core();
            if !core.enough_replicas() {
                return Err(PartitionError::NotEnoughReplicasAfterAppend {
                    topic: self.topic.clone(),
                    partition: self.index,
                    isr: core.isr_len(),
                    min_insync_replicas: core.config().min_insync_replicas,
                });
            }
            Ok(None)
        })
        .await
    }

    /// Waits, while this replica leads, until the high watermark reaches `offset`: every
    /// record below it is then acknowledged by the ISR. Unlike [`Partition::wait_replicated`]
    /// an ISR below `min.insync.replicas` is waited out, not refused; callers bound the wait.
    pub async fn wait_high_watermark(&self, offset: i64) -> Result<(), PartitionError> {
        self.wait_data(|| {
            self.check_live()?;
            self.check_leader()?;
            Ok((self.high_watermark() >= offset).then_some(()))
        })
        .await
    }

    /// Calls `poll` now and after every wake-up of `data_arrived` (a high watermark or log
    /// end advance, a leadership change) until it decides: `Ok(Some(_))` or `Err(_)`. The
    /// wake-up is armed before each poll, so none between a poll and the wait is missed.
    async fn wait_data<T>(
        &self,
        mut poll: impl FnMut() -> Result<Option<T>, PartitionError>,
    ) -> Result<T, PartitionError> {
        loop {
            let notified = self.data_arrived.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(done) = poll()? {
                return Ok(done);
            }
            notified.await;
        }
    }

    /// Whether this replica leads in `current_leader_epoch` (-1: not sent), as a request that
    /// names the epoch it expects must find it (KIP-320): FENCED_LEADER_EPOCH for an older
    /// one, UNKNOWN_LEADER_EPOCH for a newer one.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        self.core()
            .check_leader_epoch(current_leader_epoch)
            .map_err(|refusal| self.fetch_refusal(refusal))
    }

    fn fetch_refusal(&self, refusal: FetchRefusal) -> PartitionError {
        match refusal {
            FetchRefusal::NotLeader => PartitionError::NotLeader {
                topic: self.topic.clone(),
                partition: self.index,
            },
            refusal => PartitionError::ReplicaFetch {
                topic: self.topic.clone(),
                partition: self.index,
                refusal,
            },
        }
    }

    /// A follower's fetch arrived (leader side): checks its epoch, records its fetch offset
    /// (which may advance the high watermark and propose it for the ISR), and says whether its
    /// log diverges from this one (Fetch v12+ DivergingEpoch), in which case it gets no
    /// records.
    pub async fn follower_fetch(
        &self,
        now_ms: u64,
        (replica_id, broker_epoch): (i32, i64),
        current_leader_epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> Result<Option<EpochEnd>, PartitionError> {
        self.check_live()?;
        let refusal = |refusal| self.fetch_refusal(refusal);
        // Checked before the divergence, and the fetch offset of a diverging follower is not
        // recorded: it counts records the leader does not have.
        self.core()
            .check_fetch(replica_id, current_leader_epoch)
            .map_err(refusal)?;
        if last_fetched_epoch >= 0 {
            let ours = self.log.end_offset_for_epoch(last_fetched_epoch).await;
            if let Some(diverging) = crate::replication::follower::diverging_epoch(
                last_fetched_epoch,
                fetch_offset,
                ours,
            ) {
                return Ok(Some(diverging));
            }
        }
        self.step(now_ms, |core| {
            core.follower_fetch(
                now_ms,
                replica_id,
                broker_epoch,
                current_leader_epoch,
                fetch_offset,
            )
        })
        .map_err(refusal)?;
        Ok(None)
    }

    /// Appends the leader's batches as they are (offsets and epochs kept) on a follower, and
    /// syncs them under sync-before-ack before returning, so that the next fetch offset, which
    /// acknowledges them to the leader, covers only synced records (design §5).
    pub async fn append_as_follower(&self, records: Bytes) -> Result<(), PartitionError> {
        self.check_live()?;
        if self.bugs.replica.follower_acks_before_sync {
            self.log
                .append_in_mode(records, crate::log::AppendMode::Replica)
                .await
                .map_err(|e| self.log_error(e))?;
        } else {
            self.log
                .append_as_follower(records)
                .await
                .map_err(|e| self.log_error(e))?;
        }
        Ok(())
    }

    /// Truncates a follower's log to `offset` (its divergence from the leader); returns the
    /// new log end. The high watermark is capped at it.
    pub async fn truncate_as_follower(&self, offset: i64) -> Result<i64, PartitionError> {
        self.check_live()?;
        let end = self
            .log
            .truncate_to(offset)
            .await
            .map_err(|e| self.log_error(e))?;
        let before = self.high_watermark();
        if end < before {
            tracing::warn!(topic = %self.topic, partition = self.index, end, high_watermark = before, "a follower truncated below its high watermark");
        }
        self.step(0, |core| core.truncated(end));
        Ok(end)
    }

    /// A follower drops its log from the first corrupt batch the scrubber found, so that the
    /// fetcher takes those records from the leader again (the leader and the rest of the ISR
    /// still hold them: corruption of one replica is a minority's loss); the new log end, or
    /// none when nothing was found or this replica does not follow. A leader keeps refusing
    /// reads from the corrupt batch on ([`PartitionError::CorruptAtRest`]).
    pub async fn truncate_corrupt_tail(&self) -> Result<Option<i64>, PartitionError> {
        let from = self.corrupt_from.load(Ordering::Acquire);
        if from == NOT_CORRUPT
            || self.following().is_none()
            || self.bugs.follower_keeps_corrupt_batches
        {
            return Ok(None);
        }
        let end = self.truncate_as_follower(from).await?;
        assert!(end <= from, "a corrupt batch kept after truncating at it");
        // The corrupt batch is gone: reads may pass where it was (a later finding lowers
        // the bound again).
        let _ = self.corrupt_from.compare_exchange(
            from,
            NOT_CORRUPT,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        tracing::warn!(
            topic = %self.topic,
            partition = self.index,
            from,
            end,
            "a follower truncated its log at a corrupt batch and fetches it again from the leader"
        );
        Ok(Some(end))
    }

    /// A follower whose fetch offset is below the leader's log start starts over there.
    pub async fn restart_follower_at(&self, offset: i64) -> Result<(), PartitionError> {
        self.check_live()?;
        self.log
            .truncate_fully_and_start_at(offset)
            .await
            .map_err(|e| self.log_error(e))?;
        self.step(0, |core| core.truncated(offset));
        Ok(())
    }

    /// A follower takes the leader's high watermark from a fetch answer.
    pub fn follower_high_watermark(&self, leader_high_watermark: i64) {
        let log_end = self.log.log_end_offset();
        self.step(0, |core| {
            core.follower_high_watermark(leader_high_watermark, log_end)
        });
    }

    /// Writes the high watermark checkpoint if it moved since the last write.
    pub async fn checkpoint_high_watermark(&self, disk: &crate::rt::disk::Disk) {
        let high_watermark = self.high_watermark();
        if self.checkpointed.load(Ordering::Acquire) == high_watermark || self.is_deleted() {
            return;
        }
        match crate::replication::checkpoint::write(disk, self.log.dir(), high_watermark).await {
            Ok(()) => self.checkpointed.store(high_watermark, Ordering::Release),
            Err(e) => {
                tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "cannot write the high watermark checkpoint")
            }
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
            .append_validated_unacknowledged(batch, self.leader_epoch())
            .await
            .map_err(|e| self.log_error(e))?;
        // The log's flush policy, not the (possibly altered) topic config's: the two must
        // agree on when an append is acknowledged, and the log's is fixed until reopened. In
        // page-cache mode an append counts at once; followers wait for its log end to move.
        let ends = self.ends();
        self.step(0, |core| core.leader_end_advanced(ends.0, ends.1));
        // Followers' fetches wait for the log end to move, not the high watermark.
        self.data_arrived.notify_waiters();
        Ok(pending)
    }

    /// Waits until an append may be acknowledged by this replica (its sync under
    /// sync-before-ack) and tells the core, which may advance the high watermark over it (at
    /// once when this replica is its whole ISR).
    pub async fn acknowledge(&self, pending: PendingAppend) -> Result<AppendInfo, PartitionError> {
        let info = self
            .log
            .acknowledge(pending)
            .await
            .map_err(|e| self.log_error(e))?;
        self.acknowledgeable_cap.store(i64::MAX, Ordering::Release);
        let ends = self.ends();
        assert!(
            ends.1 > info.last_offset,
            "an acknowledged append must lie below the acknowledged end"
        );
        self.step(0, |core| core.leader_end_advanced(ends.0, ends.1));
        Ok(info)
    }

    /// Makes every record appended below `offset` durable on this replica and tells the
    /// core. Appends whose acknowledgement nobody awaits any more (a coordinator's, after a
    /// failed write unloaded its shard) would otherwise stay unsynced under sync-before-ack,
    /// holding a leader's high watermark below them until its next append.
    pub async fn sync_to(&self, offset: i64) -> Result<(), PartitionError> {
        self.check_live()?;
        self.log
            .flush_to(offset)
            .await
            .map_err(|e| self.log_error(e))?;
        let ends = self.ends();
        self.step(0, |core| core.leader_end_advanced(ends.0, ends.1));
        Ok(())
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

    /// Whether this replica leads while its scrubber found acknowledged records (below the
    /// high watermark) corrupt and another ISR member holds them: it cannot serve them, and
    /// the controller moves leadership only off a broker that stops (see
    /// `Broker::run_scrubber`). A lone replica keeps leading, refusing only the corrupt reads.
    pub fn leads_over_corrupt_acknowledged_records(&self) -> Option<i64> {
        let from = self.corrupt_from()?;
        let core = self.core();
        let lost = core.is_leader() && core.isr_len() > 1 && from < core.high_watermark();
        lost.then_some(from)
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
