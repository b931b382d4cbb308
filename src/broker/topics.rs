//! The topics of this node: names, ids, partition counts and config overrides, persisted in
//! the log directory, and the open partitions of each.
//!
//! On disk, each topic is one file `samsa-topics/<name>.properties` (its id, partition count,
//! replication factor and config overrides) plus one directory `<name>-<partition>` per
//! partition holding the partition's log and Kafka's `partition.metadata`. The topic file is
//! the commit point: creating writes the partitions first and the file last (atomically);
//! deleting removes the file first. Partition directories without a topic file are debris of
//! an interrupted create or delete and are removed when the node starts.
//!
//! On a node with a metadata quorum (`process.roles` with `controller`, the default) this is
//! the log manager of Kafka's KRaft broker: a change a client asks for (create, delete, grow,
//! alter) goes to the controller through [`ControllerChannel`] and is done here only when the
//! committed metadata image says so ([`crate::broker::metadata_publisher`] calls the
//! `apply_*` methods); the topic files then only record which directories this node owns.
//! Without a controller attached (the in-process brokers of some tests and the simulation's
//! single node, for now) the same methods change the directory directly.
//!
//! Invariants: two topics never have names that collide once `.` is read as `_` (Kafka's
//! metric-name rule); every topic's partitions are numbered 0..n; a topic id never changes;
//! once a controller is attached, nothing but the publisher changes the topics.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{Notify, RwLock};

use crate::broker::config::{BrokerConfig, TopicConfig};
use crate::broker::controller_channel::{ChannelError, ControllerChannel};
use crate::broker::partition::{LogDirHealth, Partition};
use crate::controller::core::ControllerError;
use crate::log::{Log, LogError};
use crate::protocol::wire::Uuid;
use crate::rt::clock::Clock;
use crate::rt::disk::{self, Disk};

/// The directory, inside the log directory, of the topic files.
pub const TOPICS_DIR: &str = "samsa-topics";
/// Kafka's limit on a topic name's length.
pub const TOPIC_NAME_LEN_MAX: usize = 249;
/// Partitions of one topic at most. Each is a directory with open files; Kafka has no hard
/// limit, this keeps a typo (`--partitions 100000000`) from exhausting file descriptors.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;
/// Topics that Kafka reserves for its own state; clients see them flagged internal.
pub const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

/// Why a topic operation failed; handlers map each to its Kafka error code.
#[derive(Debug)]
pub enum TopicError {
    InvalidName {
        name: String,
        reason: String,
    },
    AlreadyExists {
        name: String,
    },
    /// The name collides with an existing topic's once `.` is read as `_`.
    Collides {
        name: String,
        existing: String,
    },
    UnknownTopic {
        name: String,
    },
    InvalidPartitions {
        name: String,
        partitions: i32,
    },
    InvalidReplicationFactor {
        name: String,
        factor: i16,
    },
    InvalidConfig {
        name: String,
        reason: String,
    },
    DeletionDisabled {
        name: String,
    },
    /// CreatePartitions asked for no more partitions than the topic has.
    PartitionsNotIncreased {
        name: String,
        current: i32,
        requested: i32,
    },
    /// The topic file of `name` could not be read back.
    CorruptTopicFile {
        path: String,
        reason: String,
    },
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    Log {
        name: String,
        source: LogError,
    },
    /// The controller refused the change (or could not be reached).
    Controller(crate::broker::controller_channel::ChannelError),
}

