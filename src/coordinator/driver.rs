//! The group coordinator's driver: it owns one [`GroupShard`] per partition of
//! `__consumer_offsets` that this node leads (on a single node, every partition), feeds it
//! requests and time, appends the records it emits to the partition, and delivers its answers
//! once the records are durable.
//!
//! Placement is explicit: a group belongs to partition [`partition_for`]`(group id)` of
//! `__consumer_offsets`, and its coordinator is that partition's leader. The cluster steps
//! move a shard by unloading it here ([`GroupShard::unload`], NOT_COORDINATOR) and loading it
//! on the new leader from the partition's log ([`GroupCoordinator::load`]).
//!
//! Invariants:
//! - One lock ([`Shared::inner`]) orders every step of every shard; a step's records are
//!   appended to the partition before the lock is released, so the log holds records in the
//!   order the shard made its changes.
//! - Each shard's writes are acknowledged in issue order by that shard's acker task (one
//!   channel per loaded shard; a reload starts a new one and the old one's reports are
//!   dropped by its load epoch).
//! - A waiting request is woken by its own answer only (the purgatory is keyed by the
//!   request's [`Token`], and a shard holds answers behind the writes they depend on), never
//!   by a broker-wide notification.
//!
//! The driver depends on the broker's `Partition` and `Topics` for its log: the partition is
//! the unit that the replication steps will move below the coordinator.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Mutex, Notify};

use crate::broker::config::GroupSettings;
use crate::broker::partition::{Partition, PartitionError, ReadBound};
use crate::broker::topics::{NewTopic, TopicError, Topics};
use crate::coordinator::group::{Now, Token};
use crate::coordinator::records::partition_for;
use crate::coordinator::shard::{Answer, CoordinatorBugs, GroupShard, ShardStatus, Write};
use crate::log::validator::{self, ValidatorConfig};
use crate::log::PendingAppend;
use crate::protocol::error::ErrorCode;
use crate::protocol::record_batch::{self, BatchBuilder};
use crate::rt::clock::Clock;
use crate::rt::latch::Latch;
use crate::rt::time::{self, Duration};

/// Kafka's internal topic of committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The Produce version the coordinator's own batches are validated as (any version with
/// every codec and field; the coordinator writes uncompressed batches).
const OWN_BATCH_PRODUCE_VERSION: i16 = 9;
/// A write's records are split into batches of at most about this many bytes, well under
/// the topic's `max.message.bytes` (1 MiB by default).
pub const WRITE_BATCH_BYTES_MAX: usize = 256 << 10;
/// How much of the partition one load step reads.
pub const LOAD_READ_BYTES_MAX: usize = 1 << 20;
/// How often a load waiting for the high watermark to pass what it read checks that it was
/// not replaced by a newer load.
const LOAD_COMMIT_POLL_MS: u64 = 100;
/// The longest the timer loop sleeps without looking at the shards' deadlines again.
pub const TICK_INTERVAL_MAX_MS: i64 = 1_000;

/// The coordinator of every group on this node.
#[derive(Debug, Clone)]
pub struct GroupCoordinator {
    shared: Arc<Shared>,
}

#[derive(Debug)]
pub struct Shared {
    settings: GroupSettings,
    bugs: CoordinatorBugs,
    /// The wall clock: record and commit timestamps only.
    clock: Clock,
    /// The origin of the shards' monotonic milliseconds: their timers run on `rt::time`,
    /// which never jumps.
    origin: time::Instant,
    inner: Mutex<Inner>,
    /// Wakes the timer loop when a step may have moved a deadline earlier.
    wake: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    shards: BTreeMap<i32, Slot>,
    waiters: BTreeMap<Token, oneshot::Sender<Answer>>,
    next_token: u64,
    /// The partition count of `__consumer_offsets`, once it exists here.
    partitions: Option<i32>,
    next_load_epoch: u64,
}

#[derive(Debug)]
struct Slot {
    shard: GroupShard,
    partition: Arc<Partition>,
    load_epoch: u64,
    acks: mpsc::UnboundedSender<(u64, Vec<PendingAppend>)>,
}

/// Why a group request cannot reach its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// `__consumer_offsets` does not exist (yet): COORDINATOR_NOT_AVAILABLE.
    NoOffsetsTopic,
    /// The group's partition is not led here: NOT_COORDINATOR.
    NotCoordinator,
}

