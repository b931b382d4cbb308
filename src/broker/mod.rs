//! The broker: configuration, topics and their partitions, the accept loop and connections,
//! one handler file per API, and the purgatory where fetches wait for data.
//!
//! Invariants: a handler never touches the network or the disk directly (it goes through a
//! partition's log and `rt`); a handler never needs to know which node leads a partition,
//! it asks the partition, which on a single node is always its own leader.

// @broker-modules (one line per module; helpers add theirs below their marker)
// @config
pub mod config;
// @core
pub mod handlers;
pub mod partition;
pub mod server;
pub mod topics;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::broker::config::BrokerConfig;
use crate::broker::topics::{TopicError, Topics};
use crate::rt::clock::Clock;
use crate::rt::disk::Disk;

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
}

impl Broker {
    /// Opens the node's data: `disk` is rooted at the log directory.
    pub async fn open(
        config: BrokerConfig,
        disk: Disk,
        clock: Clock,
    ) -> Result<Arc<Broker>, BrokerError> {
        let config = Arc::new(config);
        let cluster_id = load_cluster_id(&disk, &config).await?;
        let data_arrived = Arc::new(Notify::new());
        let topics = Topics::open(
            disk,
            "",
            config.clone(),
            clock.clone(),
            data_arrived.clone(),
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
        }))
    }

    /// Closes every log cleanly, so the next start skips recovery.
    pub async fn close(&self) -> Result<(), BrokerError> {
        self.topics.close().await.map_err(BrokerError::Topics)
    }
}

/// Interim: the cluster id kept in `meta.properties` (the full KRaft format lands with the
/// configuration module).
async fn load_cluster_id(disk: &Disk, config: &BrokerConfig) -> Result<String, BrokerError> {
    const META: &str = "meta.properties";
    let io = |op: &'static str| {
        move |source| BrokerError::Io {
            op,
            path: META.to_string(),
            source,
        }
    };
    if disk.exists(META).await.map_err(io("stat"))? {
        let bytes = disk.read_file(META).await.map_err(io("read"))?;
        let text = String::from_utf8_lossy(&bytes);
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
        };
        let cluster_id =
            value("cluster.id").ok_or(BrokerError::Meta("cluster.id is missing".into()))?;
        let node_id = value("node.id").ok_or(BrokerError::Meta("node.id is missing".into()))?;
        if node_id != config.node_id.to_string() {
            return Err(BrokerError::Meta(format!(
                "node.id {node_id} in meta.properties differs from the configured node.id {}",
                config.node_id
            )));
        }
        return Ok(cluster_id);
    }
    let id = crate::protocol::wire::Uuid::v4_from([
        crate::rt::rand::random_u64(),
        crate::rt::rand::random_u64(),
    ])
    .to_base64();
    let text = format!("version=1\ncluster.id={id}\nnode.id={}\n", config.node_id);
    disk.write_file_atomic(META, text.as_bytes())
        .await
        .map_err(io("write"))?;
    Ok(id)
}
