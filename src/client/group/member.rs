//! One consumer group member's side of the classic group protocol, IO-free (Kafka's
//! `AbstractCoordinator` and `ConsumerCoordinator` bookkeeping): when to JoinGroup, SyncGroup
//! and Heartbeat, what to do with each answer, what the leader assigns, and which partitions
//! the member gains, gives up or loses.
//!
//! The shape is the producer's `State`: the driver asks [`Member::ready`] what to do at
//! `now_ms` (at most one request to the coordinator, plus [`Event`]s to act on first), sends
//! the request, and hands the answer back ([`Member::joined`], [`Member::synced`],
//! [`Member::heartbeat_answered`]) or reports that it failed ([`Member::request_failed`]).
//! The leader asks the driver for the subscribed topics' partition counts with
//! [`Event::NeedMetadata`] and gets its SyncGroup request once [`Member::metadata`] gives
//! them. [`Member::next_deadline_ms`] says when to ask again.
//!
//! Rules, as Kafka's clients follow them:
//! - A JoinGroup answered MEMBER_ID_REQUIRED (KIP-394) is sent again at once with the id it
//!   hands out; UNKNOWN_MEMBER_ID clears the id first.
//! - Eager assignors (range, roundrobin): every owned partition is revoked before the
//!   member rejoins. Cooperative (cooperative-sticky, KIP-429): only partitions that leave the
//!   member are revoked, after SyncGroup, and the member then rejoins at once so that the
//!   leader can hand them on.
//! - ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID mean the member was thrown
//!   out: its partitions are lost (not revoked: a commit would be refused).
//! - Heartbeats go every `heartbeat_interval_ms` while Stable; REBALANCE_IN_PROGRESS in a
//!   heartbeat answer starts a rejoin.
//! - Heartbeats may also come from a background task ([`Member::background_ready`], Kafka's
//!   heartbeat thread), so that an application that takes a while between polls stays in
//!   the group. The background only heartbeats, and leaves the group when the application has
//!   not polled for `max_poll_interval_ms` (the member's partitions are then lost and the
//!   next poll joins anew); joins, syncs and events stay with the polling driver.
//! - A failed request (lost connection, timeout, a coordinator error) is retried after
//!   `retry_backoff_ms`; the driver finds the coordinator again in between.
//!
//! Invariants (asserted on every transition):
//! - At most one request is in flight.
//! - `owned` is empty unless the member is Stable or rejoining cooperatively.
//! - The generation only grows while the member id stays the same.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::assignor::{Assignor, MemberSubscription, RebalanceProtocol, TopicPartitions};
use crate::protocol::consumer_protocol::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, ConsumerProtocolTopicPartition,
    CONSUMER_PROTOCOL_VERSION_MAX,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::join_group::{JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse};
use crate::protocol::leave_group::{LeaveGroupRequest, MemberIdentity};
use crate::protocol::sync_group::{
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};

/// The protocol type of consumer groups.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";
/// JoinGroup rounds in a row answered MEMBER_ID_REQUIRED or UNKNOWN_MEMBER_ID before the
/// member backs off (a coordinator that keeps refusing must not be hammered).
pub const JOIN_RETRIES_IMMEDIATE_MAX: u32 = 3;

/// A member's settings, under the Java client's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberConfig {
    pub group_id: String,
    /// `group.instance.id`: a static member (KIP-345).
    pub group_instance_id: Option<String>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub heartbeat_interval_ms: i64,
    /// `max.poll.interval.ms`: the longest the application may spend between two polls
    /// before the member leaves the group ([`Member::background_ready`]).
    pub max_poll_interval_ms: i64,
    pub retry_backoff_ms: i64,
    /// `partition.assignment.strategy`, in order of preference.
    pub assignors: Vec<Assignor>,
}

impl Default for MemberConfig {
    fn default() -> Self {
        MemberConfig {
            group_id: String::new(),
            group_instance_id: None,
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 300_000,
            heartbeat_interval_ms: 3_000,
            max_poll_interval_ms: 300_000,
            retry_backoff_ms: 100,
            assignors: vec![Assignor::Range, Assignor::CooperativeSticky],
        }
    }
}

/// Kafka's `MemberState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Not in the group: a JoinGroup is due.
    Unjoined,
    /// JoinGroup sent, or the leader waiting for metadata: the group is rebalancing.
    PreparingRebalance,
    /// SyncGroup sent.
    CompletingRebalance,
    Stable,
}

/// A request the driver sends to the group's coordinator.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Join(JoinGroupRequest),
    Sync(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
}

/// What the driver acts on before sending the request that comes with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The member now owns these partitions too (positions start at their committed
    /// offsets).
    Assigned(TopicPartitions),
    /// The member gives these partitions up: commit their positions first, then stop
    /// fetching them.
    Revoked(TopicPartitions),
    /// The member was thrown out and lost these partitions: stop fetching, commit nothing.
    Lost(TopicPartitions),
    /// The leader needs these topics' partition counts ([`Member::metadata`]).
    NeedMetadata(BTreeSet<String>),
    /// The group refused the member for good (INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED,
    /// INCONSISTENT_GROUP_PROTOCOL, GROUP_AUTHORIZATION_FAILED, FENCED_INSTANCE_ID, …).
    Fatal(ErrorCode),
}

/// What the background task is to send ([`Member::background_ready`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Background {
    Heartbeat(HeartbeatRequest),
    /// The application did not poll for `max_poll_interval_ms`: the member left the group
    /// (its partitions are lost). A dynamic member tells the coordinator with this
    /// LeaveGroup, so the others need not wait out its session; a static member does not
    /// (KIP-345: its partitions wait for it).
    PollTimeout(Option<LeaveGroupRequest>),
}