impl std::fmt::Display for TopicError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TopicError::InvalidName { name, reason } => {
                write!(f, "topic name '{name}' is illegal: {reason}")
            }
            TopicError::AlreadyExists { name } => write!(f, "topic '{name}' already exists"),
            TopicError::Collides { name, existing } => write!(
                f,
                "topic '{name}' collides with existing topic '{existing}' ('.' and '_' are the same in metric names)"
            ),
            TopicError::UnknownTopic { name } => write!(f, "topic '{name}' does not exist"),
            TopicError::InvalidPartitions { name, partitions } => write!(
                f,
                "topic '{name}': {partitions} partitions is outside [1, {PARTITIONS_PER_TOPIC_MAX}]"
            ),
            TopicError::InvalidReplicationFactor { name, factor } => write!(
                f,
                "topic '{name}': replication factor {factor} is larger than the 1 available broker"
            ),
            TopicError::InvalidConfig { name, reason } => {
                write!(f, "topic '{name}': invalid config: {reason}")
            }
            TopicError::DeletionDisabled { name } => write!(
                f,
                "topic '{name}' cannot be deleted: delete.topic.enable is false"
            ),
            TopicError::PartitionsNotIncreased {
                name,
                current,
                requested,
            } => {
                if current == requested {
                    write!(f, "topic '{name}' already has {current} partitions")
                } else {
                    write!(
                        f,
                        "topic '{name}' currently has {current} partitions, which is higher than the requested {requested}"
                    )
                }
            }
            TopicError::CorruptTopicFile { path, reason } => write!(f, "{path}: {reason}"),
            TopicError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            TopicError::Log { name, source } => write!(f, "topic '{name}': {source}"),
            TopicError::Controller(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TopicError {}

fn io_error<'a>(op: &'static str, path: &'a str) -> impl FnOnce(std::io::Error) -> TopicError + 'a {
    move |source| TopicError::Io {
        op,
        path: path.to_string(),
        source,
    }
}

/// Checks a topic name against Kafka's rules: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason: String| {
        Err(TopicError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("it is empty".into());
    }
    if name == "." || name == ".." {
        return invalid("'.' and '..' are not allowed".into());
    }
    if name.len() > TOPIC_NAME_LEN_MAX {
        return invalid(format!(
            "{} characters is longer than {TOPIC_NAME_LEN_MAX}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!("character {bad:?} is not one of [a-zA-Z0-9._-]"));
    }
    Ok(())
}

/// Kafka's collision rule: names that differ only by `.` versus `_` collide.
fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

/// One topic and its open partitions.
#[derive(Debug)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<Arc<Partition>>,
    pub replication_factor: i16,
    /// The overrides as given at creation; `config` is them resolved over the broker's.
    pub overrides: BTreeMap<String, String>,
    pub config: TopicConfig,
    pub internal: bool,
}

impl Topic {
    /// The partition numbered `index`, if the topic has it.
    pub fn partition(&self, index: i32) -> Option<Arc<Partition>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i).cloned())
    }
}

/// What a topic file holds.
#[derive(Clone, Debug, PartialEq)]
struct TopicRecord {
    id: Uuid,
    partitions: i32,
    replication_factor: i16,
    overrides: BTreeMap<String, String>,
}

impl TopicRecord {
    fn encode(&self) -> String {
        let mut out =
            String::from("# Samsa topic record; the topic exists while this file does.\n");
        out.push_str(&format!("topic.id={}\n", self.id.to_base64()));
        out.push_str(&format!("partitions={}\n", self.partitions));
        out.push_str(&format!("replication.factor={}\n", self.replication_factor));
        for (key, value) in &self.overrides {
            out.push_str(&format!("config.{key}={value}\n"));
        }
        out
    }

    fn decode(text: &str) -> Result<TopicRecord, String> {
        let mut id = None;
        let mut partitions = None;
        let mut replication_factor = None;
        let mut overrides = BTreeMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {}: expected key=value", number + 1));
            };
            match key {
                "topic.id" => {
                    id = Some(
                        Uuid::from_base64(value)
                            .ok_or_else(|| format!("topic.id '{value}' is not a topic id"))?,
                    )
                }
                "partitions" => {
                    partitions = Some(
                        value
                            .parse::<i32>()
                            .map_err(|e| format!("partitions '{value}': {e}"))?,
                    )
                }
                "replication.factor" => {
                    replication_factor = Some(
                        value
                            .parse::<i16>()
                            .map_err(|e| format!("replication.factor '{value}': {e}"))?,
                    )
                }
                _ => match key.strip_prefix("config.") {
                    Some(config_key) => {
                        overrides.insert(config_key.to_string(), value.to_string());
                    }
                    None => return Err(format!("line {}: unknown key '{key}'", number + 1)),
                },
            }
        }
        let partitions = partitions.ok_or("partitions is missing")?;
        if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
            return Err(format!("partitions {partitions} is out of range"));
        }
        Ok(TopicRecord {
            id: id.ok_or("topic.id is missing")?,
            partitions,
            replication_factor: replication_factor.ok_or("replication.factor is missing")?,
            overrides,
        })
    }
}

/// A request to create one topic.
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    /// The id the committed metadata gave the topic; `None` draws one (no controller).
    pub id: Option<Uuid>,
    /// `None` takes `num.partitions`.
    pub partitions: Option<i32>,
    /// `None` takes `default.replication.factor`.
    pub replication_factor: Option<i16>,
    pub overrides: BTreeMap<String, String>,
}

