//! Broker and topic configuration under Kafka's names.
//!
//! [`BrokerConfig`] holds the node's settings (`server.properties` keys); [`TopicConfig`] the
//! effective settings of one topic: its overrides on top of the broker's defaults, as Kafka
//! resolves topic configs through their broker synonyms (`segment.bytes` falls back to
//! `log.segment.bytes`). Parsing and validation name the offending key.

use crate::log::{FlushPolicy, LogConfig};

/// One `listeners` / `advertised.listeners` entry: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The listener name (`PLAINTEXT` by default).
    pub name: String,
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
    /// `node.id`.
    pub node_id: i32,
    /// `listeners`: where the broker accepts connections.
    pub listeners: Vec<Endpoint>,
    /// `advertised.listeners`: what Metadata tells clients (the listeners when unset).
    pub advertised_listeners: Vec<Endpoint>,
    /// `log.dirs` (or `log.dir`): one data directory.
    pub log_dirs: Vec<String>,
    /// `num.partitions`: partitions of an auto-created topic.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `message.max.bytes`: the largest record batch accepted (topic `max.message.bytes`).
    pub message_max_bytes: usize,
    /// `socket.request.max.bytes`: the largest request frame read.
    pub socket_request_max_bytes: usize,
    /// `max.connections`: open client connections at most.
    pub max_connections: usize,
    /// `connections.max.idle.ms`: a connection idle this long is closed.
    pub connections_max_idle_ms: u64,
    /// `queued.max.requests`: requests read ahead of their responses, per connection.
    pub queued_max_requests: usize,
    /// `log.segment.bytes`.
    pub log_segment_bytes: u64,
    /// `log.roll.ms` (or `log.roll.hours`).
    pub log_roll_ms: i64,
    /// `log.index.interval.bytes`.
    pub log_index_interval_bytes: u64,
    /// `log.index.size.max.bytes`.
    pub log_index_size_max_bytes: u64,
    /// `log.flush.interval.messages` / `log.flush.interval.ms`, or Samsa's default of syncing
    /// before acknowledging (see [`FlushPolicy`]).
    pub log_flush: FlushPolicy,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `log.message.timestamp.type`.
    pub log_message_timestamp_type: TimestampType,
    /// `log.message.timestamp.before.max.ms`.
    pub log_message_timestamp_before_max_ms: i64,
    /// `log.message.timestamp.after.max.ms`.
    pub log_message_timestamp_after_max_ms: i64,
}

impl Default for BrokerConfig {
    /// The embedded default: one node, data in `./samsa-data`, listening on 127.0.0.1:9092.
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
            log_message_timestamp_type: TimestampType::CreateTime,
            log_message_timestamp_before_max_ms: i64::MAX,
            log_message_timestamp_after_max_ms: 3_600_000,
        }
    }
}

/// The effective settings of one topic (Kafka's topic-level config names).
#[derive(Clone, Debug)]
pub struct TopicConfig {
    /// `cleanup.policy` includes `compact`: records without a key are refused.
    pub cleanup_policy_compact: bool,
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
}

impl TopicConfig {
    /// The topic config of a topic without overrides: every value from its broker synonym.
    pub fn broker_defaults(broker: &BrokerConfig) -> TopicConfig {
        TopicConfig {
            cleanup_policy_compact: false,
            max_message_bytes: broker.message_max_bytes,
            message_timestamp_type: broker.log_message_timestamp_type,
            message_timestamp_before_max_ms: broker.log_message_timestamp_before_max_ms,
            message_timestamp_after_max_ms: broker.log_message_timestamp_after_max_ms,
            segment_bytes: broker.log_segment_bytes,
            segment_ms: broker.log_roll_ms,
            index_interval_bytes: broker.log_index_interval_bytes,
            segment_index_bytes: broker.log_index_size_max_bytes,
            flush: broker.log_flush,
        }
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
            ..LogConfig::default()
        }
    }
}
