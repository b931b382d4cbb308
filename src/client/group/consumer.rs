//! [`GroupConsumer`]: a consumer that joins a group, consumes the partitions the group gives
//! it and commits what it consumed (Kafka's `KafkaConsumer` with `subscribe`). It drives the
//! IO-free [`Member`] over its own connection to the coordinator and fetches through a
//! [`Client`].
//!
//! One task does everything, as in Kafka's consumer before its background heartbeat thread:
//! [`GroupConsumer::poll`] first runs the group protocol (join, sync, a heartbeat when due),
//! then fetches once from each leader of the owned partitions (the broker holds a fetch up to
//! `fetch.max_wait_ms`). A caller must poll at least once per heartbeat interval, or the
//! coordinator counts the member dead after `session_timeout_ms`.
//!
//! Positions: a newly assigned partition starts at its committed offset, else where
//! `auto_offset_reset` says. With `enable_auto_commit`, positions are committed every
//! `auto_commit_interval_ms`, before partitions are revoked, and on close; a partition whose
//! position has not moved since its last commit is left out. Lost partitions (the member was
//! fenced) are dropped without a commit.
//!
//! Invariants:
//! - Only owned partitions have positions, and a position only moves forward within one
//!   ownership, past whole batches the broker returned.
//! - Every retry loop is bounded: [`COORDINATOR_ATTEMPTS_MAX`] FindCoordinator attempts per
//!   lookup, [`GROUP_STEPS_MAX`] group protocol steps per poll.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::assignor::TopicPartitions;
use super::member::{Event, Member, MemberConfig, MemberState, Request};
use super::offsets::{self, Committer, TopicPartition};
use crate::client::cluster::{Client, ClientConfig, FetchOptions};
use crate::client::connection::Connection;
use crate::client::error::{code_is_retriable, ClientError};
use crate::client::records::{self, ConsumedRecord, ConsumedRecords};
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use crate::protocol::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::join_group::{JoinGroupRequest, JoinGroupResponse};
use crate::protocol::leave_group::{LeaveGroupRequest, LeaveGroupResponse};
use crate::protocol::sync_group::{SyncGroupRequest, SyncGroupResponse};
use crate::protocol::types::Offset;
use crate::rt::time;

/// FindCoordinator attempts in one lookup (COORDINATOR_NOT_AVAILABLE while
/// `__consumer_offsets` is being created), `retry_backoff_ms` apart.
pub const COORDINATOR_ATTEMPTS_MAX: u32 = 50;
/// From this version LeaveGroup names a batch of members (KIP-345).
pub const LEAVE_GROUP_BATCH_VERSION_MIN: i16 = 3;
/// Group protocol steps (requests and events) in one poll before it fetches.
pub const GROUP_STEPS_MAX: u32 = 64;

/// Where a partition without a committed offset starts (`auto.offset.reset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Fail the poll instead.
    None,
}

/// The consumer's settings, under the Java client's names where it has them.
#[derive(Clone, Debug)]
pub struct GroupConsumerConfig {
    pub client: ClientConfig,
    pub member: MemberConfig,
    pub enable_auto_commit: bool,
    pub auto_commit_interval_ms: i64,
    pub auto_offset_reset: OffsetReset,
    pub fetch: FetchOptions,
}

impl Default for GroupConsumerConfig {
    fn default() -> Self {
        GroupConsumerConfig {
            client: ClientConfig::default(),
            member: MemberConfig::default(),
            enable_auto_commit: true,
            auto_commit_interval_ms: 5_000,
            auto_offset_reset: OffsetReset::Latest,
            fetch: FetchOptions::default(),
        }
    }
}

/// One consumed record and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    pub topic: String,
    pub partition: i32,
    pub record: ConsumedRecord,
}

#[derive(Debug)]
pub struct GroupConsumer {
    config: GroupConsumerConfig,
    client: Client,
    member: Member,
    coordinator: Option<Connection>,
    origin: time::Instant,
    /// The next offset to consume of each owned partition whose start is known.
    positions: BTreeMap<TopicPartition, i64>,
    /// Owned partitions whose start is not known yet.
    unpositioned: BTreeSet<TopicPartition>,
    /// What was last committed (or found committed) per owned partition.
    committed: BTreeMap<TopicPartition, i64>,
    next_auto_commit_ms: i64,
    /// A poll began and did not finish (its future was dropped, e.g. at SIGINT): a
    /// connection may hold half a request or an unread answer, so [`GroupConsumer::close`]
    /// starts on fresh ones.
    polling: bool,
}

fn flatten(partitions: &TopicPartitions) -> Vec<TopicPartition> {
    partitions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .collect()
}

