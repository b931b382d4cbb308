//! [`GroupConsumer`]: a consumer that joins a group, consumes the partitions the group gives
//! it and commits what it consumed (Kafka's `KafkaConsumer` with `subscribe`). It drives the
//! IO-free [`Member`] over its own connection to the coordinator and fetches through a
//! [`Client`].
//!
//! [`GroupConsumer::poll`] first runs the group protocol (join, sync, a heartbeat when due),
//! then fetches once from each leader of the owned partitions (the broker holds a fetch up to
//! `fetch.max_wait_ms`). From the first poll on, a background task (Kafka's heartbeat thread,
//! KIP-62) sends the heartbeats of a Stable member over its own connection to the
//! coordinator, so a caller that processes records for longer than `session_timeout_ms`
//! keeps its partitions. It also runs the poll timer: a caller that does not poll for
//! `max_poll_interval_ms` is taken for stuck, and the member leaves the group (a static
//! member only drops its partitions); the next poll joins again. Both tasks drive the one
//! [`Member`] behind a mutex that is never held across an await, and the member keeps one
//! request in flight between them.
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
//!   lookup, [`GROUP_STEPS_MAX`] group protocol steps per poll; the background task makes one
//!   lookup per heartbeat and backs off per the member between failures.
//! - The background task ends with the consumer: `close` and `Drop` abort it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::assignor::TopicPartitions;
use super::member::{Background, Event, Member, MemberConfig, MemberState, Request};
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
use crate::rt::{task, time};

/// FindCoordinator attempts in one lookup (COORDINATOR_NOT_AVAILABLE while
/// `__consumer_offsets` is being created), `retry_backoff_ms` apart.
pub const COORDINATOR_ATTEMPTS_MAX: u32 = 50;
/// From this version LeaveGroup names a batch of members (KIP-345).
pub const LEAVE_GROUP_BATCH_VERSION_MIN: i16 = 3;
/// Group protocol steps (requests and events) in one poll before it fetches.
pub const GROUP_STEPS_MAX: u32 = 64;
/// The longest the background task sleeps before it looks at the member again: a poll may
/// have moved the member's deadlines meanwhile.
pub const BACKGROUND_IDLE_MS_MAX: u64 = 100;

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
    /// Shared with the background task.
    member: Arc<Mutex<Member>>,
    /// The background heartbeat task, spawned by the first poll.
    background: Option<task::JoinHandle<()>>,
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

/// The member, locked. A poisoned lock means an assertion in the member failed in the other
/// task: its state is not to be trusted, so this task stops too.
fn lock(member: &Mutex<Member>) -> MutexGuard<'_, Member> {
    match member.lock() {
        Ok(guard) => guard,
        Err(_) => panic!("the group member's state was poisoned by a failed assertion"),
    }
}

fn ms_since(origin: time::Instant) -> i64 {
    let elapsed = time::now().saturating_duration_since(origin).as_millis();
    i64::try_from(elapsed).unwrap_or(i64::MAX)
}

/// One request to the coordinator over `conn`, in the version negotiated for it.
async fn call_on<
    Req: crate::protocol::message::Message,
    Resp: crate::protocol::message::Message,
>(
    conn: &mut Connection,
    request: &Req,
    timeout_ms: u64,
) -> Result<Resp, ClientError> {
    let version = conn.version_for(Req::API_KEY)?;
    conn.send_with_timeout(Req::API_KEY, version, request, timeout_ms)
        .await
}

/// LeaveGroup in the negotiated version's shape: one member id before v3, a batch of
/// members from v3 (KIP-345).
async fn leave_group_on(
    conn: &mut Connection,
    mut leave: LeaveGroupRequest,
    timeout_ms: u64,
) -> Result<(), ClientError> {
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
            group: leave.group_id,
            api: "LeaveGroup",
            code: ErrorCode(code),
        }),
    }
}

/// Ends the poll (the poll timer runs again) also when the poll's future is dropped.
struct PollGuard {
    member: Arc<Mutex<Member>>,
    origin: time::Instant,
}

impl Drop for PollGuard {
    fn drop(&mut self) {
        // Not `lock`: a second panic while unwinding would abort the process.
        if let Ok(mut member) = self.member.lock() {
            member.poll_ended(ms_since(self.origin));
        }
    }
}

