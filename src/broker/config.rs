//! Broker and topic configuration under Kafka's names.
//!
//! [`BrokerConfig`] holds the node's settings (`server.properties` keys); [`TopicConfig`] the
//! effective settings of one topic: its overrides on top of the broker's defaults, as Kafka
//! resolves topic configs through their broker synonyms (`segment.bytes` falls back to
//! `log.segment.bytes`). Parsing and validation name the offending key.
//!
//! Owns: the Java-properties text format ([`parse_properties`], also used for persisted topic
//! overrides through [`encode_overrides`] / [`decode_overrides`]), the table of recognised
//! broker keys, the keys of Kafka's stock `server.properties` that are accepted but not used
//! yet ([`IGNORED_BROKER_KEYS`]), and the table of topic keys with their broker synonyms.
//!
//! Invariants:
//! - Every value in a [`BrokerConfig`] or [`TopicConfig`] built here passed its range check, so
//!   `to_log_config` always yields a [`LogConfig`] that `LogConfig::validate` accepts.
//! - Any key neither recognised nor ignored is an error: a typo never silently leaves a
//!   default in force.
//! - Defaults are Kafka 4.0's, except where a doc comment says Samsa differs: the flush
//!   policy (Samsa syncs before acknowledging unless `log.flush.interval.*` is set),
//!   `max.connections` (bounded by default), and the minimum `segment.bytes` and
//!   `index.interval.bytes`/`segment.index.bytes` lower bounds (those the log can honour).

use crate::log::{FlushPolicy, LogConfig, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
use crate::protocol::compression::{self, Compressor};
use crate::protocol::record_batch::Compression;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The largest `socket.request.max.bytes` accepted: a request is buffered whole before it is
/// parsed, so this bounds the memory one connection can demand (1 GiB).
pub const SOCKET_REQUEST_MAX_BYTES_MAX: usize = 1 << 30;
/// The largest `max.connections` accepted (Kafka's own ceiling, `Integer.MAX_VALUE`).
pub const MAX_CONNECTIONS_MAX: usize = i32::MAX as usize;
/// The largest `queued.max.requests` accepted: each queued request may hold a whole frame.
pub const QUEUED_MAX_REQUESTS_MAX: usize = 1 << 20;
/// Physical lines one logical properties line may span through backslash continuations.
pub const CONTINUATION_LINES_MAX: usize = 10_000;
/// Kafka's stand-in for "never" in its long-valued settings (`Long.MAX_VALUE`).
pub const KAFKA_LONG_MAX: i64 = i64::MAX;
/// The most `log.cleaner.threads` accepted: passes hold a whole offset map each.
pub const LOG_CLEANER_THREADS_MAX: usize = 16;
/// Bytes per offset-index entry: the smallest `segment.index.bytes` the log can use.
const INDEX_ENTRY_BYTES: u64 = 8;

/// One `listeners` / `advertised.listeners` entry: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The listener name (`PLAINTEXT` by default), upper-case.
    pub name: String,
    /// A host name or address; `0.0.0.0` in `listeners` binds every interface (Kafka's empty
    /// host, as in `PLAINTEXT://:9092`, is read as that).
    pub host: String,
    pub port: u16,
}

/// How a record's timestamp is set (`message.timestamp.type`): the producer's CreateTime,
/// kept within the before/after bounds, or the broker's LogAppendTime, stamped at append. The
/// log's validator owns the type; it is re-exported here under the config's name.
pub use crate::log::validator::TimestampType;

/// The node's settings, named after Kafka's broker configs (units last).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `node.id` (or its alias `broker.id`).
    pub node_id: i32,
    /// `listeners`: where the broker accepts connections. Listeners named in
    /// `controller.listener.names` (`CONTROLLER` by default) are left out here: the metadata
    /// quorum binds them ([`KraftSettings::controller_listener`]).
    pub listeners: Vec<Endpoint>,
    /// `advertised.listeners`: what Metadata tells clients (the listeners when unset).
    pub advertised_listeners: Vec<Endpoint>,
    /// `log.dirs` (or `log.dir`): exactly one data directory for now.
    pub log_dirs: Vec<String>,
    /// `num.partitions`: partitions of an auto-created topic.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `unclean.leader.election.enable`: the controller's default for topics that do not
    /// set it (false: a partition whose ISR and ELR are gone waits for one of them).
    pub unclean_leader_election_enable: bool,
    /// `auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds` (in ms)
    /// and `leader.imbalance.per.broker.percentage`: the controller moves leaders back to
    /// their preferred replicas.
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_ms: u64,
    pub leader_imbalance_per_broker_percentage: u32,
    /// `message.max.bytes`: the largest record batch accepted (topic `max.message.bytes`).
    pub message_max_bytes: usize,
    /// `socket.request.max.bytes`: the largest request frame read, at most
    /// [`SOCKET_REQUEST_MAX_BYTES_MAX`].
    pub socket_request_max_bytes: usize,
    /// `max.connections`: open client connections at most. Samsa's default is 10 000 where
    /// Kafka's is unbounded (`Integer.MAX_VALUE`): every connection holds buffers.
    pub max_connections: usize,
    /// `connections.max.idle.ms`: a connection idle this long is closed.
    pub connections_max_idle_ms: u64,
    /// `queued.max.requests`: requests read ahead of their responses, per connection.
    pub queued_max_requests: usize,
    /// `log.segment.bytes`.
    pub log_segment_bytes: u64,
    /// `log.roll.ms` (or `log.roll.hours`; the ms key wins, as in Kafka).
    pub log_roll_ms: i64,
    /// `log.index.interval.bytes`.
    pub log_index_interval_bytes: u64,
    /// `log.index.size.max.bytes`.
    pub log_index_size_max_bytes: u64,
    /// `log.flush.interval.messages` / `log.flush.interval.ms`, or Samsa's default of syncing
    /// before acknowledging (see [`FlushPolicy`]). Kafka's default is the page cache with
    /// both limits at `Long.MAX_VALUE`; setting either key here switches to
    /// [`FlushPolicy::PageCache`] with that default for the other.
    pub log_flush: FlushPolicy,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `producer.id.expiration.ms` (KIP-854): how long a partition keeps an idle idempotent
    /// producer's state, counted from its latest batch's timestamp.
    pub producer_id_expiration_ms: i64,
    /// `producer.id.expiration.check.interval.ms`: how often expired producers are removed.
    pub producer_id_expiration_check_interval_ms: u64,
    /// Whether partitions check idempotent producers' batches (duplicates, sequences,
    /// epochs). Always true from a properties file: not a Kafka setting, it exists so the
    /// simulation can show that its duplicate checker catches a broker without the checks.
    pub producer_state_checks: bool,
    /// `log.message.timestamp.type`.
    pub log_message_timestamp_type: TimestampType,
    /// `log.message.timestamp.before.max.ms`.
    pub log_message_timestamp_before_max_ms: i64,
    /// `log.message.timestamp.after.max.ms` (Kafka 4.0's default: one hour, KIP-1030).
    pub log_message_timestamp_after_max_ms: i64,
    /// `log.retention.ms` (or `.minutes`, or `.hours`, in that precedence); -1: no limit.
    pub log_retention_ms: i64,
    /// `log.retention.bytes`; -1: no limit.
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms`.
    pub log_retention_check_interval_ms: u64,
    /// `log.cleanup.policy`.
    pub log_cleanup_policy: CleanupPolicy,
    /// `log.cleaner.enable`: run the log cleaner on compacted topics.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.threads`: passes that may run at once, on different logs.
    pub log_cleaner_threads: usize,
    /// `log.cleaner.backoff.ms`: how long the cleaner sleeps when no log needs cleaning.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the offset maps' budget, shared by the threads.
    pub log_cleaner_dedupe_buffer_size: u64,
    /// `log.cleaner.io.max.bytes.per.second` (read plus written, per thread); 0: no limit.
    pub log_cleaner_io_max_bytes_per_second: u64,
    /// `log.cleaner.min.cleanable.ratio`: the default of `min.cleanable.dirty.ratio`.
    pub log_cleaner_min_cleanable_ratio: f64,
    /// `log.cleaner.delete.retention.ms`: the default of `delete.retention.ms`.
    pub log_cleaner_delete_retention_ms: i64,
    /// `log.cleaner.min.compaction.lag.ms`: the default of `min.compaction.lag.ms`.
    pub log_cleaner_min_compaction_lag_ms: i64,
    /// `log.cleaner.max.compaction.lag.ms`: the default of `max.compaction.lag.ms`.
    pub log_cleaner_max_compaction_lag_ms: i64,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `compression.type`: the topic default.
    pub compression_type: BrokerCompressionType,
    /// `compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level` (KIP-390):
    /// the topic defaults.
    pub compression_levels: CompressionLevels,
    /// Keys set (file or override) that Samsa accepts without acting on, sorted.
    pub ignored: Vec<String>,
    /// Recognised keys set explicitly (file or override): DescribeConfigs reports these as
    /// broker-level sources.
    pub explicit_keys: BTreeSet<String>,
    /// The values of `explicit_keys` as written (trimmed), for DescribeConfigs and for
    /// layering dynamic broker configs over the static ones (`broker::dynamic_config`).
    pub explicit_values: BTreeMap<String, String>,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions (KIP-227) kept at most.
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `log.scrubber.bytes.per.second` (Samsa's, not Kafka's): how fast the background
    /// scrubber re-reads and CRC-checks the closed segments below the recovery point, over
    /// all partitions; 0 turns it off. The default, [`LOG_SCRUBBER_BYTES_PER_SECOND_DEFAULT`]
    /// (4 MiB/s), costs a busy broker little: about 0.5% of one core (measured on an idle
    /// broker: 150 ms of CPU per 20 s against 50 ms with the scrubber off; CRC-32C runs at
    /// GB/s), a few percent at most of one disk's sequential read bandwidth, and no
    /// measurable produce throughput (README "Performance"); yet it re-reads ~340 GiB a day,
    /// so a broker's data at rest is checked every day or few.
    pub log_scrubber_bytes_per_second: u64,
    /// A partition's fetched records of at least this many bytes go from the segment file to
    /// the socket without a copy; smaller ones are copied (`handlers::fetch::ZERO_COPY_BYTES_MIN`,
    /// measured). Not a Kafka setting and no properties key reaches it: the simulation lowers
    /// it so that both paths run under its faults.
    pub fetch_zero_copy_bytes_min: usize,
    /// The group coordinator's settings, under Kafka's names (`group.*`, `offsets.*`,
    /// `offset.metadata.max.bytes`).
    pub groups: GroupSettings,
    /// Partition replication's settings, under Kafka's names (`replica.*`).
    pub replication: ReplicationSettings,
    /// Deliberate bugs for the simulation's checker tests; no properties key reaches them.
    pub bugs: BrokerBugs,
    /// The node's place in the metadata quorum (`process.roles`, `controller.*`,
    /// `broker.session.timeout.ms`, `broker.heartbeat.interval.ms`).
    pub kraft: KraftSettings,
}

/// Samsa's `broker.session.timeout.ms` default: 2 s, where Kafka's is 9 s. The session is
/// the failure detector of partition leaders: a dead leader's partitions move only once its
/// session expires, so it is most of a failover's time (the goal is a producer acknowledged
/// again within 3 s of a leader's SIGKILL). Kafka's 9 s leaves room for JVM garbage
/// collection pauses; a Samsa broker has none, sends its heartbeats from a task of their own,
/// and the controller counts a heartbeat when it takes the request, before any disk write.
/// Shorter still would fence brokers that are merely slow for a moment (a fenced live broker
/// heartbeats, is unfenced and gets its leaderships back by preferred election: no data is at
/// risk, only a brief leader move). Kafka's values remain a setting away.
pub const BROKER_SESSION_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// Samsa's `broker.heartbeat.interval.ms` default (Kafka's is 2000): four heartbeats a
/// session, so that one or two lost or late ones do not fence a broker.
pub const BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 500;
const _: () =
    assert!(BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT * 4 <= BROKER_SESSION_TIMEOUT_MS_DEFAULT);

/// KRaft settings of a `samsa broker` node, under Kafka's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KraftSettings {
    /// `process.roles`: `broker,controller` (the default: the node runs the metadata quorum
    /// and its controller itself) is the only combination `samsa broker` runs until step 10;
    /// `controller` alone is `samsa controller`.
    pub controller_role: bool,
    /// `controller.listener.names`' first name, upper-case (`CONTROLLER`).
    pub controller_listener_name: String,
    /// The listener of `listeners` named by `controller.listener.names`; `None`: an
    /// ephemeral port on 127.0.0.1 (a quorum of one needs no fixed address).
    pub controller_listener: Option<Endpoint>,
    /// `controller.quorum.voters` (`id@host:port,...`); empty: a quorum of one, this node.
    pub quorum_voters: BTreeMap<i32, String>,
    /// `controller.quorum.bootstrap.servers` was set without `controller.quorum.voters`
    /// (Kafka 4's stock `server.properties`): a quorum of one, with a warning.
    pub bootstrap_servers_without_voters: bool,
    /// `metadata.log.dir`: where `__cluster_metadata-0` lives (the log directory by default).
    pub metadata_log_dir: Option<String>,
    /// `broker.session.timeout.ms` ([`BROKER_SESSION_TIMEOUT_MS_DEFAULT`]; Kafka's is 9000): a
    /// broker without a heartbeat this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms` ([`BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT`]; Kafka's is
    /// 2000).
    pub broker_heartbeat_interval_ms: u64,
}