fn invalid(reason: impl Into<String>) -> ClientError {
    ClientError::InvalidArgument {
        reason: reason.into(),
    }
}

impl GroupConsumer {
    /// A consumer of `config.member.group_id` subscribing to `topics`; it joins on the
    /// first poll.
    pub fn new(config: GroupConsumerConfig, topics: &[&str]) -> Result<GroupConsumer, ClientError> {
        if config.member.group_id.is_empty() {
            return Err(invalid("a group consumer needs a group id"));
        }
        if topics.is_empty() {
            return Err(invalid("a group consumer needs a topic to subscribe to"));
        }
        if config.member.assignors.is_empty() {
            return Err(invalid("a group consumer needs an assignor"));
        }
        if config.member.heartbeat_interval_ms <= 0
            || config.member.heartbeat_interval_ms >= i64::from(config.member.session_timeout_ms)
        {
            return Err(invalid(
                "heartbeat.interval.ms must be positive and below session.timeout.ms",
            ));
        }
        let subscription = topics.iter().map(|t| t.to_string()).collect();
        let member = Member::new(config.member.clone(), subscription);
        Ok(GroupConsumer {
            client: Client::new(config.client.clone()),
            member,
            coordinator: None,
            origin: time::now(),
            positions: BTreeMap::new(),
            unpositioned: BTreeSet::new(),
            committed: BTreeMap::new(),
            next_auto_commit_ms: config.auto_commit_interval_ms,
            polling: false,
            config,
        })
    }

    fn now_ms(&self) -> i64 {
        let elapsed = time::now()
            .saturating_duration_since(self.origin)
            .as_millis();
        i64::try_from(elapsed).unwrap_or(i64::MAX)
    }