/// The background task: heartbeats while Stable, and the poll timer. It has its own client
/// and coordinator connection, so a heartbeat never waits behind a fetch or a commit.
async fn background(
    member: Arc<Mutex<Member>>,
    client_config: ClientConfig,
    origin: time::Instant,
) {
    let group = lock(&member).config().group_id.clone();
    let timeout_ms = client_config.request_timeout_ms;
    let mut client = Client::new(client_config);
    let mut coordinator: Option<Connection> = None;
    loop {
        let now_ms = ms_since(origin);
        let (action, deadline_ms) = {
            let mut m = lock(&member);
            if m.is_closed() {
                return;
            }
            let action = m.background_ready(now_ms);
            (action, m.background_deadline_ms())
        };
        match action {
            None => {
                let wait_ms = deadline_ms
                    .map_or(BACKGROUND_IDLE_MS_MAX, |at| {
                        u64::try_from(at.saturating_sub(now_ms)).unwrap_or(0)
                    })
                    .clamp(1, BACKGROUND_IDLE_MS_MAX);
                time::sleep(Duration::from_millis(wait_ms)).await;
            }
            Some(Background::Heartbeat(heartbeat)) => {
                if coordinator.as_ref().is_some_and(Connection::is_broken) {
                    coordinator = None;
                }
                let result = match coordinator.as_mut() {
                    Some(conn) => call_on(conn, &heartbeat, timeout_ms).await,
                    None => match connect_coordinator(&mut client, &group).await {
                        Ok(conn) => {
                            let conn = coordinator.insert(conn);
                            call_on(conn, &heartbeat, timeout_ms).await
                        }
                        Err(e) => Err(e),
                    },
                };
                let now_ms = ms_since(origin);
                let mut m = lock(&member);
                match result {
                    Ok(response) => m.heartbeat_answered(now_ms, response),
                    Err(e) => {
                        tracing::debug!("background heartbeat of group {group} failed: {e}");
                        coordinator = None;
                        client.reset();
                        m.request_failed(now_ms);
                    }
                }
            }
            Some(Background::PollTimeout(leave)) => {
                tracing::warn!(
                    "the consumer of group {group} did not poll for max.poll.interval.ms; \
                     it left the group and joins again on its next poll"
                );
                let Some(leave) = leave else { continue };
                let sent = match coordinator.as_mut() {
                    Some(conn) => leave_group_on(conn, leave, timeout_ms).await,
                    None => match connect_coordinator(&mut client, &group).await {
                        Ok(conn) => {
                            leave_group_on(coordinator.insert(conn), leave, timeout_ms).await
                        }
                        Err(e) => Err(e),
                    },
                };
                if let Err(e) = sent {
                    // The coordinator then ends the member after its session timeout.
                    tracing::warn!("LeaveGroup after the poll timeout failed: {e}");
                    coordinator = None;
                }
            }
        }
    }
}

/// One FindCoordinator and a connection to the broker it names.
async fn connect_coordinator(client: &mut Client, group: &str) -> Result<Connection, ClientError> {
    let found = client.find_coordinator(group).await?;
    client.connect(&found.addr).await
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
        if config.member.max_poll_interval_ms <= 0 {
            return Err(invalid("max.poll.interval.ms must be positive"));
        }
        let subscription = topics.iter().map(|t| t.to_string()).collect();
        let member = Member::new(config.member.clone(), subscription);
        Ok(GroupConsumer {
            client: Client::new(config.client.clone()),
            member: Arc::new(Mutex::new(member)),
            background: None,
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
        ms_since(self.origin)
    }

    fn member(&self) -> MutexGuard<'_, Member> {
        lock(&self.member)
    }

    /// The partitions the group gave this member.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        flatten(self.member().owned())
    }

    /// The id the coordinator gave this member (empty before it joined).
    pub fn member_id(&self) -> String {
        self.member().member_id().to_owned()
    }

    /// Whether the member is in a stable generation.
    pub fn is_stable(&self) -> bool {
        self.member().state() == MemberState::Stable
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
            let ready = self.member().ready(now_ms);
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
                        self.member().metadata_failed(now_ms);
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                self.member().metadata(counts);
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
                    self.member().joined(now_ms, response);
                })
            }
            Request::Sync(sync) => {
                let r = self
                    .call::<SyncGroupRequest, SyncGroupResponse>(&sync, base_ms + session_ms)
                    .await;
                r.map(|response| {
                    let now_ms = self.now_ms();
                    self.member().synced(now_ms, response);
                })
            }
            Request::Heartbeat(heartbeat) => {
                let r = self
                    .call::<HeartbeatRequest, HeartbeatResponse>(&heartbeat, base_ms)
                    .await;
                r.map(|response| {
                    let now_ms = self.now_ms();
                    self.member().heartbeat_answered(now_ms, response);
                })
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.is_retriable() => {
                tracing::debug!("group request failed, retrying: {e}");
                self.coordinator = None;
                let now_ms = self.now_ms();
                self.member().request_failed(now_ms);
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
        call_on(conn, request, timeout_ms).await
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
        let generation = self
            .member()
            .generation()
            .map(|(id, member_id)| (id, member_id.to_owned()));
        let Some((generation_id, member_id)) = generation else {
            return Ok(());
        };
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
                self.member().generation_refused(now_ms, code);
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
        let now_ms = self.now_ms();
        self.member().poll_started(now_ms);
        let _guard = PollGuard {
            member: Arc::clone(&self.member),
            origin: self.origin,
        };
        if self.background.is_none() {
            self.background = Some(task::spawn(background(
                Arc::clone(&self.member),
                self.config.client.clone(),
                self.origin,
            )));
        }
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
            let next_deadline_ms = self.member().next_deadline_ms();
            let wait_ms = next_deadline_ms
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
        if let Some(background) = self.background.take() {
            background.abort();
        }
        if self.polling {
            self.coordinator = None;
            self.client.reset();
        }
        if self.config.enable_auto_commit && self.is_stable() {
            if let Err(e) = self.commit().await {
                tracing::warn!("the final commit failed: {e}");
            }
        }
        let (_, leave) = self.member().leave();
        if let Some(leave) = leave {
            if let Err(e) = self.leave_group(leave).await {
                tracing::warn!("LeaveGroup failed: {e}");
            }
        }
        Ok(())
    }

    async fn leave_group(&mut self, leave: LeaveGroupRequest) -> Result<(), ClientError> {
        let timeout_ms = self.config.client.request_timeout_ms;
        let conn = self.coordinator().await?;
        leave_group_on(conn, leave, timeout_ms).await
    }
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        if let Some(background) = self.background.take() {
            background.abort();
        }
    }
}
