//! Dynamic broker configs and the config descriptions that DescribeConfigs serves.
//!
//! Kafka layers a broker's configs: a per-broker dynamic config (`DYNAMIC_BROKER_CONFIG`)
//! over the cluster-wide dynamic default (`DYNAMIC_DEFAULT_BROKER_CONFIG`) over
//! `server.properties` (`STATIC_BROKER_CONFIG`) over the built-in default (`DEFAULT_CONFIG`);
//! a topic's override (`DYNAMIC_TOPIC_CONFIG`) sits on top of its broker synonyms. This module
//! owns the two dynamic layers, their file and their validation, and describes any topic or
//! broker key with its value, source, synonyms, type and documentation.
//!
//! On disk the dynamic layers are one properties file in the log directory,
//! [`DYNAMIC_CONFIG_FILE`]: `default.<key>=<value>` lines for the cluster-wide default and
//! `node.<key>=<value>` lines for this node, replaced atomically (write, sync, rename, sync
//! directory) on every change, so a crash leaves the old or the new set.
//!
//! Invariants: only keys in [`DYNAMIC_BROKER_KEYS`] are ever stored; the stored layers always
//! produce a valid effective config over the static one (a change that would not is refused
//! before anything is written); the effective config in force (`Topics::broker_config`) is
//! the one the stored layers produce.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::config::{
    decode_overrides, encode_overrides, BrokerConfig, ConfigError, TopicConfig,
    IGNORED_BROKER_KEYS, RECOGNISED_BROKER_KEYS, TOPIC_KEYS,
};
use crate::broker::topics::Topics;
use crate::log::FlushPolicy;
use crate::rt::disk::{self, Disk};

/// The file, in the log directory, holding the dynamic broker configs.
pub const DYNAMIC_CONFIG_FILE: &str = "samsa-dynamic-broker.properties";

/// Broker keys that Kafka lets AlterConfigs change at run time and that Samsa implements:
/// the broker defaults of topic configs (Kafka's `DynamicLogConfig`) and `message.max.bytes`.
/// Changing one re-resolves every topic's config.
pub const DYNAMIC_BROKER_KEYS: &[&str] = &[
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "log.cleanup.policy",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type",
    "log.retention.bytes",
    "log.retention.hours",
    "log.retention.minutes",
    "log.retention.ms",
    "log.roll.hours",
    "log.roll.ms",
    "log.segment.bytes",
    "message.max.bytes",
    "min.insync.replicas",
];

const DEFAULT_PREFIX: &str = "default.";
const NODE_PREFIX: &str = "node.";

/// Why a dynamic config change or load failed.
#[derive(Debug)]
pub enum DynamicConfigError {
    /// A broker key Kafka (or Samsa) cannot change while running (INVALID_REQUEST).
    NotDynamic { key: String },
    /// A key that is no broker config (INVALID_CONFIG).
    UnknownKey { key: String },
    /// The values would not make a valid broker config (INVALID_CONFIG).
    Invalid(ConfigError),
    /// The dynamic config file could not be read back.
    Corrupt { path: String, reason: String },
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// The controller refused the change or could not be reached.
    Controller(crate::broker::controller_channel::ChannelError),
}

impl std::fmt::Display for DynamicConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DynamicConfigError::NotDynamic { key } => {
                write!(f, "cannot update broker config '{key}' dynamically")
            }
            DynamicConfigError::UnknownKey { key } => write!(f, "unknown broker config '{key}'"),
            DynamicConfigError::Invalid(e) => write!(f, "{e}"),
            DynamicConfigError::Corrupt { path, reason } => write!(f, "{path}: {reason}"),
            DynamicConfigError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            DynamicConfigError::Controller(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DynamicConfigError {}

/// Which dynamic layer a change addresses: the broker resource named `""` or this node's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    ClusterDefault,
    Node,
}

/// The two dynamic layers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    pub cluster_default: BTreeMap<String, String>,
    pub node: BTreeMap<String, String>,
}

impl Layers {
    pub fn get(&self, scope: Scope) -> &BTreeMap<String, String> {
        match scope {
            Scope::ClusterDefault => &self.cluster_default,
            Scope::Node => &self.node,
        }
    }