impl Default for KraftSettings {
    fn default() -> Self {
        KraftSettings {
            controller_role: true,
            controller_listener_name: "CONTROLLER".to_string(),
            controller_listener: None,
            quorum_voters: BTreeMap::new(),
            bootstrap_servers_without_voters: false,
            metadata_log_dir: None,
            broker_session_timeout_ms: BROKER_SESSION_TIMEOUT_MS_DEFAULT,
            broker_heartbeat_interval_ms: BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT,
        }
    }
}

/// The group coordinator's broker settings, with Kafka's defaults except where noted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`, the
    /// `group.initial.rebalance.delay.ms`, `group.max.size`, `offset.metadata.max.bytes`,
    /// `offsets.retention.minutes` (in ms) and `offsets.retention.check.interval.ms`.
    pub coordinator: crate::coordinator::shard::GroupConfig,
    /// `offsets.topic.num.partitions` (50).
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor`: Kafka's default is 3, and a properties file that
    /// does not set it gets 3; the embedded single-node default (no file) uses 1, as Kafka's
    /// own single-node sample configuration does. `__consumer_offsets` is created only once
    /// this many brokers are alive.
    pub offsets_topic_replication_factor: i16,
    /// `offsets.topic.segment.bytes` (100 MiB).
    pub offsets_topic_segment_bytes: i64,
    /// `offsets.commit.timeout.ms` (5000): how long a write to `__consumer_offsets` may take
    /// to become durable before its requests are answered REQUEST_TIMED_OUT.
    pub offsets_commit_timeout_ms: i64,
}

/// Partition replication's settings (Kafka's `replica.*` broker configs, same defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationSettings {
    /// `replica.lag.time.max.ms` (30000): an ISR member not caught up this long leaves it.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms` (500): how long a follower's fetch waits at the leader.
    /// Kafka requires it below `replica.lag.time.max.ms`, so that an idle follower is never
    /// taken for a lagging one.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.max.bytes` (1 MiB): per partition, at least one batch (KIP-74).
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes` (10 MiB): per fetch.
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.backoff.ms` (1000): the pause after a failed fetch.
    pub replica_fetch_backoff_ms: u64,
    /// `replica.socket.timeout.ms` (30000): the longest a follower waits for a fetch answer
    /// beyond the fetch's own wait.
    pub replica_socket_timeout_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms` (5000).
    pub replica_high_watermark_checkpoint_interval_ms: u64,
}

impl Default for ReplicationSettings {
    fn default() -> Self {
        ReplicationSettings {
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_max_bytes: 1 << 20,
            replica_fetch_response_max_bytes: 10 << 20,
            replica_fetch_backoff_ms: 1_000,
            replica_socket_timeout_ms: 30_000,
            replica_high_watermark_checkpoint_interval_ms: 5_000,
        }
    }
}

/// Kafka's default `offsets.topic.replication.factor`.
pub const OFFSETS_TOPIC_REPLICATION_FACTOR_DEFAULT: i16 = 3;

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            coordinator: crate::coordinator::shard::GroupConfig::default(),
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 1,
            offsets_topic_segment_bytes: 100 << 20,
            offsets_commit_timeout_ms: 5_000,
        }
    }
}

/// Deliberately broken options of the broker (no properties key reaches them, all off by
/// default): each plants one small bug that a simulation checker must report, so that every
/// checker is shown to fire (`sim/main.rs`, "planted bugs"). Keep this list growing with
/// every new checker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokerBugs {
    /// Consumer reads on the copying path are bounded by the log end instead of the high
    /// watermark (serving-above-watermark).
    pub read_bound_log_end: bool,
    /// The same on the zero-copy path (`Partition::read_for_send`'s file regions).
    pub zero_copy_read_bound_log_end: bool,
    /// An acknowledgement under sync-before-ack advances the high watermark to the log end,
    /// over other requests' unsynced appends, instead of the durable end (watermark). Also
    /// turns off the partition's own assertion, so that the history checker must catch it.
    pub high_watermark_by_log_end: bool,
    /// On open, the high watermark starts at the checkpointed recovery point instead of the
    /// recovered log end, so it moves back after a restart (watermark).
    pub high_watermark_from_recovery_point: bool,
    /// Reads go on serving what the scrubber found corrupt (corrupt-read).
    pub ignore_scrubber_findings: bool,
    /// A follower keeps the batches its scrubber found corrupt instead of truncating there
    /// and fetching them again (the final ISR member then holds a corrupt record).
    pub follower_keeps_corrupt_batches: bool,
    /// The log's planted bugs (recovery).
    pub log: crate::log::LogBugs,
    /// The group coordinator's planted bugs (the group checkers).
    pub coordinator: crate::coordinator::shard::CoordinatorBugs,
    /// The log cleaner's planted bugs (the compaction and duplicate checkers).
    pub cleaner: crate::log::cleaner::CleanerBugs,
    /// The metadata publisher never takes a leadership away once given, so a fenced broker
    /// goes on serving its partitions (served-while-not-leader).
    pub serve_after_fenced: bool,
    /// The metadata quorum replica's planted bugs (the quorum checker).
    pub raft: crate::raft::core::RaftBugs,
    /// Partition replication's planted bugs (lost-write, watermark, inconsistent-offsets).
    pub replica: crate::replication::replica::ReplicaBugs,
    /// The controller's planted bugs (elections: lost-write).
    pub controller: crate::controller::core::ControllerBugs,
}

/// The default `log.scrubber.bytes.per.second`: 4 MiB/s (see
/// [`BrokerConfig::log_scrubber_bytes_per_second`]).
pub const LOG_SCRUBBER_BYTES_PER_SECOND_DEFAULT: u64 = 4 << 20;

impl Default for BrokerConfig {
    /// The embedded default: one node, data in `./samsa-data`, listening on 127.0.0.1:9092.
    /// Everything else is Kafka 4.0's default except where a field's doc says otherwise.
    fn default() -> Self {
        let listener = Endpoint {
            name: "PLAINTEXT".to_string(),
            host: "127.0.0.1".to_string(),
            port: 9092,
        };
        BrokerConfig {
            node_id: 1,
            listeners: vec![listener.clone()],
            advertised_listeners: vec![listener],
            log_dirs: vec!["./samsa-data".to_string()],
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics_enable: true,
            delete_topic_enable: true,
            unclean_leader_election_enable: false,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            leader_imbalance_per_broker_percentage: 10,
            message_max_bytes: 1_048_588,
            socket_request_max_bytes: crate::protocol::frame::SOCKET_REQUEST_BYTES_MAX_DEFAULT,
            max_connections: 10_000,
            connections_max_idle_ms: 600_000,
            queued_max_requests: 500,
            log_segment_bytes: 1 << 30,
            log_roll_ms: 7 * 24 * 60 * 60 * 1000,
            log_index_interval_bytes: 4096,
            log_index_size_max_bytes: 10 << 20,
            log_flush: FlushPolicy::SyncBeforeAck,
            log_flush_offset_checkpoint_interval_ms: 60_000,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            producer_state_checks: true,
            log_message_timestamp_type: TimestampType::CreateTime,
            log_message_timestamp_before_max_ms: i64::MAX,
            log_message_timestamp_after_max_ms: 3_600_000,
            log_retention_ms: 7 * 24 * HOUR_MS,
            log_retention_bytes: -1,
            log_retention_check_interval_ms: 300_000,
            log_cleanup_policy: CleanupPolicy::Delete,
            log_cleaner_enable: true,
            log_cleaner_threads: 1,
            log_cleaner_backoff_ms: 15_000,
            log_cleaner_dedupe_buffer_size: 128 << 20,
            log_cleaner_io_max_bytes_per_second: 0,
            log_cleaner_min_cleanable_ratio: 0.5,
            log_cleaner_delete_retention_ms: DELETE_RETENTION_MS_DEFAULT,
            log_cleaner_min_compaction_lag_ms: 0,
            log_cleaner_max_compaction_lag_ms: i64::MAX,
            min_insync_replicas: 1,
            compression_type: BrokerCompressionType::Producer,
            compression_levels: CompressionLevels::default(),
            ignored: Vec::new(),
            explicit_keys: BTreeSet::new(),
            explicit_values: BTreeMap::new(),
            max_incremental_fetch_session_cache_slots: 1000,
            log_scrubber_bytes_per_second: LOG_SCRUBBER_BYTES_PER_SECOND_DEFAULT,
            fetch_zero_copy_bytes_min: crate::broker::handlers::fetch::ZERO_COPY_BYTES_MIN,
            groups: GroupSettings::default(),
            replication: ReplicationSettings::default(),
            kraft: KraftSettings::default(),
            bugs: BrokerBugs::default(),
        }
    }
}

/// The effective settings of one topic (Kafka's topic-level config names).
#[derive(Clone, Debug)]
pub struct TopicConfig {
    /// `cleanup.policy` includes `compact`: records without a key are refused.
    pub cleanup_policy_compact: bool,
    /// `cleanup.policy` (`cleanup_policy_compact` is `cleanup_policy.compacts()`).
    pub cleanup_policy: CleanupPolicy,
    /// `max.message.bytes`.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`.
    pub message_timestamp_after_max_ms: i64,
    /// `segment.bytes`.
    pub segment_bytes: u64,
    /// `segment.ms`.
    pub segment_ms: i64,
    /// `index.interval.bytes`.
    pub index_interval_bytes: u64,
    /// `segment.index.bytes`.
    pub segment_index_bytes: u64,
    /// `flush.messages` / `flush.ms`.
    pub flush: FlushPolicy,
    /// `retention.ms`; -1: no limit.
    pub retention_ms: i64,
    /// `retention.bytes`; -1: no limit.
    pub retention_bytes: i64,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `compression.type`: the codec batches are stored with, or `producer`'s.
    pub compression_type: BrokerCompressionType,
    /// `compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level`.
    pub compression_levels: CompressionLevels,
    /// `unclean.leader.election.enable` (kept; a single node never elects).
    pub unclean_leader_election_enable: bool,
    /// `delete.retention.ms`: how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: a segment holding a younger record is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: dirty data this old is cleaned below the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `file.delete.delay.ms`: how long a deleted segment's files linger.
    pub file_delete_delay_ms: i64,
    /// `segment.jitter.ms`.
    pub segment_jitter_ms: i64,
    /// `preallocate` (kept; Samsa does not preallocate segment files).
    pub preallocate: bool,
    /// `message.downconversion.enable` (kept; Samsa serves only the v2 record format, which
    /// every fetch version it supports reads, so it never down-converts).
    pub message_downconversion_enable: bool,
}

/// Why a configuration cannot be used. Every variant names the key or line at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A properties line that cannot be read (1-based line number where it starts).
    Syntax { line: usize, reason: String },
    /// A `--override` argument that is not `key=value`.
    Override { arg: String },
    /// A broker key that is neither recognised nor on [`IGNORED_BROKER_KEYS`].
    UnknownKey { key: String, line: Option<usize> },
    /// A topic-level key Samsa does not know (CreateTopics answers `INVALID_CONFIG`).
    UnknownTopicKey { key: String },
    /// A value outside what the key allows; `allowed` states the range or the choices.
    InvalidValue {
        key: String,
        value: String,
        allowed: String,
        line: Option<usize>,
    },
    /// Two settings that are each valid but contradict each other.
    Conflict { keys: String, reason: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |line: &Option<usize>| match line {
            Some(line) => format!("line {line}: "),
            None => String::new(),
        };
        match self {
            ConfigError::Syntax { line, reason } => write!(f, "line {line}: {reason}"),
            ConfigError::Override { arg } => {
                write!(f, "invalid override '{arg}': expected key=value")
            }
            ConfigError::UnknownKey { key, line } => {
                write!(f, "{}unknown setting '{key}'", at(line))
            }
            ConfigError::UnknownTopicKey { key } => write!(f, "unknown topic config '{key}'"),
            ConfigError::InvalidValue {
                key,
                value,
                allowed,
                line,
            } => write!(
                f,
                "{}invalid value '{value}' for '{key}': {allowed}",
                at(line)
            ),
            ConfigError::Conflict { keys, reason } => write!(f, "{keys}: {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Whitespace as `java.util.Properties` counts it: space, tab and form feed.
fn is_properties_space(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\u{c}'
}

/// Whether a physical line ends in an odd number of backslashes, i.e. continues.
fn continues(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Parses Java-properties text into `(key, value, line)` triples in file order, `line` being
/// the 1-based line where the entry starts. Duplicates are kept; later ones win when applied.
///
/// Follows `java.util.Properties.load`: `#` and `!` start comment lines; a key ends at the
/// first unescaped `=`, `:` or whitespace, after which whitespace and one `=` or `:` are
/// skipped; a line ending in an odd number of backslashes continues on the next line with
/// its leading whitespace dropped; `\t \n \r \f \\ \uXXXX` are escapes and any other escaped
/// character stands for itself. Unlike Java, an invalid `\u` escape, an empty key and a
/// continuation at the end of the text are errors rather than guesses.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String, usize)>, ConfigError> {
    let mut entries = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, raw)) = lines.next() {
        let line_no = index + 1;
        let first = raw.trim_start_matches(is_properties_space);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = first.to_string();
        let mut joined = 0usize;
        while continues(&logical) {
            logical.pop();
            joined += 1;
            if joined > CONTINUATION_LINES_MAX {
                return Err(ConfigError::Syntax {
                    line: line_no,
                    reason: format!(
                        "more than {CONTINUATION_LINES_MAX} continuation lines in one entry"
                    ),
                });
            }
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_properties_space)),
                None => {
                    return Err(ConfigError::Syntax {
                        line: line_no,
                        reason: "line continuation ('\\' at end of line) at end of file".into(),
                    })
                }
            }
        }
        let (raw_key, raw_value) = split_key_value(&logical);
        let key = unescape(raw_key, line_no)?;
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                line: line_no,
                reason: format!("entry without a key: '{logical}'"),
            });
        }
        let value = unescape(raw_value, line_no)?;
        entries.push((key, value, line_no));
    }
    Ok(entries)
}