/// Every topic of this node.
#[derive(Debug)]
pub struct Topics {
    disk: Disk,
    /// The log directory.
    dir: String,
    /// The broker's effective config (static plus dynamic broker configs), replaced whole
    /// when a dynamic broker config changes. Never held across an await.
    broker: std::sync::RwLock<Arc<BrokerConfig>>,
    clock: Clock,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    data_arrived: Arc<Notify>,
    /// Woken when a partition has an ISR change for the controller.
    isr_changes: Arc<Notify>,
    health: Arc<LogDirHealth>,
    /// The way to the controller, once the node runs one: changes go there.
    controller: std::sync::OnceLock<ControllerChannel>,
    /// Set once the metadata publisher decides leadership: partitions opened from then on
    /// start not leading, until the publisher has applied a whole image.
    leadership_from_metadata: std::sync::atomic::AtomicBool,
}

impl Topics {
    /// Loads every topic of the log directory, recovering each partition's log, and removes
    /// the partition directories no topic owns.
    pub async fn open(
        disk: Disk,
        dir: &str,
        broker: Arc<BrokerConfig>,
        clock: Clock,
        data_arrived: Arc<Notify>,
        health: Arc<LogDirHealth>,
    ) -> Result<Topics, TopicError> {
        let topics_dir = disk::join(dir, TOPICS_DIR);
        let isr_changes = Arc::new(Notify::new());
        disk.create_dir_all(&topics_dir)
            .await
            .map_err(io_error("create", &topics_dir))?;
        let mut loaded = BTreeMap::new();
        for file in disk
            .list(&topics_dir)
            .await
            .map_err(io_error("list", &topics_dir))?
        {
            let Some(name) = file.strip_suffix(".properties") else {
                // Leftover `.tmp` files of an interrupted atomic write.
                let path = disk::join(&topics_dir, &file);
                disk.remove(&path)
                    .await
                    .map_err(io_error("remove", &path))?;
                continue;
            };
            let path = disk::join(&topics_dir, &file);
            let bytes = disk
                .read_file(&path)
                .await
                .map_err(io_error("read", &path))?;
            let text = std::str::from_utf8(&bytes).map_err(|e| TopicError::CorruptTopicFile {
                path: path.clone(),
                reason: format!("not UTF-8: {e}"),
            })?;
            let record =
                TopicRecord::decode(text).map_err(|reason| TopicError::CorruptTopicFile {
                    path: path.clone(),
                    reason,
                })?;
            validate_name(name)?;
            let topic = open_topic(
                &disk,
                dir,
                &broker,
                &clock,
                (&data_arrived, &isr_changes, &health),
                name,
                record,
            )
            .await?;
            loaded.insert(name.to_string(), Arc::new(topic));
        }
        // What was loaded is trusted from now on, so make it durable: a topic file renamed
        // into place by a process that crashed before it synced the directory exists in the
        // page cache but would vanish at the next power loss, taking the partitions the
        // next start then treats as debris with it.
        disk.sync_dir(&topics_dir)
            .await
            .map_err(io_error("sync", &topics_dir))?;
        // Remove partition directories of topics that do not exist (or partitions beyond a
        // topic's count): what an interrupted create or delete left behind.
        for entry in disk.list(dir).await.map_err(io_error("list", dir))? {
            let Some((name, partition)) = entry.rsplit_once('-') else {
                continue;
            };
            let Ok(partition) = partition.parse::<i32>() else {
                continue;
            };
            if name == crate::controller::core::METADATA_TOPIC_NAME {
                continue; // The metadata log's own directory (`__cluster_metadata-0`).
            }
            let owned = loaded
                .get(name)
                .is_some_and(|t: &Arc<Topic>| (0..t.partitions.len() as i32).contains(&partition));
            if !owned && validate_name(name).is_ok() {
                let path = disk::join(dir, &entry);
                tracing::warn!(%path, "removing a partition directory that no topic owns");
                disk.remove(&path)
                    .await
                    .map_err(io_error("remove", &path))?;
            }
        }
        Ok(Topics {
            disk,
            dir: dir.to_string(),
            broker: std::sync::RwLock::new(broker),
            clock,
            topics: RwLock::new(loaded),
            data_arrived,
            isr_changes,
            health,
            controller: std::sync::OnceLock::new(),
            leadership_from_metadata: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// From now on the metadata publisher decides which partitions lead: every partition
    /// stops leading until it says so, and partitions opened later start not leading (a
    /// publisher that fails half-way through an image must not leave a new partition
    /// serving that the image gives to nobody, or not yet to this broker).
    pub async fn take_leadership_from_metadata(&self) {
        self.leadership_from_metadata
            .store(true, std::sync::atomic::Ordering::Release);
        for partition in self.partitions().await {
            partition.resign();
        }
    }

    /// [`Topics::initial_leadership`] of a partition just opened.
    fn opened(&self, partition: Arc<Partition>) -> Arc<Partition> {
        self.initial_leadership(&partition);
        partition
    }

    /// A partition just opened starts leading only without a publisher.
    fn initial_leadership(&self, partition: &Partition) {
        if self
            .leadership_from_metadata
            .load(std::sync::atomic::Ordering::Acquire)
        {
            partition.resign();
        }
    }

    /// Woken when a partition has an ISR change for the controller.
    pub fn isr_changes(&self) -> Arc<Notify> {
        self.isr_changes.clone()
    }

    /// From now on, changes go to the controller (see the module doc). Attached once.
    pub fn attach_controller(&self, channel: ControllerChannel) {
        assert!(
            self.controller.set(channel).is_ok(),
            "a controller attached twice"
        );
    }

    /// The way to the controller, once attached (a broker opened without one has none).
    pub fn controller_channel(&self) -> Option<&ControllerChannel> {
        self.controller.get()
    }

    /// The topic `name`, or UnknownTopic.
    async fn existing(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        self.get(name)
            .await
            .ok_or_else(|| TopicError::UnknownTopic {
                name: name.to_string(),
            })
    }

    /// The controller changes go to, if one is attached.
    pub fn controller(&self) -> Option<&ControllerChannel> {
        self.controller.get()
    }

    /// The broker's effective config (static plus dynamic broker configs).
    pub fn broker_config(&self) -> Arc<BrokerConfig> {
        self.broker
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The disk holding the log directory.
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// The log directory on [`Topics::disk`].
    pub fn dir(&self) -> &str {
        &self.dir
    }

    pub async fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().await.get(name).cloned()
    }

    pub async fn get_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .await
            .values()
            .find(|t| t.id == id)
            .cloned()
    }

    pub async fn get_partition(&self, name: &str, partition: i32) -> Option<Arc<Partition>> {
        self.get(name).await?.partition(partition)
    }

    /// The topic a request names: by id from the version where the request carries topic
    /// ids (Produce v13, Fetch v13), by name before.
    pub async fn find(&self, by_id: bool, name: &str, id: Uuid) -> Option<Arc<Topic>> {
        if by_id {
            self.get_by_id(id).await
        } else {
            self.get(name).await
        }
    }

    /// Every topic, by name.
    pub async fn list(&self) -> Vec<Arc<Topic>> {
        self.topics.read().await.values().cloned().collect()
    }

    /// Checks a creation without performing it (CreateTopics' `validate_only`), returning the
    /// resolved partition count, replication factor and config.
    pub async fn validate_new(
        &self,
        new: &NewTopic,
    ) -> Result<(i32, i16, TopicConfig), TopicError> {
        let topics = self.topics.read().await;
        self.check_new(&topics, new)
    }

    fn check_new(
        &self,
        topics: &BTreeMap<String, Arc<Topic>>,
        new: &NewTopic,
    ) -> Result<(i32, i16, TopicConfig), TopicError> {
        validate_name(&new.name)?;
        if topics.contains_key(&new.name) {
            return Err(TopicError::AlreadyExists {
                name: new.name.clone(),
            });
        }
        let key = collision_key(&new.name);
        if let Some(existing) = topics.keys().find(|t| collision_key(t) == key) {
            return Err(TopicError::Collides {
                name: new.name.clone(),
                existing: existing.clone(),
            });
        }
        let broker = self.broker_config();
        let partitions = new.partitions.unwrap_or(broker.num_partitions);
        if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
            return Err(TopicError::InvalidPartitions {
                name: new.name.clone(),
                partitions,
            });
        }
        let factor = new
            .replication_factor
            .unwrap_or(broker.default_replication_factor);
        if factor != 1 {
            return Err(TopicError::InvalidReplicationFactor {
                name: new.name.clone(),
                factor,
            });
        }
        let config = self.validate_overrides(&new.name, &new.overrides)?;
        Ok((partitions, factor, config))
    }

    /// Checks a topic's config overrides as CreateTopics does (the same rules for
    /// AlterConfigs), returning the config they resolve to over the broker's.
    pub fn validate_overrides(
        &self,
        name: &str,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, TopicError> {
        for (key, value) in overrides {
            if key.contains(['\n', '\r', '=']) || value.contains(['\n', '\r']) {
                return Err(TopicError::InvalidConfig {
                    name: name.to_string(),
                    reason: format!("'{key}' has a line break or '=' in its name or value"),
                });
            }
        }
        TopicConfig::resolve(&self.broker_config(), overrides).map_err(|e| {
            TopicError::InvalidConfig {
                name: name.to_string(),
                reason: e.to_string(),
            }
        })
    }

    /// Replaces a topic's config overrides with what `change` makes of the current ones
    /// (AlterConfigs, IncrementalAlterConfigs; under the topics lock, so concurrent changes
    /// never lose one another): validated as at creation, written
    /// to the topic file atomically (the commit point), then put in force on the running
    /// partitions. With `validate_only` nothing changes.
    pub async fn alter_overrides(
        &self,
        name: &str,
        change: impl FnOnce(&BTreeMap<String, String>) -> BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        if let Some(channel) = self.controller.get() {
            let current = self.existing(name).await?;
            let overrides = change(&current.overrides);
            self.validate_overrides(name, &overrides)?;
            channel
                .replace_topic_configs(name, &current.overrides, &overrides, validate_only)
                .await
                .map_err(TopicError::Controller)?;
            return self.existing(name).await;
        }
        self.apply_alter_overrides(name, change, validate_only)
            .await
    }

    /// [`Topics::alter_overrides`] done here (the publisher's part, or no controller).
    pub async fn apply_alter_overrides(
        &self,
        name: &str,
        change: impl FnOnce(&BTreeMap<String, String>) -> BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write().await;
        let Some(topic) = topics.get(name).cloned() else {
            return Err(TopicError::UnknownTopic {
                name: name.to_string(),
            });
        };
        let overrides = change(&topic.overrides);
        let config = self.validate_overrides(name, &overrides)?;
        if validate_only {
            return Ok(topic);
        }
        let record = TopicRecord {
            id: topic.id,
            partitions: topic.partitions.len() as i32,
            replication_factor: topic.replication_factor,
            overrides: overrides.clone(),
        };
        let path = topic_file(&self.dir, name);
        self.disk
            .write_file_atomic(&path, record.encode().as_bytes())
            .await
            .map_err(io_error("write", &path))?;
        for partition in &topic.partitions {
            partition.set_config(config.clone());
        }
        let altered = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            partitions: topic.partitions.clone(),
            replication_factor: topic.replication_factor,
            overrides,
            config,
            internal: topic.internal,
        });
        topics.insert(name.to_string(), altered.clone());
        tracing::info!(topic = name, overrides = ?altered.overrides, "altered topic config");
        Ok(altered)
    }