    /// Both layers merged, this node's winning.
    fn merged(&self) -> BTreeMap<String, String> {
        let mut merged = self.cluster_default.clone();
        merged.extend(self.node.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged
    }

    fn encode(&self) -> String {
        let mut prefixed = BTreeMap::new();
        for (key, value) in &self.cluster_default {
            prefixed.insert(format!("{DEFAULT_PREFIX}{key}"), value.clone());
        }
        for (key, value) in &self.node {
            prefixed.insert(format!("{NODE_PREFIX}{key}"), value.clone());
        }
        format!(
            "# Samsa dynamic broker configs (AlterConfigs); default.* cluster-wide, node.* this node.\n{}",
            encode_overrides(&prefixed)
        )
    }

    fn decode(text: &str) -> Result<Layers, String> {
        let mut layers = Layers::default();
        for (key, value) in decode_overrides(text).map_err(|e| e.to_string())? {
            if let Some(key) = key.strip_prefix(DEFAULT_PREFIX) {
                layers.cluster_default.insert(key.to_string(), value);
            } else if let Some(key) = key.strip_prefix(NODE_PREFIX) {
                layers.node.insert(key.to_string(), value);
            } else {
                return Err(format!(
                    "key '{key}' has neither the '{DEFAULT_PREFIX}' nor the '{NODE_PREFIX}' prefix"
                ));
            }
        }
        Ok(layers)
    }
}

/// Checks that every key of a proposed layer may be set dynamically.
pub fn check_keys<'a>(
    keys: impl IntoIterator<Item = &'a String>,
) -> Result<(), DynamicConfigError> {
    for key in keys {
        if DYNAMIC_BROKER_KEYS.contains(&key.as_str()) {
            continue;
        }
        if RECOGNISED_BROKER_KEYS.contains(&key.as_str())
            || IGNORED_BROKER_KEYS.contains(&key.as_str())
        {
            return Err(DynamicConfigError::NotDynamic { key: key.clone() });
        }
        return Err(DynamicConfigError::UnknownKey { key: key.clone() });
    }
    Ok(())
}

/// The effective broker config: `layers` over the static config.
pub fn effective(
    static_config: &BrokerConfig,
    layers: &Layers,
) -> Result<BrokerConfig, DynamicConfigError> {
    if layers.cluster_default.is_empty() && layers.node.is_empty() {
        return Ok(static_config.clone());
    }
    static_config
        .with_dynamic(&layers.merged())
        .map_err(DynamicConfigError::Invalid)
}

/// The dynamic broker configs of this node.
#[derive(Debug)]
pub struct DynamicConfigs {
    disk: Disk,
    path: String,
    static_config: Arc<BrokerConfig>,
    /// Held across a whole change (validate, write, apply), so changes apply in order.
    layers: tokio::sync::Mutex<Layers>,
}