/// Splits a logical line (leading whitespace already gone) into its raw key and raw value,
/// both still escaped.
fn split_key_value(logical: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = logical.len();
    for (i, c) in logical.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_properties_space(c) {
            key_end = i;
            break;
        }
    }
    let key = &logical[..key_end];
    let rest = logical[key_end..].trim_start_matches(is_properties_space);
    let rest = rest
        .strip_prefix('=')
        .or_else(|| rest.strip_prefix(':'))
        .unwrap_or(rest);
    (key, rest.trim_start_matches(is_properties_space))
}

/// Resolves the escapes of a raw key or value.
fn unescape(raw: &str, line: usize) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    let mut pending_high: Option<u16> = None;
    while let Some(c) = chars.next() {
        if c != '\\' {
            check_no_pending_surrogate(pending_high, line)?;
            pending_high = None;
            out.push(c);
            continue;
        }
        let Some(escaped) = chars.next() else {
            // A lone trailing backslash was consumed as a continuation; an escaped one here
            // can only come from an even run, which pairs up above.
            break;
        };
        if escaped != 'u' {
            check_no_pending_surrogate(pending_high, line)?;
            pending_high = None;
            out.push(match escaped {
                't' => '\t',
                'n' => '\n',
                'r' => '\r',
                'f' => '\u{c}',
                other => other,
            });
            continue;
        }
        let hex: String = chars.by_ref().take(4).collect();
        let unit = (hex.len() == 4)
            .then(|| u16::from_str_radix(&hex, 16).ok())
            .flatten()
            .ok_or_else(|| ConfigError::Syntax {
                line,
                reason: format!("malformed \\uXXXX escape '\\u{hex}'"),
            })?;
        match (pending_high.take(), unit) {
            (None, 0xD800..=0xDBFF) => pending_high = Some(unit),
            (Some(high), 0xDC00..=0xDFFF) => {
                let code =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                match char::from_u32(code) {
                    Some(ch) => out.push(ch),
                    None => {
                        return Err(ConfigError::Syntax {
                            line,
                            reason: format!("invalid surrogate pair \\u{high:04X}\\u{unit:04X}"),
                        })
                    }
                }
            }
            (Some(high), _) => {
                return Err(ConfigError::Syntax {
                    line,
                    reason: format!("unpaired surrogate \\u{high:04X}"),
                })
            }
            (None, _) => match char::from_u32(u32::from(unit)) {
                Some(ch) => out.push(ch),
                None => {
                    return Err(ConfigError::Syntax {
                        line,
                        reason: format!("unpaired surrogate \\u{unit:04X}"),
                    })
                }
            },
        }
    }
    check_no_pending_surrogate(pending_high, line)?;
    Ok(out)
}

fn check_no_pending_surrogate(pending: Option<u16>, line: usize) -> Result<(), ConfigError> {
    match pending {
        Some(high) => Err(ConfigError::Syntax {
            line,
            reason: format!("unpaired surrogate \\u{high:04X}"),
        }),
        None => Ok(()),
    }
}

/// Escapes a key or value so [`parse_properties`] reads it back unchanged.
fn escape(text: &str, is_key: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            // A key ends at these; a value's leading ones would be taken as separators or
            // skipped as whitespace; a key's leading `#`/`!` would make a comment line.
            '=' | ':' | ' ' if is_key || i == 0 => {
                out.push('\\');
                out.push(c);
            }
            '#' | '!' if is_key && i == 0 => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Parses one `--override key=value` argument (split at the first `=`; the key is trimmed).
pub fn parse_override(arg: &str) -> Result<(String, String), ConfigError> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(ConfigError::Override {
            arg: arg.to_string(),
        }),
    }
}

/// Serialises per-topic overrides as properties text, one `key=value` line each in key
/// order, for persisting next to the topic's metadata.
pub fn encode_overrides(overrides: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (key, value) in overrides {
        out.push_str(&escape(key, true));
        out.push('=');
        out.push_str(&escape(value, false));
        out.push('\n');
    }
    out
}

/// Reads back what [`encode_overrides`] wrote (any properties text; a later duplicate wins).
pub fn decode_overrides(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    Ok(parse_properties(text)?
        .into_iter()
        .map(|(key, value, _)| (key, value))
        .collect())
}

/// Settings from a file's `(key, value, line)` entries and `--override`s, overrides winning
/// and later entries winning over earlier ones: key -> (value, line in the file, `None` for
/// an override).
pub fn merge_settings(
    pairs: &[(String, String, usize)],
    overrides: &[(String, String)],
) -> BTreeMap<String, (String, Option<usize>)> {
    let mut values = BTreeMap::new();
    for (key, value, line) in pairs {
        values.insert(key.clone(), (value.clone(), Some(*line)));
    }
    for (key, value) in overrides {
        values.insert(key.clone(), (value.clone(), None));
    }
    values
}

/// Keys of Kafka's stock KRaft `server.properties` (and a few other common broker keys) that
/// Samsa accepts so such a file loads, but does not act on yet. [`BrokerConfig::ignored_keys`]
/// lists the ones a configuration actually set, for the broker to warn about.
pub const IGNORED_BROKER_KEYS: &[&str] = &[
    "inter.broker.listener.name",
    "listener.security.protocol.map",
    "num.network.threads",
    "num.io.threads",
    "num.replica.fetchers",
    "background.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "socket.listen.backlog.size",
    "num.recovery.threads.per.data.dir",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.num.partitions",
];

/// Broker keys Samsa acts on (besides aliases handled with them).
pub const RECOGNISED_BROKER_KEYS: &[&str] = &[
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "metadata.log.dir",
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "node.id",
    "broker.id",
    "listeners",
    "advertised.listeners",
    "controller.listener.names",
    "log.dirs",
    "log.dir",
    "num.partitions",
    "default.replication.factor",
    "auto.create.topics.enable",
    "delete.topic.enable",
    "unclean.leader.election.enable",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage",
    "message.max.bytes",
    "socket.request.max.bytes",
    "max.connections",
    "connections.max.idle.ms",
    "queued.max.requests",
    "log.segment.bytes",
    "log.roll.ms",
    "log.roll.hours",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.flush.offset.checkpoint.interval.ms",
    "producer.id.expiration.ms",
    "producer.id.expiration.check.interval.ms",
    "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.cleanup.policy",
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "min.insync.replicas",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "max.incremental.fetch.session.cache.slots",
    "log.scrubber.bytes.per.second",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.size",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "offset.metadata.max.bytes",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offsets.commit.timeout.ms",
    "replica.lag.time.max.ms",
    "replica.fetch.wait.max.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.backoff.ms",
    "replica.socket.timeout.ms",
    "replica.high.watermark.checkpoint.interval.ms",
];

/// The largest `max.incremental.fetch.session.cache.slots` accepted: each session holds the
/// state of its partitions.
pub const FETCH_SESSION_CACHE_SLOTS_MAX: usize = 1 << 20;

/// The merged settings of a file and its overrides, consumed key by key.
struct Settings {
    /// key -> (value, line in the file; `None` for an override).
    values: BTreeMap<String, (String, Option<usize>)>,
}

impl Settings {
    fn get(&self, key: &str) -> Option<(&str, Option<usize>)> {
        self.values.get(key).map(|(v, line)| (v.trim(), *line))
    }

    fn invalid(&self, key: &str, allowed: impl Into<String>) -> ConfigError {
        let (value, line) = self.get(key).unwrap_or(("", None));
        ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            allowed: allowed.into(),
            line,
        }
    }

    /// An integer setting within `[min, max]`, or `None` when unset.
    fn int(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, ConfigError> {
        let Some((value, _)) = self.get(key) else {
            return Ok(None);
        };
        match value.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(self.invalid(key, format!("must be an integer in [{min}, {max}]"))),
        }
    }

    /// `compression.type`, or `None` when unset.
    fn compression_type(&self, key: &str) -> Result<Option<BrokerCompressionType>, ConfigError> {
        let Some((value, _)) = self.get(key) else {
            return Ok(None);
        };
        BrokerCompressionType::parse(value)
            .map(Some)
            .ok_or_else(|| self.invalid(key, BrokerCompressionType::ALLOWED))
    }

    /// The three level keys of KIP-390 (each the same name at topic and broker level) over
    /// `levels`, each checked against the range Kafka allows for its codec.
    fn compression_levels(&self, levels: &mut CompressionLevels) -> Result<(), ConfigError> {
        for (key, codec, level, allowed) in [
            (
                "compression.gzip.level",
                Compression::Gzip,
                &mut levels.gzip,
                "must be an integer in [1, 9] or -1",
            ),
            (
                "compression.lz4.level",
                Compression::Lz4,
                &mut levels.lz4,
                "must be an integer in [1, 17]",
            ),
            (
                "compression.zstd.level",
                Compression::Zstd,
                &mut levels.zstd,
                "must be an integer in [-131072, 22]",
            ),
        ] {
            let Some((value, _)) = self.get(key) else {
                continue;
            };
            *level = value
                .parse::<i32>()
                .ok()
                .filter(|&n| compression::level_allowed(codec, n))
                .ok_or_else(|| self.invalid(key, allowed))?;
        }
        Ok(())
    }

    /// A decimal setting within `[min, max]`, or `None` when unset.
    fn float(&self, key: &str, min: f64, max: f64) -> Result<Option<f64>, ConfigError> {
        let Some((value, _)) = self.get(key) else {
            return Ok(None);
        };
        match value.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(self.invalid(key, format!("must be a number in [{min}, {max}]"))),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        let Some((value, _)) = self.get(key) else {
            return Ok(None);
        };
        parse_bool(value)
            .map(Some)
            .ok_or_else(|| self.invalid(key, "must be true or false"))
    }
}

/// Kafka's boolean parsing: `true` or `false`, case-insensitive (the controller's topic and
/// cluster configs too).
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

fn parse_timestamp_type(value: &str) -> Option<TimestampType> {
    match value {
        "CreateTime" => Some(TimestampType::CreateTime),
        "LogAppendTime" => Some(TimestampType::LogAppendTime),
        _ => None,
    }
}

/// Converts a range-checked non-negative integer.
fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn to_usize(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// Parses a `listeners`-style list: comma-separated `NAME://host:port`, host possibly empty
/// (every interface) or a bracketed IPv6 address. Listener names are case-insensitive in
/// Kafka and kept upper-case here.
fn parse_endpoints(key: &str, settings: &Settings) -> Result<Vec<Endpoint>, ConfigError> {
    let allowed = "must be a comma-separated list of NAME://host:port with port in [0, 65535] \
                   and distinct names";
    let (value, _) = settings.get(key).unwrap_or(("", None));
    let mut endpoints: Vec<Endpoint> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let endpoint = parse_endpoint(item).ok_or_else(|| settings.invalid(key, allowed))?;
        if endpoints.iter().any(|e| e.name == endpoint.name) {
            return Err(settings.invalid(key, allowed));
        }
        endpoints.push(endpoint);
    }
    if endpoints.is_empty() {
        return Err(settings.invalid(key, allowed));
    }
    Ok(endpoints)
}

pub fn parse_endpoint(item: &str) -> Option<Endpoint> {
    let (name, address) = item.split_once("://")?;
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return None;
    }
    let (host, port) = address.rsplit_once(':')?;
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner.strip_suffix(']').is_some_and(|ip| !ip.is_empty())
    } else {
        !host.contains([':', '/', '[', ']', ' '])
    };
    if !host_ok || port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(Endpoint {
        name: name.to_ascii_uppercase(),
        host: host.to_string(),
        port: port.parse::<u16>().ok()?,
    })
}

/// Whether a host means "every interface", which cannot be advertised to clients.
fn is_wildcard_host(host: &str) -> bool {
    host.is_empty() || host == "0.0.0.0" || host == "[::]"
}

impl BrokerConfig {
    /// Reads a `server.properties` text (if any) and applies `--override`s on top.
    pub fn load(file: Option<&str>, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        let pairs = match file {
            Some(text) => parse_properties(text)?,
            None => Vec::new(),
        };
        let mut config = BrokerConfig::from_properties(&pairs, overrides)?;
        // Kafka's default replication factor for `__consumer_offsets` holds for a
        // configuration file; only the embedded default (no file) is a one-node cluster.
        let key = "offsets.topic.replication.factor";
        if file.is_some() && !config.explicit_keys.contains(key) {
            config.groups.offsets_topic_replication_factor =
                OFFSETS_TOPIC_REPLICATION_FACTOR_DEFAULT;
        }
        Ok(config)
    }

    /// Builds the configuration from parsed `(key, value, line)` entries and overrides
    /// (which win over the file; later entries win over earlier ones). Unset keys keep the
    /// embedded default ([`BrokerConfig::default`]).
    pub fn from_properties(
        pairs: &[(String, String, usize)],
        overrides: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let values = merge_settings(pairs, overrides);
        let mut ignored = Vec::new();
        for (key, (_, line)) in &values {
            if IGNORED_BROKER_KEYS.contains(&key.as_str()) {
                ignored.push(key.clone());
            } else if !RECOGNISED_BROKER_KEYS.contains(&key.as_str()) {
                return Err(ConfigError::UnknownKey {
                    key: key.clone(),
                    line: *line,
                });
            }
        }
        let s = Settings { values };
        let mut c = BrokerConfig {
            explicit_keys: s
                .values
                .keys()
                .filter(|k| RECOGNISED_BROKER_KEYS.contains(&k.as_str()))
                .cloned()
                .collect(),
            explicit_values: s
                .values
                .iter()
                .filter(|(k, _)| RECOGNISED_BROKER_KEYS.contains(&k.as_str()))
                .map(|(k, (v, _))| (k.clone(), v.trim().to_string()))
                .collect(),
            ignored,
            ..BrokerConfig::default()
        };
        c.apply(&s)?;
        Ok(c)
    }