/// What [`Member::ready`] hands back.
#[derive(Debug, Default, PartialEq)]
pub struct Ready {
    pub events: Vec<Event>,
    pub request: Option<Request>,
}

/// A JoinGroup answered, its SyncGroup not sent yet.
#[derive(Clone, Debug)]
struct JoinAnswered {
    generation_id: i32,
    protocol: Assignor,
    /// The members' subscriptions, for the leader only (it assigns).
    members: Option<Vec<MemberSubscription>>,
}

#[derive(Debug)]
pub struct Member {
    config: MemberConfig,
    protocol: RebalanceProtocol,
    subscription: BTreeSet<String>,
    state: MemberState,
    member_id: String,
    /// The generation joined, -1 before the first.
    generation_id: i32,
    owned: TopicPartitions,
    in_flight: bool,
    /// Not before this may the next request go (a backoff, the next heartbeat).
    next_request_ms: i64,
    join_retries: u32,
    join: Option<JoinAnswered>,
    metadata_asked: bool,
    /// Partition counts the leader was given for the join in progress.
    partition_counts: Option<BTreeMap<String, i32>>,
    events: Vec<Event>,
    fatal: Option<ErrorCode>,
    /// Left the group (close): nothing more to send.
    closed: bool,
    /// The application is inside a poll (the poll timer does not run).
    polling: bool,
    /// When the application last started or ended a poll.
    last_poll_ms: i64,
}

fn is_coordinator_error(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::NOT_COORDINATOR
            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
    )
}

/// `a` without what `b` holds.
fn minus(a: &TopicPartitions, b: &TopicPartitions) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for (topic, partitions) in a {
        let keep: Vec<i32> = partitions
            .iter()
            .copied()
            .filter(|p| !b.get(topic).is_some_and(|q| q.contains(p)))
            .collect();
        if !keep.is_empty() {
            out.insert(topic.clone(), keep);
        }
    }
    out
}

fn to_wire(partitions: &TopicPartitions) -> Vec<ConsumerProtocolTopicPartition> {
    partitions
        .iter()
        .map(|(topic, p)| ConsumerProtocolTopicPartition {
            topic: topic.clone(),
            partitions: p.clone(),
        })
        .collect()
}

fn from_wire(list: &[ConsumerProtocolTopicPartition]) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for tp in list {
        let entry: &mut Vec<i32> = out.entry(tp.topic.clone()).or_default();
        entry.extend(&tp.partitions);
        entry.sort_unstable();
        entry.dedup();
    }
    out.retain(|_, p| !p.is_empty());
    out
}

impl Member {
    /// A member of `config.group_id` subscribing to `topics`. Its rebalance protocol is
    /// cooperative only if every assignor it offers is (as Kafka's consumer picks the
    /// highest protocol all its assignors support: range alongside cooperative-sticky, the
    /// default list, stays eager).
    ///
    /// Panics if `config.assignors` is empty (a configuration the caller validates).
    pub fn new(config: MemberConfig, topics: BTreeSet<String>) -> Member {
        assert!(!config.assignors.is_empty(), "a member needs an assignor");
        let cooperative = config
            .assignors
            .iter()
            .all(|a| a.rebalance_protocol() == RebalanceProtocol::Cooperative);
        let protocol = if cooperative {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        };
        Member {
            config,
            protocol,
            subscription: topics,
            state: MemberState::Unjoined,
            member_id: String::new(),
            generation_id: -1,
            owned: TopicPartitions::new(),
            in_flight: false,
            next_request_ms: 0,
            join_retries: 0,
            join: None,
            metadata_asked: false,
            partition_counts: None,
            events: Vec::new(),
            fatal: None,
            closed: false,
            polling: false,
            last_poll_ms: 0,
        }
    }