impl DynamicConfigs {
    /// Reads the dynamic layers of the log directory `dir` (none when the file is absent)
    /// and returns them with the effective config they produce.
    pub async fn load(
        disk: Disk,
        dir: &str,
        static_config: Arc<BrokerConfig>,
    ) -> Result<(DynamicConfigs, Arc<BrokerConfig>), DynamicConfigError> {
        let path = disk::join(dir, DYNAMIC_CONFIG_FILE);
        let io = |op: &'static str, path: &str| {
            let path = path.to_string();
            move |source| DynamicConfigError::Io { op, path, source }
        };
        let layers = if disk.exists(&path).await.map_err(io("stat", &path))? {
            let bytes = disk.read_file(&path).await.map_err(io("read", &path))?;
            let text = std::str::from_utf8(&bytes).map_err(|e| DynamicConfigError::Corrupt {
                path: path.clone(),
                reason: format!("not UTF-8: {e}"),
            })?;
            let layers = Layers::decode(text).map_err(|reason| DynamicConfigError::Corrupt {
                path: path.clone(),
                reason,
            })?;
            check_keys(layers.cluster_default.keys().chain(layers.node.keys()))?;
            layers
        } else {
            Layers::default()
        };
        let effective = Arc::new(effective(&static_config, &layers)?);
        if !layers.cluster_default.is_empty() || !layers.node.is_empty() {
            tracing::info!(?layers, "dynamic broker configs loaded");
        }
        Ok((
            DynamicConfigs {
                disk,
                path,
                static_config,
                layers: tokio::sync::Mutex::new(layers),
            },
            effective,
        ))
    }

    /// The static config (`server.properties` and command-line overrides).
    pub fn static_config(&self) -> &Arc<BrokerConfig> {
        &self.static_config
    }

    /// The dynamic layers now.
    pub async fn layers(&self) -> Layers {
        self.layers.lock().await.clone()
    }

    /// Computes a layer's new contents from its current ones with `change` and replaces it
    /// (AlterConfigs replaces the whole layer; IncrementalAlterConfigs edits it): keys
    /// checked, the effective config validated, the file written, the new effective config
    /// put in force on every topic. With `validate_only` nothing is written or applied.
    pub async fn alter(
        &self,
        topics: &Topics,
        scope: Scope,
        validate_only: bool,
        change: impl FnOnce(
            &BTreeMap<String, String>,
        ) -> Result<BTreeMap<String, String>, DynamicConfigError>,
    ) -> Result<(), DynamicConfigError> {
        let mut layers = self.layers.lock().await;
        let new_layer = change(layers.get(scope))?;
        check_keys(new_layer.keys())?;
        let mut proposed = layers.clone();
        match scope {
            Scope::ClusterDefault => proposed.cluster_default = new_layer.clone(),
            Scope::Node => proposed.node = new_layer.clone(),
        }
        let config = effective(&self.static_config, &proposed)?;
        if let Some(channel) = topics.controller() {
            // The controller decides; the publisher applies what it committed
            // ([`DynamicConfigs::apply_layers`]), which needs this lock: release it first.
            let old_layer = layers.get(scope).clone();
            drop(layers);
            return channel
                .replace_broker_configs(scope == Scope::Node, &old_layer, &new_layer, validate_only)
                .await
                .map_err(DynamicConfigError::Controller);
        }
        if validate_only || proposed == *layers {
            return Ok(());
        }
        self.install(&mut layers, proposed, config, topics).await?;
        tracing::info!(layers = ?*layers, "dynamic broker configs changed");
        Ok(())
    }

    /// Puts the layers the committed metadata image holds in force (the publisher's part on
    /// a node with a controller): the file is rewritten, so the next start opens the topics
    /// with the configs last known, and the effective config goes to every topic. Layers
    /// that do not make a valid config keep the current ones (reported).
    pub async fn apply_layers(
        &self,
        topics: &Topics,
        committed: Layers,
    ) -> Result<(), DynamicConfigError> {
        let mut layers = self.layers.lock().await;
        if *layers == committed {
            return Ok(());
        }
        let config = effective(&self.static_config, &committed)?;
        self.install(&mut layers, committed, config, topics).await?;
        tracing::info!(layers = ?*layers, "dynamic broker configs applied from the metadata log");
        Ok(())
    }

    /// Writes `new` to the file (the commit point), then makes it the layers and `config`
    /// the effective config of every topic; `held` is the layers' lock, held throughout.
    async fn install(
        &self,
        held: &mut Layers,
        new: Layers,
        config: BrokerConfig,
        topics: &Topics,
    ) -> Result<(), DynamicConfigError> {
        self.disk
            .write_file_atomic(&self.path, new.encode().as_bytes())
            .await
            .map_err(|source| DynamicConfigError::Io {
                op: "write",
                path: self.path.clone(),
                source,
            })?;
        *held = new;
        topics.set_broker_config(Arc::new(config)).await;
        Ok(())
    }
}

/// Kafka's `ConfigSource`, with its wire codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    TopicConfig = 1,
    DynamicBrokerConfig = 2,
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
}

/// Kafka's `ConfigType` of DescribeConfigs v3+, with its wire codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    List = 7,
}

/// One described config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub name: String,
    pub value: Option<String>,
    pub source: Source,
    pub read_only: bool,
    pub sensitive: bool,
    /// In precedence order, the first being the source of `value`.
    pub synonyms: Vec<(String, Option<String>, Source)>,
    pub config_type: ConfigType,
    pub documentation: &'static str,
}

