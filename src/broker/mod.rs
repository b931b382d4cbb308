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
// @core
pub mod handlers;
pub mod partition;
pub mod producer_ids;
pub mod server;
pub mod topics;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::broker::config::BrokerConfig;
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
    /// Hands out producer ids for InitProducerId (a durable block file in the data dir).
    pub producer_ids: producer_ids::ProducerIds,
    /// Held while the broker lives: no second process opens the same log directory.
    _lock: DirLock,
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
        let topics = Topics::open(
            disk,
            "",
            config.clone(),
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
            producer_ids,
            _lock: lock,
        }))
    }

    /// Background work until `shutdown`: Kafka's log flusher (page-cache mode syncs once
    /// `flush.ms` has passed). A failure is reported through [`Broker::health`].
    pub async fn run_background(self: Arc<Self>, shutdown: Arc<Latch>) {
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
            // Kafka's producer expiration task (`producer.id.expiration.check.interval.ms`).
            if last_expiration_check.elapsed() >= expiration_check_interval {
                last_expiration_check = time::now();
                for partition in self.topics.partitions().await {
                    let _ = partition.remove_expired_producers().await;
                }
            }
        }
    }

    /// Closes every log cleanly, so the next start skips recovery.
    pub async fn close(&self) -> Result<(), BrokerError> {
        self.topics.close().await.map_err(BrokerError::Topics)
    }
}