    pub fn state(&self) -> MemberState {
        self.state
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The generation and member id to commit with: the latest joined (an eager member
    /// commits with it while it revokes, before it joins anew).
    pub fn generation(&self) -> Option<(i32, &str)> {
        (self.generation_id >= 0 && !self.member_id.is_empty())
            .then_some((self.generation_id, self.member_id.as_str()))
    }

    /// The partitions the member owns now.
    pub fn owned(&self) -> &TopicPartitions {
        &self.owned
    }

    /// Whether [`Member::leave`] ended this member.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn config(&self) -> &MemberConfig {
        &self.config
    }

    fn check(&self) {
        if !matches!(self.state, MemberState::Stable) && self.protocol == RebalanceProtocol::Eager {
            assert!(
                self.owned.is_empty(),
                "an eager member owns nothing while rebalancing"
            );
        }
        if self.state == MemberState::Stable {
            assert!(self.generation_id >= 0, "a stable member has a generation");
            assert!(!self.member_id.is_empty(), "a stable member has an id");
        }
    }

    /// Starts a rejoin (a rebalance began, the subscription changed, a revocation is done).
    /// Eager: everything owned is revoked now.
    fn rejoin(&mut self, now_ms: i64, backoff: bool) {
        if self.protocol == RebalanceProtocol::Eager && !self.owned.is_empty() {
            let all = std::mem::take(&mut self.owned);
            self.events.push(Event::Revoked(all));
        }
        self.state = MemberState::Unjoined;
        self.join = None;
        self.partition_counts = None;
        self.metadata_asked = false;
        self.next_request_ms = if backoff {
            now_ms + self.config.retry_backoff_ms
        } else {
            now_ms
        };
        self.check();
    }

    /// The member was thrown out: its partitions are lost; `forget_id` for a member id the
    /// coordinator no longer knows.
    fn fenced(&mut self, now_ms: i64, forget_id: bool) {
        if !self.owned.is_empty() {
            let all = std::mem::take(&mut self.owned);
            self.events.push(Event::Lost(all));
        }
        if forget_id {
            self.member_id.clear();
            self.generation_id = -1;
        }
        self.rejoin(now_ms, false);
    }

    fn fail(&mut self, code: ErrorCode) {
        if !self.owned.is_empty() {
            let all = std::mem::take(&mut self.owned);
            self.events.push(Event::Lost(all));
        }
        self.fatal = Some(code);
        self.events.push(Event::Fatal(code));
        self.state = MemberState::Unjoined;
    }

    /// Changes the subscription; a member in the group rejoins.
    pub fn subscribe(&mut self, now_ms: i64, topics: BTreeSet<String>) {
        if topics == self.subscription {
            return;
        }
        self.subscription = topics;
        if self.state == MemberState::Stable {
            self.rejoin(now_ms, false);
        }
    }

    /// A commit or fetch of this member's generation was refused with `code`: the member
    /// acts as on a heartbeat answer with it.
    pub fn generation_refused(&mut self, now_ms: i64, code: ErrorCode) {
        if self.state != MemberState::Stable || self.in_flight {
            return;
        }
        self.on_heartbeat_code(now_ms, code);
    }

    /// When [`Member::ready`] may have something new to do, if nothing else happens first.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        if self.in_flight || self.fatal.is_some() || self.closed {
            return None;
        }
        if self.waits_for_metadata() {
            return None;
        }
        Some(self.next_request_ms)
    }

    /// What to do at `now_ms`: events first, then at most one request.
    pub fn ready(&mut self, now_ms: i64) -> Ready {
        let mut out = Ready {
            events: std::mem::take(&mut self.events),
            request: None,
        };
        if self.in_flight || self.fatal.is_some() || self.closed || now_ms < self.next_request_ms {
            return out;
        }
        match self.state {
            MemberState::Unjoined => {
                self.state = MemberState::PreparingRebalance;
                out.request = Some(Request::Join(self.join_request()));
            }
            MemberState::PreparingRebalance => {
                let Some(join) = &self.join else {
                    return out; // the JoinGroup is in flight
                };
                let assignments = match (&join.members, &self.partition_counts) {
                    (None, _) => Vec::new(),
                    (Some(members), None) => {
                        if !self.metadata_asked {
                            self.metadata_asked = true;
                            let topics: BTreeSet<String> = members
                                .iter()
                                .flat_map(|m| m.topics.iter().cloned())
                                .collect();
                            out.events.push(Event::NeedMetadata(topics));
                        }
                        return out;
                    }
                    (Some(members), Some(counts)) => assignments(join.protocol, counts, members),
                };
                let sync = self.sync_request(join.generation_id, join.protocol, assignments);
                self.state = MemberState::CompletingRebalance;
                out.request = Some(Request::Sync(sync));
            }
            MemberState::CompletingRebalance => return out,
            MemberState::Stable => {
                out.request = Some(Request::Heartbeat(self.heartbeat_request()));
            }
        }
        self.in_flight = out.request.is_some();
        out
    }

    fn heartbeat_request(&self) -> HeartbeatRequest {
        HeartbeatRequest {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation_id,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    /// The application starts a poll: the poll timer stops.
    pub fn poll_started(&mut self, now_ms: i64) {
        self.polling = true;
        self.last_poll_ms = now_ms;
    }

    /// The application's poll returned: the poll timer runs from `now_ms`.
    pub fn poll_ended(&mut self, now_ms: i64) {
        self.polling = false;
        self.last_poll_ms = now_ms;
    }

    /// Whether the background has nothing to do in any state but Stable.
    fn background_idle(&self) -> bool {
        self.in_flight || self.fatal.is_some() || self.closed || self.state != MemberState::Stable
    }

    /// When [`Member::background_ready`] may have something to do: the next heartbeat, or
    /// the end of the poll timer.
    pub fn background_deadline_ms(&self) -> Option<i64> {
        if self.background_idle() {
            return None;
        }
        if self.polling {
            return Some(self.next_request_ms);
        }
        let poll_deadline_ms = self
            .last_poll_ms
            .saturating_add(self.config.max_poll_interval_ms)
            .saturating_add(1);
        Some(self.next_request_ms.min(poll_deadline_ms))
    }

    /// What the background task is to do at `now_ms` while the member is Stable: leave the
    /// group if the poll timer ran out, else a heartbeat when one is due (it is then the
    /// request in flight; the answer goes to [`Member::heartbeat_answered`] or
    /// [`Member::request_failed`]).
    pub fn background_ready(&mut self, now_ms: i64) -> Option<Background> {
        if self.background_idle() {
            return None;
        }
        let since_poll_ms = now_ms.saturating_sub(self.last_poll_ms);
        if !self.polling && since_poll_ms > self.config.max_poll_interval_ms {
            let leave = self.leave_request("the consumer's poll timeout has expired");
            // As Kafka's consumer: forget the generation and the id; the next poll joins
            // as a new member.
            self.fenced(now_ms, true);
            assert_eq!(self.state, MemberState::Unjoined, "left the group");
            return Some(Background::PollTimeout(leave));
        }
        if now_ms < self.next_request_ms {
            return None;
        }
        self.in_flight = true;
        Some(Background::Heartbeat(self.heartbeat_request()))
    }

    fn subscription_bytes(&self) -> Bytes {
        let subscription = ConsumerProtocolSubscription {
            topics: self.subscription.iter().cloned().collect(),
            user_data: None,
            owned_partitions: to_wire(&self.owned),
            generation_id: self.generation_id,
            rack_id: None,
        };
        // A subscription of valid strings and arrays always encodes; an empty one is the
        // fallback should a topic name exceed the string limit.
        subscription
            .to_bytes(CONSUMER_PROTOCOL_VERSION_MAX)
            .unwrap_or_default()
    }

    fn join_request(&self) -> JoinGroupRequest {
        let metadata = self.subscription_bytes();
        JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            session_timeout_ms: self.config.session_timeout_ms,
            rebalance_timeout_ms: self.config.rebalance_timeout_ms,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
            protocols: self
                .config
                .assignors
                .iter()
                .map(|a| JoinGroupRequestProtocol {
                    name: a.name().to_string(),
                    metadata: metadata.clone(),
                })
                .collect(),
            reason: None,
        }
    }

    fn sync_request(
        &self,
        generation_id: i32,
        protocol: Assignor,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: self.config.group_id.clone(),
            generation_id,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(protocol.name().to_string()),
            assignments,
        }
    }

    /// Whether the leader waits for [`Member::metadata`].
    fn waits_for_metadata(&self) -> bool {
        self.state == MemberState::PreparingRebalance
            && self.partition_counts.is_none()
            && self.join.as_ref().is_some_and(|j| j.members.is_some())
    }

    /// The leader's partition counts for [`Event::NeedMetadata`]; topics that do not exist
    /// are left out (they get no partitions).
    pub fn metadata(&mut self, counts: BTreeMap<String, i32>) {
        if self.waits_for_metadata() {
            self.partition_counts = Some(counts);
        }
    }

    /// The driver could not get metadata for the leader: it tries again after a backoff.
    pub fn metadata_failed(&mut self, now_ms: i64) {
        if self.waits_for_metadata() {
            self.metadata_asked = false;
            self.next_request_ms = now_ms + self.config.retry_backoff_ms;
        }
    }

    /// The in-flight request failed without an answer (connection lost, timed out) or with
    /// a coordinator error: try again after the backoff, the driver finding the coordinator
    /// again meanwhile.
    pub fn request_failed(&mut self, now_ms: i64) {
        assert!(self.in_flight, "no request in flight to fail");
        self.in_flight = false;
        match self.state {
            MemberState::PreparingRebalance | MemberState::CompletingRebalance => {
                // Join or sync lost: join again (the coordinator may have moved on).
                self.rejoin(now_ms, true);
            }
            MemberState::Stable => self.next_request_ms = now_ms + self.config.retry_backoff_ms,
            MemberState::Unjoined => {}
        }
        self.check();
    }

    /// An answer to the request in flight, sent in state `expected`, arrived.
    fn answer_arrived(&mut self, api: &str, expected: MemberState) {
        assert!(self.in_flight, "a {api} answer with no request in flight");
        assert_eq!(self.state, expected, "a {api} answer out of its state");
        self.in_flight = false;
    }

    /// The JoinGroup answer.
    pub fn joined(&mut self, now_ms: i64, response: JoinGroupResponse) {
        self.answer_arrived("JoinGroup", MemberState::PreparingRebalance);
        let code = ErrorCode(response.error_code);
        match code {
            ErrorCode::NONE => {}
            ErrorCode::MEMBER_ID_REQUIRED | ErrorCode::UNKNOWN_MEMBER_ID => {
                self.member_id = if code == ErrorCode::MEMBER_ID_REQUIRED {
                    response.member_id
                } else {
                    String::new()
                };
                self.join_retries += 1;
                let backoff = self.join_retries > JOIN_RETRIES_IMMEDIATE_MAX;
                if backoff {
                    self.join_retries = 0;
                }
                return self.rejoin(now_ms, backoff);
            }
            ErrorCode::REBALANCE_IN_PROGRESS => return self.rejoin(now_ms, true),
            code if is_coordinator_error(code) => return self.rejoin(now_ms, true),
            code => return self.fail(code),
        }
        self.join_retries = 0;
        assert!(
            response.generation_id >= self.generation_id || response.member_id != self.member_id,
            "the generation never shrinks: {} after {}",
            response.generation_id,
            self.generation_id
        );
        self.member_id = response.member_id.clone();
        let protocol = response
            .protocol_name
            .as_deref()
            .and_then(Assignor::from_name);
        let Some(protocol) = protocol.filter(|p| self.config.assignors.contains(p)) else {
            // The coordinator chose a protocol this member did not offer.
            return self.fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        };
        let leads = response.leader == response.member_id && !response.skip_assignment;
        let members = leads.then(|| {
            response
                .members
                .iter()
                .map(|m| {
                    // A member whose metadata is not a subscription subscribes to nothing.
                    let parsed = ConsumerProtocolSubscription::from_bytes(m.metadata.clone())
                        .unwrap_or_default();
                    MemberSubscription {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        topics: parsed.topics.into_iter().collect(),
                        owned: from_wire(&parsed.owned_partitions),
                        generation_id: parsed.generation_id,
                    }
                })
                .collect()
        });
        self.join = Some(JoinAnswered {
            generation_id: response.generation_id,
            protocol,
            members,
        });
        self.generation_id = response.generation_id;
        self.partition_counts = None;
        self.metadata_asked = false;
        self.next_request_ms = now_ms;
        self.check();
    }

    /// The SyncGroup answer: the member's assignment.
    pub fn synced(&mut self, now_ms: i64, response: SyncGroupResponse) {
        self.answer_arrived("SyncGroup", MemberState::CompletingRebalance);
        let code = ErrorCode(response.error_code);
        match code {
            ErrorCode::NONE => {}
            ErrorCode::REBALANCE_IN_PROGRESS => return self.rejoin(now_ms, false),
            ErrorCode::UNKNOWN_MEMBER_ID => return self.fenced(now_ms, true),
            ErrorCode::ILLEGAL_GENERATION => return self.fenced(now_ms, false),
            code if is_coordinator_error(code) => return self.rejoin(now_ms, true),
            code => return self.fail(code),
        }
        let assigned = match ConsumerProtocolAssignment::from_bytes(response.assignment) {
            Ok(a) => from_wire(&a.assigned_partitions),
            // The leader sent bytes no consumer can read: as Kafka's client, fail the member
            // rather than consume a guess.
            Err(_) => return self.fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
        };
        let revoked = minus(&self.owned, &assigned);
        let added = minus(&assigned, &self.owned);
        self.join = None;
        self.owned = assigned;
        self.state = MemberState::Stable;
        self.next_request_ms = now_ms + self.config.heartbeat_interval_ms;
        if !revoked.is_empty() {
            // Cooperative: give up what moves, then rejoin so it can be handed on.
            self.events.push(Event::Revoked(revoked));
            self.rejoin(now_ms, false);
        }
        if !added.is_empty() {
            self.events.push(Event::Assigned(added));
        }
        self.check();
    }

    /// The Heartbeat answer.
    pub fn heartbeat_answered(&mut self, now_ms: i64, response: HeartbeatResponse) {
        assert!(
            self.in_flight,
            "a Heartbeat answer with no request in flight"
        );
        self.in_flight = false;
        if self.state != MemberState::Stable {
            return;
        }
        self.next_request_ms = now_ms + self.config.heartbeat_interval_ms;
        self.on_heartbeat_code(now_ms, ErrorCode(response.error_code));
    }

    fn on_heartbeat_code(&mut self, now_ms: i64, code: ErrorCode) {
        match code {
            ErrorCode::NONE => {}
            ErrorCode::REBALANCE_IN_PROGRESS => self.rejoin(now_ms, false),
            ErrorCode::UNKNOWN_MEMBER_ID => self.fenced(now_ms, true),
            ErrorCode::ILLEGAL_GENERATION => self.fenced(now_ms, false),
            ErrorCode::FENCED_INSTANCE_ID => self.fail(code),
            code if is_coordinator_error(code) => {
                self.next_request_ms = now_ms + self.config.retry_backoff_ms;
            }
            code => self.fail(code),
        }
        self.check();
    }

    /// The LeaveGroup of a dynamic member that is in the group.
    fn leave_request(&self, reason: &str) -> Option<LeaveGroupRequest> {
        (!self.member_id.is_empty() && self.config.group_instance_id.is_none()).then(|| {
            LeaveGroupRequest {
                group_id: self.config.group_id.clone(),
                member_id: self.member_id.clone(),
                members: vec![MemberIdentity {
                    member_id: self.member_id.clone(),
                    group_instance_id: None,
                    reason: Some(reason.to_string()),
                }],
            }
        })
    }

    /// The LeaveGroup to send on close, if the member is in the group: none for a static
    /// member (KIP-345: it keeps its partitions through a restart within its session).
    /// Everything owned is revoked first. Both the pre-v3 `member_id` and the v3+ `members`
    /// are filled: the sender clears the one its version lacks.
    pub fn leave(&mut self) -> (Vec<Event>, Option<LeaveGroupRequest>) {
        let mut events = std::mem::take(&mut self.events);
        if !self.owned.is_empty() {
            events.push(Event::Revoked(std::mem::take(&mut self.owned)));
        }
        let request = self.leave_request("the consumer is closing");
        self.state = MemberState::Unjoined;
        self.join = None;
        self.closed = true;
        (events, request)
    }
}

