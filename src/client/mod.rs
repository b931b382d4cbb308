//! The Rust client: connections to brokers, metadata, producing with acks and retries, and
//! fetching. It depends only on `protocol` and `rt`, so it runs under real tokio and under
//! the simulator alike.
//!
//! - `connection`: one broker connection: framing, correlation ids, timeouts, the response
//!   size limit, and API version negotiation (ApiVersions with KIP-511's fallback).
//! - `cluster`: [`Client`]: the metadata cache, leader lookup, admin requests, ListOffsets,
//!   Produce with retries (and "unknown outcome" reporting) and Fetch.
//! - `records`: owned [`ConsumedRecord`]s from fetched bytes.
//! - `producer`: [`Producer`], the batching, idempotent producer, and building one batch.
//! - `partitioner`: Kafka's murmur2 key hashing and the sticky partitioner for keyless records.
//! - `pipeline`: a pipelined broker connection (many requests in flight), for the producer.
//! - `admin`: describing topics and the cluster, adding partitions, reading and changing
//!   configs.
//! - `group`: the consumer group member: the partition assignors (range, roundrobin,
//!   cooperative-sticky).
//! - `error`: [`ClientError`].

// @client-modules
pub mod admin;
pub mod cluster;
pub mod connection;
pub mod error;
pub mod group;
pub mod partitioner;
pub mod pipeline;
pub mod producer;
pub mod records;
#[cfg(all(test, feature = "sim"))]
mod sim_tests;

pub use admin::{
    AlterConfigOp, BrokerDescription, ClusterDescription, ConfigEntry, ConfigResource,
    ConfigResourceError, ConfigSource, ConfigSynonym, DescribeConfigsOptions, TopicDescription,
};
pub use cluster::{
    Client, ClientConfig, FetchOptions, Fetched, NewTopic, PartitionMetadata, ProduceAck,
    TopicMetadata,
};
pub use connection::{Connection, ConnectionLimits};
pub use error::ClientError;
pub use producer::{
    build_batch, send_batch, Delivery, DeliveryResult, Producer, ProducerConfig, ProducerError,
    ProducerRecord, RecordMetadata,
};
pub use records::{ConsumedRecord, ConsumedRecords};