    /// This configuration with dynamic broker configs (`key -> value`, keys already checked
    /// to be dynamic ones) layered on top, as Kafka layers its dynamic configs over
    /// `server.properties`. Keys of an alias group (`log.retention.ms/minutes/hours`,
    /// `log.roll.ms/hours`, the two flush keys) are resolved together with the static members
    /// of the group, so a dynamic `log.retention.hours` does not override a static
    /// `log.retention.ms`, which takes precedence in Kafka too.
    pub fn with_dynamic(&self, dynamic: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        const GROUPS: &[&[&str]] = &[
            &[
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
            ],
            &["log.roll.ms", "log.roll.hours"],
            &["log.flush.interval.messages", "log.flush.interval.ms"],
        ];
        let mut values: BTreeMap<String, (String, Option<usize>)> = BTreeMap::new();
        for group in GROUPS {
            if group.iter().any(|k| dynamic.contains_key(*k)) {
                for key in group.iter() {
                    if let Some(value) = self.explicit_values.get(*key) {
                        values.insert(key.to_string(), (value.clone(), None));
                    }
                }
            }
        }
        for (key, value) in dynamic {
            values.insert(key.clone(), (value.clone(), None));
        }
        let s = Settings { values };
        let mut c = self.clone();
        c.apply(&s)?;
        // Only dynamic keys are applied, but `apply` re-derives the advertised listeners when
        // none are set in `s`; the node's identity and endpoints never change dynamically.
        c.listeners = self.listeners.clone();
        c.advertised_listeners = self.advertised_listeners.clone();
        c.node_id = self.node_id;
        c.log_dirs = self.log_dirs.clone();
        for (key, value) in dynamic {
            c.explicit_keys.insert(key.clone());
            c.explicit_values
                .insert(key.clone(), value.trim().to_string());
        }
        Ok(c)
    }

    /// Applies the keys present in `s` over `self` (absent keys keep their current value).
    fn apply(&mut self, s: &Settings) -> Result<(), ConfigError> {
        let c = self;
        // node.id, with broker.id as its older alias; both set means both must agree.
        let node_id = s.int("node.id", 0, i64::from(i32::MAX))?;
        let broker_id = s.int("broker.id", 0, i64::from(i32::MAX))?;
        if let (Some(a), Some(b)) = (node_id, broker_id) {
            if a != b {
                return Err(ConfigError::Conflict {
                    keys: "node.id, broker.id".into(),
                    reason: format!("node.id={a} and broker.id={b} disagree"),
                });
            }
        }
        if let Some(id) = node_id.or(broker_id) {
            c.node_id = i32::try_from(id).unwrap_or(c.node_id);
        }

        c.apply_listeners(s)?;
        c.apply_kraft(s)?;

        // log.dirs wins over log.dir, as in Kafka.
        let dirs_key = if s.get("log.dirs").is_some() {
            Some("log.dirs")
        } else if s.get("log.dir").is_some() {
            Some("log.dir")
        } else {
            None
        };
        if let Some(key) = dirs_key {
            let (value, _) = s.get(key).unwrap_or(("", None));
            let dirs: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect();
            if dirs.len() != 1 {
                return Err(s.invalid(key, "exactly one directory is supported for now"));
            }
            c.log_dirs = dirs;
        }

        let i32_max = i64::from(i32::MAX);
        if let Some(n) = s.int("num.partitions", 1, i32_max)? {
            c.num_partitions = i32::try_from(n).unwrap_or(c.num_partitions);
        }
        if let Some(n) = s.int("default.replication.factor", 1, i64::from(i16::MAX))? {
            c.default_replication_factor = i16::try_from(n).unwrap_or(1);
        }
        if let Some(b) = s.bool("auto.create.topics.enable")? {
            c.auto_create_topics_enable = b;
        }
        if let Some(b) = s.bool("delete.topic.enable")? {
            c.delete_topic_enable = b;
        }
        if let Some(b) = s.bool("unclean.leader.election.enable")? {
            c.unclean_leader_election_enable = b;
        }
        if let Some(b) = s.bool("auto.leader.rebalance.enable")? {
            c.auto_leader_rebalance_enable = b;
        }
        if let Some(n) = s.int(
            "leader.imbalance.check.interval.seconds",
            1,
            i64::from(i32::MAX),
        )? {
            c.leader_imbalance_check_interval_ms = n.unsigned_abs() * 1_000;
        }
        if let Some(n) = s.int("leader.imbalance.per.broker.percentage", 0, 100)? {
            c.leader_imbalance_per_broker_percentage = u32::try_from(n).unwrap_or(10);
        }
        let request_max = SOCKET_REQUEST_MAX_BYTES_MAX as i64;
        if let Some(n) = s.int("socket.request.max.bytes", 1, request_max)? {
            c.socket_request_max_bytes = to_usize(n);
        }
        if let Some(n) = s.int("message.max.bytes", 0, i32_max)? {
            c.message_max_bytes = to_usize(n);
        }
        if c.message_max_bytes > c.socket_request_max_bytes {
            return Err(ConfigError::Conflict {
                keys: "message.max.bytes, socket.request.max.bytes".into(),
                reason: format!(
                    "message.max.bytes ({}) exceeds socket.request.max.bytes ({}): such a \
                     batch could never arrive",
                    c.message_max_bytes, c.socket_request_max_bytes
                ),
            });
        }
        if let Some(n) = s.int("max.connections", 0, MAX_CONNECTIONS_MAX as i64)? {
            c.max_connections = to_usize(n);
        }
        if let Some(n) = s.int("connections.max.idle.ms", 1, i64::MAX)? {
            c.connections_max_idle_ms = to_u64(n);
        }
        if let Some(n) = s.int("queued.max.requests", 1, QUEUED_MAX_REQUESTS_MAX as i64)? {
            c.queued_max_requests = to_usize(n);
        }
        if let Some(n) = s.int(
            "log.segment.bytes",
            SEGMENT_BYTES_MIN as i64,
            SEGMENT_BYTES_MAX as i64,
        )? {
            c.log_segment_bytes = to_u64(n);
        }
        // log.roll.ms wins over log.roll.hours, as in Kafka.
        let roll_hours = s.int("log.roll.hours", 1, i32_max)?;
        if let Some(ms) = s.int("log.roll.ms", 1, i64::MAX)? {
            c.log_roll_ms = ms;
        } else if let Some(hours) = roll_hours {
            c.log_roll_ms = hours * HOUR_MS;
        }
        if let Some(n) = s.int("log.index.interval.bytes", 1, i32_max)? {
            c.log_index_interval_bytes = to_u64(n);
        }
        if let Some(n) = s.int(
            "log.index.size.max.bytes",
            INDEX_ENTRY_BYTES as i64,
            i32_max,
        )? {
            c.log_index_size_max_bytes = to_u64(n);
        }
        let flush_messages = s.int("log.flush.interval.messages", 1, i64::MAX)?;
        let flush_ms = s.int("log.flush.interval.ms", 1, i64::MAX)?;
        if flush_messages.is_some() || flush_ms.is_some() {
            c.log_flush = FlushPolicy::PageCache {
                flush_messages: to_u64(flush_messages.unwrap_or(KAFKA_LONG_MAX)),
                flush_ms: to_u64(flush_ms.unwrap_or(KAFKA_LONG_MAX)),
            };
        }
        if let Some(n) = s.int("log.flush.offset.checkpoint.interval.ms", 1, i32_max)? {
            c.log_flush_offset_checkpoint_interval_ms = to_u64(n);
        }
        // Both are Kafka int configs with a minimum of 1.
        if let Some(n) = s.int("producer.id.expiration.ms", 1, i32_max)? {
            c.producer_id_expiration_ms = n;
        }
        if let Some(n) = s.int("producer.id.expiration.check.interval.ms", 1, i32_max)? {
            c.producer_id_expiration_check_interval_ms = to_u64(n);
        }
        if let Some((value, _)) = s.get("log.message.timestamp.type") {
            c.log_message_timestamp_type = parse_timestamp_type(value).ok_or_else(|| {
                s.invalid(
                    "log.message.timestamp.type",
                    "must be CreateTime or LogAppendTime",
                )
            })?;
        }
        if let Some(n) = s.int("log.message.timestamp.before.max.ms", 0, i64::MAX)? {
            c.log_message_timestamp_before_max_ms = n;
        }
        if let Some(n) = s.int("log.message.timestamp.after.max.ms", 0, i64::MAX)? {
            c.log_message_timestamp_after_max_ms = n;
        }
        // Retention: log.retention.ms wins over .minutes, which wins over .hours; -1 (or
        // any negative ms value, as Kafka) means no time limit.
        let retention_hours = s.int("log.retention.hours", -1, i32_max)?;
        let retention_minutes = s.int("log.retention.minutes", -1, i32_max)?;
        if let Some(ms) = s.int("log.retention.ms", -1, i64::MAX)? {
            c.log_retention_ms = ms;
        } else if let Some(minutes) = retention_minutes {
            c.log_retention_ms = if minutes < 0 { -1 } else { minutes * MINUTE_MS };
        } else if let Some(hours) = retention_hours {
            c.log_retention_ms = if hours < 0 { -1 } else { hours * HOUR_MS };
        }
        if let Some(n) = s.int("log.retention.bytes", -1, i64::MAX)? {
            c.log_retention_bytes = n;
        }
        if let Some(n) = s.int("log.retention.check.interval.ms", 1, i64::MAX)? {
            c.log_retention_check_interval_ms = to_u64(n);
        }
        if let Some((value, _)) = s.get("log.cleanup.policy") {
            c.log_cleanup_policy = CleanupPolicy::parse(value)
                .ok_or_else(|| s.invalid("log.cleanup.policy", CleanupPolicy::ALLOWED))?;
        }
        if let Some(b) = s.bool("log.cleaner.enable")? {
            c.log_cleaner_enable = b;
        }
        if let Some(n) = s.int("log.cleaner.threads", 1, LOG_CLEANER_THREADS_MAX as i64)? {
            c.log_cleaner_threads = to_usize(n);
        }
        if let Some(n) = s.int("log.cleaner.backoff.ms", 1, i64::MAX)? {
            c.log_cleaner_backoff_ms = to_u64(n);
        }
        if let Some(n) = s.int(
            "log.cleaner.dedupe.buffer.size",
            crate::log::cleaner::DEDUPE_BUFFER_BYTES_MIN as i64,
            i64::MAX,
        )? {
            c.log_cleaner_dedupe_buffer_size = to_u64(n);
        }
        if let Some(x) = s.float("log.cleaner.io.max.bytes.per.second", 1.0, f64::MAX)? {
            // Kafka's default, Double.MAX_VALUE, means no limit.
            c.log_cleaner_io_max_bytes_per_second = if x >= u64::MAX as f64 { 0 } else { x as u64 };
        }
        if let Some(x) = s.float("log.cleaner.min.cleanable.ratio", 0.0, 1.0)? {
            c.log_cleaner_min_cleanable_ratio = x;
        }
        if let Some(n) = s.int("log.cleaner.delete.retention.ms", 0, i64::MAX)? {
            c.log_cleaner_delete_retention_ms = n;
        }
        if let Some(n) = s.int("log.cleaner.min.compaction.lag.ms", 0, i64::MAX)? {
            c.log_cleaner_min_compaction_lag_ms = n;
        }
        if let Some(n) = s.int("log.cleaner.max.compaction.lag.ms", 1, i64::MAX)? {
            c.log_cleaner_max_compaction_lag_ms = n;
        }
        if let Some(n) = s.int("min.insync.replicas", 1, i32_max)? {
            c.min_insync_replicas = i32::try_from(n).unwrap_or(1);
        }
        if let Some(t) = s.compression_type("compression.type")? {
            c.compression_type = t;
        }
        s.compression_levels(&mut c.compression_levels)?;
        if let Some(n) = s.int(
            "max.incremental.fetch.session.cache.slots",
            0,
            FETCH_SESSION_CACHE_SLOTS_MAX as i64,
        )? {
            c.max_incremental_fetch_session_cache_slots = to_usize(n);
        }
        if let Some(n) = s.int("log.scrubber.bytes.per.second", 0, i64::MAX)? {
            c.log_scrubber_bytes_per_second = to_u64(n);
        }
        c.apply_groups(s)?;
        c.apply_replication(s)?;
        Ok(())
    }

    /// The `replica.*` keys (Kafka's ranges: the times at least 1 ms, the byte limits at
    /// least 1, and the fetch wait below the lag time).
    fn apply_replication(&mut self, s: &Settings) -> Result<(), ConfigError> {
        let i32_max = i64::from(i32::MAX);
        let r = &mut self.replication;
        if let Some(n) = s.int("replica.lag.time.max.ms", 1, i32_max)? {
            r.replica_lag_time_max_ms = n.unsigned_abs();
        }
        if let Some(n) = s.int("replica.fetch.wait.max.ms", 1, i32_max)? {
            r.replica_fetch_wait_max_ms = n.unsigned_abs();
        }
        if let Some(n) = s.int("replica.fetch.max.bytes", 1, i32_max)? {
            r.replica_fetch_max_bytes = i32::try_from(n).unwrap_or(i32::MAX);
        }
        if let Some(n) = s.int("replica.fetch.response.max.bytes", 1, i32_max)? {
            r.replica_fetch_response_max_bytes = i32::try_from(n).unwrap_or(i32::MAX);
        }
        if let Some(n) = s.int("replica.fetch.backoff.ms", 1, i32_max)? {
            r.replica_fetch_backoff_ms = n.unsigned_abs();
        }
        if let Some(n) = s.int("replica.socket.timeout.ms", 1, i32_max)? {
            r.replica_socket_timeout_ms = n.unsigned_abs();
        }
        if let Some(n) = s.int("replica.high.watermark.checkpoint.interval.ms", 1, i32_max)? {
            r.replica_high_watermark_checkpoint_interval_ms = n.unsigned_abs();
        }
        if r.replica_fetch_wait_max_ms >= r.replica_lag_time_max_ms {
            return Err(ConfigError::Conflict {
                keys: "replica.fetch.wait.max.ms, replica.lag.time.max.ms".into(),
                reason: format!(
                    "the fetch wait {} ms must be below the lag time {} ms",
                    r.replica_fetch_wait_max_ms, r.replica_lag_time_max_ms
                ),
            });
        }
        Ok(())
    }

