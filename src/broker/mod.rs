//! The broker: configuration, topics and their partitions, the accept loop and connections,
//! one handler file per API, and the purgatory where fetches wait for data.
//!
//! Invariants: a handler never touches the network or the disk directly (it goes through a
//! partition's log and `rt`); a handler never needs to know which node leads a partition,
//! it asks the partition, which on a single node is always its own leader.

// @broker-modules (one line per module; helpers add theirs below their marker)
// @config
pub mod config;
pub mod meta;
// @admin
pub mod dynamic_config;
pub mod fetch_session;
// @core
pub mod handlers;
pub mod partition;
pub mod producer_ids;
pub mod server;
pub mod topics;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::broker::config::BrokerConfig;
use crate::broker::dynamic_config::DynamicConfigs;
use crate::broker::fetch_session::{FetchSessionCache, FETCH_SESSION_EVICTION_MS};
use crate::broker::partition::LogDirHealth;
use crate::broker::topics::{TopicError, Topics};
use crate::rt::clock::Clock;
use crate::rt::disk::{DirLock, Disk};
use crate::rt::latch::Latch;
use crate::rt::time::{self, Duration};

/// Why the broker could not start.
#[derive(Debug)]
pub enum BrokerError {
    Config(String),
    Meta(String),
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

impl Broker {
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
            _lock: lock,
            #[cfg(feature = "sim")]
            retention_deletes_one_segment_too_many: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Background work until `shutdown`: Kafka's log flusher (page-cache mode syncs once
    /// `flush.ms` has passed) and its retention check every
    /// `log.retention.check.interval.ms`. A failure is reported through [`Broker::health`].
    pub async fn run_background(self: Arc<Self>, shutdown: Arc<Latch>) {
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