impl Unreachable {
    pub fn code(self) -> ErrorCode {
        match self {
            Unreachable::NoOffsetsTopic => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            Unreachable::NotCoordinator => ErrorCode::NOT_COORDINATOR,
        }
    }
}

impl GroupCoordinator {
    pub fn new(settings: GroupSettings, bugs: CoordinatorBugs, clock: Clock) -> GroupCoordinator {
        GroupCoordinator {
            shared: Arc::new(Shared {
                settings,
                bugs,
                clock,
                origin: time::now(),
                inner: Mutex::new(Inner::default()),
                wake: Notify::new(),
            }),
        }
    }

    pub fn settings(&self) -> &GroupSettings {
        &self.shared.settings
    }

    /// Creates `__consumer_offsets` with `offsets.topic.replication.factor` replicas if it
    /// does not exist, once that many brokers are alive (`alive_brokers`: the unfenced
    /// brokers of the image, or 1 for a single node; Kafka waits the same way), and loads its
    /// shards if they are not loaded. `Err` is the code FindCoordinator answers meanwhile.
    pub async fn ensure_started(
        &self,
        topics: &Topics,
        alive_brokers: usize,
    ) -> Result<(), ErrorCode> {
        if self.shared.inner.lock().await.partitions.is_some() {
            return Ok(());
        }
        if topics.get(OFFSETS_TOPIC).await.is_none() {
            let factor = self.shared.settings.offsets_topic_replication_factor;
            if alive_brokers < usize::try_from(factor).unwrap_or(usize::MAX) {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            let mut overrides = BTreeMap::new();
            overrides.insert("cleanup.policy".to_string(), "compact".to_string());
            overrides.insert(
                "segment.bytes".to_string(),
                self.shared.settings.offsets_topic_segment_bytes.to_string(),
            );
            let created = topics
                .create(NewTopic {
                    id: None,
                    name: OFFSETS_TOPIC.to_string(),
                    partitions: Some(self.shared.settings.offsets_topic_num_partitions),
                    replication_factor: Some(factor),
                    overrides,
                })
                .await;
            match created {
                Ok(_) | Err(TopicError::AlreadyExists { .. }) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not create {OFFSETS_TOPIC}");
                    return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
                }
            }
            tracing::info!(
                partitions = self.shared.settings.offsets_topic_num_partitions,
                "created {OFFSETS_TOPIC}"
            );
        }
        self.load(topics).await;
        Ok(())
    }

    /// Loads every partition of `__consumer_offsets` that exists here (at start, and after a
    /// creation). Partitions are replayed one at a time, each in steps of
    /// [`LOAD_READ_BYTES_MAX`]; a partition's groups answer COORDINATOR_LOAD_IN_PROGRESS
    /// until it is done. False when there was nothing to do: no such topic here, or a load
    /// already made.
    pub async fn load(&self, topics: &Topics) -> bool {
        let Some(topic) = topics.get(OFFSETS_TOPIC).await else {
            return false;
        };
        let partitions: Vec<Arc<Partition>> = topic.partitions.clone();
        let mut loads = Vec::with_capacity(partitions.len());
        {
            let mut inner = self.shared.inner.lock().await;
            if inner.partitions.is_some() {
                return false;
            }
            inner.partitions = Some(i32::try_from(partitions.len()).unwrap_or(i32::MAX));
            for partition in &partitions {
                let load_epoch = self.shared.install(&mut inner, partition.clone());
                loads.push((partition.clone(), load_epoch));
            }
        }
        for (partition, load_epoch) in loads {
            self.shared
                .clone()
                .replay_partition(partition, load_epoch)
                .await;
        }
        true
    }

    /// Loads `partition`'s groups again from its log, because this broker became its leader
    /// again (a load while it did not lead failed and left the shard unloaded, and whatever
    /// another leader wrote meanwhile must be read): a new shard, loading (requests get
    /// COORDINATOR_LOAD_IN_PROGRESS), replaces the unloaded one. Nothing happens before the
    /// first [`GroupCoordinator::load`], nor while the partition's shard is loading or active.
    pub async fn reload(&self, partition: Arc<Partition>) {
        let load_epoch = {
            let mut inner = self.shared.inner.lock().await;
            if inner.partitions.is_none() {
                return;
            }
            // A shard loading or active holds what the log says already: the partition was
            // just created and loaded here, or this broker never stopped leading it (a loss
            // unloads the shard, `resign`). Replacing it would only bounce its members.
            let current = inner
                .shards
                .get(&partition.index)
                .is_some_and(|slot| slot.shard.status() != ShardStatus::Unloaded);
            if current {
                return;
            }
            self.shared.install(&mut inner, partition.clone())
        };
        self.shared
            .clone()
            .replay_partition(partition, load_epoch)
            .await;
    }

