//! The broker: configuration, topics and their partitions, the accept loop and connections,
//! one handler file per API, and the purgatory where fetches wait for data.
//!
//! Invariants: a handler never touches the network or the disk directly (it goes through a
//! partition's log and `rt`); a handler never needs to know which node leads a partition,
//! it asks the partition, which on a single node is always its own leader.
//!
//! Background work ([`Broker::run_background`]) is four loops in one task: maintenance (the
//! page-cache flusher, retention, producer expiration), the scrubber, which verifies data
//! at rest at `log.scrubber.bytes.per.second` ([`Scrubber`]), the log cleaner
//! ([`Broker::run_cleaner`], with `log.cleaner.threads - 1` more tasks of its own), and the
//! group coordinator's timers (after it loaded `__consumer_offsets`).

// @broker-modules (one line per module; helpers add theirs below their marker)
// @config
pub mod clean_shutdown;
pub mod cluster_view;
pub mod config;
pub mod meta;
// @admin
pub mod dynamic_config;
pub mod fetch_session;
pub mod forwarding;
// @core
pub mod controller_channel;
pub mod handlers;
pub mod lifecycle;
pub mod lifecycle_driver;
pub mod metadata_publisher;
pub mod node;
pub mod partition;
pub mod producer_ids;
pub mod server;
pub mod topics;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::broker::partition::{CleanerShare, Partition};

use crate::broker::config::{BrokerConfig, LOG_CLEANER_THREADS_MAX};
use crate::broker::dynamic_config::DynamicConfigs;
use crate::broker::fetch_session::{FetchSessionCache, FETCH_SESSION_EVICTION_MS};
use crate::broker::partition::LogDirHealth;
use crate::broker::topics::{TopicError, Topics};
use crate::coordinator::driver::GroupCoordinator;
use crate::log::cleaner::CleanerPolicy;
use crate::rt::clock::Clock;
use crate::rt::disk::{DirLock, Disk};
use crate::rt::latch::Latch;
use crate::rt::time::{self, Duration};

/// Why the broker could not start.
#[derive(Debug)]
pub enum BrokerError {
    Config(String),
    Meta(String),
    /// The metadata quorum, the controller or the broker's place with them.
    Metadata(String),
    Topics(TopicError),
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
}

impl std::fmt::Display for BrokerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BrokerError::Config(why) => write!(f, "configuration: {why}"),
            BrokerError::Meta(why) => write!(f, "meta.properties: {why}"),
            BrokerError::Metadata(why) => write!(f, "metadata: {why}"),
            BrokerError::Topics(e) => write!(f, "loading topics: {e}"),
            BrokerError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
        }
    }
}

impl std::error::Error for BrokerError {}

/// One node's state, shared by its connections.
#[derive(Debug)]
pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub cluster_id: String,
    pub topics: Topics,
    pub clock: Clock,
    /// Fired on every high watermark advance of any partition; waiting fetches re-check.
    pub data_arrived: Arc<Notify>,
    /// Set when a partition log fails with an IO error; the broker's owner then stops it.
    pub health: Arc<LogDirHealth>,
    /// Dynamic broker configs (AlterConfigs on a broker resource), persisted in the log
    /// directory; the effective config they make is `topics.broker_config()`.
    pub dynamic: DynamicConfigs,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: FetchSessionCache,
    /// Hands out producer ids for InitProducerId (a durable block file in the data dir).
    pub producer_ids: producer_ids::ProducerIds,
    /// The log directory's disk (for the fault points a simulation may place here).
    pub disk: Disk,
    /// The group coordinator of the `__consumer_offsets` partitions this node leads.
    pub coordinator: GroupCoordinator,
    /// The metadata image the publisher applied last (None before the first, and in a
    /// broker without a controller): whom Metadata and FindCoordinator name as leaders.
    image: std::sync::RwLock<Option<Arc<crate::controller::image::MetadataImage>>>,
    /// Held while the broker lives: no second process opens the same log directory.
    _lock: DirLock,
    /// A deliberate bug for the simulation's checker test: retention deletes one segment
    /// more than the topic config allows.
    #[cfg(feature = "sim")]
    pub retention_deletes_one_segment_too_many: std::sync::atomic::AtomicBool,
}

