//! [`Client`]: a metadata cache, one connection per broker, and the operations the tests and
//! the simulation need (topics admin, ListOffsets, Produce with retries, Fetch).
//!
//! Invariants:
//! - A request about a partition goes to the leader the metadata cache names; any retriable
//!   failure forgets the topic's metadata (and a failed connection), so the next attempt asks
//!   the cluster again.
//! - Every retry loop is bounded by `retries_max` and waits `retry_backoff_ms` between tries.
//! - A produce reports [`ClientError::UnknownOutcome`] whenever one of its attempts may have
//!   been appended and no later attempt succeeded: it never turns "maybe written" into a plain
//!   failure. Retrying after such an attempt may write the records twice (this client is not
//!   idempotent), which a checker must allow as well.
//! - Methods take `&mut self`: one request at a time per client, so the simulation gets
//!   concurrency by running several clients.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use super::connection::{Connection, ConnectionLimits};
use super::error::{code_is_retriable, produce_code_is_definite, ClientError};
use super::records::ConsumedRecords;
use crate::protocol::create_topics::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::delete_topics::{DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse};
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use crate::protocol::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use crate::protocol::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse, MetadataResponsePartition,
};
use crate::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use crate::protocol::record_batch::DECOMPRESSED_BATCH_BYTES_MAX;
use crate::protocol::types::{NodeId, Offset};

/// What a [`Client`] needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// `host:port` of brokers to ask for metadata first.
    pub bootstrap: Vec<String>,
    pub client_id: String,
    /// How long one request may wait for its response (plus the broker's own wait).
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// Retries after the first attempt of an operation.
    pub retries_max: u32,
    pub retry_backoff_ms: u64,
    /// Largest response accepted from a broker.
    pub response_bytes_max: usize,
    /// Largest size one fetched compressed batch may decompress to.
    pub decompressed_batch_bytes_max: usize,
    /// Metadata requests ask the broker to create missing topics.
    pub allow_auto_topic_creation: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        let limits = ConnectionLimits::default();
        ClientConfig {
            bootstrap: Vec::new(),
            client_id: "samsa-client".into(),
            request_timeout_ms: limits.request_timeout_ms,
            connect_timeout_ms: limits.connect_timeout_ms,
            retries_max: 5,
            retry_backoff_ms: 100,
            response_bytes_max: limits.response_bytes_max,
            decompressed_batch_bytes_max: DECOMPRESSED_BATCH_BYTES_MAX,
            allow_auto_topic_creation: true,
        }
    }
}

/// One partition as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub error: ErrorCode,
    /// -1 when there is no leader.
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

impl PartitionMetadata {
    /// A partition as a Metadata answer describes it.
    pub(super) fn from_wire(p: &MetadataResponsePartition) -> PartitionMetadata {
        PartitionMetadata {
            partition: p.partition_index,
            error: ErrorCode(p.error_code),
            leader_id: p.leader_id.0,
            leader_epoch: p.leader_epoch.0,
            replicas: p.replica_nodes.iter().map(|n| n.0).collect(),
            isr: p.isr_nodes.iter().map(|n| n.0).collect(),
        }
    }
}

/// One topic as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    pub name: String,
    pub error: ErrorCode,
    pub partitions: BTreeMap<i32, PartitionMetadata>,
}

/// What a Produce acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProduceAck {
    /// The offset of the first record; -1 with acks=0.
    pub base_offset: i64,
    /// The broker's append time under LogAppendTime, else -1.
    pub log_append_time: i64,
    pub log_start_offset: i64,
}

/// The knobs of one Fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchOptions {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 52_428_800,
            partition_max_bytes: 1_048_576,
            isolation_level: 0,
        }
    }
}

impl FetchOptions {
    /// A consumer's sessionless Fetch of `topics` with these knobs.
    pub fn request(&self, topics: Vec<FetchTopic>) -> FetchRequest {
        FetchRequest {
            replica_id: NodeId::NONE,
            max_wait_ms: self.max_wait_ms,
            min_bytes: self.min_bytes,
            max_bytes: self.max_bytes,
            isolation_level: self.isolation_level,
            session_id: 0,
            session_epoch: -1,
            topics,
            ..FetchRequest::default()
        }
    }
}