    /// This broker no longer leads `index` of `__consumer_offsets`: its groups are forgotten
    /// at once (Kafka's `onResignation`), so every request for them, and every request
    /// waiting in them, gets NOT_COORDINATOR and the members look for the new coordinator
    /// instead of being served by a coordinator whose writes would fail. A load of the
    /// partition still running finds the shard unloaded and stops.
    pub async fn resign(&self, index: i32) {
        let mut inner = self.shared.inner.lock().await;
        let Some(slot) = inner.shards.get_mut(&index) else {
            return;
        };
        if slot.shard.status() == ShardStatus::Unloaded || slot.shard.bugs.serve_after_resign {
            return;
        }
        tracing::info!(
            partition = index,
            "no longer leading {OFFSETS_TOPIC}-{index}: its groups are unloaded"
        );
        slot.shard.unload(ErrorCode::NOT_COORDINATOR);
        self.shared.process(&mut inner, index).await;
    }

    /// The `__consumer_offsets` partition of `group_id`, if the topic exists here.
    pub async fn partition_of(&self, group_id: &str) -> Option<i32> {
        let partitions = self.shared.inner.lock().await.partitions?;
        Some(partition_for(group_id, partitions))
    }

    /// Steps the shard of `group_id` with `step` (given the token of the answer) and returns
    /// the answer's receiver; the step is made before this returns.
    pub async fn call(
        &self,
        group_id: &str,
        step: impl FnOnce(&mut GroupShard, Now, Token),
    ) -> Result<oneshot::Receiver<Answer>, Unreachable> {
        let mut inner = self.shared.inner.lock().await;
        let partitions = inner.partitions.ok_or(Unreachable::NoOffsetsTopic)?;
        let index = partition_for(group_id, partitions);
        self.shared.call_locked(&mut inner, index, step).await
    }

    /// Steps every loaded shard with `step` (ListGroups) and returns each answer's receiver.
    pub async fn call_all(
        &self,
        mut step: impl FnMut(&mut GroupShard, Now, Token),
    ) -> Result<Vec<oneshot::Receiver<Answer>>, Unreachable> {
        let mut inner = self.shared.inner.lock().await;
        if inner.partitions.is_none() {
            return Err(Unreachable::NoOffsetsTopic);
        }
        let indexes: Vec<i32> = inner.shards.keys().copied().collect();
        let mut out = Vec::new();
        for index in indexes {
            out.push(
                self.shared
                    .call_locked(&mut inner, index, &mut step)
                    .await?,
            );
        }
        Ok(out)
    }

    /// The timer loop until `shutdown`: ticks every shard when its next deadline is due
    /// (and at least every [`TICK_INTERVAL_MAX_MS`]).
    pub async fn run(self, shutdown: Arc<Latch>) {
        loop {
            let now_ms = self.shared.now().monotonic_ms;
            let next_ms = {
                let inner = self.shared.inner.lock().await;
                inner
                    .shards
                    .values()
                    .filter_map(|s| s.shard.next_deadline_ms())
                    .min()
                    .unwrap_or(now_ms + TICK_INTERVAL_MAX_MS)
            };
            let wait_ms = (next_ms - now_ms).clamp(0, TICK_INTERVAL_MAX_MS);
            let wait = Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0));
            tokio::select! {
                biased;
                _ = shutdown.wait() => return,
                _ = self.shared.wake.notified() => {}
                _ = time::sleep(wait) => {}
            }
            let mut inner = self.shared.inner.lock().await;
            let now = self.shared.now();
            let indexes: Vec<i32> = inner.shards.keys().copied().collect();
            for index in indexes {
                if let Some(slot) = inner.shards.get_mut(&index) {
                    slot.shard.tick(now);
                }
                self.shared.process(&mut inner, index).await;
            }
        }
    }
}