/// What a topic key is and what it does, in Samsa's words.
fn topic_key_info(key: &str) -> (ConfigType, &'static str) {
    use ConfigType::*;
    match key {
        "cleanup.policy" => (List, "How old segments are retired: delete (by retention), compact (latest value per key), or both."),
        "compression.gzip.level" => (Int, "The gzip level batches are recompressed at when compression.type is gzip: 1-9, or -1 for zlib's default."),
        "compression.lz4.level" => (Int, "The lz4 level for compression.type lz4: 1-17, accepted and kept; Samsa's lz4 has one (fast) compressor."),
        "compression.type" => (String, "The codec stored batches have: uncompressed, zstd, lz4, snappy or gzip (others are recompressed on append), or producer (stored as produced)."),
        "compression.zstd.level" => (Int, "The zstd level batches are recompressed at when compression.type is zstd: -131072 to 22."),
        "delete.retention.ms" => (Long, "How long tombstones are kept in a compacted topic."),
        "file.delete.delay.ms" => (Long, "How long a deleted segment's files linger before removal."),
        "flush.messages" => (Long, "Records appended between syncs in page-cache mode; 1 means every append is synced before it is acknowledged."),
        "flush.ms" => (Long, "Milliseconds between syncs in page-cache mode; 0 means every append is synced before it is acknowledged."),
        "index.interval.bytes" => (Int, "Log bytes between two offset index entries."),
        "max.message.bytes" => (Int, "The largest record batch a producer may append to this topic."),
        "message.downconversion.enable" => (Boolean, "Kept for compatibility; Samsa never down-converts."),
        "message.timestamp.after.max.ms" => (Long, "How far a CreateTime timestamp may lie after the broker's clock."),
        "message.timestamp.before.max.ms" => (Long, "How far a CreateTime timestamp may lie before the broker's clock."),
        "message.timestamp.type" => (String, "CreateTime (the producer's timestamp) or LogAppendTime (the broker's, at append)."),
        "min.compaction.lag.ms" => (Long, "The least time a record stays uncompacted."),
        "min.insync.replicas" => (Int, "Replicas that must acknowledge an acks=all produce."),
        "preallocate" => (Boolean, "Kept for compatibility; Samsa does not preallocate segment files."),
        "retention.bytes" => (Long, "The most bytes a partition keeps before old segments are deleted; -1 for no limit."),
        "retention.ms" => (Long, "How long a segment is kept after its newest record; -1 for no limit."),
        "segment.bytes" => (Int, "The size at which a new segment file is started."),
        "segment.index.bytes" => (Int, "The largest offset index of a segment; a full index starts a new segment."),
        "segment.jitter.ms" => (Long, "Random jitter subtracted from segment.ms."),
        "segment.ms" => (Long, "The age at which a segment is rolled even if not full."),
        "unclean.leader.election.enable" => (Boolean, "Kept for compatibility; a single node never elects."),
        _ => (String, ""),
    }
}