/// What a Fetch returned for one partition. A non-retriable partition error (such as
/// OFFSET_OUT_OF_RANGE) comes back here, with the watermarks, rather than as an `Err`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Whole record batches, possibly followed by one partial batch.
    pub records: Bytes,
    pub error: ErrorCode,
}

/// A topic to create: name, partitions, replication factor, configs.
pub type NewTopic<'a> = (&'a str, i32, i16, &'a [(&'a str, &'a str)]);

/// Which connection a metadata-style request went out on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnKey {
    Node(i32),
    Bootstrap,
}

/// One partition-directed request.
enum PartitionOp<'a> {
    Produce {
        records: &'a Bytes,
        acks: i16,
        timeout_ms: i32,
    },
    Fetch {
        offset: i64,
        options: FetchOptions,
    },
    ListOffsets {
        timestamp: i64,
    },
}

enum PartitionReply {
    Produce(ProduceAck),
    Fetch(Fetched),
    ListOffsets(i64, i64),
}

/// A Kafka client; see the module docs.
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    brokers: BTreeMap<i32, String>,
    topics: BTreeMap<String, TopicMetadata>,
    controller_id: i32,
    connections: BTreeMap<i32, Connection>,
    /// A connection to a bootstrap address, used until metadata names the brokers.
    bootstrap_conn: Option<Connection>,
}

impl Client {
    /// A client that connects lazily, on its first request.
    pub fn new(config: ClientConfig) -> Client {
        Client {
            config,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            controller_id: -1,
            connections: BTreeMap::new(),
            bootstrap_conn: None,
        }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The request timeout as the `timeout_ms` field of an admin request (Kafka's INT32).
    pub(super) fn admin_timeout_ms(&self) -> i32 {
        i32::try_from(self.config.request_timeout_ms).unwrap_or(i32::MAX)
    }

    pub(super) fn limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            response_bytes_max: self.config.response_bytes_max,
            request_timeout_ms: self.config.request_timeout_ms,
            connect_timeout_ms: self.config.connect_timeout_ms,
        }
    }

    /// The brokers of the last metadata answer: node id to `host:port`.
    pub fn brokers(&self) -> &BTreeMap<i32, String> {
        &self.brokers
    }

    /// The controller of the last metadata answer, -1 if unknown.
    pub fn controller_id(&self) -> i32 {
        self.controller_id
    }

    /// The cached metadata of `topic`, without asking the cluster.
    pub fn cached_topic(&self, topic: &str) -> Option<&TopicMetadata> {
        self.topics.get(topic)
    }

    /// Forgets the cached metadata of `topic` (after an admin change to it), so the next
    /// request about it asks the cluster.
    pub fn forget_topic(&mut self, topic: &str) {
        self.topics.remove(topic);
    }

    /// Drops every connection (they reopen on demand) and the metadata cache.
    pub fn reset(&mut self) {
        self.connections.clear();
        self.bootstrap_conn = None;
        self.topics.clear();
    }

    fn conn_mut(&mut self, key: ConnKey) -> Option<&mut Connection> {
        match key {
            ConnKey::Node(id) => self.connections.get_mut(&id),
            ConnKey::Bootstrap => self.bootstrap_conn.as_mut(),
        }
    }

    fn drop_conn(&mut self, key: ConnKey) {
        match key {
            ConnKey::Node(id) => {
                self.connections.remove(&id);
            }
            ConnKey::Bootstrap => self.bootstrap_conn = None,
        }
    }