impl Shared {
    /// Both clocks, read together.
    fn now(&self) -> Now {
        let elapsed_ms = time::now()
            .saturating_duration_since(self.origin)
            .as_millis();
        Now {
            monotonic_ms: i64::try_from(elapsed_ms).unwrap_or(i64::MAX),
            wall_ms: self.clock.now_ms(),
        }
    }

    /// A new shard for `partition`, loading, with its acker task; its load epoch. A shard it
    /// replaces is unloaded first and whatever it still held is answered NOT_COORDINATOR
    /// here: the new shard knows nothing of those requests, and a waiter left behind would
    /// never be answered (a JoinGroup would hang for its whole rebalance timeout).
    fn install(self: &Arc<Self>, inner: &mut Inner, partition: Arc<Partition>) -> u64 {
        let index = partition.index;
        if let Some(mut old) = inner.shards.remove(&index) {
            if old.shard.status() != ShardStatus::Unloaded {
                old.shard.unload(ErrorCode::NOT_COORDINATOR);
            }
            let ready = old.shard.ready();
            assert!(ready.writes.is_empty(), "an unloaded shard has no writes");
            for (token, answer) in ready.answers {
                if let Some(waiter) = inner.waiters.remove(&token) {
                    let _ = waiter.send(answer);
                }
            }
        }
        let (acks, rx) = mpsc::unbounded_channel();
        let load_epoch = inner.next_load_epoch;
        inner.next_load_epoch += 1;
        let mut config = self.settings.coordinator.clone();
        // The retention check runs on the shard's clock from load on.
        config.offsets_retention_check_interval_ms =
            config.offsets_retention_check_interval_ms.max(1);
        inner.shards.insert(
            index,
            Slot {
                shard: GroupShard::new(index, config, self.bugs),
                partition: partition.clone(),
                load_epoch,
                acks,
            },
        );
        crate::rt::task::spawn(self.clone().ack_loop(index, load_epoch, partition, rx));
        load_epoch
    }

    async fn call_locked(
        &self,
        inner: &mut Inner,
        index: i32,
        step: impl FnOnce(&mut GroupShard, Now, Token),
    ) -> Result<oneshot::Receiver<Answer>, Unreachable> {
        if !inner.shards.contains_key(&index) {
            return Err(Unreachable::NotCoordinator);
        }
        let token = Token(inner.next_token);
        inner.next_token += 1;
        let (tx, rx) = oneshot::channel();
        inner.waiters.insert(token, tx);
        let now = self.now();
        if let Some(slot) = inner.shards.get_mut(&index) {
            step(&mut slot.shard, now, token);
        }
        self.process(inner, index).await;
        self.wake.notify_one();
        Ok(rx)
    }

    /// Carries out what shard `index` made ready: appends its writes, in order, handing each
    /// to the acker; sends its answers.
    async fn process(&self, inner: &mut Inner, index: i32) {
        loop {
            let Some(slot) = inner.shards.get_mut(&index) else {
                return;
            };
            let ready = slot.shard.ready();
            if ready.writes.is_empty() && ready.answers.is_empty() {
                return;
            }
            for write in ready.writes {
                let Some(slot) = inner.shards.get_mut(&index) else {
                    break;
                };
                match self.append(&slot.partition, &write).await {
                    Ok(pending) => {
                        // The acker ends only when the slot is dropped.
                        let _ = slot.acks.send((write.id, pending));
                    }
                    Err(_) if slot.shard.bugs.serve_after_resign => {
                        // Planted: the deposed coordinator answers as if it still owned the
                        // partition.
                        slot.shard.write_completed(write.id, Ok(()));
                    }
                    Err(code) => {
                        tracing::warn!(
                            partition = index,
                            ?code,
                            "a write to {OFFSETS_TOPIC} failed; unloading its groups"
                        );
                        slot.shard.unload(code);
                    }
                }
            }
            for (token, answer) in ready.answers {
                if let Some(waiter) = inner.waiters.remove(&token) {
                    // The requester may have gone (its connection closed): nothing to do.
                    let _ = waiter.send(answer);
                }
            }
        }
    }