/// What a broker key is and what it does, in Samsa's words.
fn broker_key_info(key: &str) -> (ConfigType, &'static str) {
    use ConfigType::*;
    match key {
        "node.id" | "broker.id" => (Int, "This node's id."),
        "listeners" => (
            String,
            "Where the broker accepts connections: NAME://host:port, comma-separated.",
        ),
        "advertised.listeners" => (String, "What Metadata tells clients to connect to."),
        "controller.listener.names" => (
            String,
            "Listeners of a KRaft controller, which Samsa does not bind.",
        ),
        "log.dirs" | "log.dir" => (String, "The data directory (exactly one)."),
        "num.partitions" => (Int, "Partitions of an auto-created topic."),
        "default.replication.factor" => (Int, "Replication factor of an auto-created topic."),
        "auto.create.topics.enable" => (
            Boolean,
            "Whether Metadata and Produce create unknown topics.",
        ),
        "delete.topic.enable" => (Boolean, "Whether DeleteTopics may delete topics."),
        "message.max.bytes" => (
            Int,
            "The largest record batch accepted (topic default of max.message.bytes).",
        ),
        "socket.request.max.bytes" => (Int, "The largest request frame read."),
        "max.connections" => (Int, "Client connections open at most."),
        "connections.max.idle.ms" => (Long, "Idle connections are closed after this long."),
        "queued.max.requests" => (
            Int,
            "Requests of one connection read ahead of their responses.",
        ),
        "log.segment.bytes" => (Int, "Topic default of segment.bytes."),
        "log.roll.ms" => (Long, "Topic default of segment.ms."),
        "log.roll.hours" => (
            Int,
            "Topic default of segment.ms, in hours (log.roll.ms wins).",
        ),
        "log.index.interval.bytes" => (Int, "Topic default of index.interval.bytes."),
        "log.index.size.max.bytes" => (Int, "Topic default of segment.index.bytes."),
        "log.flush.interval.messages" => (
            Long,
            "Topic default of flush.messages; unset, Samsa syncs before acknowledging.",
        ),
        "log.flush.interval.ms" => (
            Long,
            "Topic default of flush.ms; unset, Samsa syncs before acknowledging.",
        ),
        "log.flush.offset.checkpoint.interval.ms" => {
            (Int, "How often the recovery point is checkpointed.")
        }
        "log.message.timestamp.type" => (String, "Topic default of message.timestamp.type."),
        "log.message.timestamp.before.max.ms" => {
            (Long, "Topic default of message.timestamp.before.max.ms.")
        }
        "log.message.timestamp.after.max.ms" => {
            (Long, "Topic default of message.timestamp.after.max.ms.")
        }
        "log.retention.ms" => (
            Long,
            "Topic default of retention.ms (wins over minutes and hours).",
        ),
        "log.retention.minutes" => (Int, "Topic default of retention.ms, in minutes."),
        "log.retention.hours" => (Int, "Topic default of retention.ms, in hours."),
        "log.retention.bytes" => (Long, "Topic default of retention.bytes."),
        "log.retention.check.interval.ms" => {
            (Long, "How often retention looks for segments to delete.")
        }
        "log.cleanup.policy" => (List, "Topic default of cleanup.policy."),
        "min.insync.replicas" => (Int, "Topic default of min.insync.replicas."),
        "compression.type" => (String, "Topic default of compression.type."),
        "compression.gzip.level" => (Int, "Topic default of compression.gzip.level."),
        "compression.lz4.level" => (Int, "Topic default of compression.lz4.level."),
        "compression.zstd.level" => (Int, "Topic default of compression.zstd.level."),
        "max.incremental.fetch.session.cache.slots" => {
            (Int, "Incremental fetch sessions (KIP-227) kept at most.")
        }
        "log.scrubber.bytes.per.second" => (
            Long,
            "How fast the scrubber CRC-checks data at rest below the recovery point; 0: off.",
        ),
        "group.min.session.timeout.ms" => (Int, "The shortest session timeout a member may ask for."),
        "group.max.session.timeout.ms" => (Int, "The longest session timeout a member may ask for."),
        "group.initial.rebalance.delay.ms" => (
            Int,
            "How long an empty group's first rebalance waits for members, extended while they join.",
        ),
        "group.max.size" => (Int, "The most members a group may have."),
        "offset.metadata.max.bytes" => (Int, "The largest metadata string of a committed offset."),
        "offsets.retention.minutes" => (
            Int,
            "How long the offsets of an empty group are kept after it became empty.",
        ),
        "offsets.retention.check.interval.ms" => (Long, "How often offsets are checked for expiry."),
        "offsets.topic.num.partitions" => (Int, "Partitions of __consumer_offsets."),
        "offsets.topic.replication.factor" => (
            Short,
            "Replication factor of __consumer_offsets; it is created once this many brokers are alive.",
        ),
        "offsets.topic.segment.bytes" => (Int, "The segment size of __consumer_offsets."),
        "offsets.commit.timeout.ms" => (
            Int,
            "How long a write to __consumer_offsets may take to become durable.",
        ),
        _ => (String, ""),
    }
}