    /// The group coordinator's keys (Kafka's ranges: each must be at least 1, the session
    /// bounds and the rebalance delay at least 0, and min <= max).
    fn apply_groups(&mut self, s: &Settings) -> Result<(), ConfigError> {
        let i32_max = i64::from(i32::MAX);
        let g = &mut self.groups;
        let to_i32 = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
        if let Some(n) = s.int("group.min.session.timeout.ms", 0, i32_max)? {
            g.coordinator.min_session_timeout_ms = to_i32(n);
        }
        if let Some(n) = s.int("group.max.session.timeout.ms", 0, i32_max)? {
            g.coordinator.max_session_timeout_ms = to_i32(n);
        }
        if g.coordinator.min_session_timeout_ms > g.coordinator.max_session_timeout_ms {
            return Err(ConfigError::Conflict {
                keys: "group.min.session.timeout.ms, group.max.session.timeout.ms".to_string(),
                reason: format!(
                    "the minimum session timeout ({} ms) exceeds the maximum ({} ms)",
                    g.coordinator.min_session_timeout_ms, g.coordinator.max_session_timeout_ms
                ),
            });
        }
        if let Some(n) = s.int("group.initial.rebalance.delay.ms", 0, i32_max)? {
            g.coordinator.initial_rebalance_delay_ms = to_i32(n);
        }
        if let Some(n) = s.int("group.max.size", 1, i32_max)? {
            g.coordinator.max_size = to_i32(n);
        }
        if let Some(n) = s.int("offset.metadata.max.bytes", 0, i32_max)? {
            g.coordinator.offset_metadata_max_bytes = to_i32(n);
        }
        if let Some(n) = s.int("offsets.retention.minutes", 1, i32_max)? {
            g.coordinator.offsets_retention_ms = n * MINUTE_MS;
        }
        if let Some(n) = s.int("offsets.retention.check.interval.ms", 1, i64::MAX)? {
            g.coordinator.offsets_retention_check_interval_ms = n;
        }
        if let Some(n) = s.int("offsets.topic.num.partitions", 1, 10_000)? {
            g.offsets_topic_num_partitions = to_i32(n);
        }
        if let Some(n) = s.int("offsets.topic.replication.factor", 1, i64::from(i16::MAX))? {
            g.offsets_topic_replication_factor = i16::try_from(n).unwrap_or(i16::MAX);
        }
        if let Some(n) = s.int("offsets.topic.segment.bytes", 1, i64::from(i32::MAX))? {
            g.offsets_topic_segment_bytes = n;
        }
        if let Some(n) = s.int("offsets.commit.timeout.ms", 1, i32_max)? {
            g.offsets_commit_timeout_ms = n;
        }
        Ok(())
    }

    /// `process.roles`, `controller.quorum.*`, `metadata.log.dir` and the broker's session
    /// and heartbeat timings.
    fn apply_kraft(&mut self, s: &Settings) -> Result<(), ConfigError> {
        let node_id = self.node_id;
        let k = &mut self.kraft;
        if let Some((roles, _)) = s.get("process.roles") {
            let mut roles: Vec<String> = roles
                .split(',')
                .map(|r| r.trim().to_ascii_lowercase())
                .filter(|r| !r.is_empty())
                .collect();
            roles.sort();
            roles.dedup();
            match roles
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
            {
                ["broker", "controller"] => k.controller_role = true,
                ["controller"] => {
                    return Err(s.invalid(
                        "process.roles",
                        "is `controller` alone: run it with `samsa controller`",
                    ))
                }
                ["broker"] => {
                    return Err(s.invalid(
                        "process.roles",
                        "must be `broker,controller` for now (a broker without a controller \
                         of its own joins a separate quorum from step 10 on)",
                    ))
                }
                _ => {
                    return Err(s.invalid(
                        "process.roles",
                        "must be `broker,controller` (or `controller` for `samsa controller`)",
                    ))
                }
            }
        }
        if let Some((voters, _)) = s.get("controller.quorum.voters") {
            let voters = crate::raft::driver::parse_voters(voters)
                .map_err(|reason| s.invalid("controller.quorum.voters", reason))?;
            k.quorum_voters = voters;
        }
        // Several voters: each a combined node (step 10), this one among them.
        if !k.quorum_voters.is_empty() && !k.quorum_voters.contains_key(&node_id) {
            return Err(ConfigError::Conflict {
                keys: "node.id, controller.quorum.voters".into(),
                reason: format!(
                    "node {} is not among the voters {:?}",
                    node_id,
                    k.quorum_voters.keys().collect::<Vec<_>>()
                ),
            });
        }
        k.bootstrap_servers_without_voters =
            k.quorum_voters.is_empty() && s.get("controller.quorum.bootstrap.servers").is_some();
        if let Some((dir, _)) = s.get("metadata.log.dir") {
            let dir = dir.trim();
            k.metadata_log_dir = (!dir.is_empty()).then(|| dir.to_string());
        }
        if let Some(n) = s.int("broker.session.timeout.ms", 1, i64::from(i32::MAX))? {
            k.broker_session_timeout_ms = n.unsigned_abs();
        }
        if let Some(n) = s.int("broker.heartbeat.interval.ms", 1, i64::from(i32::MAX))? {
            k.broker_heartbeat_interval_ms = n.unsigned_abs();
        }
        if k.broker_heartbeat_interval_ms >= k.broker_session_timeout_ms {
            return Err(ConfigError::Conflict {
                keys: "broker.heartbeat.interval.ms, broker.session.timeout.ms".into(),
                reason: format!(
                    "the heartbeat interval {} ms must be below the session timeout {} ms",
                    k.broker_heartbeat_interval_ms, k.broker_session_timeout_ms
                ),
            });
        }
        Ok(())
    }

    /// `listeners`, `advertised.listeners` and `controller.listener.names`.
    fn apply_listeners(&mut self, s: &Settings) -> Result<(), ConfigError> {
        // Samsa runs no KRaft controller: the controller listeners of a combined-mode file
        // are dropped rather than bound.
        let controller_names: BTreeSet<String> = s
            .get("controller.listener.names")
            .map(|(v, _)| {
                v.split(',')
                    .map(|n| n.trim().to_ascii_uppercase())
                    .filter(|n| !n.is_empty())
                    .collect()
            })
            .unwrap_or_else(|| BTreeSet::from(["CONTROLLER".to_string()]));
        let not_controller = |e: &Endpoint| !controller_names.contains(&e.name);
        if let Some(first) = s.get("controller.listener.names").and_then(|(v, _)| {
            v.split(',')
                .map(|n| n.trim().to_ascii_uppercase())
                .find(|n| !n.is_empty())
        }) {
            self.kraft.controller_listener_name = first;
        }
        if s.get("listeners").is_some() {
            let name = self.kraft.controller_listener_name.clone();
            self.kraft.controller_listener = parse_endpoints("listeners", s)?
                .into_iter()
                .find(|e| e.name == name)
                .map(|mut e| {
                    if e.host.is_empty() {
                        e.host = "0.0.0.0".to_string();
                    }
                    e
                });
            let mut listeners: Vec<Endpoint> = parse_endpoints("listeners", s)?
                .into_iter()
                .filter(not_controller)
                .collect();
            if listeners.is_empty() {
                return Err(s.invalid(
                    "listeners",
                    "needs a listener besides those in controller.listener.names",
                ));
            }
            // An empty host binds every interface, as Kafka's `PLAINTEXT://:9092`.
            for listener in &mut listeners {
                if listener.host.is_empty() {
                    listener.host = "0.0.0.0".to_string();
                }
            }
            self.listeners = listeners;
        }
        if s.get("advertised.listeners").is_some() {
            let advertised: Vec<Endpoint> = parse_endpoints("advertised.listeners", s)?
                .into_iter()
                .filter(not_controller)
                .collect();
            for endpoint in &advertised {
                if is_wildcard_host(&endpoint.host) {
                    return Err(s.invalid(
                        "advertised.listeners",
                        format!(
                            "listener {} has host '{}', which clients cannot connect to: \
                             advertise a host name or address",
                            endpoint.name, endpoint.host
                        ),
                    ));
                }
                if !self.listeners.iter().any(|l| l.name == endpoint.name) {
                    return Err(s.invalid(
                        "advertised.listeners",
                        format!("listener {} is not in listeners", endpoint.name),
                    ));
                }
            }
            self.advertised_listeners = advertised;
        } else {
            if let Some(l) = self.listeners.iter().find(|l| is_wildcard_host(&l.host)) {
                return Err(ConfigError::Conflict {
                    keys: "advertised.listeners".into(),
                    reason: format!(
                        "unset, so it defaults to listeners, but listener {} binds every \
                         interface (host '{}'), which cannot be advertised: set \
                         advertised.listeners",
                        l.name, l.host
                    ),
                });
            }
            self.advertised_listeners = self.listeners.clone();
        }
        Ok(())
    }

    /// The keys this configuration set that Samsa accepts but does not use yet (see
    /// [`IGNORED_BROKER_KEYS`]), sorted; the broker logs a warning for each.
    pub fn ignored_keys(&self) -> &[String] {
        &self.ignored
    }

    /// Whether the configuration set `key` (a file line or an override).
    pub fn sets(&self, key: &str) -> bool {
        self.explicit_keys.contains(key)
    }

    /// The one data directory (`log.dirs`).
    pub fn log_dir(&self) -> &str {
        self.log_dirs.first().map(String::as_str).unwrap_or("")
    }

    /// The broker key that set a setting explicitly, among `keys` in precedence order.
    fn explicit_synonym(&self, keys: &[&'static str]) -> Option<&'static str> {
        keys.iter()
            .copied()
            .find(|k| self.explicit_keys.contains(*k))
    }
}

const MINUTE_MS: i64 = 60 * 1000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// `cleanup.policy` / `log.cleanup.policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// `delete`: old segments are removed by retention (Kafka's default).
    Delete,
    /// `compact`: only the latest record per key is kept; keyless records are refused.
    Compact,
    /// `compact,delete` (either order): compaction plus retention.
    CompactDelete,
}

impl CleanupPolicy {
    const ALLOWED: &'static str = "must be delete, compact, or both comma-separated";

    pub fn parse(value: &str) -> Option<CleanupPolicy> {
        let mut delete = false;
        let mut compact = false;
        for item in value.split(',').map(str::trim) {
            match item {
                "delete" if !delete => delete = true,
                "compact" if !compact => compact = true,
                _ => return None,
            }
        }
        match (delete, compact) {
            (true, false) => Some(CleanupPolicy::Delete),
            (false, true) => Some(CleanupPolicy::Compact),
            (true, true) => Some(CleanupPolicy::CompactDelete),
            (false, false) => None,
        }
    }

    /// Kafka's spelling of the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }

    pub fn compacts(self) -> bool {
        self != CleanupPolicy::Delete
    }

    pub fn deletes(self) -> bool {
        self != CleanupPolicy::Compact
    }
}

/// `compression.type` of a topic or the broker's topic default: Kafka's
/// `BrokerCompressionType`, whose names Kafka checks case-sensitively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerCompressionType {
    /// `uncompressed`: batches are stored uncompressed (a compressed one is decompressed).
    Uncompressed,
    Zstd,
    Lz4,
    Snappy,
    Gzip,
    /// `producer` (the default): batches are stored in the codec the producer chose.
    Producer,
}

impl BrokerCompressionType {
    const ALLOWED: &'static str = "must be one of uncompressed, zstd, lz4, snappy, gzip, producer";

    pub fn parse(value: &str) -> Option<BrokerCompressionType> {
        Some(match value {
            "uncompressed" => BrokerCompressionType::Uncompressed,
            "zstd" => BrokerCompressionType::Zstd,
            "lz4" => BrokerCompressionType::Lz4,
            "snappy" => BrokerCompressionType::Snappy,
            "gzip" => BrokerCompressionType::Gzip,
            "producer" => BrokerCompressionType::Producer,
            _ => return None,
        })
    }

    /// Kafka's spelling of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            BrokerCompressionType::Uncompressed => "uncompressed",
            BrokerCompressionType::Zstd => "zstd",
            BrokerCompressionType::Lz4 => "lz4",
            BrokerCompressionType::Snappy => "snappy",
            BrokerCompressionType::Gzip => "gzip",
            BrokerCompressionType::Producer => "producer",
        }
    }

    /// The codec stored batches have, or `None` for `producer` (whatever the producer chose).
    pub fn codec(self) -> Option<Compression> {
        match self {
            BrokerCompressionType::Uncompressed => Some(Compression::None),
            BrokerCompressionType::Zstd => Some(Compression::Zstd),
            BrokerCompressionType::Lz4 => Some(Compression::Lz4),
            BrokerCompressionType::Snappy => Some(Compression::Snappy),
            BrokerCompressionType::Gzip => Some(Compression::Gzip),
            BrokerCompressionType::Producer => None,
        }
    }
}