/// How often the background task looks for page-cache logs due a flush (the granularity
/// of `flush.ms`).
pub const FLUSH_CHECK_INTERVAL_MS: u64 = 50;

/// Kafka's lock file in a log directory.
pub const LOCK_FILE: &str = ".lock";

/// The logs the cleaner workers are cleaning, by (topic, partition).
pub type CleanerBusy = std::sync::Mutex<std::collections::BTreeSet<(String, i32)>>;

/// The busy set; a poisoned lock only means a worker panicked between two whole updates.
fn lock_busy(
    busy: &CleanerBusy,
) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<(String, i32)>> {
    busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How often the scrubber wakes to spend the budget earned since its last tick.
pub const SCRUB_TICK_MS: u64 = 100;
/// The most one scrub step reads: bounds the memory a step holds and how long one
/// partition's step keeps the scrubber from the next.
pub const SCRUB_STEP_BYTES_MAX: u64 = 1 << 20;

/// The scrubber's rate limiter and round-robin position over the partitions.
///
/// Budget: every tick earns `rate × elapsed`; the steps spend what they actually read, and
/// a step may overspend (a batch larger than its budget is read whole), which the next ticks
/// pay back. Unspent budget carries over by at most one step's worth, so an idle scrubber
/// does not save up a burst. Invariant: the allowance never exceeds one tick's earnings plus
/// [`SCRUB_STEP_BYTES_MAX`].
#[derive(Debug)]
pub struct Scrubber {
    rate_bytes_per_second: u64,
    /// Bytes the scrubber may still read; negative after an overspend.
    allowance_bytes: i64,
    /// The (topic, partition) after the one stepped last.
    next: Option<(String, i32)>,
}

impl Scrubber {
    pub fn new(rate_bytes_per_second: u64) -> Scrubber {
        Scrubber {
            rate_bytes_per_second,
            allowance_bytes: 0,
            next: None,
        }
    }

    fn allowance_max_bytes(&self) -> i64 {
        let per_tick = u128::from(self.rate_bytes_per_second) * u128::from(SCRUB_TICK_MS) / 1000;
        i64::try_from(per_tick + u128::from(SCRUB_STEP_BYTES_MAX)).unwrap_or(i64::MAX)
    }

    /// Adds the budget earned over `elapsed`.
    pub fn earn(&mut self, elapsed: Duration) {
        let earned = u128::from(self.rate_bytes_per_second) * elapsed.as_micros() / 1_000_000;
        let earned = i64::try_from(earned).unwrap_or(i64::MAX);
        self.allowance_bytes = self
            .allowance_bytes
            .saturating_add(earned)
            .min(self.allowance_max_bytes());
        assert!(
            self.allowance_bytes <= self.allowance_max_bytes(),
            "scrub allowance above its cap"
        );
    }

    /// Spends the allowance on steps over `partitions`, round-robin, each step at most
    /// [`SCRUB_STEP_BYTES_MAX`]; stops when it is spent or no partition has anything to
    /// scrub. A deleted partition is skipped; a failed step is reported through the log
    /// directory's health by the partition, and skipped here.
    pub async fn spend(&mut self, partitions: &[Arc<Partition>]) {
        let mut order: Vec<&Arc<Partition>> = partitions.iter().collect();
        order.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
        let mut idle_in_a_row = 0;
        while self.allowance_bytes > 0 && idle_in_a_row < order.len() {
            let at = match &self.next {
                Some((topic, index)) => order
                    .iter()
                    .position(|p| (&p.topic, p.index) >= (topic, *index))
                    .unwrap_or(0),
                None => 0,
            };
            let Some(partition) = order.get(at) else {
                return;
            };
            self.next = Some(match order.get(at + 1) {
                Some(next) => (next.topic.clone(), next.index),
                None => (String::new(), i32::MIN),
            });
            let budget_bytes = u64::try_from(self.allowance_bytes)
                .unwrap_or(0)
                .min(SCRUB_STEP_BYTES_MAX);
            match partition.scrub_step(budget_bytes).await {
                Ok(step) if step.bytes_read > 0 => {
                    idle_in_a_row = 0;
                    let spent = i64::try_from(step.bytes_read).unwrap_or(i64::MAX);
                    self.allowance_bytes = self.allowance_bytes.saturating_sub(spent);
                }
                Ok(_) | Err(_) => idle_in_a_row += 1,
            }
        }
    }
}

impl Broker {
    /// Milliseconds of the monotonic clock since the broker started: the time replication
    /// cores and their tasks run on (never the wall clock, which may jump).
    pub fn monotonic_ms(&self) -> u64 {
        self.fetch_sessions.now_ms()
    }

    /// Opens the node's data: `disk` is rooted at the log directory.
    pub async fn open(
        config: BrokerConfig,
        disk: Disk,
        clock: Clock,
    ) -> Result<Arc<Broker>, BrokerError> {
        let config = Arc::new(config);
        let lock = disk
            .lock(LOCK_FILE)
            .await
            .map_err(|source| BrokerError::Io {
                op: "lock",
                path: LOCK_FILE.to_string(),
                source,
            })?;
        let cluster_id = meta::load_or_create(&disk, "", config.node_id)
            .await
            .map_err(|e| BrokerError::Meta(e.to_string()))?
            .cluster_id;
        let producer_ids = producer_ids::ProducerIds::open(disk.clone())
            .await
            .map_err(|e| BrokerError::Meta(e.to_string()))?;
        let data_arrived = Arc::new(Notify::new());
        let health = Arc::new(LogDirHealth::default());
        let (dynamic, effective) = DynamicConfigs::load(disk.clone(), "", config.clone())
            .await
            .map_err(|e| BrokerError::Config(format!("dynamic broker configs: {e}")))?;
        let fetch_sessions = FetchSessionCache::new(
            effective.max_incremental_fetch_session_cache_slots,
            FETCH_SESSION_EVICTION_MS,
        );
        let topics = Topics::open(
            disk.clone(),
            "",
            effective,
            clock.clone(),
            data_arrived.clone(),
            health.clone(),
        )
        .await
        .map_err(BrokerError::Topics)?;
        let coordinator = GroupCoordinator::new(
            config.groups.clone(),
            config.bugs.coordinator,
            clock.clone(),
        );
        tracing::info!(node_id = config.node_id, %cluster_id, "broker data opened");
        Ok(Arc::new(Broker {
            config,
            cluster_id,
            topics,
            clock,
            data_arrived,
            health,
            dynamic,
            fetch_sessions,
            producer_ids,
            disk,
            coordinator,
            image: std::sync::RwLock::new(None),
            _lock: lock,
            #[cfg(feature = "sim")]
            retention_deletes_one_segment_too_many: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The metadata image applied last, if any.
    pub fn image(&self) -> Option<Arc<crate::controller::image::MetadataImage>> {
        self.image
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Called by the metadata publisher once `image` is applied whole.
    pub fn set_image(&self, image: Arc<crate::controller::image::MetadataImage>) {
        *self
            .image
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(image);
    }

    /// Background work until `shutdown`: maintenance ([`Broker::run_maintenance`]) and the
    /// scrubber ([`Broker::run_scrubber`]), polled together in this one task (`join!` polls
    /// in a fixed rotation, so the simulation stays deterministic).
    pub async fn run_background(self: Arc<Self>, shutdown: Arc<Latch>) {
        // The groups of an existing `__consumer_offsets` load while clients connect (they get
        // COORDINATOR_LOAD_IN_PROGRESS meanwhile); the timer loop serves every shard.
        let coordinator = self.coordinator.clone();
        let topics_owner = Arc::clone(&self);
        let load = async move { topics_owner.coordinator.load(&topics_owner.topics).await };
        tokio::join!(
            Arc::clone(&self).run_maintenance(shutdown.clone()),
            Arc::clone(&self).run_scrubber(shutdown.clone()),
            Arc::clone(&self).run_cleaner(shutdown.clone()),
            async move {
                load.await;
                coordinator.run(shutdown).await;
            },
        );
    }

    /// Kafka's log flusher (page-cache mode syncs once `flush.ms` has passed), its retention
    /// check every `log.retention.check.interval.ms` and its producer expiration, until
    /// `shutdown`. A failure is reported through [`Broker::health`].
    pub async fn run_maintenance(self: Arc<Self>, shutdown: Arc<Latch>) {
        let retention_every = Duration::from_millis(self.config.log_retention_check_interval_ms);
        let mut next_retention = time::now() + retention_every;
        let expiration_check_interval =
            Duration::from_millis(self.config.producer_id_expiration_check_interval_ms);
        let mut last_expiration_check = time::now();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait() => return,
                _ = time::sleep(Duration::from_millis(FLUSH_CHECK_INTERVAL_MS)) => {}
            }
            for partition in self.topics.partitions().await {
                // Errors are reported through the health flag; deleted partitions are skipped.
                let _ = partition.flush_if_due().await;
            }
            if time::now() >= next_retention {
                self.enforce_retention().await;
                next_retention = time::now() + retention_every;
            }
            // Kafka's producer expiration task (`producer.id.expiration.check.interval.ms`).
            if last_expiration_check.elapsed() >= expiration_check_interval {
                last_expiration_check = time::now();
                for partition in self.topics.partitions().await {
                    let _ = partition.remove_expired_producers().await;
                }
            }
        }
    }

    /// The scrubber until `shutdown`: every [`SCRUB_TICK_MS`] it verifies data at rest
    /// (closed segments below each log's recovery point) at `log.scrubber.bytes.per.second`,
    /// round-robin over the partitions, each starting again from its first segment after its
    /// last. Findings make the partition refuse reads from the corrupt batch on
    /// ([`Partition::corrupt_from`]). A rate of 0 returns at once.
    pub async fn run_scrubber(self: Arc<Self>, shutdown: Arc<Latch>) {
        let rate = self.config.log_scrubber_bytes_per_second;
        if rate == 0 {
            return;
        }
        let mut scrubber = Scrubber::new(rate);
        let mut last_tick = time::now();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait() => return,
                _ = time::sleep(Duration::from_millis(SCRUB_TICK_MS)) => {}
            }
            let now = time::now();
            scrubber.earn(now.saturating_duration_since(last_tick));
            last_tick = now;
            let partitions = self.topics.partitions().await;
            scrubber.spend(&partitions).await;
            for partition in &partitions {
                if let Some(from) = partition.leads_over_corrupt_acknowledged_records() {
                    self.halt_over_corrupt_leader(partition, from).await;
                    return;
                }
            }
        }
    }

    /// A leader whose scrubber found acknowledged records corrupt cannot serve them, nor can
    /// its followers fetch past them; another ISR member holds them. Kafka moves leaderships
    /// only off a broker that is fenced or shuts down, and stops a broker whose only log
    /// directory failed: so does this one, after withdrawing its clean-shutdown marker (the
    /// next start is unclean, so it leaves every ISR and ELR and, as a follower, truncates at
    /// the corrupt batch and fetches it again).
    async fn halt_over_corrupt_leader(&self, partition: &Partition, from: i64) {
        if let Err(e) = self.health.running_marker.withdraw(&self.disk).await {
            tracing::warn!(error = %e, "cannot withdraw the clean-shutdown marker");
        }
        self.health.fail(&format!(
            "{}-{}: this leader's records from offset {from} on are corrupt at rest, below \
             the high watermark; another in-sync replica holds them",
            partition.topic, partition.index
        ));
    }

    /// The log cleaner until `shutdown` (Kafka's `LogCleaner`): `log.cleaner.threads`
    /// workers, each taking the filthiest compacted log that is due
    /// ([`Broker::clean_filthiest`]) and sleeping `log.cleaner.backoff.ms` when none is.
    /// Returns at once when `log.cleaner.enable` is false.
    pub async fn run_cleaner(self: Arc<Self>, shutdown: Arc<Latch>) {
        if !self.config.log_cleaner_enable {
            return;
        }
        let threads = self
            .config
            .log_cleaner_threads
            .clamp(1, LOG_CLEANER_THREADS_MAX);
        let busy = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
        let mut others = Vec::with_capacity(threads - 1);
        for _ in 1..threads {
            let broker = Arc::clone(&self);
            let shutdown = shutdown.clone();
            let busy = busy.clone();
            others.push(crate::rt::task::spawn(async move {
                broker.cleaner_thread(&shutdown, &busy).await;
            }));
        }
        self.cleaner_thread(&shutdown, &busy).await;
        for other in others {
            let _ = other.await;
        }
    }

    async fn cleaner_thread(&self, shutdown: &Latch, busy: &CleanerBusy) {
        let backoff = Duration::from_millis(self.config.log_cleaner_backoff_ms);
        loop {
            let cleaned = self.clean_filthiest(shutdown, busy).await;
            if shutdown.is_set() {
                return;
            }
            if !cleaned {
                tokio::select! {
                    biased;
                    _ = shutdown.wait() => return,
                    _ = time::sleep(backoff) => {}
                }
            }
        }
    }

    /// What each cleaner pass brings from the broker's settings.
    pub fn cleaner_share(&self) -> CleanerShare {
        let threads = self
            .config
            .log_cleaner_threads
            .clamp(1, LOG_CLEANER_THREADS_MAX);
        CleanerShare {
            dedupe_buffer_bytes: self.config.log_cleaner_dedupe_buffer_size / threads as u64,
            io_max_bytes_per_second: self.config.log_cleaner_io_max_bytes_per_second,
            bugs: self.config.bugs.cleaner,
        }
    }

    /// One cleaner pass over the compacted log that needs it most: an overdue one
    /// (`max.compaction.lag.ms`) first, then the highest dirty ratio at or above its
    /// `min.cleanable.dirty.ratio`; ties go to the first in (topic, partition) order. A log
    /// another worker is cleaning is skipped. Returns whether a pass ran.
    pub async fn clean_filthiest(&self, shutdown: &Latch, busy: &CleanerBusy) -> bool {
        let share = self.cleaner_share();
        let now_ms = self.clock.now_ms();
        let mut partitions = self.topics.partitions().await;
        partitions.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
        let mut best: Option<(bool, f64, Arc<Partition>, CleanerPolicy)> = None;
        for partition in partitions {
            let key = (partition.topic.clone(), partition.index);
            if lock_busy(busy).contains(&key) {
                continue;
            }
            let Some(policy) = partition.cleaner_policy(&share) else {
                continue;
            };
            let Ok(offered) = partition.cleanable(&policy, now_ms).await else {
                continue;
            };
            if !offered.due(&policy) {
                continue;
            }
            let rank = (offered.overdue, offered.dirty_ratio());
            if best
                .as_ref()
                .is_none_or(|(overdue, ratio, _, _)| rank > (*overdue, *ratio))
            {
                best = Some((rank.0, rank.1, partition, policy));
            }
        }
        let Some((_, _, partition, policy)) = best else {
            return false;
        };
        let key = (partition.topic.clone(), partition.index);
        if !lock_busy(busy).insert(key.clone()) {
            return false; // Another worker took it meanwhile.
        }
        let result = partition.clean(&policy, now_ms, shutdown).await;
        lock_busy(busy).remove(&key);
        match result {
            Ok(outcome) => tracing::debug!(
                topic = %partition.topic,
                partition = partition.index,
                end = outcome.end_offset,
                records_removed = outcome.records_removed,
                "log cleaner pass done"
            ),
            Err(e) => tracing::warn!(
                topic = %partition.topic,
                partition = partition.index,
                error = %e,
                "log cleaner pass failed"
            ),
        }
        true
    }

    /// One retention check of every partition (Kafka's `kafka-log-retention` task). Errors
    /// are reported through the health flag; deleted partitions are skipped.
    pub async fn enforce_retention(&self) {
        #[cfg(feature = "sim")]
        let too_many = self
            .retention_deletes_one_segment_too_many
            .load(std::sync::atomic::Ordering::Acquire);
        #[cfg(not(feature = "sim"))]
        let too_many = false;
        for partition in self.topics.partitions().await {
            match partition
                .enforce_retention(self.clock.now_ms(), too_many)
                .await
            {
                Ok(outcome) if outcome.segments_deleted > 0 => tracing::info!(
                    topic = %partition.topic,
                    partition = partition.index,
                    segments = outcome.segments_deleted,
                    bytes = outcome.bytes_deleted,
                    log_start_offset = outcome.log_start_offset,
                    "retention deleted segments"
                ),
                Ok(_) | Err(_) => {}
            }
        }
    }

    /// Whether some partition has data written but not yet synced (for the fault points
    /// after an answer, which matter only while such data exists).
    pub async fn has_unsynced_data(&self) -> bool {
        self.topics
            .partitions()
            .await
            .iter()
            .any(|p| p.log().durable_end_offset() < p.log_end_offset())
    }

    /// Closes every log cleanly, so the next start skips recovery.
    pub async fn close(&self) -> Result<(), BrokerError> {
        self.topics.close().await.map_err(BrokerError::Topics)
    }
}