    /// Grows a topic to `count` partitions (CreatePartitions): the new partition directories
    /// and logs first, then the topic file with the new count (the commit point), so a crash
    /// leaves either the old count (the new directories are debris, removed at the next
    /// start) or the new one. The new partitions are served as soon as this returns. With
    /// `validate_only` nothing changes.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        if let Some(channel) = self.controller.get() {
            channel
                .create_partitions(name, count, validate_only)
                .await
                .map_err(TopicError::Controller)?;
            return self.existing(name).await;
        }
        self.apply_create_partitions(name, count, validate_only)
            .await
    }

    /// [`Topics::create_partitions`] done here (the publisher's part, or no controller).
    pub async fn apply_create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write().await;
        let Some(topic) = topics.get(name).cloned() else {
            return Err(TopicError::UnknownTopic {
                name: name.to_string(),
            });
        };
        let current = topic.partitions.len() as i32;
        if count <= current {
            return Err(TopicError::PartitionsNotIncreased {
                name: name.to_string(),
                current,
                requested: count,
            });
        }
        if count > PARTITIONS_PER_TOPIC_MAX {
            return Err(TopicError::InvalidPartitions {
                name: name.to_string(),
                partitions: count,
            });
        }
        if validate_only {
            return Ok(topic);
        }
        let broker = self.broker_config();
        let record = TopicRecord {
            id: topic.id,
            partitions: count,
            replication_factor: topic.replication_factor,
            overrides: topic.overrides.clone(),
        };
        let mut partitions = topic.partitions.clone();
        for index in current..count {
            partitions.push(
                self.opened(
                    open_partition(
                        &self.disk,
                        &self.dir,
                        (&broker, &topic.config),
                        &self.clock,
                        (&self.data_arrived, &self.isr_changes, &self.health),
                        name,
                        topic.id,
                        index,
                    )
                    .await?,
                ),
            );
        }
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(io_error("sync", &self.dir))?;
        let path = topic_file(&self.dir, name);
        self.disk
            .write_file_atomic(&path, record.encode().as_bytes())
            .await
            .map_err(io_error("write", &path))?;
        let grown = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            partitions,
            replication_factor: topic.replication_factor,
            overrides: topic.overrides.clone(),
            config: topic.config.clone(),
            internal: topic.internal,
        });
        topics.insert(name.to_string(), grown.clone());
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(grown)
    }

    /// Puts a new effective broker config in force (a dynamic broker config changed): new
    /// topics take their defaults from it, and every topic's config is resolved again over
    /// it and given to its running partitions.
    pub async fn set_broker_config(&self, broker: Arc<BrokerConfig>) {
        let mut topics = self.topics.write().await;
        *self
            .broker
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = broker.clone();
        for (name, topic) in topics.iter_mut() {
            // Overrides were accepted before and resolve against any valid broker config;
            // should one not, the topic keeps its current config rather than lose it.
            let config = match TopicConfig::resolve(&broker, &topic.overrides) {
                Ok(config) => config,
                Err(e) => {
                    tracing::warn!(topic = %name, error = %e, "topic config not re-resolved");
                    continue;
                }
            };
            for partition in &topic.partitions {
                partition.set_config(config.clone());
            }
            *topic = Arc::new(Topic {
                name: topic.name.clone(),
                id: topic.id,
                partitions: topic.partitions.clone(),
                replication_factor: topic.replication_factor,
                overrides: topic.overrides.clone(),
                config,
                internal: topic.internal,
            });
        }
    }

    /// Creates a topic: partitions first, then the topic file (the commit point).
    pub async fn create(&self, new: NewTopic) -> Result<Arc<Topic>, TopicError> {
        if let Some(channel) = self.controller.get() {
            validate_name(&new.name)?;
            let id = channel.create_topic(&new).await.map_err(|e| match e {
                // Another request created it first: the callers that race (auto-creation,
                // the coordinator's `__consumer_offsets`) tell this case apart.
                ChannelError::Refused(ControllerError::TopicAlreadyExists { name }) => {
                    TopicError::AlreadyExists { name }
                }
                e => TopicError::Controller(e),
            })?;
            return match self.get(&new.name).await {
                Some(topic) if topic.id == id => Ok(topic),
                // Deleted again (or replaced) between the commit and this look.
                _ => Err(TopicError::UnknownTopic { name: new.name }),
            };
        }
        self.apply_create(new).await
    }

    /// [`Topics::create`] done here (the publisher's part, with the committed id; or no
    /// controller).
    pub async fn apply_create(&self, new: NewTopic) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write().await;
        let (partitions, replication_factor, _) = self.check_new(&topics, &new)?;
        if new.name.contains(['.', '_']) {
            tracing::warn!(
                topic = %new.name,
                "topic names with '.' or '_' may collide in metric names; avoid mixing them"
            );
        }
        let record = TopicRecord {
            id: new.id.unwrap_or_else(|| {
                Uuid::v4_from([crate::rt::rand::random_u64(), crate::rt::rand::random_u64()])
            }),
            partitions,
            replication_factor,
            overrides: new.overrides,
        };
        let topic = open_topic(
            &self.disk,
            &self.dir,
            &self.broker_config(),
            &self.clock,
            (&self.data_arrived, &self.isr_changes, &self.health),
            &new.name,
            record.clone(),
        )
        .await?;
        for partition in &topic.partitions {
            self.initial_leadership(partition);
        }
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(io_error("sync", &self.dir))?;
        let path = topic_file(&self.dir, &new.name);
        self.disk
            .write_file_atomic(&path, record.encode().as_bytes())
            .await
            .map_err(io_error("write", &path))?;
        tracing::info!(topic = %new.name, partitions, id = %record.id.to_base64(), "created topic");
        let topic = Arc::new(topic);
        topics.insert(new.name, topic.clone());
        Ok(topic)
    }

    /// Deletes a topic: the topic file first (the commit point), then its partitions.
    pub async fn delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        if !self.broker_config().delete_topic_enable {
            return Err(TopicError::DeletionDisabled {
                name: name.to_string(),
            });
        }
        if let Some(channel) = self.controller.get() {
            let topic = self.existing(name).await?;
            channel
                .delete_topic(name)
                .await
                .map_err(TopicError::Controller)?;
            return Ok(topic);
        }
        self.apply_delete(name).await
    }

    /// [`Topics::delete`] done here (the publisher's part, or no controller).
    pub async fn apply_delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write().await;
        let Some(topic) = topics.get(name).cloned() else {
            return Err(TopicError::UnknownTopic {
                name: name.to_string(),
            });
        };
        let path = topic_file(&self.dir, name);
        let topics_dir = disk::join(&self.dir, TOPICS_DIR);
        self.disk
            .remove(&path)
            .await
            .map_err(io_error("remove", &path))?;
        self.disk
            .sync_dir(&topics_dir)
            .await
            .map_err(io_error("sync", &topics_dir))?;
        topics.remove(name);
        drop(topics);
        for partition in &topic.partitions {
            partition.mark_deleted();
            // A failed close only loses the clean-shutdown marker of a log being removed.
            if let Err(e) = partition.log().close().await {
                tracing::debug!(topic = name, partition = partition.index, error = %e, "closing a deleted partition");
            }
            let dir = partition_dir(&self.dir, name, partition.index);
            self.disk
                .remove(&dir)
                .await
                .map_err(io_error("remove", &dir))?;
        }
        self.disk
            .sync_dir(&self.dir)
            .await
            .map_err(io_error("sync", &self.dir))?;
        tracing::info!(topic = name, "deleted topic");
        Ok(topic)
    }

    /// Every partition of every topic.
    pub async fn partitions(&self) -> Vec<Arc<Partition>> {
        self.topics
            .read()
            .await
            .values()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect()
    }

    /// Closes every partition's log cleanly (flush, checkpoint, clean-shutdown marker).
    pub async fn close(&self) -> Result<(), TopicError> {
        let topics = self.topics.read().await;
        let mut first_error = None;
        for topic in topics.values() {
            for partition in &topic.partitions {
                if let Err(source) = partition.log().close().await {
                    tracing::error!(topic = %topic.name, partition = partition.index, error = %source, "closing a partition log");
                    first_error.get_or_insert(TopicError::Log {
                        name: topic.name.clone(),
                        source,
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn topic_file(dir: &str, name: &str) -> String {
    disk::join(&disk::join(dir, TOPICS_DIR), &format!("{name}.properties"))
}

fn partition_dir(dir: &str, name: &str, partition: i32) -> String {
    disk::join(dir, &format!("{name}-{partition}"))
}

async fn open_topic(
    disk: &Disk,
    dir: &str,
    broker: &BrokerConfig,
    clock: &Clock,
    (data_arrived, isr_changes, health): (&Arc<Notify>, &Arc<Notify>, &Arc<LogDirHealth>),
    name: &str,
    record: TopicRecord,
) -> Result<Topic, TopicError> {
    let config =
        TopicConfig::resolve(broker, &record.overrides).map_err(|e| TopicError::InvalidConfig {
            name: name.to_string(),
            reason: e.to_string(),
        })?;
    let mut partitions = Vec::with_capacity(record.partitions as usize);
    for index in 0..record.partitions {
        partitions.push(
            open_partition(
                disk,
                dir,
                (broker, &config),
                clock,
                (data_arrived, isr_changes, health),
                name,
                record.id,
                index,
            )
            .await?,
        );
    }
    Ok(Topic {
        name: name.to_string(),
        id: record.id,
        partitions,
        replication_factor: record.replication_factor,
        internal: INTERNAL_TOPICS.contains(&name),
        overrides: record.overrides,
        config,
    })
}

/// Opens (creating if needed) one partition's directory, `partition.metadata` and log.
#[allow(clippy::too_many_arguments)]
async fn open_partition(
    disk: &Disk,
    dir: &str,
    (broker, config): (&BrokerConfig, &TopicConfig),
    clock: &Clock,
    (data_arrived, isr_changes, health): (&Arc<Notify>, &Arc<Notify>, &Arc<LogDirHealth>),
    name: &str,
    id: Uuid,
    index: i32,
) -> Result<Arc<Partition>, TopicError> {
    let partition_dir = partition_dir(dir, name, index);
    disk.create_dir_all(&partition_dir)
        .await
        .map_err(io_error("create", &partition_dir))?;
    // Kafka's partition.metadata, so tools that look for it find the topic id.
    let metadata = disk::join(&partition_dir, "partition.metadata");
    if !disk
        .exists(&metadata)
        .await
        .map_err(io_error("stat", &metadata))?
    {
        let text = format!("version: 0\ntopic_id: {}\n", id.to_base64());
        disk.write_file_atomic(&metadata, text.as_bytes())
            .await
            .map_err(io_error("write", &metadata))?;
    }
    let log_config = config.to_log_config(broker);
    if log_config.flush != crate::log::FlushPolicy::SyncBeforeAck {
        // Before the log can acknowledge from the page cache, this process stops claiming
        // that a crash would lose nothing acknowledged (see `clean_shutdown`).
        health
            .running_marker
            .page_cache_log_opens(disk)
            .await
            .map_err(|e| TopicError::Io {
                op: "remove",
                path: crate::broker::clean_shutdown::CLEAN_SHUTDOWN_MARKER.to_string(),
                source: e.source,
            })?;
    }
    let (log, report) = Log::open(disk.clone(), &partition_dir, log_config, clock.clone())
        .await
        .map_err(|source| TopicError::Log {
            name: name.to_string(),
            source,
        })?;
    if !report.clean_shutdown && (report.batches_scanned > 0 || report.truncated.is_some()) {
        tracing::info!(
            topic = name,
            partition = index,
            ?report,
            "recovered partition log"
        );
    }
    let checkpointed = crate::replication::checkpoint::read(disk, &partition_dir).await;
    Ok(Arc::new(Partition::new(
        (name.to_string(), id, index),
        (log, report),
        config.clone(),
        (broker.node_id, broker.replication),
        checkpointed,
        (data_arrived.clone(), isr_changes.clone()),
        health.clone(),
        broker.bugs,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        for good in ["a", "orders", "a.b_c-D9", &"x".repeat(TOPIC_NAME_LEN_MAX)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "a/b",
            "ü",
            &"x".repeat(TOPIC_NAME_LEN_MAX + 1),
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert_eq!(collision_key("a.b"), collision_key("a_b"));
    }

    use crate::rt::block_on;

    /// Added partitions and altered overrides are committed once their calls return: a power
    /// loss right after keeps them (the topic file is the synced commit point).
    #[test]
    fn added_partitions_and_altered_overrides_survive_power_loss() {
        use crate::rt::disk::{CrashMode, MemDisk};
        use rand::SeedableRng;
        block_on(async {
            let mem = MemDisk::new(3);
            let broker = Arc::new(BrokerConfig::default());
            let open = |mem: &MemDisk| {
                Topics::open(
                    Disk::mem(mem.clone()),
                    "",
                    broker.clone(),
                    Clock::new(),
                    Arc::new(Notify::new()),
                    Arc::new(LogDirHealth::default()),
                )
            };
            let topics = open(&mem).await.unwrap();
            topics
                .create(NewTopic {
                    id: None,
                    name: "t".into(),
                    partitions: Some(1),
                    replication_factor: None,
                    overrides: BTreeMap::new(),
                })
                .await
                .unwrap();
            assert!(matches!(
                topics.create_partitions("t", 1, false).await,
                Err(TopicError::PartitionsNotIncreased { .. })
            ));
            topics.create_partitions("t", 2, true).await.unwrap();
            assert_eq!(topics.get("t").await.unwrap().partitions.len(), 1);
            topics.create_partitions("t", 4, false).await.unwrap();
            let retention = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
            assert!(topics
                .alter_overrides(
                    "t",
                    |_| BTreeMap::from([("bogus".into(), "1".into())]),
                    false
                )
                .await
                .is_err());
            topics
                .alter_overrides("t", |_| retention.clone(), false)
                .await
                .unwrap();
            let running = topics.get_partition("t", 3).await.unwrap();
            assert_eq!(running.config().retention_ms, 1000);
            drop(topics);
            mem.crash(
                CrashMode::PowerLossDropUnsynced,
                &mut rand::rngs::SmallRng::seed_from_u64(5),
            );
            let topics = open(&mem).await.unwrap();
            let t = topics.get("t").await.unwrap();
            assert_eq!(t.partitions.len(), 4);
            assert_eq!(t.overrides, retention);
            assert_eq!(t.config.retention_ms, 1000);
        });
    }

    #[test]
    fn topic_records_round_trip_and_reject_damage() {
        let record = TopicRecord {
            id: Uuid::v4_from([7, 9]),
            partitions: 3,
            replication_factor: 1,
            overrides: BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
        };
        assert_eq!(TopicRecord::decode(&record.encode()), Ok(record.clone()));
        let text = record.encode();
        assert!(TopicRecord::decode(&text.replace("partitions=3", "partitions=0")).is_err());
        assert!(TopicRecord::decode(&text.replace("topic.id=", "topic.id=x")).is_err());
        assert!(TopicRecord::decode("partitions=1\nreplication.factor=1\n").is_err());
        assert!(TopicRecord::decode(&format!("{text}bogus=1\n")).is_err());
    }
}