    /// Appends one write's records as uncompressed batches of at most
    /// [`WRITE_BATCH_BYTES_MAX`].
    async fn append(
        &self,
        partition: &Arc<Partition>,
        write: &Write,
    ) -> Result<Vec<PendingAppend>, ErrorCode> {
        let now_ms = self.clock.now_ms();
        let mut pending = Vec::new();
        let mut rest = write.records.as_slice();
        while !rest.is_empty() {
            let mut builder = BatchBuilder::new(0);
            let mut bytes = 0usize;
            let mut taken = 0usize;
            for (key, value) in rest {
                let len = key.len() + value.as_ref().map_or(0, Bytes::len);
                if taken > 0 && bytes + len > WRITE_BATCH_BYTES_MAX {
                    break;
                }
                builder.push(now_ms, Some(key), value.as_deref(), &[]);
                bytes += len;
                taken += 1;
            }
            rest = &rest[taken..];
            let config = partition.config();
            let batch = builder.build().freeze();
            let (_, validated) = validator::validate_produce_bytes(
                batch,
                &ValidatorConfig {
                    topic: &partition.topic,
                    partition: partition.index,
                    produce_version: OWN_BATCH_PRODUCE_VERSION,
                    max_message_bytes: config.max_message_bytes,
                    timestamp_type: config.message_timestamp_type,
                    timestamp_before_max_ms: i64::MAX,
                    timestamp_after_max_ms: i64::MAX,
                    compacted: config.cleanup_policy.compacts(),
                    now_ms,
                    decompressed_bytes_max: record_batch::DECOMPRESSED_BATCH_BYTES_MAX,
                    // As in Kafka, the topic's compression.type applies to the coordinator's
                    // appends too (`producer` by default: stored as built, uncompressed).
                    compression: config.compressor(),
                },
            )
            .map_err(|e| {
                tracing::error!(error = %e.message, "the coordinator built a batch its own validator refuses");
                ErrorCode::UNKNOWN_SERVER_ERROR
            })?;
            let appended = partition.append(&validated).await.map_err(|e| {
                tracing::warn!(error = %e, "append to {OFFSETS_TOPIC} failed");
                ErrorCode::NOT_COORDINATOR
            })?;
            pending.push(appended);
        }
        Ok(pending)
    }