/// The compression levels of KIP-390, Kafka's defaults unless set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressionLevels {
    /// `compression.gzip.level`: 1-9, or -1 for zlib's default.
    pub gzip: i32,
    /// `compression.lz4.level`: 1-17 (accepted and kept; see [`Compressor::compress`]).
    pub lz4: i32,
    /// `compression.zstd.level`: -131072 to 22.
    pub zstd: i32,
}

impl Default for CompressionLevels {
    fn default() -> Self {
        CompressionLevels {
            gzip: compression::GZIP_LEVEL_DEFAULT,
            lz4: compression::LZ4_LEVEL_DEFAULT,
            zstd: compression::ZSTD_LEVEL_DEFAULT,
        }
    }
}

impl TimestampType {
    /// Kafka's spelling of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// Where a described config value comes from (Kafka's `ConfigSource`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic (`DYNAMIC_TOPIC_CONFIG`).
    TopicOverride,
    /// Set in the broker's configuration under `synonym` (`STATIC_BROKER_CONFIG`).
    BrokerDefault { synonym: String },
    /// Nobody set it: the built-in default (`DEFAULT_CONFIG`).
    Default,
}

/// One entry of a DescribeConfigs answer for a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
}

/// Topic-level keys Samsa knows, sorted, with the broker keys they fall back to (in
/// precedence order; empty when Kafka has no broker synonym Samsa reads).
pub const TOPIC_KEYS: &[(&str, &[&str])] = &[
    ("cleanup.policy", &["log.cleanup.policy"]),
    ("compression.gzip.level", &["compression.gzip.level"]),
    ("compression.lz4.level", &["compression.lz4.level"]),
    ("compression.type", &["compression.type"]),
    ("compression.zstd.level", &["compression.zstd.level"]),
    ("delete.retention.ms", &["log.cleaner.delete.retention.ms"]),
    ("file.delete.delay.ms", &[]),
    ("flush.messages", &["log.flush.interval.messages"]),
    ("flush.ms", &["log.flush.interval.ms"]),
    ("index.interval.bytes", &["log.index.interval.bytes"]),
    (
        "max.compaction.lag.ms",
        &["log.cleaner.max.compaction.lag.ms"],
    ),
    ("max.message.bytes", &["message.max.bytes"]),
    ("message.downconversion.enable", &[]),
    (
        "message.timestamp.after.max.ms",
        &["log.message.timestamp.after.max.ms"],
    ),
    (
        "message.timestamp.before.max.ms",
        &["log.message.timestamp.before.max.ms"],
    ),
    ("message.timestamp.type", &["log.message.timestamp.type"]),
    (
        "min.cleanable.dirty.ratio",
        &["log.cleaner.min.cleanable.ratio"],
    ),
    (
        "min.compaction.lag.ms",
        &["log.cleaner.min.compaction.lag.ms"],
    ),
    ("min.insync.replicas", &["min.insync.replicas"]),
    ("preallocate", &[]),
    ("retention.bytes", &["log.retention.bytes"]),
    (
        "retention.ms",
        &[
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
    ),
    ("segment.bytes", &["log.segment.bytes"]),
    ("segment.index.bytes", &["log.index.size.max.bytes"]),
    ("segment.jitter.ms", &[]),
    ("segment.ms", &["log.roll.ms", "log.roll.hours"]),
    ("unclean.leader.election.enable", &[]),
];

/// Kafka's default `delete.retention.ms` (one day).
const DELETE_RETENTION_MS_DEFAULT: i64 = 24 * HOUR_MS;
/// Kafka's default `file.delete.delay.ms` (one minute).
const FILE_DELETE_DELAY_MS_DEFAULT: i64 = MINUTE_MS;

impl TopicConfig {
    /// The topic config of a topic without overrides: every value from its broker synonym.
    pub fn broker_defaults(broker: &BrokerConfig) -> TopicConfig {
        TopicConfig {
            cleanup_policy_compact: broker.log_cleanup_policy.compacts(),
            cleanup_policy: broker.log_cleanup_policy,
            max_message_bytes: broker.message_max_bytes,
            message_timestamp_type: broker.log_message_timestamp_type,
            message_timestamp_before_max_ms: broker.log_message_timestamp_before_max_ms,
            message_timestamp_after_max_ms: broker.log_message_timestamp_after_max_ms,
            segment_bytes: broker.log_segment_bytes,
            segment_ms: broker.log_roll_ms,
            index_interval_bytes: broker.log_index_interval_bytes,
            segment_index_bytes: broker.log_index_size_max_bytes,
            flush: broker.log_flush,
            retention_ms: broker.log_retention_ms,
            retention_bytes: broker.log_retention_bytes,
            min_insync_replicas: broker.min_insync_replicas,
            compression_type: broker.compression_type,
            compression_levels: broker.compression_levels,
            unclean_leader_election_enable: false,
            delete_retention_ms: broker.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms: broker.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms: broker.log_cleaner_max_compaction_lag_ms,
            min_cleanable_dirty_ratio: broker.log_cleaner_min_cleanable_ratio,
            file_delete_delay_ms: FILE_DELETE_DELAY_MS_DEFAULT,
            segment_jitter_ms: 0,
            preallocate: false,
            message_downconversion_enable: true,
        }
    }

    /// The effective config of a topic: its `overrides` (Kafka's topic keys) on top of the
    /// broker's defaults. An unknown key or invalid value is an error naming it.
    pub fn resolve(
        broker: &BrokerConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, ConfigError> {
        for key in overrides.keys() {
            if !TOPIC_KEYS.iter().any(|(name, _)| name == key) {
                return Err(ConfigError::UnknownTopicKey { key: key.clone() });
            }
        }
        let s = Settings {
            values: overrides
                .iter()
                .map(|(k, v)| (k.clone(), (v.clone(), None)))
                .collect(),
        };
        let mut t = TopicConfig::broker_defaults(broker);
        let i32_max = i64::from(i32::MAX);
        if let Some((value, _)) = s.get("cleanup.policy") {
            t.cleanup_policy = CleanupPolicy::parse(value)
                .ok_or_else(|| s.invalid("cleanup.policy", CleanupPolicy::ALLOWED))?;
            t.cleanup_policy_compact = t.cleanup_policy.compacts();
        }
        if let Some(compression_type) = s.compression_type("compression.type")? {
            t.compression_type = compression_type;
        }
        s.compression_levels(&mut t.compression_levels)?;
        if let Some(n) = s.int("delete.retention.ms", 0, i64::MAX)? {
            t.delete_retention_ms = n;
        }
        if let Some(n) = s.int("file.delete.delay.ms", 0, i64::MAX)? {
            t.file_delete_delay_ms = n;
        }
        let flush_messages = s.int("flush.messages", 1, i64::MAX)?;
        let flush_ms = s.int("flush.ms", 1, i64::MAX)?;
        if flush_messages.is_some() || flush_ms.is_some() {
            // The unset one comes from the broker's page-cache policy, or Kafka's "never".
            let (broker_messages, broker_ms) = match broker.log_flush {
                FlushPolicy::PageCache {
                    flush_messages,
                    flush_ms,
                } => (flush_messages, flush_ms),
                FlushPolicy::SyncBeforeAck => (to_u64(KAFKA_LONG_MAX), to_u64(KAFKA_LONG_MAX)),
            };
            t.flush = FlushPolicy::PageCache {
                flush_messages: flush_messages.map(to_u64).unwrap_or(broker_messages),
                flush_ms: flush_ms.map(to_u64).unwrap_or(broker_ms),
            };
        }
        if let Some(n) = s.int("index.interval.bytes", 1, i32_max)? {
            t.index_interval_bytes = to_u64(n);
        }
        if let Some(n) = s.int("max.message.bytes", 0, i32_max)? {
            t.max_message_bytes = to_usize(n);
        }
        if let Some(b) = s.bool("message.downconversion.enable")? {
            t.message_downconversion_enable = b;
        }
        if let Some(n) = s.int("message.timestamp.after.max.ms", 0, i64::MAX)? {
            t.message_timestamp_after_max_ms = n;
        }
        if let Some(n) = s.int("message.timestamp.before.max.ms", 0, i64::MAX)? {
            t.message_timestamp_before_max_ms = n;
        }
        if let Some((value, _)) = s.get("message.timestamp.type") {
            t.message_timestamp_type = parse_timestamp_type(value).ok_or_else(|| {
                s.invalid(
                    "message.timestamp.type",
                    "must be CreateTime or LogAppendTime",
                )
            })?;
        }
        if let Some(n) = s.int("min.compaction.lag.ms", 0, i64::MAX)? {
            t.min_compaction_lag_ms = n;
        }
        if let Some(n) = s.int("max.compaction.lag.ms", 1, i64::MAX)? {
            t.max_compaction_lag_ms = n;
        }
        if let Some(x) = s.float("min.cleanable.dirty.ratio", 0.0, 1.0)? {
            t.min_cleanable_dirty_ratio = x;
        }
        if let Some(n) = s.int("min.insync.replicas", 1, i32_max)? {
            t.min_insync_replicas = i32::try_from(n).unwrap_or(1);
        }
        if let Some(b) = s.bool("preallocate")? {
            t.preallocate = b;
        }
        if let Some(n) = s.int("retention.bytes", -1, i64::MAX)? {
            t.retention_bytes = n;
        }
        if let Some(n) = s.int("retention.ms", -1, i64::MAX)? {
            t.retention_ms = n;
        }
        if let Some(n) = s.int(
            "segment.bytes",
            SEGMENT_BYTES_MIN as i64,
            SEGMENT_BYTES_MAX as i64,
        )? {
            t.segment_bytes = to_u64(n);
        }
        if let Some(n) = s.int("segment.index.bytes", INDEX_ENTRY_BYTES as i64, i32_max)? {
            t.segment_index_bytes = to_u64(n);
        }
        if let Some(n) = s.int("segment.jitter.ms", 0, i64::MAX)? {
            t.segment_jitter_ms = n;
        }
        if let Some(n) = s.int("segment.ms", 1, i64::MAX)? {
            t.segment_ms = n;
        }
        if let Some(b) = s.bool("unclean.leader.election.enable")? {
            t.unclean_leader_election_enable = b;
        }
        Ok(t)
    }

    /// Every topic key with its effective value and where it comes from, sorted by name, for
    /// DescribeConfigs. `overrides` must be ones [`TopicConfig::resolve`] accepted.
    pub fn describe(
        broker: &BrokerConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Vec<ConfigEntry>, ConfigError> {
        let resolved = TopicConfig::resolve(broker, overrides)?;
        Ok(TOPIC_KEYS
            .iter()
            .map(|(name, synonyms)| {
                let source = if overrides.contains_key(*name) {
                    ConfigSource::TopicOverride
                } else if let Some(synonym) = broker.explicit_synonym(synonyms) {
                    ConfigSource::BrokerDefault {
                        synonym: synonym.to_string(),
                    }
                } else {
                    ConfigSource::Default
                };
                ConfigEntry {
                    name: name.to_string(),
                    value: resolved.value_of(name),
                    source,
                    read_only: false,
                    sensitive: false,
                }
            })
            .collect())
    }

    /// The effective value of one topic key, spelled as Kafka describes it. Under
    /// [`FlushPolicy::SyncBeforeAck`] `flush.messages` is 1 and `flush.ms` 0: every
    /// acknowledged record is already on disk.
    pub fn value_of(&self, name: &str) -> String {
        let (flush_messages, flush_ms) = match self.flush {
            FlushPolicy::SyncBeforeAck => (1, 0),
            FlushPolicy::PageCache {
                flush_messages,
                flush_ms,
            } => (flush_messages, flush_ms),
        };
        match name {
            "cleanup.policy" => self.cleanup_policy.as_str().to_string(),
            "compression.gzip.level" => self.compression_levels.gzip.to_string(),
            "compression.lz4.level" => self.compression_levels.lz4.to_string(),
            "compression.type" => self.compression_type.as_str().to_string(),
            "compression.zstd.level" => self.compression_levels.zstd.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "file.delete.delay.ms" => self.file_delete_delay_ms.to_string(),
            "flush.messages" => flush_messages.to_string(),
            "flush.ms" => flush_ms.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "message.downconversion.enable" => self.message_downconversion_enable.to_string(),
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms.to_string(),
            "message.timestamp.type" => self.message_timestamp_type.as_str().to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio.to_string(),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "preallocate" => self.preallocate.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "segment.jitter.ms" => self.segment_jitter_ms.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "unclean.leader.election.enable" => self.unclean_leader_election_enable.to_string(),
            // TOPIC_KEYS and this match list the same keys (a unit test checks it).
            _ => String::new(),
        }
    }

    /// What produced batches are recompressed to (the codec `compression.type` names, at
    /// its level), or `None` under `producer`: see `log::validator`.
    pub fn compressor(&self) -> Option<Compressor> {
        let codec = self.compression_type.codec()?;
        let level = match codec {
            Compression::Gzip => self.compression_levels.gzip,
            Compression::Lz4 => self.compression_levels.lz4,
            Compression::Zstd => self.compression_levels.zstd,
            Compression::None | Compression::Snappy => return Some(Compressor::new(codec)),
        };
        Some(Compressor::with_level(codec, level))
    }

    /// The settings the partition logs of this topic are opened with.
    pub fn to_log_config(&self, broker: &BrokerConfig) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            segment_ms: self.segment_ms,
            index_interval_bytes: self.index_interval_bytes,
            segment_index_bytes: self.segment_index_bytes,
            flush: self.flush,
            checkpoint_interval_ms: broker.log_flush_offset_checkpoint_interval_ms,
            producer_id_expiration_ms: broker.producer_id_expiration_ms,
            producer_state_checks: broker.producer_state_checks,
            bugs: broker.bugs.log,
            ..LogConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STOCK_SERVER_PROPERTIES: &str = include_str!("testdata/kafka-4.0-server.properties");

    fn kv(entries: &[(String, String, usize)]) -> Vec<(&str, &str, usize)> {
        entries
            .iter()
            .map(|(k, v, l)| (k.as_str(), v.as_str(), *l))
            .collect()
    }

    fn load(text: &str) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::load(Some(text), &[])
    }

    fn err(text: &str) -> String {
        match load(text) {
            Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn properties_separators_comments_and_whitespace() {
        let text = "# comment\n! also a comment\n\n   a=1\nb : 2\nc\t3\nd\ne = \nf=x=y:z\n  g  =  spaced value  \n";
        let parsed = parse_properties(text).unwrap();
        assert_eq!(
            kv(&parsed),
            vec![
                ("a", "1", 4),
                ("b", "2", 5),
                ("c", "3", 6),
                ("d", "", 7),
                ("e", "", 8),
                ("f", "x=y:z", 9),
                ("g", "spaced value  ", 10),
            ]
        );
    }

    #[test]
    fn properties_continuations_and_escapes() {
        let text = "list=a,\\\n    b,\\\n\tc\nesc=tab\\there\\nnl\\\\back\\u00e9\\q\nkey\\ with\\=sep=v\nsmile=\\uD83D\\uDE00\ntwo=ends\\\\\nnext=1\n# comment \\\nnot.continued=2\n";
        let parsed = parse_properties(text).unwrap();
        assert_eq!(
            kv(&parsed),
            vec![
                ("list", "a,b,c", 1),
                ("esc", "tab\there\nnl\\back\u{e9}q", 4),
                ("key with=sep", "v", 5),
                ("smile", "\u{1F600}", 6),
                ("two", "ends\\", 7),
                ("next", "1", 8),
                ("not.continued", "2", 10),
            ]
        );
    }

    #[test]
    fn malformed_properties_name_their_line() {
        let cases = [
            ("a=1\nb=\\u12G4\n", "line 2: malformed \\uXXXX escape"),
            ("a=1\n\nc=\\u12\n", "line 3: malformed \\uXXXX escape"),
            ("a=1\n=v\n", "line 2: entry without a key"),
            ("a=1\nb=2\\\n", "line 2: line continuation"),
            ("x=\\uD800\n", "line 1: unpaired surrogate"),
            ("x=\\uDC00z\n", "line 1: unpaired surrogate"),
        ];
        for (text, want) in cases {
            let e = parse_properties(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: got {e:?}, want {want:?}");
        }
    }

    #[test]
    fn overrides_parse_and_round_trip() {
        assert_eq!(
            parse_override(" num.partitions = 3").unwrap(),
            ("num.partitions".to_string(), "3".to_string())
        );
        assert_eq!(
            parse_override("a=b=c").unwrap(),
            ("a".to_string(), "b=c".to_string())
        );
        for bad in ["novalue", "=3", ""] {
            assert_eq!(
                parse_override(bad).unwrap_err().to_string(),
                format!("invalid override '{bad}': expected key=value")
            );
        }
        let map = overrides(&[
            ("retention.ms", "1000"),
            (
                "odd key=:#",
                " leading space, then \\ and \n newline\ttab é",
            ),
            ("#hash", "!bang"),
            ("empty", ""),
        ]);
        let text = encode_overrides(&map);
        assert_eq!(decode_overrides(&text).unwrap(), map, "text was {text:?}");
        assert_eq!(encode_overrides(&BTreeMap::new()), "");
    }

    #[test]
    fn stock_kafka_server_properties_loads() {
        let c = load(STOCK_SERVER_PROPERTIES).unwrap();
        assert_eq!(c.node_id, 1);
        // The CONTROLLER listener is dropped; the empty host binds every interface.
        assert_eq!(
            c.listeners,
            vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "0.0.0.0".into(),
                port: 9092
            }]
        );
        assert_eq!(
            c.advertised_listeners,
            vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092
            }]
        );
        assert_eq!(c.log_dirs, vec!["/tmp/kraft-combined-logs".to_string()]);
        assert_eq!(c.log_dir(), "/tmp/kraft-combined-logs");
        assert_eq!(c.log_retention_ms, 168 * HOUR_MS);
        assert_eq!(c.log_segment_bytes, 1 << 30);
        assert_eq!(c.log_retention_check_interval_ms, 300_000);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert_eq!(c.log_flush, FlushPolicy::SyncBeforeAck);
        // The KRaft keys are acted on: a combined node, its CONTROLLER listener, one voter.
        assert!(c.kraft.controller_role);
        assert_eq!(
            c.kraft.controller_listener,
            Some(Endpoint {
                name: "CONTROLLER".into(),
                host: "0.0.0.0".into(),
                port: 9093
            })
        );
        assert_eq!(
            c.kraft.quorum_voters,
            BTreeMap::from([(1, "localhost:9093".to_string())])
        );
        assert!(!c.kraft.bootstrap_servers_without_voters);
        for key in [
            "inter.broker.listener.name",
            "listener.security.protocol.map",
            "num.network.threads",
            "share.coordinator.state.topic.min.isr",
        ] {
            assert!(
                c.ignored_keys().iter().any(|k| k == key),
                "{key} not in {:?}",
                c.ignored_keys()
            );
        }
        // Kafka 4.0 replaced the static voters with a bootstrap list in the same file.
        let text = STOCK_SERVER_PROPERTIES.replace(
            "controller.quorum.voters=1@localhost:9093",
            "controller.quorum.bootstrap.servers=localhost:9093",
        );
        let c = load(&text).unwrap();
        assert!(c.kraft.quorum_voters.is_empty());
        assert!(c.kraft.bootstrap_servers_without_voters);
    }

    #[test]
    fn kraft_settings_are_checked_by_name() {
        for (text, expected) in [
            ("process.roles=broker", "process.roles"),
            ("process.roles=controller", "samsa controller"),
            ("process.roles=broker,zookeeper", "process.roles"),
            (
                "node.id=2\ncontroller.quorum.voters=1@h:9093",
                "not among the voters",
            ),
            (
                "controller.quorum.voters=2@h:9093,3@h:9094",
                "not among the voters",
            ),
            ("controller.quorum.voters=1@h", "controller.quorum.voters"),
            (
                "broker.heartbeat.interval.ms=9000\nbroker.session.timeout.ms=9000",
                "heartbeat interval",
            ),
        ] {
            let error = load(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let c = load("process.roles=controller,broker\nbroker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=300\nmetadata.log.dir=/m").unwrap();
        assert_eq!(c.kraft.broker_session_timeout_ms, 3000);
        assert_eq!(c.kraft.broker_heartbeat_interval_ms, 300);
        assert_eq!(c.kraft.metadata_log_dir.as_deref(), Some("/m"));
        assert_eq!(c.kraft.controller_listener, None);
    }

    #[test]
    fn empty_configuration_is_the_embedded_default() {
        let c = BrokerConfig::load(None, &[]).unwrap();
        let d = BrokerConfig::default();
        assert_eq!(c.node_id, d.node_id);
        assert_eq!(c.listeners, d.listeners);
        assert_eq!(c.log_dirs, d.log_dirs);
        assert!(c.ignored_keys().is_empty());
        assert!(c.explicit_keys.is_empty());
        // Kafka 4.0's defaults where Samsa does not differ.
        assert_eq!(c.message_max_bytes, 1024 * 1024 + 12);
        assert_eq!(c.log_message_timestamp_after_max_ms, 3_600_000);
        assert_eq!(c.log_message_timestamp_before_max_ms, i64::MAX);
        assert_eq!(c.log_retention_ms, 604_800_000);
        assert_eq!(c.log_roll_ms, 604_800_000);
        assert_eq!(c.log_retention_bytes, -1);
    }

    #[test]
    fn overrides_win_over_the_file_and_later_lines_over_earlier() {
        let text = "num.partitions=2\nnum.partitions=3\nlog.dirs=/data/a\n";
        let c = load(text).unwrap();
        assert_eq!(c.num_partitions, 3);
        let ov = vec![
            ("num.partitions".to_string(), "5".to_string()),
            ("log.dirs".to_string(), "/data/b".to_string()),
        ];
        let c = BrokerConfig::load(Some(text), &ov).unwrap();
        assert_eq!(c.num_partitions, 5);
        assert_eq!(c.log_dirs, vec!["/data/b".to_string()]);
        // An override's bad value is reported without a line.
        let ov = vec![("num.partitions".to_string(), "0".to_string())];
        assert_eq!(
            BrokerConfig::load(Some(text), &ov).unwrap_err().to_string(),
            "invalid value '0' for 'num.partitions': must be an integer in [1, 2147483647]"
        );
    }

    #[test]
    fn aliases_and_precedence() {
        assert_eq!(load("broker.id=7").unwrap().node_id, 7);
        assert_eq!(load("node.id=7\nbroker.id=7").unwrap().node_id, 7);
        assert!(err("node.id=7\nbroker.id=8").contains("node.id=7 and broker.id=8 disagree"));
        assert_eq!(load("log.dir=/x").unwrap().log_dirs, vec!["/x".to_string()]);
        assert_eq!(
            load("log.dir=/x\nlog.dirs=/y").unwrap().log_dirs,
            vec!["/y".to_string()]
        );
        assert_eq!(load("log.roll.hours=2").unwrap().log_roll_ms, 2 * HOUR_MS);
        assert_eq!(
            load("log.roll.hours=2\nlog.roll.ms=5").unwrap().log_roll_ms,
            5
        );
        assert_eq!(
            load("log.retention.hours=1\nlog.retention.minutes=3")
                .unwrap()
                .log_retention_ms,
            3 * MINUTE_MS
        );
        assert_eq!(
            load("log.retention.minutes=3\nlog.retention.ms=-1")
                .unwrap()
                .log_retention_ms,
            -1
        );
        assert_eq!(load("log.retention.hours=-1").unwrap().log_retention_ms, -1);
    }

    #[test]
    fn flush_keys_switch_to_the_page_cache() {
        let max = i64::MAX as u64;
        assert_eq!(
            load("log.flush.interval.messages=10000").unwrap().log_flush,
            FlushPolicy::PageCache {
                flush_messages: 10_000,
                flush_ms: max
            }
        );
        assert_eq!(
            load("log.flush.interval.ms=1000").unwrap().log_flush,
            FlushPolicy::PageCache {
                flush_messages: max,
                flush_ms: 1000
            }
        );
        assert_eq!(
            load("log.flush.interval.ms=1000\nlog.flush.interval.messages=5")
                .unwrap()
                .log_flush,
            FlushPolicy::PageCache {
                flush_messages: 5,
                flush_ms: 1000
            }
        );
    }

    #[test]
    fn listeners_parse_and_validate() {
        let c = load(
            "listeners=plaintext://127.0.0.1:9092,EXTERNAL://[::1]:19092\n\
             advertised.listeners=PLAINTEXT://broker.example:9092,EXTERNAL://[::1]:19092",
        )
        .unwrap();
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.listeners[0].name, "PLAINTEXT");
        assert_eq!(c.listeners[1].host, "[::1]");
        assert_eq!(c.advertised_listeners[0].host, "broker.example");
        // advertised.listeners defaults to listeners.
        let c = load("listeners=PLAINTEXT://10.0.0.5:9093").unwrap();
        assert_eq!(c.advertised_listeners, c.listeners);
        assert_eq!(c.advertised_listeners[0].port, 9093);
    }

    #[test]
    fn each_invalid_value_names_its_key_value_and_range() {
        let cases: &[(&str, &str)] = &[
            ("listeners=PLAINTEXT://host:65536", "invalid value 'PLAINTEXT://host:65536' for 'listeners': must be a comma-separated list of NAME://host:port"),
            ("listeners=host:9092", "'listeners'"),
            ("listeners=PLAINTEXT://host:-1", "'listeners'"),
            ("listeners=PLAINTEXT://a:1,PLAINTEXT://b:2", "distinct names"),
            ("listeners=PLAINTEXT://:9092", "advertised.listeners: unset, so it defaults to listeners, but listener PLAINTEXT binds every interface"),
            ("listeners=PLAINTEXT://0.0.0.0:9092\nadvertised.listeners=PLAINTEXT://0.0.0.0:9092", "invalid value 'PLAINTEXT://0.0.0.0:9092' for 'advertised.listeners'"),
            ("advertised.listeners=OTHER://h:1", "listener OTHER is not in listeners"),
            ("listeners=CONTROLLER://h:1\ncontroller.listener.names=CONTROLLER", "needs a listener besides"),
            ("log.dirs=/a,/b", "line 1: invalid value '/a,/b' for 'log.dirs': exactly one directory"),
            ("log.dir=", "for 'log.dir': exactly one directory"),
            ("node.id=-1", "invalid value '-1' for 'node.id': must be an integer in [0, 2147483647]"),
            ("num.partitions=abc", "'abc' for 'num.partitions'"),
            ("default.replication.factor=40000", "'default.replication.factor'"),
            ("auto.create.topics.enable=yes", "'yes' for 'auto.create.topics.enable': must be true or false"),
            ("delete.topic.enable=1", "'delete.topic.enable'"),
            ("message.max.bytes=-5", "'-5' for 'message.max.bytes'"),
            ("socket.request.max.bytes=2000000000", "'2000000000' for 'socket.request.max.bytes': must be an integer in [1, 1073741824]"),
            ("socket.request.max.bytes=1000\nmessage.max.bytes=2000", "message.max.bytes (2000) exceeds socket.request.max.bytes (1000)"),
            ("max.connections=-1", "'max.connections'"),
            ("connections.max.idle.ms=0", "'connections.max.idle.ms'"),
            ("queued.max.requests=0", "'queued.max.requests'"),
            ("log.segment.bytes=-1", "'-1' for 'log.segment.bytes'"),
            ("log.segment.bytes=100", "'100' for 'log.segment.bytes'"),
            ("log.roll.ms=0", "'log.roll.ms'"),
            ("log.roll.hours=0", "'log.roll.hours'"),
            ("log.index.interval.bytes=0", "'log.index.interval.bytes'"),
            ("log.index.size.max.bytes=4", "'log.index.size.max.bytes'"),
            ("log.flush.interval.messages=0", "'log.flush.interval.messages'"),
            ("log.flush.interval.ms=-3", "'log.flush.interval.ms'"),
            ("log.flush.offset.checkpoint.interval.ms=0", "'log.flush.offset.checkpoint.interval.ms'"),
            ("producer.id.expiration.ms=0", "'producer.id.expiration.ms'"),
            ("producer.id.expiration.check.interval.ms=2147483648", "'producer.id.expiration.check.interval.ms'"),
            ("log.message.timestamp.type=NoTime", "'NoTime' for 'log.message.timestamp.type': must be CreateTime or LogAppendTime"),
            ("log.message.timestamp.before.max.ms=-1", "'log.message.timestamp.before.max.ms'"),
            ("log.message.timestamp.after.max.ms=x", "'log.message.timestamp.after.max.ms'"),
            ("log.retention.ms=-2", "'log.retention.ms'"),
            ("log.retention.minutes=x", "'log.retention.minutes'"),
            ("log.retention.hours=1.5", "'log.retention.hours'"),
            ("log.retention.bytes=-7", "'log.retention.bytes'"),
            ("log.retention.check.interval.ms=0", "'log.retention.check.interval.ms'"),
            ("log.cleanup.policy=keep", "'keep' for 'log.cleanup.policy'"),
            ("min.insync.replicas=0", "'min.insync.replicas'"),
            (
                "max.incremental.fetch.session.cache.slots=-1",
                "'max.incremental.fetch.session.cache.slots': must be an integer in [0, 1048576]",
            ),
            (
                "log.scrubber.bytes.per.second=-1",
                "invalid value '-1' for 'log.scrubber.bytes.per.second': must be an integer in [0, ",
            ),
            ("log.scrubber.bytes.per.second=4MiB", "'4MiB' for 'log.scrubber.bytes.per.second'"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.contains(want), "{text:?}: got {e:?}, want {want:?}");
        }
    }

    #[test]
    fn scrubber_rate_parses_defaults_and_turns_off_at_zero() {
        let defaults = load("").unwrap();
        assert_eq!(defaults.log_scrubber_bytes_per_second, 4_194_304);
        assert_eq!(
            load("log.scrubber.bytes.per.second=1048576")
                .unwrap()
                .log_scrubber_bytes_per_second,
            1 << 20
        );
        assert_eq!(
            load("log.scrubber.bytes.per.second=0")
                .unwrap()
                .log_scrubber_bytes_per_second,
            0
        );
    }

    #[test]
    fn unknown_keys_are_errors_naming_key_and_line() {
        assert_eq!(
            err("num.partitions=1\nnum.partitons=3\n"),
            "line 2: unknown setting 'num.partitons'"
        );
        let ov = vec![("zookeeper.connect".to_string(), "x".to_string())];
        assert_eq!(
            BrokerConfig::load(None, &ov).unwrap_err().to_string(),
            "unknown setting 'zookeeper.connect'"
        );
    }

    #[test]
    fn topic_resolve_layers_overrides_on_broker_defaults() {
        let broker = load("log.segment.bytes=2000000\nlog.retention.ms=5000").unwrap();
        let t = TopicConfig::resolve(&broker, &BTreeMap::new()).unwrap();
        assert_eq!(t.segment_bytes, 2_000_000);
        assert_eq!(t.retention_ms, 5000);
        assert_eq!(t.cleanup_policy, CleanupPolicy::Delete);
        let t = TopicConfig::resolve(
            &broker,
            &overrides(&[
                ("segment.bytes", "3000000"),
                ("cleanup.policy", "delete, compact"),
                ("compression.type", "producer"),
                ("message.timestamp.type", "LogAppendTime"),
                ("retention.bytes", "100"),
                ("flush.messages", "10"),
            ]),
        )
        .unwrap();
        assert_eq!(t.segment_bytes, 3_000_000);
        assert_eq!(t.cleanup_policy, CleanupPolicy::CompactDelete);
        assert!(t.cleanup_policy_compact);
        assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(t.retention_bytes, 100);
        assert_eq!(t.retention_ms, 5000);
        assert_eq!(
            t.flush,
            FlushPolicy::PageCache {
                flush_messages: 10,
                flush_ms: i64::MAX as u64
            }
        );
        let log = t.to_log_config(&broker);
        assert_eq!(log.segment_bytes, 3_000_000);
        assert!(log.validate().is_ok());
        // The broker's page-cache policy supplies the unset half.
        let broker = load("log.flush.interval.ms=250").unwrap();
        let t = TopicConfig::resolve(&broker, &overrides(&[("flush.messages", "10")])).unwrap();
        assert_eq!(
            t.flush,
            FlushPolicy::PageCache {
                flush_messages: 10,
                flush_ms: 250
            }
        );
    }

    #[test]
    fn topic_errors_name_the_key() {
        let broker = BrokerConfig::default();
        let cases: &[(&str, &str, &str)] = &[
            (
                "retention.msec",
                "1",
                "unknown topic config 'retention.msec'",
            ),
            (
                "compression.type",
                "none",
                "invalid value 'none' for 'compression.type': must be one of uncompressed, \
                 zstd, lz4, snappy, gzip, producer",
            ),
            ("compression.type", "GZIP", "'compression.type'"),
            (
                "compression.gzip.level",
                "0",
                "invalid value '0' for 'compression.gzip.level': must be an integer in [1, 9] \
                 or -1",
            ),
            ("compression.gzip.level", "10", "'compression.gzip.level'"),
            ("compression.gzip.level", "-2", "'compression.gzip.level'"),
            (
                "compression.lz4.level",
                "18",
                "invalid value '18' for 'compression.lz4.level': must be an integer in [1, 17]",
            ),
            ("compression.lz4.level", "-1", "'compression.lz4.level'"),
            (
                "compression.zstd.level",
                "23",
                "invalid value '23' for 'compression.zstd.level': must be an integer in \
                 [-131072, 22]",
            ),
            (
                "compression.zstd.level",
                "-131073",
                "'compression.zstd.level'",
            ),
            ("compression.zstd.level", "3.5", "'compression.zstd.level'"),
            ("cleanup.policy", "delete,delete", "'cleanup.policy'"),
            ("cleanup.policy", "", "'cleanup.policy'"),
            ("segment.bytes", "10", "'10' for 'segment.bytes'"),
            ("segment.ms", "0", "'segment.ms'"),
            ("segment.index.bytes", "4", "'segment.index.bytes'"),
            ("index.interval.bytes", "0", "'index.interval.bytes'"),
            ("max.message.bytes", "-1", "'max.message.bytes'"),
            (
                "message.timestamp.type",
                "createtime",
                "'message.timestamp.type'",
            ),
            (
                "message.timestamp.before.max.ms",
                "-1",
                "'message.timestamp.before.max.ms'",
            ),
            (
                "message.timestamp.after.max.ms",
                "-1",
                "'message.timestamp.after.max.ms'",
            ),
            ("flush.messages", "0", "'flush.messages'"),
            ("flush.ms", "0", "'flush.ms'"),
            ("retention.ms", "-2", "'retention.ms'"),
            ("retention.bytes", "-2", "'retention.bytes'"),
            ("min.insync.replicas", "0", "'min.insync.replicas'"),
            (
                "unclean.leader.election.enable",
                "no",
                "'unclean.leader.election.enable'",
            ),
            ("delete.retention.ms", "-1", "'delete.retention.ms'"),
            ("min.compaction.lag.ms", "-1", "'min.compaction.lag.ms'"),
            ("file.delete.delay.ms", "-1", "'file.delete.delay.ms'"),
            ("segment.jitter.ms", "-1", "'segment.jitter.ms'"),
            ("preallocate", "2", "'preallocate'"),
            (
                "message.downconversion.enable",
                "x",
                "'message.downconversion.enable'",
            ),
        ];
        for (key, value, want) in cases {
            let e = TopicConfig::resolve(&broker, &overrides(&[(key, value)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{key}={value}: got {e:?}, want {want:?}");
        }
    }

    #[test]
    fn compression_type_takes_kafkas_six_values_and_the_levels_of_kip_390() {
        let broker = BrokerConfig::default();
        for (value, codec) in [
            ("uncompressed", Some(Compression::None)),
            ("zstd", Some(Compression::Zstd)),
            ("lz4", Some(Compression::Lz4)),
            ("snappy", Some(Compression::Snappy)),
            ("gzip", Some(Compression::Gzip)),
            ("producer", None),
        ] {
            let t =
                TopicConfig::resolve(&broker, &overrides(&[("compression.type", value)])).unwrap();
            assert_eq!(t.compression_type.as_str(), value);
            assert_eq!(t.value_of("compression.type"), value);
            assert_eq!(t.compressor().map(|c| c.codec), codec, "{value}");
        }
        // Kafka's defaults, then every level at its bounds, each reaching the compressor.
        let t = TopicConfig::resolve(&broker, &overrides(&[("compression.type", "gzip")])).unwrap();
        assert_eq!(
            t.compressor(),
            Some(Compressor::with_level(Compression::Gzip, -1))
        );
        assert_eq!(
            (
                t.value_of("compression.gzip.level"),
                t.value_of("compression.lz4.level"),
                t.value_of("compression.zstd.level")
            ),
            ("-1".to_string(), "9".to_string(), "3".to_string())
        );
        for (codec, key, level) in [
            ("gzip", "compression.gzip.level", 1),
            ("gzip", "compression.gzip.level", 9),
            ("lz4", "compression.lz4.level", 1),
            ("lz4", "compression.lz4.level", 17),
            ("zstd", "compression.zstd.level", -131_072),
            ("zstd", "compression.zstd.level", 22),
        ] {
            let level_text = level.to_string();
            let t = TopicConfig::resolve(
                &broker,
                &overrides(&[("compression.type", codec), (key, &level_text)]),
            )
            .unwrap();
            assert_eq!(t.compressor().map(|c| c.level), Some(level), "{key}");
            assert_eq!(t.value_of(key), level_text);
        }
        // The broker keys of the same names are the topics' defaults.
        let broker = load("compression.type=zstd\ncompression.zstd.level=7").unwrap();
        let t = TopicConfig::resolve(&broker, &BTreeMap::new()).unwrap();
        assert_eq!(
            t.compressor(),
            Some(Compressor::with_level(Compression::Zstd, 7))
        );
        let t =
            TopicConfig::resolve(&broker, &overrides(&[("compression.type", "producer")])).unwrap();
        assert_eq!(t.compressor(), None);
        assert!(err("compression.type=none").contains("'compression.type'"));
        assert!(err("compression.lz4.level=0").contains("'compression.lz4.level'"));
    }

    #[test]
    fn topic_describe_reports_values_and_sources() {
        let broker = load("log.retention.hours=48\nlog.roll.ms=1000").unwrap();
        let entries =
            TopicConfig::describe(&broker, &overrides(&[("segment.bytes", "2000000")])).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let table: Vec<&str> = TOPIC_KEYS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, table);
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "entries are sorted by name");
        for entry in &entries {
            assert!(!entry.value.is_empty(), "{} has no value", entry.name);
            assert!(!entry.read_only && !entry.sensitive);
        }
        let find = |name: &str| entries.iter().find(|e| e.name == name).unwrap().clone();
        let e = find("segment.bytes");
        assert_eq!(
            (e.value.as_str(), e.source),
            ("2000000", ConfigSource::TopicOverride)
        );
        let e = find("retention.ms");
        assert_eq!(e.value, (48 * HOUR_MS).to_string());
        assert_eq!(
            e.source,
            ConfigSource::BrokerDefault {
                synonym: "log.retention.hours".into()
            }
        );
        let e = find("segment.ms");
        assert_eq!(e.value, "1000");
        assert_eq!(
            e.source,
            ConfigSource::BrokerDefault {
                synonym: "log.roll.ms".into()
            }
        );
        let e = find("max.message.bytes");
        assert_eq!(
            (e.value.as_str(), e.source),
            ("1048588", ConfigSource::Default)
        );
        let e = find("flush.messages");
        assert_eq!((e.value.as_str(), e.source), ("1", ConfigSource::Default));
        assert_eq!(find("compression.type").value, "producer");
        assert_eq!(find("cleanup.policy").value, "delete");
        assert_eq!(find("message.timestamp.after.max.ms").value, "3600000");
        assert!(TopicConfig::describe(&broker, &overrides(&[("bogus", "1")])).is_err());
    }

    #[test]
    fn producer_id_expiration_keys_parse_with_kafka_defaults() {
        let c = load("").unwrap();
        assert_eq!(c.producer_id_expiration_ms, 86_400_000);
        assert_eq!(c.producer_id_expiration_check_interval_ms, 600_000);
        let c =
            load("producer.id.expiration.ms=1500\nproducer.id.expiration.check.interval.ms=100\n")
                .unwrap();
        assert_eq!(c.producer_id_expiration_ms, 1500);
        assert_eq!(c.producer_id_expiration_check_interval_ms, 100);
        let topic = TopicConfig::broker_defaults(&c).to_log_config(&c);
        assert_eq!(topic.producer_id_expiration_ms, 1500);
    }
}