/// The value a broker key has in `config` when nobody set it under this name: for the main
/// key of an alias group the effective value, for the others Kafka's default (`None` where
/// Kafka's is null).
fn broker_value(config: &BrokerConfig, key: &str) -> Option<String> {
    let g = &config.groups.coordinator;
    let listeners = |endpoints: &[crate::broker::config::Endpoint]| {
        endpoints
            .iter()
            .map(|e| format!("{}://{}:{}", e.name, e.host, e.port))
            .collect::<Vec<_>>()
            .join(",")
    };
    let (flush_messages, flush_ms) = match config.log_flush {
        FlushPolicy::SyncBeforeAck => (None, None),
        FlushPolicy::PageCache {
            flush_messages,
            flush_ms,
        } => (Some(flush_messages.to_string()), Some(flush_ms.to_string())),
    };
    Some(match key {
        "node.id" | "broker.id" => config.node_id.to_string(),
        "listeners" => listeners(&config.listeners),
        "advertised.listeners" => listeners(&config.advertised_listeners),
        "controller.listener.names" => return None,
        "log.dirs" | "log.dir" => config.log_dirs.join(","),
        "num.partitions" => config.num_partitions.to_string(),
        "default.replication.factor" => config.default_replication_factor.to_string(),
        "auto.create.topics.enable" => config.auto_create_topics_enable.to_string(),
        "delete.topic.enable" => config.delete_topic_enable.to_string(),
        "message.max.bytes" => config.message_max_bytes.to_string(),
        "socket.request.max.bytes" => config.socket_request_max_bytes.to_string(),
        "max.connections" => config.max_connections.to_string(),
        "connections.max.idle.ms" => config.connections_max_idle_ms.to_string(),
        "queued.max.requests" => config.queued_max_requests.to_string(),
        "log.segment.bytes" => config.log_segment_bytes.to_string(),
        "log.roll.ms" => return None,
        "log.roll.hours" => "168".to_string(),
        "log.index.interval.bytes" => config.log_index_interval_bytes.to_string(),
        "log.index.size.max.bytes" => config.log_index_size_max_bytes.to_string(),
        "log.flush.interval.messages" => return flush_messages,
        "log.flush.interval.ms" => return flush_ms,
        "log.flush.offset.checkpoint.interval.ms" => {
            config.log_flush_offset_checkpoint_interval_ms.to_string()
        }
        "log.message.timestamp.type" => config.log_message_timestamp_type.as_str().to_string(),
        "log.message.timestamp.before.max.ms" => {
            config.log_message_timestamp_before_max_ms.to_string()
        }
        "log.message.timestamp.after.max.ms" => {
            config.log_message_timestamp_after_max_ms.to_string()
        }
        "log.retention.ms" | "log.retention.minutes" => return None,
        "log.retention.hours" => "168".to_string(),
        "log.retention.bytes" => config.log_retention_bytes.to_string(),
        "log.retention.check.interval.ms" => config.log_retention_check_interval_ms.to_string(),
        "log.cleanup.policy" => config.log_cleanup_policy.as_str().to_string(),
        "log.cleaner.enable" => config.log_cleaner_enable.to_string(),
        "log.cleaner.threads" => config.log_cleaner_threads.to_string(),
        "log.cleaner.backoff.ms" => config.log_cleaner_backoff_ms.to_string(),
        "log.cleaner.dedupe.buffer.size" => config.log_cleaner_dedupe_buffer_size.to_string(),
        "log.cleaner.io.max.bytes.per.second" => match config.log_cleaner_io_max_bytes_per_second {
            0 => f64::MAX.to_string(),
            n => n.to_string(),
        },
        "log.cleaner.min.cleanable.ratio" => config.log_cleaner_min_cleanable_ratio.to_string(),
        "log.cleaner.delete.retention.ms" => config.log_cleaner_delete_retention_ms.to_string(),
        "log.cleaner.min.compaction.lag.ms" => config.log_cleaner_min_compaction_lag_ms.to_string(),
        "log.cleaner.max.compaction.lag.ms" => config.log_cleaner_max_compaction_lag_ms.to_string(),
        "min.insync.replicas" => config.min_insync_replicas.to_string(),
        "compression.type" => config.compression_type.as_str().to_string(),
        "compression.gzip.level" => config.compression_levels.gzip.to_string(),
        "compression.lz4.level" => config.compression_levels.lz4.to_string(),
        "compression.zstd.level" => config.compression_levels.zstd.to_string(),
        "max.incremental.fetch.session.cache.slots" => {
            config.max_incremental_fetch_session_cache_slots.to_string()
        }
        "log.scrubber.bytes.per.second" => config.log_scrubber_bytes_per_second.to_string(),
        "group.min.session.timeout.ms" => g.min_session_timeout_ms.to_string(),
        "group.max.session.timeout.ms" => g.max_session_timeout_ms.to_string(),
        "group.initial.rebalance.delay.ms" => g.initial_rebalance_delay_ms.to_string(),
        "group.max.size" => g.max_size.to_string(),
        "offset.metadata.max.bytes" => g.offset_metadata_max_bytes.to_string(),
        "offsets.retention.minutes" => (g.offsets_retention_ms / 60_000).to_string(),
        "offsets.retention.check.interval.ms" => g.offsets_retention_check_interval_ms.to_string(),
        "offsets.topic.num.partitions" => config.groups.offsets_topic_num_partitions.to_string(),
        "offsets.topic.replication.factor" => {
            config.groups.offsets_topic_replication_factor.to_string()
        }
        "offsets.topic.segment.bytes" => config.groups.offsets_topic_segment_bytes.to_string(),
        "offsets.commit.timeout.ms" => config.groups.offsets_commit_timeout_ms.to_string(),
        _ => return None,
    })
}