/// The leader's SyncGroup assignments.
fn assignments(
    protocol: Assignor,
    counts: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
) -> Vec<SyncGroupRequestAssignment> {
    protocol
        .assign(counts, members)
        .into_iter()
        .map(|(member_id, partitions)| SyncGroupRequestAssignment {
            member_id,
            assignment: ConsumerProtocolAssignment {
                assigned_partitions: to_wire(&partitions),
                user_data: None,
            }
            .to_bytes(CONSUMER_PROTOCOL_VERSION_MAX)
            .unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::join_group::JoinGroupResponseMember;

    const HEARTBEAT_MS: i64 = 1_000;
    const BACKOFF_MS: i64 = 100;

    fn member(assignors: &[Assignor], instance: Option<&str>) -> Member {
        let config = MemberConfig {
            group_id: "g".into(),
            group_instance_id: instance.map(str::to_string),
            heartbeat_interval_ms: HEARTBEAT_MS,
            retry_backoff_ms: BACKOFF_MS,
            assignors: assignors.to_vec(),
            ..Default::default()
        };
        Member::new(config, ["t".to_string()].into_iter().collect())
    }

    fn tps(list: &[i32]) -> TopicPartitions {
        [("t".to_string(), list.to_vec())].into_iter().collect()
    }

    fn join_of(ready: Ready) -> JoinGroupRequest {
        match ready.request {
            Some(Request::Join(j)) => j,
            other => panic!("expected a JoinGroup, got {other:?}"),
        }
    }

    fn sync_of(ready: Ready) -> SyncGroupRequest {
        match ready.request {
            Some(Request::Sync(s)) => s,
            other => panic!("expected a SyncGroup, got {other:?}"),
        }
    }

    fn join_answer(
        generation: i32,
        me: &str,
        leader: &str,
        protocol: Assignor,
        members: &[(&str, &[i32])],
    ) -> JoinGroupResponse {
        JoinGroupResponse {
            generation_id: generation,
            protocol_name: Some(protocol.name().into()),
            leader: leader.into(),
            member_id: me.into(),
            members: members
                .iter()
                .map(|(id, owned)| JoinGroupResponseMember {
                    member_id: id.to_string(),
                    group_instance_id: None,
                    metadata: ConsumerProtocolSubscription {
                        topics: vec!["t".into()],
                        owned_partitions: to_wire(&tps(owned)),
                        generation_id: generation - 1,
                        ..Default::default()
                    }
                    .to_bytes(CONSUMER_PROTOCOL_VERSION_MAX)
                    .unwrap(),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn sync_answer(partitions: &[i32]) -> SyncGroupResponse {
        SyncGroupResponse {
            assignment: ConsumerProtocolAssignment {
                assigned_partitions: to_wire(&tps(partitions)),
                user_data: None,
            }
            .to_bytes(0)
            .unwrap(),
            ..Default::default()
        }
    }

    /// Joins `m` as the only member (leader) of generation 1 over 4 partitions.
    fn stable_alone(m: &mut Member, protocol: Assignor) {
        let _ = join_of(m.ready(0));
        m.joined(0, join_answer(1, "m-1", "m-1", protocol, &[("m-1", &[])]));
        let _ = m.ready(0);
        m.metadata([("t".to_string(), 4)].into_iter().collect());
        let _ = sync_of(m.ready(0));
        m.synced(0, sync_answer(&[0, 1, 2, 3]));
        assert_eq!(m.state(), MemberState::Stable);
    }

    /// [`stable_alone`], then the first heartbeat is answered with `code`.
    fn stable_then_heartbeat(m: &mut Member, protocol: Assignor, code: ErrorCode) {
        stable_alone(m, protocol);
        let _ = m.ready(0);
        let heartbeat = m.ready(HEARTBEAT_MS);
        assert!(matches!(heartbeat.request, Some(Request::Heartbeat(_))));
        m.heartbeat_answered(
            HEARTBEAT_MS,
            HeartbeatResponse {
                error_code: code.code(),
                ..Default::default()
            },
        );
    }

    #[test]
    fn range_next_to_cooperative_sticky_stays_eager() {
        let mut m = member(&[Assignor::Range, Assignor::CooperativeSticky], None);
        stable_then_heartbeat(
            &mut m,
            Assignor::CooperativeSticky,
            ErrorCode::REBALANCE_IN_PROGRESS,
        );
        let ready = m.ready(HEARTBEAT_MS);
        assert_eq!(ready.events, vec![Event::Revoked(tps(&[0, 1, 2, 3]))]);
        let join = join_of(ready);
        let names: Vec<&str> = join.protocols.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["range", "cooperative-sticky"]);
    }

    #[test]
    fn a_dynamic_member_gets_its_id_then_leads_assigns_and_heartbeats() {
        let mut m = member(&[Assignor::Range], None);
        let first = join_of(m.ready(0));
        assert_eq!(first.member_id, "");
        assert_eq!(first.protocols[0].name, "range");
        let subscription =
            ConsumerProtocolSubscription::from_bytes(first.protocols[0].metadata.clone()).unwrap();
        assert_eq!(subscription.topics, vec!["t".to_string()]);
        assert!(
            m.ready(0).request.is_none(),
            "one request in flight at most"
        );
        m.joined(
            0,
            JoinGroupResponse {
                error_code: ErrorCode::MEMBER_ID_REQUIRED.code(),
                member_id: "m-1".into(),
                ..Default::default()
            },
        );
        assert_eq!(
            join_of(m.ready(0)).member_id,
            "m-1",
            "rejoins at once with its id"
        );
        m.joined(
            0,
            join_answer(
                1,
                "m-1",
                "m-1",
                Assignor::Range,
                &[("m-1", &[]), ("m-2", &[])],
            ),
        );
        let ready = m.ready(0);
        assert_eq!(
            ready.events,
            vec![Event::NeedMetadata(["t".to_string()].into_iter().collect())]
        );
        assert!(ready.request.is_none(), "the leader waits for metadata");
        assert_eq!(m.next_deadline_ms(), None);
        m.metadata([("t".to_string(), 4)].into_iter().collect());
        let sync = sync_of(m.ready(0));
        assert_eq!(sync.generation_id, 1);
        let assigned: BTreeMap<String, TopicPartitions> = sync
            .assignments
            .iter()
            .map(|a| {
                let decoded = ConsumerProtocolAssignment::from_bytes(a.assignment.clone()).unwrap();
                (a.member_id.clone(), from_wire(&decoded.assigned_partitions))
            })
            .collect();
        assert_eq!(assigned["m-1"], tps(&[0, 1]));
        assert_eq!(assigned["m-2"], tps(&[2, 3]));
        m.synced(5, sync_answer(&[0, 1]));
        assert_eq!(m.state(), MemberState::Stable);
        assert_eq!(m.ready(5).events, vec![Event::Assigned(tps(&[0, 1]))]);
        assert_eq!(m.next_deadline_ms(), Some(5 + HEARTBEAT_MS));
        assert!(m.ready(5 + HEARTBEAT_MS - 1).request.is_none());
        match m.ready(5 + HEARTBEAT_MS).request {
            Some(Request::Heartbeat(h)) => {
                assert_eq!((h.generation_id, h.member_id.as_str()), (1, "m-1"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_follower_syncs_with_no_assignments() {
        let mut m = member(&[Assignor::Range], None);
        let _ = join_of(m.ready(0));
        m.joined(0, join_answer(3, "m-2", "m-1", Assignor::Range, &[]));
        let sync = sync_of(m.ready(0));
        assert!(sync.assignments.is_empty());
        assert_eq!(sync.protocol_name.as_deref(), Some("range"));
    }

    #[test]
    fn an_eager_member_revokes_everything_before_it_rejoins() {
        let mut m = member(&[Assignor::Range], None);
        stable_then_heartbeat(&mut m, Assignor::Range, ErrorCode::REBALANCE_IN_PROGRESS);
        assert!(m.owned().is_empty());
        assert_eq!(
            m.generation(),
            Some((1, "m-1")),
            "commits go with the old generation"
        );
        let ready = m.ready(HEARTBEAT_MS);
        assert_eq!(ready.events, vec![Event::Revoked(tps(&[0, 1, 2, 3]))]);
        assert_eq!(join_of(ready).member_id, "m-1");
    }

    #[test]
    fn a_cooperative_member_revokes_only_what_moves_then_rejoins_at_once() {
        let mut m = member(&[Assignor::CooperativeSticky], None);
        stable_then_heartbeat(
            &mut m,
            Assignor::CooperativeSticky,
            ErrorCode::REBALANCE_IN_PROGRESS,
        );
        let ready = m.ready(HEARTBEAT_MS);
        assert!(ready.events.is_empty(), "nothing revoked before the join");
        let join = join_of(ready);
        let owned =
            ConsumerProtocolSubscription::from_bytes(join.protocols[0].metadata.clone()).unwrap();
        assert_eq!(from_wire(&owned.owned_partitions), tps(&[0, 1, 2, 3]));
        assert_eq!(owned.generation_id, 1);
        m.joined(
            HEARTBEAT_MS,
            join_answer(2, "m-1", "m-0", Assignor::CooperativeSticky, &[]),
        );
        let _ = sync_of(m.ready(HEARTBEAT_MS));
        m.synced(HEARTBEAT_MS, sync_answer(&[0, 1]));
        let ready = m.ready(HEARTBEAT_MS);
        assert_eq!(ready.events, vec![Event::Revoked(tps(&[2, 3]))]);
        assert_eq!(m.owned(), &tps(&[0, 1]));
        let rejoin = join_of(ready);
        assert_eq!(
            rejoin.member_id, "m-1",
            "the follow-up rebalance starts at once"
        );
    }

    #[test]
    fn a_fenced_member_loses_its_partitions_and_an_unknown_one_its_id() {
        let mut m = member(&[Assignor::Range], None);
        stable_then_heartbeat(&mut m, Assignor::Range, ErrorCode::UNKNOWN_MEMBER_ID);
        let ready = m.ready(HEARTBEAT_MS);
        assert_eq!(ready.events, vec![Event::Lost(tps(&[0, 1, 2, 3]))]);
        assert_eq!(join_of(ready).member_id, "", "joins as a new member");
        assert_eq!(m.generation(), None);
    }

    #[test]
    fn a_refusal_for_good_stops_the_member() {
        let mut m = member(&[Assignor::Range], None);
        let _ = join_of(m.ready(0));
        m.joined(
            0,
            JoinGroupResponse {
                error_code: ErrorCode::INVALID_SESSION_TIMEOUT.code(),
                ..Default::default()
            },
        );
        let ready = m.ready(0);
        assert_eq!(
            ready.events,
            vec![Event::Fatal(ErrorCode::INVALID_SESSION_TIMEOUT)]
        );
        assert!(ready.request.is_none());
        assert_eq!(m.next_deadline_ms(), None);
    }

    #[test]
    fn a_lost_sync_rejoins_after_the_backoff_and_coordinator_errors_back_off() {
        let mut m = member(&[Assignor::Range], None);
        let _ = join_of(m.ready(0));
        m.joined(0, join_answer(1, "m-2", "m-1", Assignor::Range, &[]));
        let _ = sync_of(m.ready(0));
        m.request_failed(10);
        assert!(m.ready(10 + BACKOFF_MS - 1).request.is_none());
        let _ = join_of(m.ready(10 + BACKOFF_MS));
        m.joined(
            200,
            JoinGroupResponse {
                error_code: ErrorCode::NOT_COORDINATOR.code(),
                ..Default::default()
            },
        );
        assert_eq!(m.next_deadline_ms(), Some(200 + BACKOFF_MS));
    }

    #[test]
    fn a_protocol_the_member_did_not_offer_is_refused() {
        let mut m = member(&[Assignor::Range], None);
        let _ = join_of(m.ready(0));
        m.joined(0, join_answer(1, "m-1", "m-1", Assignor::RoundRobin, &[]));
        assert_eq!(
            m.ready(0).events,
            vec![Event::Fatal(ErrorCode::INCONSISTENT_GROUP_PROTOCOL)]
        );
    }

    #[test]
    fn closing_revokes_and_leaves_unless_static() {
        let mut m = member(&[Assignor::Range], None);
        stable_alone(&mut m, Assignor::Range);
        let (events, leave) = m.leave();
        assert!(events.contains(&Event::Revoked(tps(&[0, 1, 2, 3]))));
        assert_eq!(leave.unwrap().members[0].member_id, "m-1");
        assert!(m.ready(HEARTBEAT_MS * 10).request.is_none(), "closed");
        let mut s = member(&[Assignor::Range], Some("instance-1"));
        stable_alone(&mut s, Assignor::Range);
        let (_, leave) = s.leave();
        assert!(
            leave.is_none(),
            "a static member keeps its session through a restart"
        );
    }

    const MAX_POLL_MS: i64 = 10_000;

    fn polled_member(instance: Option<&str>) -> Member {
        let mut m = member(&[Assignor::Range], instance);
        m.config.max_poll_interval_ms = MAX_POLL_MS;
        m.poll_started(0);
        stable_alone(&mut m, Assignor::Range);
        let _ = m.ready(0); // the Assigned event
        m.poll_ended(0);
        m
    }

    #[test]
    fn the_background_heartbeats_while_the_application_does_not_poll() {
        let mut m = polled_member(None);
        assert_eq!(m.background_deadline_ms(), Some(HEARTBEAT_MS));
        assert_eq!(m.background_ready(HEARTBEAT_MS - 1), None, "not due yet");
        let Some(Background::Heartbeat(heartbeat)) = m.background_ready(HEARTBEAT_MS) else {
            panic!("a heartbeat is due");
        };
        assert_eq!(
            (heartbeat.generation_id, heartbeat.member_id.as_str()),
            (1, "m-1")
        );
        // One request at a time: neither the poller nor the background sends another.
        assert_eq!(m.ready(HEARTBEAT_MS + 1), Ready::default());
        assert_eq!(m.background_ready(HEARTBEAT_MS + 1), None);
        assert_eq!(m.background_deadline_ms(), None);
        m.heartbeat_answered(HEARTBEAT_MS + 5, HeartbeatResponse::default());
        assert_eq!(m.background_deadline_ms(), Some(2 * HEARTBEAT_MS + 5));
        // A failed background heartbeat is retried after the backoff, as the poller's.
        let Some(Background::Heartbeat(_)) = m.background_ready(2 * HEARTBEAT_MS + 5) else {
            panic!("the second heartbeat is due");
        };
        m.request_failed(2 * HEARTBEAT_MS + 6);
        assert_eq!(
            m.background_deadline_ms(),
            Some(2 * HEARTBEAT_MS + 6 + BACKOFF_MS)
        );
        assert_eq!(m.state(), MemberState::Stable);
        assert_eq!(m.owned(), &tps(&[0, 1, 2, 3]));
    }

    #[test]
    fn a_background_heartbeat_answered_rebalance_leaves_the_rejoin_to_the_poller() {
        let mut m = polled_member(None);
        let Some(Background::Heartbeat(_)) = m.background_ready(HEARTBEAT_MS) else {
            panic!("a heartbeat is due");
        };
        m.heartbeat_answered(
            HEARTBEAT_MS,
            HeartbeatResponse {
                error_code: ErrorCode::REBALANCE_IN_PROGRESS.code(),
                ..Default::default()
            },
        );
        assert_eq!(
            m.background_ready(HEARTBEAT_MS * 5),
            None,
            "only while Stable"
        );
        let ready = m.ready(HEARTBEAT_MS);
        assert_eq!(ready.events, vec![Event::Revoked(tps(&[0, 1, 2, 3]))]);
        assert_eq!(join_of(ready).member_id, "m-1");
    }

    #[test]
    fn no_poll_for_max_poll_interval_leaves_the_group_and_the_next_poll_joins_anew() {
        let mut m = polled_member(None);
        // Heartbeats keep going up to the poll deadline.
        let mut now_ms = 0;
        while now_ms + HEARTBEAT_MS <= MAX_POLL_MS {
            now_ms += HEARTBEAT_MS;
            let Some(Background::Heartbeat(_)) = m.background_ready(now_ms) else {
                panic!("a heartbeat at {now_ms}");
            };
            m.heartbeat_answered(now_ms, HeartbeatResponse::default());
        }
        assert_eq!(m.background_deadline_ms(), Some(MAX_POLL_MS + 1));
        let Some(Background::PollTimeout(Some(leave))) = m.background_ready(MAX_POLL_MS + 1) else {
            panic!("the poll timer ran out");
        };
        assert_eq!(leave.members[0].member_id, "m-1");
        assert_eq!(m.state(), MemberState::Unjoined);
        assert_eq!(
            m.background_ready(MAX_POLL_MS * 2),
            None,
            "out of the group"
        );
        m.poll_started(MAX_POLL_MS * 2);
        let ready = m.ready(MAX_POLL_MS * 2);
        assert_eq!(
            ready.events,
            vec![Event::Lost(tps(&[0, 1, 2, 3]))],
            "lost, not revoked: a commit of the old generation would be refused"
        );
        assert_eq!(join_of(ready).member_id, "", "a new member");
    }

    #[test]
    fn the_poll_timer_stops_inside_a_poll_and_a_static_member_sends_no_leave() {
        let mut m = polled_member(Some("instance-1"));
        m.poll_started(1);
        let mut now_ms = 1;
        for _ in 0..20 {
            now_ms += HEARTBEAT_MS;
            let Some(Background::Heartbeat(_)) = m.background_ready(now_ms) else {
                panic!("inside a poll only heartbeats, at {now_ms}");
            };
            m.heartbeat_answered(now_ms, HeartbeatResponse::default());
        }
        assert!(now_ms > MAX_POLL_MS);
        m.poll_ended(now_ms);
        // At the last instant of the poll interval only a heartbeat is due.
        let Some(Background::Heartbeat(_)) = m.background_ready(now_ms + MAX_POLL_MS) else {
            panic!("the poll timer fired one millisecond early");
        };
        m.heartbeat_answered(now_ms + MAX_POLL_MS, HeartbeatResponse::default());
        assert_eq!(
            m.background_ready(now_ms + MAX_POLL_MS + 1),
            Some(Background::PollTimeout(None))
        );
    }
}