    /// A live connection to some broker, for requests any broker answers. `skip` lists the
    /// addresses that already failed in this round.
    async fn any_connection(&mut self, skip: &[String]) -> Result<ConnKey, ClientError> {
        self.connections.retain(|_, c| !c.is_broken());
        if self
            .bootstrap_conn
            .as_ref()
            .is_some_and(Connection::is_broken)
        {
            self.bootstrap_conn = None;
        }
        let usable = |c: &Connection| !skip.iter().any(|s| s == c.addr());
        if let Some((&id, _)) = self.connections.iter().find(|(_, c)| usable(c)) {
            return Ok(ConnKey::Node(id));
        }
        if self.bootstrap_conn.as_ref().is_some_and(usable) {
            return Ok(ConnKey::Bootstrap);
        }
        let mut candidates: Vec<String> = self.config.bootstrap.clone();
        for addr in self.brokers.values() {
            if !candidates.contains(addr) {
                candidates.push(addr.clone());
            }
        }
        candidates.retain(|addr| !skip.contains(addr));
        let mut last = None;
        for addr in &candidates {
            match Connection::connect(addr, &self.config.client_id, self.limits()).await {
                Ok(conn) => {
                    self.bootstrap_conn = Some(conn);
                    return Ok(ConnKey::Bootstrap);
                }
                Err(err) => last = Some(Box::new(err)),
            }
        }
        Err(ClientError::NoBrokerReachable {
            addrs: candidates,
            last,
        })
    }

    /// Sends a request to any broker, moving to the next one on a network failure. `make`
    /// builds the request for the version negotiated with that broker.
    pub(super) async fn send_any<Req, Resp>(
        &mut self,
        api_key: i16,
        make: impl Fn(i16) -> Req,
    ) -> Result<Resp, ClientError>
    where
        Req: crate::protocol::message::Message,
        Resp: crate::protocol::message::Message,
    {
        let mut failed: Vec<String> = Vec::new();
        loop {
            let key = self.any_connection(&failed).await?;
            let Some(conn) = self.conn_mut(key) else {
                return Err(ClientError::NoBrokerReachable {
                    addrs: failed,
                    last: None,
                });
            };
            let addr = conn.addr().to_owned();
            let version = conn.version_for(api_key)?;
            match conn
                .send::<Req, Resp>(api_key, version, &make(version))
                .await
            {
                Ok(resp) => return Ok(resp),
                Err(err) if err.is_retriable() => {
                    self.drop_conn(key);
                    failed.push(addr);
                    // Leave the loop once every known address failed: any_connection then
                    // reports NoBrokerReachable, but this error says more.
                    let known = self.config.bootstrap.len() + self.brokers.len();
                    if failed.len() >= known.max(1) {
                        return Err(err);
                    }
                }
                Err(err) => {
                    if conn_is_broken(self.conn_mut(key)) {
                        self.drop_conn(key);
                    }
                    return Err(err);
                }
            }
        }
    }

    /// Asks the cluster for the metadata of `topics` (all topics if empty) and updates the
    /// cache.
    pub async fn refresh(&mut self, topics: &[&str]) -> Result<(), ClientError> {
        let allow_auto_topic_creation = self.config.allow_auto_topic_creation;
        let response = self
            .metadata_response(topics, allow_auto_topic_creation)
            .await?;
        self.apply_metadata(response);
        Ok(())
    }

    /// The Metadata answer about `topics` (all topics if empty) from any broker, without
    /// touching the cache.
    pub(super) async fn metadata_response(
        &mut self,
        topics: &[&str],
        allow_auto_topic_creation: bool,
    ) -> Result<MetadataResponse, ClientError> {
        let named: Vec<MetadataRequestTopic> = topics
            .iter()
            .map(|name| MetadataRequestTopic {
                name: Some((*name).to_owned()),
                ..MetadataRequestTopic::default()
            })
            .collect();
        // "All topics" is a null list from v1 and an empty one in v0, which has no null.
        let make = |version: i16| MetadataRequest {
            topics: if named.is_empty() && version >= 1 {
                None
            } else {
                Some(named.clone())
            },
            allow_auto_topic_creation,
            ..MetadataRequest::default()
        };
        self.send_any(MetadataRequest::API_KEY, make).await
    }