    /// Acknowledges shard `index`'s writes in issue order, each within
    /// `offsets.commit.timeout.ms`, and reports them to the shard.
    async fn ack_loop(
        self: Arc<Self>,
        index: i32,
        load_epoch: u64,
        partition: Arc<Partition>,
        mut rx: mpsc::UnboundedReceiver<(u64, Vec<PendingAppend>)>,
    ) {
        let timeout = Duration::from_millis(
            u64::try_from(self.settings.offsets_commit_timeout_ms).unwrap_or(5_000),
        );
        while let Some((id, pending)) = rx.recv().await {
            // Durable here, then on the ISR (Kafka's coordinator appends with acks=-1): a
            // commit answered before its followers hold it could be lost to a failover.
            let acknowledged = time::timeout(timeout, async {
                let mut last_offset = None;
                for p in pending {
                    last_offset = Some(partition.acknowledge(p).await?.last_offset);
                }
                if let Some(last_offset) = last_offset {
                    partition.wait_replicated(last_offset).await?;
                }
                Ok::<(), PartitionError>(())
            })
            .await;
            let result = match acknowledged {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, partition = index, "a write to {OFFSETS_TOPIC} did not become durable");
                    // As Kafka's coordinator maps them: too few replicas is a wait, a lost
                    // leadership sends the client to the new coordinator.
                    Err(match e {
                        PartitionError::NotEnoughReplicas { .. }
                        | PartitionError::NotEnoughReplicasAfterAppend { .. } => {
                            ErrorCode::COORDINATOR_NOT_AVAILABLE
                        }
                        _ => ErrorCode::NOT_COORDINATOR,
                    })
                }
                Err(_) => Err(ErrorCode::REQUEST_TIMED_OUT),
            };
            let mut inner = self.inner.lock().await;
            let Some(slot) = inner.shards.get_mut(&index) else {
                return;
            };
            if slot.load_epoch != load_epoch {
                return;
            }
            slot.shard.write_completed(id, result);
            let unloaded = slot.shard.status() == ShardStatus::Unloaded;
            self.process(&mut inner, index).await;
            if unloaded {
                // Reload from what the log holds: the state a restart would see.
                let partition = partition.clone();
                let load_epoch = self.install(&mut inner, partition.clone());
                drop(inner);
                self.clone().replay_partition(partition, load_epoch).await;
                return;
            }
        }
    }

    /// Replays a partition into its (loading) shard of load epoch `load_epoch`, then opens
    /// the shard; stops as soon as that shard was replaced by a newer load.
    async fn replay_partition(self: Arc<Self>, partition: Arc<Partition>, load_epoch: u64) {
        let index = partition.index;
        let mut offset = partition.log_start_offset().await;
        let end = partition.log_end_offset();
        let mut failed = None;
        while offset < end {
            let read = match partition
                .read(offset, LOAD_READ_BYTES_MAX, ReadBound::LogEnd)
                .await
            {
                Ok(read) => read,
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            };
            if read.next_offset <= offset {
                break;
            }
            let mut records = Vec::new();
            for batch in record_batch::batches(read.records.clone()) {
                let Ok((_, batch)) = batch else {
                    break;
                };
                let Ok(iter) = record_batch::records(&batch) else {
                    continue;
                };
                for record in iter.flatten() {
                    if record.offset >= offset && record.offset < end {
                        records.push(record);
                    }
                }
            }
            let mut inner = self.inner.lock().await;
            let Some(slot) = inner
                .shards
                .get_mut(&index)
                .filter(|slot| slot.load_epoch == load_epoch)
            else {
                return;
            };
            for record in records {
                let Some(key) = record.key else {
                    continue;
                };
                if let Err(e) = slot.shard.replay(&key, record.value.as_deref()) {
                    tracing::warn!(partition = index, offset = record.offset, error = %e, "skipping a {OFFSETS_TOPIC} record this version cannot read");
                }
            }
            offset = read.next_offset;
        }
        // An empty log needs no read, and only a read checks leadership: a follower must not
        // open a shard (it would stay open, empty, when this broker is elected later).
        // Not leading is the usual case at the first load of a replicated `__consumer_offsets`
        // (every replica loads every partition it holds): not worth a warning.
        let mut not_leading = false;
        if failed.is_none() && !partition.is_leading() {
            failed = Some("this broker does not lead the partition".to_string());
            not_leading = true;
        }
        // Nothing is answered from what the ISR has not acknowledged (Kafka's coordinator
        // runtime exposes only committed state): the loaded records may include writes that
        // failed (NOT_ENOUGH_REPLICAS_AFTER_APPEND left them in this log) or that a new leader
        // holds above its high watermark, and a later election of a replica without them
        // would take back what a member was told. The shard stays loading
        // (COORDINATOR_LOAD_IN_PROGRESS) until the high watermark passes them.
        if failed.is_none() {
            if let Err(e) = partition.sync_to(end).await {
                failed = Some(e.to_string());
            }
        }
        while failed.is_none() {
            let waited = time::timeout(
                Duration::from_millis(LOAD_COMMIT_POLL_MS),
                partition.wait_high_watermark(end),
            )
            .await;
            match waited {
                Ok(Ok(())) => break,
                Ok(Err(e)) => failed = Some(e.to_string()),
                Err(_) => {
                    tracing::debug!(partition = index, end, high_watermark = partition.high_watermark(), state = ?partition.replica_state(), maximal_isr = ?partition.maximal_isr(), "a load waits for the high watermark");
                    let inner = self.inner.lock().await;
                    let current = inner
                        .shards
                        .get(&index)
                        .is_some_and(|slot| slot.load_epoch == load_epoch);
                    if !current {
                        return;
                    }
                }
            }
        }
        if let Some(why) = failed {
            if not_leading {
                tracing::debug!(partition = index, "{OFFSETS_TOPIC}: not loaded, another broker leads it; loaded once this broker leads it");
            } else {
                tracing::warn!(partition = index, error = %why, "loading {OFFSETS_TOPIC} failed; its groups stay unavailable until this broker leads the partition again");
            }
            let mut inner = self.inner.lock().await;
            if let Some(slot) = inner
                .shards
                .get_mut(&index)
                .filter(|slot| slot.load_epoch == load_epoch)
            {
                slot.shard.unload(ErrorCode::NOT_COORDINATOR);
            }
            return;
        }
        let mut inner = self.inner.lock().await;
        let now = self.now();
        if let Some(slot) = inner
            .shards
            .get_mut(&index)
            .filter(|slot| slot.load_epoch == load_epoch)
        {
            if slot.shard.status() == ShardStatus::Loading {
                slot.shard.finish_loading(now);
            }
        }
        self.wake.notify_one();
    }
}