/// The layers of broker key `key` that set it, in precedence order.
fn broker_layers(
    static_config: &BrokerConfig,
    layers: &Layers,
    key: &str,
) -> Vec<(String, Option<String>, Source)> {
    let mut found = Vec::new();
    if let Some(v) = layers.node.get(key) {
        found.push((
            key.to_string(),
            Some(v.clone()),
            Source::DynamicBrokerConfig,
        ));
    }
    if let Some(v) = layers.cluster_default.get(key) {
        found.push((
            key.to_string(),
            Some(v.clone()),
            Source::DynamicDefaultBrokerConfig,
        ));
    }
    if let Some(v) = static_config.explicit_values.get(key) {
        found.push((key.to_string(), Some(v.clone()), Source::StaticBrokerConfig));
    }
    found
}

fn wanted(keys: Option<&[String]>, name: &str) -> bool {
    keys.is_none_or(|keys| keys.iter().any(|k| k == name))
}

/// Describes every topic key of a topic with `overrides` (or the `keys` asked for).
pub fn describe_topic(
    static_config: &BrokerConfig,
    layers: &Layers,
    effective: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    keys: Option<&[String]>,
) -> Result<Vec<Described>, ConfigError> {
    let resolved = TopicConfig::resolve(effective, overrides)?;
    let defaults = TopicConfig::broker_defaults(&BrokerConfig::default());
    let mut out = Vec::new();
    for (name, synonyms) in TOPIC_KEYS {
        if !wanted(keys, name) {
            continue;
        }
        let mut chain = Vec::new();
        if let Some(v) = overrides.get(*name) {
            chain.push((name.to_string(), Some(v.clone()), Source::TopicConfig));
        }
        // Layer first, then synonym precedence within the layer, as Kafka lists synonyms.
        let per_layer: Vec<Vec<_>> = synonyms
            .iter()
            .map(|s| broker_layers(static_config, layers, s))
            .collect();
        for source in [
            Source::DynamicBrokerConfig,
            Source::DynamicDefaultBrokerConfig,
            Source::StaticBrokerConfig,
        ] {
            for found in &per_layer {
                chain.extend(found.iter().filter(|(_, _, s)| *s == source).cloned());
            }
        }
        let default = match synonyms.first() {
            Some(synonym) => match broker_value(&BrokerConfig::default(), synonym) {
                Some(v) => (synonym.to_string(), Some(v)),
                None => (name.to_string(), Some(defaults.value_of(name))),
            },
            None => (name.to_string(), Some(defaults.value_of(name))),
        };
        chain.push((default.0, default.1, Source::DefaultConfig));
        let (config_type, documentation) = topic_key_info(name);
        out.push(Described {
            name: name.to_string(),
            // An override is described as written (a list keeps its order), as Kafka does.
            value: Some(
                overrides
                    .get(*name)
                    .map(|v| v.trim().to_string())
                    .unwrap_or_else(|| resolved.value_of(name)),
            ),
            source: chain.first().map_or(Source::DefaultConfig, |c| c.2),
            read_only: false,
            sensitive: false,
            synonyms: chain,
            config_type,
            documentation,
        });
    }
    Ok(out)
}