    pub(super) fn apply_metadata(&mut self, response: MetadataResponse) {
        let brokers: BTreeMap<i32, String> = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        // A connection to a node that moved or left is no longer the node's.
        self.connections
            .retain(|id, conn| brokers.get(id).is_some_and(|addr| addr == conn.addr()));
        self.brokers = brokers;
        self.controller_id = response.controller_id.0;
        for topic in response.topics {
            let Some(name) = topic.name else { continue };
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| (p.partition_index, PartitionMetadata::from_wire(&p)))
                .collect();
            self.topics.insert(
                name.clone(),
                TopicMetadata {
                    name,
                    error: ErrorCode(topic.error_code),
                    partitions,
                },
            );
        }
    }

    /// Refreshes and returns the metadata of `topics` (all topics if empty).
    pub async fn metadata(
        &mut self,
        topics: &[&str],
    ) -> Result<BTreeMap<String, TopicMetadata>, ClientError> {
        self.refresh(topics).await?;
        Ok(self
            .topics
            .iter()
            .filter(|(name, _)| topics.is_empty() || topics.contains(&name.as_str()))
            .map(|(name, meta)| (name.clone(), meta.clone()))
            .collect())
    }

    fn cached_leader(&self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        let kafka = |code| ClientError::Kafka {
            code,
            message: None,
            topic: topic.to_owned(),
            partition,
        };
        let Some(meta) = self.topics.get(topic) else {
            return Err(kafka(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
        };
        if meta.error != ErrorCode::NONE {
            return Err(kafka(meta.error));
        }
        let Some(p) = meta.partitions.get(&partition) else {
            return Err(kafka(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
        };
        if p.leader_id < 0 {
            let code = if p.error == ErrorCode::NONE {
                ErrorCode::LEADER_NOT_AVAILABLE
            } else {
                p.error
            };
            return Err(kafka(code));
        }
        Ok(p.leader_id)
    }

    /// The node id of the leader of `topic`-`partition`, asking the cluster if the cache does
    /// not know it.
    pub async fn leader(&mut self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        if let Ok(id) = self.cached_leader(topic, partition) {
            return Ok(id);
        }
        self.refresh(&[topic]).await?;
        self.cached_leader(topic, partition)
    }

    /// The connection to broker `node_id` (as the metadata cache names it), opened if needed:
    /// for requests this client has no method for.
    pub async fn broker_connection(
        &mut self,
        node_id: i32,
    ) -> Result<&mut Connection, ClientError> {
        if self
            .connections
            .get(&node_id)
            .is_some_and(Connection::is_broken)
        {
            self.connections.remove(&node_id);
        }
        if !self.connections.contains_key(&node_id) {
            let addr = self
                .brokers
                .get(&node_id)
                .cloned()
                .ok_or(ClientError::UnknownBroker { node_id })?;
            let conn = Connection::connect(&addr, &self.config.client_id, self.limits()).await?;
            self.connections.insert(node_id, conn);
        }
        self.connections
            .get_mut(&node_id)
            .ok_or(ClientError::UnknownBroker { node_id })
    }

    /// What to do after a failed attempt that will be retried: forget what may be stale,
    /// then wait.
    async fn recover(&mut self, topic: &str, err: &ClientError) {
        self.forget(topic, err);
        crate::rt::time::sleep(Duration::from_millis(self.config.retry_backoff_ms)).await;
    }

    /// Drops what a retriable error says may be stale: the topic's metadata (its leaders),
    /// broken connections, and the brokers when one was unknown.
    fn forget(&mut self, topic: &str, err: &ClientError) {
        self.topics.remove(topic);
        self.connections.retain(|_, c| !c.is_broken());
        if matches!(err, ClientError::UnknownBroker { .. }) {
            self.brokers.clear();
        }
    }

    /// One attempt of a partition-directed request at the current leader.
    async fn partition_once(
        &mut self,
        topic: &str,
        partition: i32,
        op: &PartitionOp<'_>,
    ) -> Result<PartitionReply, ClientError> {
        let leader = self.leader(topic, partition).await?;
        let request_timeout_ms = self.config.request_timeout_ms;
        let conn = self.broker_connection(leader).await?;
        let addr = conn.addr().to_owned();
        let missing = |api| ClientError::MissingPartition {
            addr: addr.clone(),
            api,
            topic: topic.to_owned(),
            partition,
        };
        let kafka = |code: i16, message: Option<String>| ClientError::Kafka {
            code: ErrorCode(code),
            message,
            topic: topic.to_owned(),
            partition,
        };
        match op {
            PartitionOp::Produce {
                records,
                acks,
                timeout_ms,
            } => {
                let api_key = ProduceRequest::API_KEY;
                let version = conn.version_for(api_key)?;
                let request = ProduceRequest {
                    transactional_id: None,
                    acks: *acks,
                    timeout_ms: *timeout_ms,
                    topic_data: vec![TopicProduceData {
                        name: topic.to_owned(),
                        partition_data: vec![PartitionProduceData {
                            index: partition,
                            records: Some((*records).clone()),
                        }],
                        ..TopicProduceData::default()
                    }],
                };
                if *acks == 0 {
                    conn.send_no_response(api_key, version, &request).await?;
                    return Ok(PartitionReply::Produce(ProduceAck {
                        base_offset: -1,
                        log_append_time: -1,
                        log_start_offset: -1,
                    }));
                }
                let wait_ms = u64::try_from(*timeout_ms).unwrap_or(0);
                let response: ProduceResponse = conn
                    .send_with_timeout(
                        api_key,
                        version,
                        &request,
                        request_timeout_ms.saturating_add(wait_ms),
                    )
                    .await?;
                let p = response
                    .responses
                    .iter()
                    .filter(|t| t.name == topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == partition)
                    .ok_or_else(|| missing("Produce"))?;
                if p.error_code != 0 {
                    return Err(kafka(p.error_code, p.error_message.clone()));
                }
                Ok(PartitionReply::Produce(ProduceAck {
                    base_offset: p.base_offset.0,
                    log_append_time: p.log_append_time_ms,
                    log_start_offset: p.log_start_offset.0,
                }))
            }
            PartitionOp::Fetch { offset, options } => {
                let api_key = FetchRequest::API_KEY;
                let version = conn.version_for(api_key)?;
                let request = options.request(vec![FetchTopic {
                    topic: topic.to_owned(),
                    partitions: vec![FetchPartition {
                        partition,
                        fetch_offset: Offset(*offset),
                        partition_max_bytes: options.partition_max_bytes,
                        ..FetchPartition::default()
                    }],
                    ..FetchTopic::default()
                }]);
                let wait_ms = u64::try_from(options.max_wait_ms).unwrap_or(0);
                let response: FetchResponse = conn
                    .send_with_timeout(
                        api_key,
                        version,
                        &request,
                        request_timeout_ms.saturating_add(wait_ms),
                    )
                    .await?;
                if response.error_code != 0 {
                    return Err(kafka(response.error_code, None));
                }
                let p = response
                    .responses
                    .into_iter()
                    .filter(|t| t.topic == topic)
                    .flat_map(|t| t.partitions.into_iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| missing("Fetch"))?;
                if code_is_retriable(ErrorCode(p.error_code)) {
                    return Err(kafka(p.error_code, None));
                }
                Ok(PartitionReply::Fetch(Fetched {
                    high_watermark: p.high_watermark.0,
                    last_stable_offset: p.last_stable_offset.0,
                    log_start_offset: p.log_start_offset.0,
                    records: p.records.unwrap_or_default(),
                    error: ErrorCode(p.error_code),
                }))
            }
            PartitionOp::ListOffsets { timestamp } => {
                let api_key = ListOffsetsRequest::API_KEY;
                let version = conn.version_for(api_key)?;
                let request = ListOffsetsRequest {
                    replica_id: NodeId::NONE,
                    isolation_level: 0,
                    topics: vec![ListOffsetsTopic {
                        name: topic.to_owned(),
                        partitions: vec![ListOffsetsPartition {
                            partition_index: partition,
                            timestamp: *timestamp,
                            ..ListOffsetsPartition::default()
                        }],
                    }],
                    timeout_ms: i32::try_from(request_timeout_ms).unwrap_or(i32::MAX),
                };
                let response: ListOffsetsResponse = conn.send(api_key, version, &request).await?;
                let p = response
                    .topics
                    .iter()
                    .filter(|t| t.name == topic)
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| missing("ListOffsets"))?;
                if p.error_code != 0 {
                    return Err(kafka(p.error_code, None));
                }
                Ok(PartitionReply::ListOffsets(p.offset.0, p.timestamp))
            }
        }
    }

    /// Runs `op` with retries. `produce_acks` is set for a produce, whose attempts may leave
    /// the outcome unknown.
    async fn partition_with_retries(
        &mut self,
        topic: &str,
        partition: i32,
        op: PartitionOp<'_>,
    ) -> Result<PartitionReply, ClientError> {
        let produce_acks = match op {
            PartitionOp::Produce { acks, .. } => Some(acks),
            _ => None,
        };
        let mut maybe_written = false;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let err = match self.partition_once(topic, partition, &op).await {
                Ok(reply) => return Ok(reply),
                Err(err) => err,
            };
            if let Some(acks) = produce_acks {
                maybe_written |= err.maybe_delivered()
                    || err
                        .code()
                        .is_some_and(|code| !produce_code_is_definite(code, acks));
            }
            if err.is_retriable() && attempts <= self.config.retries_max {
                self.recover(topic, &err).await;
                continue;
            }
            if err.is_retriable() {
                // Out of retries: the next operation still starts from fresh metadata, so that
                // a client that does not retry follows a leader that moved.
                self.forget(topic, &err);
            }
            if maybe_written {
                return Err(ClientError::UnknownOutcome {
                    topic: topic.to_owned(),
                    partition,
                    attempts,
                    last: Box::new(err),
                });
            }
            return Err(err);
        }
    }

    /// Appends `records` (whole v2 batches) to `topic`-`partition`, retrying retriable errors
    /// up to `retries_max` times. `timeout_ms` is how long the broker may wait for acks=all.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
        timeout_ms: i32,
    ) -> Result<ProduceAck, ClientError> {
        let op = PartitionOp::Produce {
            records: &records,
            acks,
            timeout_ms,
        };
        match self.partition_with_retries(topic, partition, op).await? {
            PartitionReply::Produce(ack) => Ok(ack),
            _ => unreachable!("a produce is answered by a produce reply"),
        }
    }

    /// Fetches from `topic`-`partition` at `offset`, retrying retriable errors.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        options: FetchOptions,
    ) -> Result<Fetched, ClientError> {
        let op = PartitionOp::Fetch { offset, options };
        match self.partition_with_retries(topic, partition, op).await? {
            PartitionReply::Fetch(fetched) => Ok(fetched),
            _ => unreachable!("a fetch is answered by a fetch reply"),
        }
    }

    /// The records of `fetched` at or above `from_offset`; see [`ConsumedRecords`].
    pub fn records(
        &self,
        topic: &str,
        partition: i32,
        fetched: &Fetched,
        from_offset: i64,
    ) -> ConsumedRecords {
        ConsumedRecords::new(
            topic,
            partition,
            fetched.records.clone(),
            from_offset,
            self.config.decompressed_batch_bytes_max,
        )
    }

    /// The offset (and its timestamp) for `timestamp`: -2 earliest, -1 latest, -3 the record
    /// with the largest timestamp, else the first offset whose timestamp is at or above it.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<(i64, i64), ClientError> {
        let op = PartitionOp::ListOffsets { timestamp };
        match self.partition_with_retries(topic, partition, op).await? {
            PartitionReply::ListOffsets(offset, ts) => Ok((offset, ts)),
            _ => unreachable!("a list-offsets is answered by a list-offsets reply"),
        }
    }

    /// Creates topics; one result per topic named in the answer. TOPIC_ALREADY_EXISTS is
    /// reported as an error like any other: the caller decides whether it matters.
    pub async fn create_topics(
        &mut self,
        topics: &[NewTopic<'_>],
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        needs_one(topics, "create_topics needs at least one topic")?;
        let request = CreateTopicsRequest {
            topics: topics
                .iter()
                .map(|(name, partitions, rf, configs)| CreatableTopic {
                    name: (*name).to_owned(),
                    num_partitions: *partitions,
                    replication_factor: *rf,
                    assignments: Vec::new(),
                    configs: configs
                        .iter()
                        .map(|(k, v)| CreatableTopicConfig {
                            name: (*k).to_owned(),
                            value: Some((*v).to_owned()),
                        })
                        .collect(),
                })
                .collect(),
            timeout_ms: self.admin_timeout_ms(),
            validate_only: false,
        };
        let response: CreateTopicsResponse = self
            .admin_with_retries(CreateTopicsRequest::API_KEY, &request)
            .await?;
        let results = topic_results(
            response
                .topics
                .into_iter()
                .map(|t| (t.name, t.error_code, t.error_message)),
        );
        for (name, ..) in topics {
            self.topics.remove(*name);
        }
        Ok(results)
    }

    /// Deletes topics by name; one result per topic named in the answer.
    pub async fn delete_topics(
        &mut self,
        topics: &[&str],
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        needs_one(topics, "delete_topics needs at least one topic")?;
        let timeout_ms = self.admin_timeout_ms();
        // v6 names topics in `topics`, older versions in `topic_names`; fill in the one the
        // negotiated version has at send time (see admin_with_retries' use of `versioned`).
        let names: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
        let request = DeleteTopicsRequest {
            topics: Vec::new(),
            topic_names: names.clone(),
            timeout_ms,
        };
        let request_v6 = DeleteTopicsRequest {
            topics: names
                .iter()
                .map(|n| DeleteTopicState {
                    name: Some(n.clone()),
                    ..DeleteTopicState::default()
                })
                .collect(),
            topic_names: Vec::new(),
            timeout_ms,
        };
        let api_key = DeleteTopicsRequest::API_KEY;
        let response: DeleteTopicsResponse = self
            .admin_versioned(api_key, |version| {
                if version >= 6 {
                    request_v6.clone()
                } else {
                    request.clone()
                }
            })
            .await?;
        for name in topics {
            self.topics.remove(*name);
        }
        Ok(topic_results(response.responses.into_iter().map(|r| {
            (r.name.unwrap_or_default(), r.error_code, r.error_message)
        })))
    }

    /// Asks for a producer id and epoch (InitProducerId, API 22) for an idempotent producer
    /// (`transactional_id` None) or a transactional one. Any broker answers an idempotent
    /// producer. Network errors and retriable codes (such as COORDINATOR_LOAD_IN_PROGRESS) are
    /// retried up to `retries_max` times. A broker that does not advertise the API gives
    /// [`ClientError::UnsupportedApi`] naming InitProducerId.
    pub async fn init_producer_id(
        &mut self,
        transactional_id: Option<&str>,
        transaction_timeout_ms: i32,
    ) -> Result<(i64, i16), ClientError> {
        use crate::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
        let request = InitProducerIdRequest {
            transactional_id: transactional_id.map(str::to_owned),
            transaction_timeout_ms,
            ..InitProducerIdRequest::default()
        };
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let response: InitProducerIdResponse = self
                .admin_with_retries(InitProducerIdRequest::API_KEY, &request)
                .await?;
            let code = ErrorCode(response.error_code);
            if code == ErrorCode::NONE {
                return Ok((response.producer_id.0, response.producer_epoch.0));
            }
            if code_is_retriable(code) && attempts <= self.config.retries_max {
                crate::rt::time::sleep(Duration::from_millis(self.config.retry_backoff_ms)).await;
                continue;
            }
            return Err(ClientError::Kafka {
                code,
                message: Some("InitProducerId".into()),
                topic: transactional_id
                    .unwrap_or("(idempotent producer)")
                    .to_owned(),
                partition: -1,
            });
        }
    }

    async fn admin_with_retries<Req, Resp>(
        &mut self,
        api_key: i16,
        req: &Req,
    ) -> Result<Resp, ClientError>
    where
        Req: crate::protocol::message::Message,
        Resp: crate::protocol::message::Message,
    {
        self.admin_versioned(api_key, |_| req.clone()).await
    }

    /// An admin request to any broker (Kafka forwards it to the controller), retried on
    /// network errors. `make` builds the request for the negotiated version.
    pub(super) async fn admin_versioned<Req, Resp>(
        &mut self,
        api_key: i16,
        make: impl Fn(i16) -> Req,
    ) -> Result<Resp, ClientError>
    where
        Req: crate::protocol::message::Message,
        Resp: crate::protocol::message::Message,
    {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let result = async {
                let key = self.any_connection(&[]).await?;
                let conn = self.conn_mut(key).ok_or(ClientError::NoBrokerReachable {
                    addrs: Vec::new(),
                    last: None,
                })?;
                let version = conn.version_for(api_key)?;
                conn.send::<Req, Resp>(api_key, version, &make(version))
                    .await
            }
            .await;
            match result {
                Ok(resp) => return Ok(resp),
                Err(err) if err.is_retriable() && attempts <= self.config.retries_max => {
                    self.connections.retain(|_, c| !c.is_broken());
                    if self
                        .bootstrap_conn
                        .as_ref()
                        .is_some_and(Connection::is_broken)
                    {
                        self.bootstrap_conn = None;
                    }
                    crate::rt::time::sleep(Duration::from_millis(self.config.retry_backoff_ms))
                        .await;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

fn conn_is_broken(conn: Option<&mut Connection>) -> bool {
    conn.is_none_or(|c| c.is_broken())
}

/// Refuses an admin call given nothing to act on; `reason` names the call and what it needs.
pub(super) fn needs_one<T>(items: &[T], reason: &str) -> Result<(), ClientError> {
    if items.is_empty() {
        return Err(ClientError::InvalidArgument {
            reason: reason.into(),
        });
    }
    Ok(())
}

/// The per-topic results of an admin answer, from each topic's `(name, error code, message)`.
pub(super) fn topic_results(
    answers: impl Iterator<Item = (String, i16, Option<String>)>,
) -> Vec<(String, Result<(), ClientError>)> {
    answers
        .map(|(name, code, message)| {
            let result = topic_result(&name, code, message);
            (name, result)
        })
        .collect()
}

fn topic_result(name: &str, code: i16, message: Option<String>) -> Result<(), ClientError> {
    if code == 0 {
        Ok(())
    } else {
        Err(ClientError::Kafka {
            code: ErrorCode(code),
            message,
            topic: name.to_owned(),
            partition: -1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::metadata::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };

    fn client_with(response: MetadataResponse) -> Client {
        let mut client = Client::new(ClientConfig::default());
        client.apply_metadata(response);
        client
    }

    #[test]
    fn client_metadata_cache_answers_leaders_and_names_missing_ones() {
        let response = MetadataResponse {
            brokers: vec![MetadataResponseBroker {
                node_id: NodeId(1),
                host: "h1".into(),
                port: 9092,
                rack: None,
            }],
            controller_id: NodeId(1),
            topics: vec![
                MetadataResponseTopic {
                    name: Some("t".into()),
                    partitions: vec![
                        MetadataResponsePartition {
                            partition_index: 0,
                            leader_id: NodeId(1),
                            ..MetadataResponsePartition::default()
                        },
                        MetadataResponsePartition {
                            partition_index: 1,
                            leader_id: NodeId(-1),
                            ..MetadataResponsePartition::default()
                        },
                    ],
                    ..MetadataResponseTopic::default()
                },
                MetadataResponseTopic {
                    name: Some("gone".into()),
                    error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
                    ..MetadataResponseTopic::default()
                },
            ],
            ..MetadataResponse::default()
        };
        let client = client_with(response);
        assert_eq!(
            client.brokers().get(&1).map(String::as_str),
            Some("h1:9092")
        );
        assert_eq!(client.cached_leader("t", 0).ok(), Some(1));
        let code = |r: Result<i32, ClientError>| r.err().and_then(|e| e.code());
        assert_eq!(
            code(client.cached_leader("t", 1)),
            Some(ErrorCode::LEADER_NOT_AVAILABLE)
        );
        assert_eq!(
            code(client.cached_leader("t", 7)),
            Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
        );
        assert_eq!(
            code(client.cached_leader("gone", 0)),
            Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
        );
        assert_eq!(
            code(client.cached_leader("never", 0)),
            Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
        );
    }
}