    /// The partitions the group gave this member.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        flatten(self.member.owned())
    }

    pub fn member_id(&self) -> &str {
        self.member.member_id()
    }

    /// Whether the member is in a stable generation.
    pub fn is_stable(&self) -> bool {
        self.member.state() == MemberState::Stable
    }

    /// The next offset this member will consume of a partition it owns.
    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.positions.get(&(topic.to_string(), partition)).copied()
    }

    /// Moves the position of an owned partition (the next offset to consume); a partition
    /// this member does not own is ignored.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) {
        let tp = (topic.to_string(), partition);
        if let Some(position) = self.positions.get_mut(&tp) {
            *position = offset;
        }
    }

    /// The connection to the coordinator, found again if it was lost.
    async fn coordinator(&mut self) -> Result<&mut Connection, ClientError> {
        if self.coordinator.as_ref().is_some_and(Connection::is_broken) {
            self.coordinator = None;
        }
        if self.coordinator.is_none() {
            let group = self.config.member.group_id.clone();
            let mut last = None;
            for _ in 0..COORDINATOR_ATTEMPTS_MAX {
                match self.client.find_coordinator(&group).await {
                    Ok(found) => match self.client.connect(&found.addr).await {
                        Ok(conn) => {
                            self.coordinator = Some(conn);
                            break;
                        }
                        Err(e) => last = Some(e),
                    },
                    Err(e) if e.is_retriable() => last = Some(e),
                    Err(e) => return Err(e),
                }
                self.client.reset();
                time::sleep(Duration::from_millis(self.config.client.retry_backoff_ms)).await;
            }
            if self.coordinator.is_none() {
                return Err(last.unwrap_or(ClientError::Group {
                    group,
                    api: "FindCoordinator",
                    code: ErrorCode::COORDINATOR_NOT_AVAILABLE,
                }));
            }
        }
        self.coordinator
            .as_mut()
            .ok_or_else(|| invalid("no coordinator connection"))
    }

    /// Runs the group protocol until nothing is due; then, while Stable, finds the start
    /// of newly assigned partitions.
    async fn drive_group(&mut self) -> Result<(), ClientError> {
        for _ in 0..GROUP_STEPS_MAX {
            let now_ms = self.now_ms();
            let ready = self.member.ready(now_ms);
            let idle = ready.events.is_empty() && ready.request.is_none();
            for event in ready.events {
                self.on_event(event).await?;
            }
            if let Some(request) = ready.request {
                self.send(request).await?;
            }
            if idle {
                break;
            }
        }
        if self.is_stable() && !self.unpositioned.is_empty() {
            self.position_new_partitions().await?;
        }
        Ok(())
    }

    async fn on_event(&mut self, event: Event) -> Result<(), ClientError> {
        match event {
            Event::Assigned(partitions) => {
                for tp in flatten(&partitions) {
                    self.unpositioned.insert(tp);
                }
            }
            Event::Revoked(partitions) => {
                let revoked = flatten(&partitions);
                if self.config.enable_auto_commit {
                    // Best effort, as Kafka's consumer: a refused commit is logged, the
                    // partitions go anyway.
                    if let Err(e) = self.commit_partitions(&revoked).await {
                        tracing::warn!("committing revoked partitions failed: {e}");
                    }
                }
                self.forget(&revoked);
            }
            Event::Lost(partitions) => self.forget(&flatten(&partitions)),
            Event::NeedMetadata(topics) => {
                let names: Vec<&str> = topics.iter().map(String::as_str).collect();
                let counts = match self.client.describe_topics(&names).await {
                    Ok(described) => described
                        .into_iter()
                        .filter(|t| t.error == ErrorCode::NONE)
                        .map(|t| {
                            let n = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
                            (t.name, n)
                        })
                        .collect(),
                    Err(e) if e.is_retriable() => {
                        tracing::warn!("metadata for the assignment failed: {e}");
                        let now_ms = self.now_ms();
                        self.member.metadata_failed(now_ms);
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                self.member.metadata(counts);
            }
            Event::Fatal(code) => {
                return Err(ClientError::Group {
                    group: self.config.member.group_id.clone(),
                    api: "JoinGroup",
                    code,
                })
            }
        }
        Ok(())
    }

    fn forget(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.positions.remove(tp);
            self.unpositioned.remove(tp);
            self.committed.remove(tp);
        }
    }

    /// Sends one group request and hands the answer to the member.
    async fn send(&mut self, request: Request) -> Result<(), ClientError> {
        let rebalance_ms = u64::try_from(self.config.member.rebalance_timeout_ms).unwrap_or(0);
        let session_ms = u64::try_from(self.config.member.session_timeout_ms).unwrap_or(0);
        let base_ms = self.config.client.request_timeout_ms;
        let result = match request {
            Request::Join(join) => {
                // The coordinator holds a JoinGroup until the rebalance completes.
                let r = self
                    .call::<JoinGroupRequest, JoinGroupResponse>(&join, base_ms + rebalance_ms)
                    .await;
                r.map(|response| {
                    let now_ms = self.now_ms();
                    self.member.joined(now_ms, response);
                })
            }
            Request::Sync(sync) => {
                let r = self
                    .call::<SyncGroupRequest, SyncGroupResponse>(&sync, base_ms + session_ms)
                    .await;
                r.map(|response| {
                    let now_ms = self.now_ms();
                    self.member.synced(now_ms, response);
                })
            }
            Request::Heartbeat(heartbeat) => {
                let r = self
                    .call::<HeartbeatRequest, HeartbeatResponse>(&heartbeat, base_ms)
                    .await;
                r.map(|response| {
                    let now_ms = self.now_ms();
                    self.member.heartbeat_answered(now_ms, response);
                })
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.is_retriable() => {
                tracing::debug!("group request failed, retrying: {e}");
                self.coordinator = None;
                let now_ms = self.now_ms();
                self.member.request_failed(now_ms);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn call<
        Req: crate::protocol::message::Message,
        Resp: crate::protocol::message::Message,
    >(
        &mut self,
        request: &Req,
        timeout_ms: u64,
    ) -> Result<Resp, ClientError> {
        let conn = self.coordinator().await?;
        let version = conn.version_for(Req::API_KEY)?;
        let response: Resp = conn
            .send_with_timeout(Req::API_KEY, version, request, timeout_ms)
            .await?;
        Ok(response)
    }

    /// Starts newly owned partitions at their committed offsets, else per
    /// `auto_offset_reset`.
    async fn position_new_partitions(&mut self) -> Result<(), ClientError> {
        let wanted: Vec<TopicPartition> = self.unpositioned.iter().cloned().collect();
        let group = self.config.member.group_id.clone();
        let fetched = {
            let conn = self.coordinator().await?;
            offsets::offset_fetch(conn, &group, Some(&wanted)).await
        };
        let committed = match fetched {
            Ok(c) => c,
            Err(e) if e.is_retriable() => {
                self.coordinator = None;
                return Ok(()); // the next poll tries again
            }
            Err(e) => return Err(e),
        };
        for tp in wanted {
            let start = match committed.get(&tp).copied().flatten() {
                Some(offset) => {
                    self.committed.insert(tp.clone(), offset);
                    offset
                }
                None => {
                    let timestamp = match self.config.auto_offset_reset {
                        OffsetReset::Earliest => -2,
                        OffsetReset::Latest => -1,
                        OffsetReset::None => {
                            return Err(invalid(format!(
                                "{}-{} has no committed offset and auto.offset.reset is none",
                                tp.0, tp.1
                            )))
                        }
                    };
                    self.client.list_offsets(&tp.0, tp.1, timestamp).await?.0
                }
            };
            self.unpositioned.remove(&tp);
            self.positions.insert(tp, start);
        }
        Ok(())
    }

    /// Commits the positions of `partitions` that moved since their last commit.
    async fn commit_partitions(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<(), ClientError> {
        let offsets: BTreeMap<TopicPartition, i64> = partitions
            .iter()
            .filter_map(|tp| self.positions.get(tp).map(|&o| (tp.clone(), o)))
            .filter(|(tp, o)| self.committed.get(tp) != Some(o))
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        let Some((generation_id, member_id)) = self.member.generation() else {
            return Ok(());
        };
        let member_id = member_id.to_owned();
        let group = self.config.member.group_id.clone();
        let instance = self.config.member.group_instance_id.clone();
        let committer = Committer {
            generation_id,
            member_id: &member_id,
            group_instance_id: instance.as_deref(),
        };
        let result = {
            let conn = self.coordinator().await?;
            offsets::offset_commit(conn, &group, committer, &offsets).await
        };
        let codes = match result {
            Ok(codes) => codes,
            Err(e) => {
                if e.is_retriable() {
                    self.coordinator = None;
                }
                return Err(e);
            }
        };
        let mut refused = None;
        for (tp, code) in codes {
            if code == ErrorCode::NONE {
                if let Some(&offset) = offsets.get(&tp) {
                    self.committed.insert(tp, offset);
                }
            } else {
                refused = Some(code);
            }
        }
        match refused {
            None => Ok(()),
            Some(code) => {
                let now_ms = self.now_ms();
                self.member.generation_refused(now_ms, code);
                Err(ClientError::Group {
                    group,
                    api: "OffsetCommit",
                    code,
                })
            }
        }
    }

    /// Commits the positions of every owned partition (Kafka's `commitSync`).
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        let owned: Vec<TopicPartition> = self.positions.keys().cloned().collect();
        self.commit_partitions(&owned).await
    }

    /// Runs the group protocol, then fetches once from each leader of the owned partitions:
    /// the records at or past each position, in offset order per partition.
    pub async fn poll(&mut self) -> Result<Vec<GroupRecord>, ClientError> {
        self.polling = true;
        let result = self.poll_once().await;
        self.polling = false;
        result
    }

    async fn poll_once(&mut self) -> Result<Vec<GroupRecord>, ClientError> {
        self.drive_group().await?;
        if self.config.enable_auto_commit && self.now_ms() >= self.next_auto_commit_ms {
            self.next_auto_commit_ms = self.now_ms() + self.config.auto_commit_interval_ms;
            if let Err(e) = self.commit().await {
                tracing::warn!("auto-commit failed: {e}");
            }
        }
        if self.positions.is_empty() || !self.is_stable() {
            // Nothing to fetch: wait a little for the group instead of spinning.
            let wait_ms = self
                .member
                .next_deadline_ms()
                .map_or(self.config.client.retry_backoff_ms, |at| {
                    u64::try_from(at.saturating_sub(self.now_ms())).unwrap_or(0)
                })
                .min(u64::try_from(self.config.fetch.max_wait_ms).unwrap_or(0));
            time::sleep(Duration::from_millis(wait_ms)).await;
            return Ok(Vec::new());
        }
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for (topic, partition) in self.positions.keys() {
            match self.client.leader(topic, *partition).await {
                Ok(leader) => by_leader
                    .entry(leader)
                    .or_default()
                    .push((topic.clone(), *partition)),
                Err(e) if e.is_retriable() => {
                    self.client.forget_topic(topic);
                    tracing::debug!("no leader for {topic}-{partition} yet: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        let mut out = Vec::new();
        for (leader, partitions) in by_leader {
            match self.fetch_from(leader, &partitions).await {
                Ok(response) => self.take_records(response, &mut out)?,
                Err(e) if e.is_retriable() => {
                    tracing::debug!("fetch from broker {leader} failed: {e}");
                    self.client.reset();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    async fn fetch_from(
        &mut self,
        leader: i32,
        partitions: &[TopicPartition],
    ) -> Result<FetchResponse, ClientError> {
        let options = self.config.fetch;
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (topic, partition) in partitions {
            let position = self
                .positions
                .get(&(topic.clone(), *partition))
                .copied()
                .unwrap_or(0);
            topics
                .entry(topic.as_str())
                .or_default()
                .push(FetchPartition {
                    partition: *partition,
                    fetch_offset: Offset(position),
                    partition_max_bytes: options.partition_max_bytes,
                    ..FetchPartition::default()
                });
        }
        let request = options.request(
            topics
                .into_iter()
                .map(|(topic, partitions)| FetchTopic {
                    topic: topic.to_owned(),
                    partitions,
                    ..FetchTopic::default()
                })
                .collect(),
        );
        let timeout_ms =
            self.config.client.request_timeout_ms + u64::try_from(options.max_wait_ms).unwrap_or(0);
        let conn = self.client.broker_connection(leader).await?;
        let version = conn.version_for(FetchRequest::API_KEY)?;
        let response: FetchResponse = conn
            .send_with_timeout(FetchRequest::API_KEY, version, &request, timeout_ms)
            .await?;
        if response.error_code != 0 {
            return Err(ClientError::Kafka {
                code: ErrorCode(response.error_code),
                message: None,
                topic: String::new(),
                partition: -1,
            });
        }
        Ok(response)
    }

    fn take_records(
        &mut self,
        response: FetchResponse,
        out: &mut Vec<GroupRecord>,
    ) -> Result<(), ClientError> {
        let decompressed_max = self.client.config().decompressed_batch_bytes_max;
        for topic in response.responses {
            for part in topic.partitions {
                let tp = (topic.topic.clone(), part.partition_index);
                let Some(&position) = self.positions.get(&tp) else {
                    continue; // revoked meanwhile
                };
                match ErrorCode(part.error_code) {
                    ErrorCode::NONE => {}
                    ErrorCode::OFFSET_OUT_OF_RANGE => {
                        let to = match self.config.auto_offset_reset {
                            OffsetReset::Earliest => part.log_start_offset.0,
                            OffsetReset::Latest => part.high_watermark.0,
                            OffsetReset::None => {
                                return Err(ClientError::Kafka {
                                    code: ErrorCode::OFFSET_OUT_OF_RANGE,
                                    message: None,
                                    topic: tp.0,
                                    partition: tp.1,
                                })
                            }
                        };
                        tracing::warn!(
                            "offset {position} is out of range for {}-{}; continuing at {to}",
                            tp.0,
                            tp.1
                        );
                        self.positions.insert(tp, to);
                        continue;
                    }
                    code if code_is_retriable(code) => {
                        self.client.forget_topic(&tp.0);
                        continue;
                    }
                    code => {
                        return Err(ClientError::Kafka {
                            code,
                            message: None,
                            topic: tp.0,
                            partition: tp.1,
                        })
                    }
                }
                let bytes = part.records.unwrap_or_default();
                let next = records::next_position(&bytes, position);
                for record in ConsumedRecords::new(&tp.0, tp.1, bytes, position, decompressed_max) {
                    out.push(GroupRecord {
                        topic: tp.0.clone(),
                        partition: tp.1,
                        record: record?,
                    });
                }
                self.positions.insert(tp, next);
            }
        }
        Ok(())
    }

    /// Commits (with auto-commit), revokes everything and leaves the group (a static member
    /// does not leave: its partitions wait for it within its session timeout).
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.polling {
            self.coordinator = None;
            self.client.reset();
        }
        if self.config.enable_auto_commit && self.is_stable() {
            if let Err(e) = self.commit().await {
                tracing::warn!("the final commit failed: {e}");
            }
        }
        let (_, leave) = self.member.leave();
        if let Some(leave) = leave {
            if let Err(e) = self.leave_group(leave).await {
                tracing::warn!("LeaveGroup failed: {e}");
            }
        }
        Ok(())
    }

    /// LeaveGroup in the negotiated version's shape: one member id before v3, a batch of
    /// members from v3 (KIP-345).
    async fn leave_group(&mut self, mut leave: LeaveGroupRequest) -> Result<(), ClientError> {
        let timeout_ms = self.config.client.request_timeout_ms;
        let conn = self.coordinator().await?;
        let version = conn.version_for(LeaveGroupRequest::API_KEY)?;
        if version >= LEAVE_GROUP_BATCH_VERSION_MIN {
            leave.member_id = String::new();
        } else {
            leave.members.clear();
        }
        let response: LeaveGroupResponse = conn
            .send_with_timeout(LeaveGroupRequest::API_KEY, version, &leave, timeout_ms)
            .await?;
        let code = std::iter::once(response.error_code)
            .chain(response.members.iter().map(|m| m.error_code))
            .find(|&c| c != 0);
        match code {
            None => Ok(()),
            Some(code) => Err(ClientError::Group {
                group: self.config.member.group_id.clone(),
                api: "LeaveGroup",
                code: ErrorCode(code),
            }),
        }
    }
}