/// Describes this node's broker keys (the resource named by its id), or with
/// `Scope::ClusterDefault` the cluster-wide dynamic defaults that are set (the resource
/// named `""`), as Kafka does.
pub fn describe_broker(
    static_config: &BrokerConfig,
    layers: &Layers,
    scope: Scope,
    keys: Option<&[String]>,
) -> Vec<Described> {
    let mut out = Vec::new();
    if scope == Scope::ClusterDefault {
        for (name, value) in &layers.cluster_default {
            if !wanted(keys, name) {
                continue;
            }
            let (config_type, documentation) = broker_key_info(name);
            let source = Source::DynamicDefaultBrokerConfig;
            out.push(Described {
                name: name.clone(),
                value: Some(value.clone()),
                source,
                read_only: false,
                sensitive: false,
                synonyms: vec![(name.clone(), Some(value.clone()), source)],
                config_type,
                documentation,
            });
        }
        return out;
    }
    let mut names: Vec<&str> = RECOGNISED_BROKER_KEYS.to_vec();
    names.sort_unstable();
    for name in names {
        if !wanted(keys, name) {
            continue;
        }
        let mut chain = broker_layers(static_config, layers, name);
        let default = broker_value(&BrokerConfig::default(), name);
        chain.push((name.to_string(), default.clone(), Source::DefaultConfig));
        let (value, source) = match chain.first() {
            Some((_, value, source)) => (value.clone(), *source),
            None => (default, Source::DefaultConfig),
        };
        // A static value the embedded defaults cannot show (a simulated node's typed
        // config) is read back from the config in force.
        let value = if source == Source::DefaultConfig {
            broker_value(static_config, name).or(value)
        } else {
            value
        };
        let (config_type, documentation) = broker_key_info(name);
        out.push(Described {
            name: name.to_string(),
            value,
            source,
            read_only: !DYNAMIC_BROKER_KEYS.contains(&name),
            sensitive: false,
            synonyms: chain,
            config_type,
            documentation,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn layers_round_trip_through_their_file() {
        let layers = Layers {
            cluster_default: map(&[("log.retention.ms", "1000")]),
            node: map(&[
                ("message.max.bytes", "2000"),
                ("log.cleanup.policy", "compact,delete"),
            ]),
        };
        assert_eq!(Layers::decode(&layers.encode()), Ok(layers));
        assert!(Layers::decode("other.x=1\n").is_err());
    }

    #[test]
    fn only_dynamic_keys_may_be_set() {
        assert!(check_keys(&[String::from("log.retention.ms")]).is_ok());
        assert!(matches!(
            check_keys(&[String::from("num.partitions")]),
            Err(DynamicConfigError::NotDynamic { .. })
        ));
        assert!(matches!(
            check_keys(&[String::from("bogus.key")]),
            Err(DynamicConfigError::UnknownKey { .. })
        ));
    }

    #[test]
    fn layers_apply_in_kafkas_precedence() {
        let static_config =
            BrokerConfig::load(Some("log.retention.ms=5000\nmessage.max.bytes=3000"), &[]).unwrap();
        let layers = Layers {
            cluster_default: map(&[("log.retention.hours", "2"), ("message.max.bytes", "4000")]),
            node: map(&[("message.max.bytes", "5000")]),
        };
        let e = effective(&static_config, &layers).unwrap();
        // The static log.retention.ms still wins over a dynamic log.retention.hours.
        assert_eq!(e.log_retention_ms, 5000);
        assert_eq!(e.message_max_bytes, 5000);
        let described = describe_broker(&static_config, &layers, Scope::Node, None);
        let find = |n: &str| described.iter().find(|d| d.name == n).unwrap().clone();
        let m = find("message.max.bytes");
        assert_eq!(m.value.as_deref(), Some("5000"));
        assert_eq!(m.source, Source::DynamicBrokerConfig);
        assert_eq!(
            m.synonyms.iter().map(|s| s.2).collect::<Vec<_>>(),
            vec![
                Source::DynamicBrokerConfig,
                Source::DynamicDefaultBrokerConfig,
                Source::StaticBrokerConfig,
                Source::DefaultConfig
            ]
        );
        assert!(!m.read_only);
        assert!(find("num.partitions").read_only);
        assert_eq!(find("num.partitions").source, Source::DefaultConfig);
        let topic = describe_topic(&static_config, &layers, &e, &map(&[]), None).unwrap();
        let t = topic
            .iter()
            .find(|d| d.name == "max.message.bytes")
            .unwrap();
        assert_eq!(t.value.as_deref(), Some("5000"));
        assert_eq!(t.source, Source::DynamicBrokerConfig);
        let defaults = describe_broker(&static_config, &layers, Scope::ClusterDefault, None);
        assert_eq!(defaults.len(), 2);
        assert!(defaults
            .iter()
            .all(|d| d.source == Source::DynamicDefaultBrokerConfig));
        let bad = Layers {
            cluster_default: map(&[("message.max.bytes", "-1")]),
            node: BTreeMap::new(),
        };
        assert!(matches!(
            effective(&static_config, &bad),
            Err(DynamicConfigError::Invalid(_))
        ));
    }
}
