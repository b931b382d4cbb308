//! The group coordinator for one partition of `__consumer_offsets` (Kafka's
//! `GroupCoordinatorShard`), IO-free: the classic groups that hash to the partition and their
//! committed offsets, the rules of every group API, and the timers of sessions, rebalances and
//! offset retention.
//!
//! The shape is raft-rs's: the driver feeds requests (`join_group`, `sync_group`, …, each with
//! the driver's [`Token`] for its answer and the [`Now`] of both clocks), records read back from the partition
//! ([`GroupShard::replay`], then [`GroupShard::finish_loading`]) and time ([`GroupShard::tick`]);
//! [`GroupShard::ready`] hands back what to do: records to append, in order, and answers to
//! send. After appending a write's records and seeing them durable, the driver calls
//! [`GroupShard::write_completed`].
//!
//! Invariants:
//! - State changes happen when a request is stepped; the records that describe them are
//!   emitted in the same step, in the order the changes were made, so replaying the partition
//!   rebuilds the state (the `replay_rebuilds_state` tests check it).
//! - An answer goes out only once every write issued before it is durable (Kafka's coordinator
//!   runtime answers once the high watermark passes its records): nothing a client is told can
//!   be lost by a crash. Writes complete in the order they were issued.
//! - A failed write unloads the shard: every held answer gets an error, the groups are
//!   forgotten, and later requests get NOT_COORDINATOR until the driver loads the partition
//!   again from what is on disk.
//! - A group's generation never decreases, across restarts too: the group's metadata record is
//!   written at every generation, before any member hears of it.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::coordinator::group::{
    ClassicGroup, CommittedOffset, GroupState, InitialDelay, JoinDeadline, Member, Now, Token,
    CONSUMER_PROTOCOL_TYPE,
};
use crate::coordinator::records::{
    CoordinatorKey, GroupMetadataValue, MemberMetadata, OffsetCommitValue, RecordsError,
};
use crate::protocol::acl::{self, ResourceType};
use crate::protocol::delete_groups::DeletableGroupResult;
use crate::protocol::describe_groups::{DescribedGroup, DescribedGroupMember};
use crate::protocol::error::ErrorCode;
use crate::protocol::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::join_group::{JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember};
use crate::protocol::leave_group::{LeaveGroupRequest, LeaveGroupResponse, MemberResponse};
use crate::protocol::list_groups::{ListGroupsResponse, ListedGroup};
use crate::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};
use crate::protocol::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
};
use crate::protocol::offset_fetch::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use crate::protocol::sync_group::{SyncGroupRequest, SyncGroupResponse};
use crate::protocol::types::{LeaderEpoch, Offset};

/// Kafka's defaults for the group settings (`GroupCoordinatorConfig`).
pub const GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT: i32 = 6_000;
pub const GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT: i32 = 1_800_000;
pub const GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT: i32 = 3_000;
pub const GROUP_MAX_SIZE_DEFAULT: i32 = i32::MAX;
pub const OFFSET_METADATA_MAX_BYTES_DEFAULT: i32 = 4_096;
pub const OFFSETS_RETENTION_MINUTES_DEFAULT: i32 = 10_080;
pub const OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT: i64 = 600_000;

/// The most groups one DescribeGroups, DeleteGroups or OffsetFetch may name per shard
/// call: bounds the work of one step (a request carrying more is refused by the driver).
pub const GROUPS_PER_REQUEST_MAX: usize = 10_000;
/// The most answers a shard holds behind writes that are not durable yet.
pub const HELD_ANSWERS_MAX: usize = 100_000;

/// One group's OffsetFetch question: its id and the partitions asked for, by topic (`None`:
/// every partition with a committed offset).
pub type OffsetQuestion = (String, Option<Vec<(String, Vec<i32>)>>);

/// The group settings one shard applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    pub offset_metadata_max_bytes: i32,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
            max_session_timeout_ms: GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
            initial_rebalance_delay_ms: GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            max_size: GROUP_MAX_SIZE_DEFAULT,
            offset_metadata_max_bytes: OFFSET_METADATA_MAX_BYTES_DEFAULT,
            offsets_retention_ms: i64::from(OFFSETS_RETENTION_MINUTES_DEFAULT) * 60_000,
            offsets_retention_check_interval_ms: OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
        }
    }
}

/// Deliberate coordinator bugs, for the simulation to show its group checkers fire.
/// All off in production.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoordinatorBugs {
    /// Accept OffsetCommit and SyncGroup whatever their generation.
    pub accept_stale_generation: bool,
    /// Answer OffsetCommit without waiting for its record to be durable.
    pub answer_commit_before_durable: bool,
    /// Complete a rebalance without bumping the generation.
    pub skip_generation_bump: bool,
    /// Keep serving a partition's groups after this broker stopped leading the partition:
    /// no unload on resignation, and a write the partition refuses is answered as done (a
    /// deposed coordinator beside the new one, acknowledging what it cannot store).
    pub serve_after_resign: bool,
}

/// Who sent a request (for DescribeGroups) and the member id the driver drew for it in case
/// the coordinator hands one out (Kafka's `clientId + "-" + UUID`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientContext {
    pub client_id: String,
    pub client_host: String,
    pub new_member_id: String,
}

/// An answer of the shard. Multi-group APIs answer per shard; the driver merges the parts of
/// the shards a request spans.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    JoinGroup(JoinGroupResponse),
    SyncGroup(SyncGroupResponse),
    Heartbeat(HeartbeatResponse),
    LeaveGroup(LeaveGroupResponse),
    OffsetCommit(OffsetCommitResponse),
    OffsetDelete(OffsetDeleteResponse),
    OffsetFetch(Vec<OffsetFetchResponseGroup>),
    DescribeGroups(Vec<DescribedGroup>),
    /// This shard's groups, or (while it does not serve) none and its error.
    ListGroups(ListGroupsResponse),
    DeleteGroups(Vec<DeletableGroupResult>),
}

impl Answer {
    /// The same answer with every error code set to `code` (a held answer whose write failed).
    pub fn with_error(mut self, code: ErrorCode) -> Answer {
        let c = code.code();
        match &mut self {
            Answer::JoinGroup(r) => {
                r.error_code = c;
                r.members.clear();
            }
            Answer::SyncGroup(r) => {
                r.error_code = c;
                r.assignment = Bytes::new();
            }
            Answer::Heartbeat(r) => r.error_code = c,
            Answer::LeaveGroup(r) => {
                r.error_code = c;
                r.members.iter_mut().for_each(|m| m.error_code = c);
            }
            Answer::OffsetCommit(r) => r
                .topics
                .iter_mut()
                .flat_map(|t| t.partitions.iter_mut())
                .for_each(|p| p.error_code = c),
            Answer::OffsetDelete(r) => r.error_code = c,
            Answer::OffsetFetch(groups) => groups.iter_mut().for_each(|g| {
                g.error_code = c;
                g.topics.clear();
            }),
            Answer::DescribeGroups(groups) => groups.iter_mut().for_each(|g| {
                g.error_code = c;
                g.members.clear();
            }),
            Answer::ListGroups(r) => {
                r.error_code = c;
                r.groups.clear();
            }
            Answer::DeleteGroups(results) => results.iter_mut().for_each(|r| r.error_code = c),
        }
        self
    }
}

/// Records to append to the shard's partition, in order (a key, and a value or a tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub id: u64,
    pub records: Vec<(Bytes, Option<Bytes>)>,
}

/// What the driver must do next.
#[derive(Debug, Default, PartialEq)]
pub struct Ready {
    /// Append these, in order, then report each with `write_completed`.
    pub writes: Vec<Write>,
    /// Send these.
    pub answers: Vec<(Token, Answer)>,
}

/// Whether the shard serves its groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardStatus {
    /// Replaying the partition: requests get COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    Active,
    /// A write failed or the partition is no longer ours: requests get NOT_COORDINATOR.
    Unloaded,
}

/// The coordinator of one `__consumer_offsets` partition.
#[derive(Debug)]
pub struct GroupShard {
    pub partition: i32,
    pub config: GroupConfig,
    pub bugs: CoordinatorBugs,
    status: ShardStatus,
    groups: BTreeMap<String, ClassicGroup>,
    /// The records of the step under way.
    records: Vec<(Bytes, Option<Bytes>)>,
    ready: Ready,
    next_write_id: u64,
    /// Issued writes not reported durable yet, oldest first, each with the answers held
    /// behind it.
    in_flight: VecDeque<(u64, Vec<(Token, Answer)>)>,
    held_count: usize,
    next_retention_check_ms: i64,
}

impl GroupShard {
    /// A shard that is about to load its partition.
    pub fn new(partition: i32, config: GroupConfig, bugs: CoordinatorBugs) -> GroupShard {
        GroupShard {
            partition,
            config,
            bugs,
            status: ShardStatus::Loading,
            groups: BTreeMap::new(),
            records: Vec::new(),
            ready: Ready::default(),
            next_write_id: 0,
            in_flight: VecDeque::new(),
            held_count: 0,
            next_retention_check_ms: 0,
        }
    }

    pub fn status(&self) -> ShardStatus {
        self.status
    }

    pub fn group(&self, group_id: &str) -> Option<&ClassicGroup> {
        self.groups.get(group_id)
    }

    pub fn groups(&self) -> impl Iterator<Item = &ClassicGroup> {
        self.groups.values()
    }

    /// Takes what the driver must do; the records of the step just made become one write.
    pub fn ready(&mut self) -> Ready {
        self.flush_step();
        std::mem::take(&mut self.ready)
    }

    /// The earliest time `tick` has work, if any.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        if self.status != ShardStatus::Active {
            return None;
        }
        let mut next = Some(self.next_retention_check_ms);
        let mut consider = |t: i64| next = Some(next.map_or(t, |n: i64| n.min(t)));
        for group in self.groups.values() {
            if let Some(deadline) = group.join_deadline {
                consider(deadline.deadline_ms);
            }
            for deadline in group.pending_members.values() {
                consider(*deadline);
            }
            for member in group.members.values() {
                if member.awaiting_join.is_none() && member.awaiting_sync.is_none() {
                    consider(member.last_heartbeat_ms + i64::from(member.session_timeout_ms));
                }
            }
        }
        next
    }

    // ---- loading ------------------------------------------------------------------------

    /// Applies one record read back from the partition while loading. A record this
    /// version does not understand is an error: the driver reports it and stops loading
    /// rather than serve groups from a partial view.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), RecordsError> {
        assert_eq!(self.status, ShardStatus::Loading, "replay outside loading");
        match CoordinatorKey::decode(key)? {
            CoordinatorKey::OffsetCommit {
                group,
                topic,
                partition,
            } => match value {
                Some(value) => {
                    let value = OffsetCommitValue::decode(value)?;
                    let entry = self
                        .groups
                        .entry(group.clone())
                        .or_insert_with(|| ClassicGroup::new(group, value.commit_timestamp_ms));
                    entry.offsets.insert(
                        (topic, partition),
                        CommittedOffset {
                            offset: value.offset,
                            leader_epoch: value.leader_epoch,
                            metadata: value.metadata,
                            commit_timestamp_ms: value.commit_timestamp_ms,
                            expire_timestamp_ms: value.expire_timestamp_ms,
                        },
                    );
                }
                None => {
                    if let Some(entry) = self.groups.get_mut(&group) {
                        entry.offsets.remove(&(topic, partition));
                    }
                }
            },
            CoordinatorKey::GroupMetadata { group } => match value {
                Some(value) => {
                    let value = GroupMetadataValue::decode(value)?;
                    let offsets = self
                        .groups
                        .remove(&group)
                        .map(|g| g.offsets)
                        .unwrap_or_default();
                    let mut loaded = group_from_record(group.clone(), value);
                    loaded.offsets = offsets;
                    self.groups.insert(group, loaded);
                }
                None => {
                    // A group tombstone deletes the group; its offsets have tombstones of
                    // their own, written before it.
                    if let Some(entry) = self.groups.get_mut(&group) {
                        if entry.offsets.is_empty() {
                            self.groups.remove(&group);
                        } else {
                            let offsets = std::mem::take(&mut entry.offsets);
                            *entry = ClassicGroup::new(group, entry.current_state_timestamp_ms);
                            entry.offsets = offsets;
                        }
                    }
                }
            },
        }
        Ok(())
    }

    /// Ends loading: members get a fresh session from `now` (Kafka schedules each loaded
    /// member's heartbeat expiration at load), and the shard serves requests.
    pub fn finish_loading(&mut self, now: Now) {
        assert_eq!(self.status, ShardStatus::Loading, "finish_loading twice");
        for group in self.groups.values_mut() {
            for member in group.members.values_mut() {
                member.last_heartbeat_ms = now.monotonic_ms;
            }
            group.check();
        }
        self.next_retention_check_ms =
            now.monotonic_ms + self.config.offsets_retention_check_interval_ms;
        self.status = ShardStatus::Active;
    }

    /// Forgets everything: the partition moved away or a write failed. Held answers get
    /// `code`.
    pub fn unload(&mut self, code: ErrorCode) {
        self.flush_step();
        for (_, held) in std::mem::take(&mut self.in_flight) {
            for (token, answer) in held {
                self.ready.answers.push((token, answer.with_error(code)));
            }
        }
        // Waiting joins and syncs are answered too: their members retry elsewhere.
        for group in std::mem::take(&mut self.groups).into_values() {
            for member in group.members.values() {
                if let Some((token, _)) = member.awaiting_join {
                    let answer = Answer::JoinGroup(JoinGroupResponse {
                        error_code: code.code(),
                        member_id: member.member_id.clone(),
                        ..Default::default()
                    });
                    self.ready.answers.push((token, answer));
                }
                if let Some((token, _)) = member.awaiting_sync {
                    let answer = Answer::SyncGroup(SyncGroupResponse {
                        error_code: code.code(),
                        ..Default::default()
                    });
                    self.ready.answers.push((token, answer));
                }
            }
        }
        self.ready.writes.clear();
        self.held_count = 0;
        self.status = ShardStatus::Unloaded;
    }

    /// The driver's report that write `id` is durable (`Ok`) or failed (`Err`, with the code
    /// its held answers get). Writes complete in issue order.
    pub fn write_completed(&mut self, id: u64, result: Result<(), ErrorCode>) {
        if self.status == ShardStatus::Unloaded {
            return;
        }
        let Some((oldest, _)) = self.in_flight.front() else {
            panic!("write {id} completed but none is in flight");
        };
        assert_eq!(*oldest, id, "writes complete in the order they were issued");
        match result {
            Ok(()) => {
                if let Some((_, held)) = self.in_flight.pop_front() {
                    self.held_count -= held.len();
                    self.ready.answers.extend(held);
                }
            }
            Err(code) => self.unload(code),
        }
    }

    /// Records of the step become a write; answers of the step were already queued behind it.
    fn flush_step(&mut self) {
        if self.records.is_empty() {
            return;
        }
        let id = self.next_write_id;
        self.next_write_id += 1;
        let records = std::mem::take(&mut self.records);
        self.ready.writes.push(Write { id, records });
        self.in_flight.push_back((id, Vec::new()));
    }

    /// Queues an answer: at once if nothing is in flight, else behind the latest write
    /// (including the records of the step under way).
    fn answer(&mut self, token: Token, answer: Answer) {
        let early =
            self.bugs.answer_commit_before_durable && matches!(answer, Answer::OffsetCommit(_));
        if !self.records.is_empty() {
            self.flush_step();
        }
        match self.in_flight.back_mut() {
            Some((_, held)) if !early => {
                assert!(self.held_count < HELD_ANSWERS_MAX, "too many answers held");
                held.push((token, answer));
                self.held_count += 1;
            }
            _ => self.ready.answers.push((token, answer)),
        }
    }

    /// The error every request gets while the shard does not serve, if it does not.
    fn unavailable(&self) -> Option<ErrorCode> {
        match self.status {
            ShardStatus::Active => None,
            ShardStatus::Loading => Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
            ShardStatus::Unloaded => Some(ErrorCode::NOT_COORDINATOR),
        }
    }

    fn write_group(&mut self, group_id: &str) {
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        let key = CoordinatorKey::GroupMetadata {
            group: group_id.to_string(),
        }
        .encode();
        let value = group_record(group).encode();
        self.push_record(key, Some(value));
    }

    /// Adds a record to the step's write. The requests' own limits (strings of at most
    /// `i16::MAX` bytes, metadata within `offset.metadata.max.bytes`, checked against the
    /// same bound) keep every record encodable; should one not be, the shard unloads rather
    /// than leave its state ahead of its log.
    fn push_record(
        &mut self,
        key: Result<Bytes, RecordsError>,
        value: Option<Result<Bytes, RecordsError>>,
    ) {
        match (key, value.transpose()) {
            (Ok(key), Ok(value)) => self.records.push((key, value)),
            (Err(e), _) | (_, Err(e)) => {
                debug_assert!(false, "an unencodable coordinator record: {e}");
                self.unload(ErrorCode::UNKNOWN_SERVER_ERROR);
            }
        }
    }

    fn write_offset(
        &mut self,
        group_id: &str,
        topic: &str,
        partition: i32,
        offset: Option<&CommittedOffset>,
    ) {
        let key = CoordinatorKey::OffsetCommit {
            group: group_id.to_string(),
            topic: topic.to_string(),
            partition,
        }
        .encode();
        let value = offset.map(|o| {
            OffsetCommitValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata.clone(),
                commit_timestamp_ms: o.commit_timestamp_ms,
                expire_timestamp_ms: o.expire_timestamp_ms,
            }
            .encode()
        });
        self.push_record(key, value);
    }

    // ---- JoinGroup ----------------------------------------------------------------------

    pub fn join_group(
        &mut self,
        now: Now,
        token: Token,
        version: i16,
        client: ClientContext,
        request: JoinGroupRequest,
    ) {
        let fail = |code: ErrorCode, member_id: &str| {
            Answer::JoinGroup(JoinGroupResponse {
                error_code: code.code(),
                member_id: member_id.to_string(),
                ..Default::default()
            })
        };
        if let Some(code) = self.unavailable() {
            return self.answer(token, fail(code, &request.member_id));
        }
        if request.group_id.is_empty() {
            return self.answer(token, fail(ErrorCode::INVALID_GROUP_ID, &request.member_id));
        }
        if request.session_timeout_ms < self.config.min_session_timeout_ms
            || request.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return self.answer(
                token,
                fail(ErrorCode::INVALID_SESSION_TIMEOUT, &request.member_id),
            );
        }
        let protocols: Vec<(String, Bytes)> = request
            .protocols
            .iter()
            .map(|p| (p.name.clone(), p.metadata.clone()))
            .collect();
        let group_known = self.groups.contains_key(&request.group_id);
        if !group_known && !request.member_id.is_empty() {
            return self.answer(
                token,
                fail(ErrorCode::UNKNOWN_MEMBER_ID, &request.member_id),
            );
        }
        let group = self
            .groups
            .entry(request.group_id.clone())
            .or_insert_with(|| ClassicGroup::new(request.group_id.clone(), now.wall_ms));
        if !group.supports_protocols(&request.protocol_type, &protocols) {
            let empty = group.members.is_empty() && group.offsets.is_empty() && !group_known;
            if empty {
                self.groups.remove(&request.group_id);
            }
            return self.answer(
                token,
                fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, &request.member_id),
            );
        }
        if !accept_joining_member(group, &request.member_id, self.config.max_size) {
            // Kafka's classicGroupJoin: a refused known member (the size limit may have been
            // lowered) leaves the group, so the last members to rejoin are the ones cut.
            // A refused pending id is dropped too, or the join would wait for it to expire.
            // The answer carries no member id, as Kafka's (UNKNOWN_MEMBER_ID, the empty id).
            let member_id = request.member_id.clone();
            let group_id = request.group_id.clone();
            let known = group.members.contains_key(&member_id);
            let was_pending = group.pending_members.remove(&member_id).is_some();
            let preparing = group.is(GroupState::PreparingRebalance);
            self.answer(token, fail(ErrorCode::GROUP_MAX_SIZE_REACHED, ""));
            if known {
                let code = ErrorCode::GROUP_MAX_SIZE_REACHED;
                self.remove_member(now, &group_id, &member_id, code);
            } else if was_pending && preparing {
                self.try_complete_join(now, &group_id);
            }
            return;
        }
        // Version 0 has no rebalance timeout: it is the session timeout.
        let rebalance_timeout_ms = if version == 0 || request.rebalance_timeout_ms < 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        };
        let member = Member {
            member_id: request.member_id.clone(),
            group_instance_id: request.group_instance_id.clone(),
            client_id: client.client_id.clone(),
            client_host: client.client_host.clone(),
            rebalance_timeout_ms,
            session_timeout_ms: request.session_timeout_ms,
            protocol_type: request.protocol_type.clone(),
            protocols,
            assignment: Bytes::new(),
            last_heartbeat_ms: now.monotonic_ms,
            awaiting_join: Some((token, version)),
            awaiting_sync: None,
            is_new: true,
        };
        let group_id = request.group_id.clone();
        if request.member_id.is_empty() {
            self.join_unknown_member(now, token, version, &group_id, client, member);
        } else {
            self.join_known_member(now, token, &group_id, member);
        }
        if let Some(group) = self.groups.get(&request.group_id) {
            group.check();
        }
    }

    fn join_unknown_member(
        &mut self,
        now: Now,
        token: Token,
        version: i16,
        group_id: &str,
        client: ClientContext,
        mut member: Member,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let new_member_id = client.new_member_id;
        member.member_id = new_member_id.clone();
        // A static member that is known: the new instance replaces the old (KIP-345).
        if let Some(instance) = member.group_instance_id.clone() {
            if let Some(old_id) = group.static_member(&instance).cloned() {
                return self.replace_static_member(now, token, version, group_id, &old_id, member);
            }
        } else if version >= 4 {
            // KIP-394: a dynamic member must join again with the id it is handed.
            group.pending_members.insert(
                new_member_id.clone(),
                now.monotonic_ms + i64::from(member.session_timeout_ms),
            );
            return self.answer(
                token,
                Answer::JoinGroup(JoinGroupResponse {
                    error_code: ErrorCode::MEMBER_ID_REQUIRED.code(),
                    member_id: new_member_id,
                    ..Default::default()
                }),
            );
        }
        self.add_member_and_rebalance(now, group_id, member);
    }

    fn join_known_member(&mut self, now: Now, token: Token, group_id: &str, member: Member) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let fail = |code: ErrorCode, id: &str| {
            Answer::JoinGroup(JoinGroupResponse {
                error_code: code.code(),
                member_id: id.to_string(),
                ..Default::default()
            })
        };
        if group.pending_members.contains_key(&member.member_id) {
            return self.add_member_and_rebalance(now, group_id, member);
        }
        let member_id = member.member_id.clone();
        if group.is_fenced(&member_id, member.group_instance_id.as_deref()) {
            return self.answer(token, fail(ErrorCode::FENCED_INSTANCE_ID, &member_id));
        }
        let Some(existing) = group.members.get_mut(&member_id) else {
            return self.answer(token, fail(ErrorCode::UNKNOWN_MEMBER_ID, &member_id));
        };
        if existing.group_instance_id.is_some()
            && existing.group_instance_id != member.group_instance_id
        {
            return self.answer(token, fail(ErrorCode::FENCED_INSTANCE_ID, &member_id));
        }
        existing.last_heartbeat_ms = now.monotonic_ms;
        match group.state {
            GroupState::PreparingRebalance => {
                // A second join replaces the first, which is told to rejoin.
                if let Some((old, _)) = existing.awaiting_join.take() {
                    let answer = fail(ErrorCode::REBALANCE_IN_PROGRESS, &member_id);
                    update_member(existing, &member);
                    existing.awaiting_join = member.awaiting_join;
                    self.answer(old, answer);
                } else {
                    update_member(existing, &member);
                    existing.awaiting_join = member.awaiting_join;
                }
                self.try_complete_join(now, group_id);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let unchanged = existing.matches(&member.protocols);
                let is_leader = group.leader.as_deref() == Some(member_id.as_str());
                if unchanged && (group.state == GroupState::CompletingRebalance || !is_leader) {
                    // Nothing changed: the member gets the current generation again.
                    let answer = join_answer(group, &member_id, false);
                    self.answer(token, Answer::JoinGroup(answer));
                } else {
                    update_member(existing, &member);
                    existing.awaiting_join = member.awaiting_join;
                    self.prepare_rebalance(now, group_id);
                }
            }
            GroupState::Empty | GroupState::Dead => {
                self.answer(token, fail(ErrorCode::UNKNOWN_MEMBER_ID, &member_id));
            }
        }
    }

    /// Adds a member (its JoinGroup answer waits in `member.awaiting_join`) and rebalances.
    fn add_member_and_rebalance(&mut self, now: Now, group_id: &str, member: Member) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.is(GroupState::PreparingRebalance) {
            group.new_member_added = true;
        }
        group.add(member);
        match group.state {
            GroupState::PreparingRebalance => self.try_complete_join(now, group_id),
            _ => self.prepare_rebalance(now, group_id),
        }
    }

    fn replace_static_member(
        &mut self,
        now: Now,
        token: Token,
        version: i16,
        group_id: &str,
        old_id: &str,
        mut member: Member,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let was_leader = group.leader.as_deref() == Some(old_id);
        let Some(old) = group.remove(old_id) else {
            return;
        };
        let unchanged = old.matches(&member.protocols);
        member.assignment = old.assignment.clone();
        let fenced = [
            old.awaiting_join.map(|(t, _)| (t, true)),
            old.awaiting_sync.map(|(t, _)| (t, false)),
        ];
        let new_id = member.member_id.clone();
        let state = group.state;
        group.add(member);
        // `remove` moved the leadership to another member: a replaced leader stays the
        // leader under its new id.
        if was_leader {
            group.leader = Some(new_id.clone());
        }
        for (t, is_join) in fenced.into_iter().flatten() {
            let answer = if is_join {
                Answer::JoinGroup(JoinGroupResponse {
                    error_code: ErrorCode::FENCED_INSTANCE_ID.code(),
                    member_id: old_id.to_string(),
                    ..Default::default()
                })
            } else {
                Answer::SyncGroup(SyncGroupResponse {
                    error_code: ErrorCode::FENCED_INSTANCE_ID.code(),
                    ..Default::default()
                })
            };
            self.answer(t, answer);
        }
        match state {
            GroupState::Stable if unchanged => {
                // KIP-345: the same static member back within its session: no rebalance. The
                // group's record names the new member id before the member hears it.
                let Some(group) = self.groups.get_mut(group_id) else {
                    return;
                };
                if let Some(m) = group.members.get_mut(&new_id) {
                    m.awaiting_join = None;
                    m.is_new = false;
                }
                let is_leader = group.leader.as_deref() == Some(new_id.as_str());
                let skips = version >= JOIN_SKIP_ASSIGNMENT_VERSION_MIN;
                let mut answer = join_answer(group, &new_id, is_leader && skips);
                if !skips {
                    // Before KIP-814 (v9) a client cannot be told to skip its assignment, and
                    // what a leader assigns to a stable group is not sent to anyone. Kafka
                    // answers such a member with no members and the leader id from before
                    // the replacement, so a returning leader sees it is not named and acts
                    // as a follower: no trivial assignment, no metadata-change rejoin.
                    answer.members.clear();
                    if was_leader {
                        answer.leader = old_id.to_string();
                    }
                }
                self.write_group(group_id);
                self.answer(token, Answer::JoinGroup(answer));
            }
            GroupState::PreparingRebalance => self.try_complete_join(now, group_id),
            _ => self.prepare_rebalance(now, group_id),
        }
    }

    /// Starts a rebalance (Kafka's `prepareRebalance`): pending syncs are told to rejoin; a
    /// group that was empty waits the initial delay, extended while members keep joining;
    /// others wait for every member up to the rebalance timeout.
    fn prepare_rebalance(&mut self, now: Now, group_id: &str) {
        let initial_delay_ms = i64::from(self.config.initial_rebalance_delay_ms);
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let mut told = Vec::new();
        if group.is(GroupState::CompletingRebalance) {
            for member in group.members.values_mut() {
                if let Some((t, _)) = member.awaiting_sync.take() {
                    told.push(t);
                }
            }
        }
        let rebalance_timeout_ms = group.rebalance_timeout_ms();
        let was_empty = group.is(GroupState::Empty);
        group.join_deadline = Some(if was_empty {
            let delay_ms = initial_delay_ms.min(rebalance_timeout_ms);
            JoinDeadline {
                deadline_ms: now.monotonic_ms + delay_ms,
                initial: Some(InitialDelay {
                    delay_ms,
                    remaining_ms: (rebalance_timeout_ms - delay_ms).max(0),
                }),
            }
        } else {
            JoinDeadline {
                deadline_ms: now.monotonic_ms + rebalance_timeout_ms,
                initial: None,
            }
        });
        group.new_member_added = false;
        group.transition(GroupState::PreparingRebalance, now.wall_ms);
        for t in told {
            self.answer(
                t,
                Answer::SyncGroup(SyncGroupResponse {
                    error_code: ErrorCode::REBALANCE_IN_PROGRESS.code(),
                    ..Default::default()
                }),
            );
        }
        self.try_complete_join(now, group_id);
    }

    /// Completes the join if every member is in (not during an initial delay, which only
    /// its timer ends).
    fn try_complete_join(&mut self, now: Now, group_id: &str) {
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        if !group.is(GroupState::PreparingRebalance) {
            return;
        }
        let initial = group.join_deadline.is_some_and(|d| d.initial.is_some());
        if !initial && group.has_all_members_joined() {
            self.complete_join(now, group_id);
        }
    }

    /// Kafka's `onCompleteJoin`: members that did not rejoin are dropped, the generation is
    /// bumped, the protocol chosen, the record written and the joins answered behind it.
    fn complete_join(&mut self, now: Now, group_id: &str) {
        let skip_bump = self.bugs.skip_generation_bump;
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        assert!(
            group.is(GroupState::PreparingRebalance),
            "complete_join outside a rebalance"
        );
        let gone: Vec<String> = group
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            group.remove(id);
        }
        group.join_deadline = None;
        let previous = group.generation;
        assert!(
            previous < i32::MAX,
            "group {group_id}: generation exhausted"
        );
        if !skip_bump || previous == 0 {
            group.generation = previous + 1;
        }
        if group.members.is_empty() {
            group.protocol_name = None;
            group.transition(GroupState::Empty, now.wall_ms);
        } else {
            group.protocol_name = group.select_protocol();
            group.transition(GroupState::CompletingRebalance, now.wall_ms);
            group.compute_subscribed_topics();
            if !group
                .leader
                .as_ref()
                .is_some_and(|l| group.members.contains_key(l))
            {
                group.leader = group.members.keys().next().cloned();
            }
        }
        let mut answers = Vec::new();
        let ids: Vec<String> = group.members.keys().cloned().collect();
        for id in &ids {
            let is_leader = group.leader.as_deref() == Some(id.as_str());
            let answer = join_answer(group, id, false);
            let answer = JoinGroupResponse {
                members: if is_leader {
                    answer.members
                } else {
                    Vec::new()
                },
                ..answer
            };
            if let Some(member) = group.members.get_mut(id) {
                member.last_heartbeat_ms = now.monotonic_ms;
                member.is_new = false;
                member.assignment = Bytes::new();
                if let Some((t, _)) = member.awaiting_join.take() {
                    answers.push((t, answer));
                }
            }
        }
        group.check();
        // As Kafka's `onCompleteJoin`: only an emptied group is stored here. A group with
        // members is stored when its leader's SyncGroup brings the assignment; stored now,
        // without one, a reload would find it stable with every assignment empty, and
        // nothing would ever rebalance it (seed 974 of the sharded suite).
        if group.members.is_empty() {
            self.write_group(group_id);
        }
        for (t, answer) in answers {
            self.answer(t, Answer::JoinGroup(answer));
        }
    }

    // ---- SyncGroup ----------------------------------------------------------------------

    pub fn sync_group(&mut self, now: Now, token: Token, version: i16, request: SyncGroupRequest) {
        let fail = |code: ErrorCode| {
            Answer::SyncGroup(SyncGroupResponse {
                error_code: code.code(),
                ..Default::default()
            })
        };
        if let Some(code) = self.unavailable() {
            return self.answer(token, fail(code));
        }
        let accept_stale = self.bugs.accept_stale_generation;
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return self.answer(token, fail(ErrorCode::UNKNOWN_MEMBER_ID));
        };
        if group.is_fenced(&request.member_id, request.group_instance_id.as_deref()) {
            return self.answer(token, fail(ErrorCode::FENCED_INSTANCE_ID));
        }
        if !group.members.contains_key(&request.member_id) {
            return self.answer(token, fail(ErrorCode::UNKNOWN_MEMBER_ID));
        }
        if request.generation_id != group.generation && !accept_stale {
            return self.answer(token, fail(ErrorCode::ILLEGAL_GENERATION));
        }
        // v5: the protocol type and name, when given, must be the group's.
        if request.protocol_type.is_some() && request.protocol_type != group.protocol_type {
            return self.answer(token, fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL));
        }
        if request.protocol_name.is_some() && request.protocol_name != group.protocol_name {
            return self.answer(token, fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL));
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => {
                self.answer(token, fail(ErrorCode::UNKNOWN_MEMBER_ID))
            }
            GroupState::PreparingRebalance => {
                self.answer(token, fail(ErrorCode::REBALANCE_IN_PROGRESS))
            }
            GroupState::CompletingRebalance => {
                let is_leader = group.leader.as_deref() == Some(request.member_id.as_str());
                let mut repeated = None;
                if let Some(member) = group.members.get_mut(&request.member_id) {
                    member.last_heartbeat_ms = now.monotonic_ms;
                    repeated = member.awaiting_sync.replace((token, version));
                }
                if let Some((old, _)) = repeated {
                    // A repeated sync: the first is answered as a rebalance in progress.
                    self.answer(old, fail(ErrorCode::REBALANCE_IN_PROGRESS));
                }
                if !is_leader {
                    return;
                }
                let assignments: BTreeMap<String, Bytes> = request
                    .assignments
                    .into_iter()
                    .map(|a| (a.member_id, a.assignment))
                    .collect();
                let Some(group) = self.groups.get_mut(&request.group_id) else {
                    return;
                };
                tracing::debug!(
                    group = %request.group_id,
                    generation = group.generation,
                    members = ?group.members.keys().collect::<Vec<_>>(),
                    assigned = ?assignments.keys().collect::<Vec<_>>(),
                    "the leader's assignment completes the rebalance"
                );
                let mut answers = Vec::new();
                for member in group.members.values_mut() {
                    member.assignment = assignments
                        .get(&member.member_id)
                        .cloned()
                        .unwrap_or_default();
                    if let Some((t, _)) = member.awaiting_sync.take() {
                        answers.push((
                            t,
                            sync_answer(
                                &(group.protocol_type.clone(), group.protocol_name.clone()),
                                member.assignment.clone(),
                            ),
                        ));
                    }
                }
                group.transition(GroupState::Stable, now.wall_ms);
                group.check();
                let group_id = request.group_id.clone();
                self.write_group(&group_id);
                for (t, answer) in answers {
                    self.answer(t, answer);
                }
            }
            GroupState::Stable => {
                let names = (group.protocol_type.clone(), group.protocol_name.clone());
                let Some(member) = group.members.get_mut(&request.member_id) else {
                    return;
                };
                member.last_heartbeat_ms = now.monotonic_ms;
                let answer = sync_answer(&names, member.assignment.clone());
                self.answer(token, answer);
            }
        }
    }

    // ---- Heartbeat ----------------------------------------------------------------------

    pub fn heartbeat(&mut self, now: Now, token: Token, request: HeartbeatRequest) {
        let reply = |code: ErrorCode| {
            Answer::Heartbeat(HeartbeatResponse {
                error_code: code.code(),
                ..Default::default()
            })
        };
        if let Some(code) = self.unavailable() {
            return self.answer(token, reply(code));
        }
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return self.answer(token, reply(ErrorCode::UNKNOWN_MEMBER_ID));
        };
        let code = if group.is_fenced(&request.member_id, request.group_instance_id.as_deref()) {
            ErrorCode::FENCED_INSTANCE_ID
        } else if !group.members.contains_key(&request.member_id) || group.is(GroupState::Empty) {
            ErrorCode::UNKNOWN_MEMBER_ID
        } else if request.generation_id != group.generation {
            ErrorCode::ILLEGAL_GENERATION
        } else {
            if let Some(member) = group.members.get_mut(&request.member_id) {
                member.last_heartbeat_ms = now.monotonic_ms;
            }
            if group.is(GroupState::PreparingRebalance) {
                ErrorCode::REBALANCE_IN_PROGRESS
            } else {
                ErrorCode::NONE
            }
        };
        self.answer(token, reply(code));
    }

    // ---- LeaveGroup ---------------------------------------------------------------------

    pub fn leave_group(
        &mut self,
        now: Now,
        token: Token,
        version: i16,
        request: LeaveGroupRequest,
    ) {
        let members: Vec<(String, Option<String>)> = if version < 3 {
            vec![(request.member_id.clone(), None)]
        } else {
            request
                .members
                .iter()
                .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
                .collect()
        };
        let top = |code: ErrorCode| {
            Answer::LeaveGroup(LeaveGroupResponse {
                error_code: code.code(),
                ..Default::default()
            })
        };
        if let Some(code) = self.unavailable() {
            return self.answer(token, top(code));
        }
        if !self.groups.contains_key(&request.group_id) {
            return self.answer(token, top(ErrorCode::UNKNOWN_MEMBER_ID));
        }
        let mut results = Vec::new();
        for (member_id, instance_id) in members {
            let Some(group) = self.groups.get_mut(&request.group_id) else {
                break;
            };
            // A static member may leave by instance id alone (KIP-345).
            let target = match &instance_id {
                Some(instance) => match group.static_member(instance) {
                    Some(current) if member_id.is_empty() || *current == member_id => {
                        Ok(current.clone())
                    }
                    Some(_) => Err(ErrorCode::FENCED_INSTANCE_ID),
                    None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
                },
                None if group.members.contains_key(&member_id) => Ok(member_id.clone()),
                None if group.pending_members.remove(&member_id).is_some() => Ok(String::new()),
                None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
            };
            let code = match target {
                Ok(id) if id.is_empty() => ErrorCode::NONE,
                Ok(id) => {
                    self.remove_member(now, &request.group_id, &id, ErrorCode::UNKNOWN_MEMBER_ID);
                    ErrorCode::NONE
                }
                Err(code) => code,
            };
            results.push(MemberResponse {
                member_id,
                group_instance_id: instance_id,
                error_code: code.code(),
            });
        }
        let answer = if version < 3 {
            LeaveGroupResponse {
                error_code: results.first().map_or(0, |r| r.error_code),
                ..Default::default()
            }
        } else {
            LeaveGroupResponse {
                members: results,
                ..Default::default()
            }
        };
        self.answer(token, Answer::LeaveGroup(answer));
    }

    /// Removes a member that left or expired, answering what it awaited with `code`, and
    /// rebalances the others.
    fn remove_member(&mut self, now: Now, group_id: &str, member_id: &str, code: ErrorCode) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(member) = group.remove(member_id) else {
            return;
        };
        if let Some((t, _)) = member.awaiting_join {
            self.answer(
                t,
                Answer::JoinGroup(JoinGroupResponse {
                    error_code: code.code(),
                    member_id: member_id.to_string(),
                    ..Default::default()
                }),
            );
        }
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, group_id)
            }
            GroupState::PreparingRebalance => self.try_complete_join(now, group_id),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---- OffsetCommit -------------------------------------------------------------------

    /// Commits offsets; `exists` says whether a topic partition exists (the broker's
    /// metadata: commits to unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, as in Kafka).
    /// `version` is the request's: the answer for a group that does not exist depends on it.
    pub fn offset_commit(
        &mut self,
        now: Now,
        token: Token,
        version: i16,
        request: OffsetCommitRequest,
        exists: &dyn Fn(&str, i32) -> bool,
    ) {
        let all = |request: &OffsetCommitRequest, code: ErrorCode| {
            Answer::OffsetCommit(OffsetCommitResponse {
                topics: request
                    .topics
                    .iter()
                    .map(|t| OffsetCommitResponseTopic {
                        name: t.name.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| OffsetCommitResponsePartition {
                                partition_index: p.partition_index,
                                error_code: code.code(),
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        };
        if let Some(code) = self.unavailable() {
            return self.answer(token, all(&request, code));
        }
        if request.group_id.is_empty() {
            return self.answer(token, all(&request, ErrorCode::INVALID_GROUP_ID));
        }
        let generation = request.generation_id_or_member_epoch;
        let accept_stale = self.bugs.accept_stale_generation;
        let group = match self.groups.get(&request.group_id) {
            None if generation < 0 => None,
            // Kafka's OffsetMetadataManager.validateOffsetCommit: a generation for a group
            // that does not exist is GROUP_ID_NOT_FOUND from v9 on, ILLEGAL_GENERATION before
            // (kept for older clients).
            None if version >= 9 => {
                return self.answer(token, all(&request, ErrorCode::GROUP_ID_NOT_FOUND))
            }
            None => return self.answer(token, all(&request, ErrorCode::ILLEGAL_GENERATION)),
            Some(group) => Some(group),
        };
        if let Some(group) = group {
            let code = validate_commit(group, &request, accept_stale);
            if code != ErrorCode::NONE {
                return self.answer(token, all(&request, code));
            }
        }
        let group = self
            .groups
            .entry(request.group_id.clone())
            .or_insert_with(|| ClassicGroup::new(request.group_id.clone(), now.wall_ms));
        if let Some(member) = group.members.get_mut(&request.member_id) {
            member.last_heartbeat_ms = now.monotonic_ms;
        }
        // A record's strings hold at most i16::MAX bytes, whatever the setting allows.
        let metadata_max = usize::try_from(self.config.offset_metadata_max_bytes)
            .unwrap_or(0)
            .min(usize::try_from(i16::MAX).unwrap_or(0));
        let mut response = OffsetCommitResponse::default();
        let mut committed = Vec::new();
        for topic in &request.topics {
            let mut partitions = Vec::new();
            for p in &topic.partitions {
                let metadata = p.committed_metadata.clone().unwrap_or_default();
                let code = if !exists(&topic.name, p.partition_index) {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                } else if metadata.len() > metadata_max {
                    ErrorCode::OFFSET_METADATA_TOO_LARGE
                } else {
                    let expire = (request.retention_time_ms >= 0)
                        .then(|| now.wall_ms.saturating_add(request.retention_time_ms));
                    let value = CommittedOffset {
                        offset: p.committed_offset.0,
                        leader_epoch: p.committed_leader_epoch.0,
                        metadata,
                        commit_timestamp_ms: now.wall_ms,
                        expire_timestamp_ms: expire,
                    };
                    group
                        .offsets
                        .insert((topic.name.clone(), p.partition_index), value.clone());
                    committed.push((topic.name.clone(), p.partition_index, value));
                    ErrorCode::NONE
                };
                partitions.push(OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: code.code(),
                });
            }
            response.topics.push(OffsetCommitResponseTopic {
                name: topic.name.clone(),
                partitions,
                ..Default::default()
            });
        }
        group.check();
        let group_id = request.group_id.clone();
        for (topic, partition, value) in &committed {
            self.write_offset(&group_id, topic, *partition, Some(value));
        }
        self.answer(token, Answer::OffsetCommit(response));
    }

    // ---- OffsetFetch --------------------------------------------------------------------

    /// The committed offsets of `groups`, each with the partitions asked for (`None`: all).
    /// Answers only with durable commits: it is held behind writes in flight.
    pub fn offset_fetch(&mut self, token: Token, groups: Vec<OffsetQuestion>) {
        let unavailable = self.unavailable();
        let mut out = Vec::new();
        for (group_id, topics) in groups.into_iter().take(GROUPS_PER_REQUEST_MAX) {
            if let Some(code) = unavailable {
                out.push(OffsetFetchResponseGroup {
                    group_id,
                    error_code: code.code(),
                    ..Default::default()
                });
                continue;
            }
            let offsets = self.groups.get(&group_id).map(|g| &g.offsets);
            let mut topics_out: Vec<OffsetFetchResponseTopics> = Vec::new();
            match topics {
                Some(topics) => {
                    for (name, partitions) in topics {
                        let partitions = partitions
                            .into_iter()
                            .map(|index| {
                                let found = offsets.and_then(|o| o.get(&(name.clone(), index)));
                                fetched_partition(index, found)
                            })
                            .collect();
                        topics_out.push(OffsetFetchResponseTopics {
                            name,
                            partitions,
                            ..Default::default()
                        });
                    }
                }
                None => {
                    for ((name, index), offset) in offsets.into_iter().flatten() {
                        let partition = fetched_partition(*index, Some(offset));
                        match topics_out.last_mut() {
                            Some(t) if t.name == *name => t.partitions.push(partition),
                            _ => topics_out.push(OffsetFetchResponseTopics {
                                name: name.clone(),
                                partitions: vec![partition],
                                ..Default::default()
                            }),
                        }
                    }
                }
            }
            out.push(OffsetFetchResponseGroup {
                group_id,
                topics: topics_out,
                ..Default::default()
            });
        }
        self.answer(token, Answer::OffsetFetch(out));
    }

    // ---- DescribeGroups, ListGroups -----------------------------------------------------

    pub fn describe_groups(
        &mut self,
        token: Token,
        version: i16,
        group_ids: Vec<String>,
        include_authorized_operations: bool,
    ) {
        let unavailable = self.unavailable();
        let mut out = Vec::new();
        for group_id in group_ids.into_iter().take(GROUPS_PER_REQUEST_MAX) {
            let mut described = DescribedGroup {
                group_id: group_id.clone(),
                ..Default::default()
            };
            if include_authorized_operations {
                described.authorized_operations = acl::authorized_operations(ResourceType::Group);
            }
            if let Some(code) = unavailable {
                described.error_code = code.code();
                out.push(described);
                continue;
            }
            match self.groups.get(&group_id) {
                None => {
                    described.group_state = GroupState::Dead.name().to_string();
                    // Kafka 4 answers an unknown group GROUP_ID_NOT_FOUND from v6 on.
                    if version >= 6 {
                        described.error_code = ErrorCode::GROUP_ID_NOT_FOUND.code();
                        described.error_message = Some(format!("group {group_id} not found"));
                    }
                }
                Some(group) => {
                    described.group_state = group.state.name().to_string();
                    described.protocol_type = group.protocol_type.clone().unwrap_or_default();
                    let stable = group.is(GroupState::Stable);
                    described.protocol_data = if stable {
                        group.protocol_name.clone().unwrap_or_default()
                    } else {
                        String::new()
                    };
                    described.members = group
                        .members
                        .values()
                        .map(|m| DescribedGroupMember {
                            member_id: m.member_id.clone(),
                            group_instance_id: m.group_instance_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            member_metadata: if stable {
                                group
                                    .protocol_name
                                    .as_deref()
                                    .and_then(|p| m.metadata(p))
                                    .cloned()
                                    .unwrap_or_default()
                            } else {
                                Bytes::new()
                            },
                            member_assignment: if stable {
                                m.assignment.clone()
                            } else {
                                Bytes::new()
                            },
                        })
                        .collect();
                }
            }
            out.push(described);
        }
        self.answer(token, Answer::DescribeGroups(out));
    }

    /// The groups of this shard, filtered by state names (ListGroups v4+, case-insensitive)
    /// and types (v5+: only `classic` groups exist here). A shard that does not serve lists
    /// nothing and says why: Kafka answers COORDINATOR_LOAD_IN_PROGRESS while a partition of
    /// `__consumer_offsets` loads (GroupCoordinator.handleListGroups), so that clients retry
    /// rather than take a partial list for the whole.
    pub fn list_groups(&mut self, token: Token, states: &[String], types: &[String]) {
        let classic_wanted =
            types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case("classic"));
        let unavailable = self.unavailable();
        let groups = if unavailable.is_some() || !classic_wanted {
            Vec::new()
        } else {
            self.groups
                .values()
                .filter(|g| {
                    states.is_empty()
                        || states
                            .iter()
                            .any(|s| s.eq_ignore_ascii_case(g.state.name()))
                })
                .map(|g| ListedGroup {
                    group_id: g.group_id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    group_state: g.state.name().to_string(),
                    group_type: "classic".to_string(),
                })
                .collect()
        };
        let answer = ListGroupsResponse {
            error_code: unavailable.map_or(0, ErrorCode::code),
            groups,
            ..Default::default()
        };
        self.answer(token, Answer::ListGroups(answer));
    }

    // ---- DeleteGroups, OffsetDelete -----------------------------------------------------

    pub fn delete_groups(&mut self, now: Now, token: Token, group_ids: Vec<String>) {
        let unavailable = self.unavailable();
        let mut results = Vec::new();
        for group_id in group_ids.into_iter().take(GROUPS_PER_REQUEST_MAX) {
            let code = if let Some(code) = unavailable {
                code
            } else {
                match self.groups.get(&group_id) {
                    None => ErrorCode::GROUP_ID_NOT_FOUND,
                    Some(g) if !g.is(GroupState::Empty) => ErrorCode::NON_EMPTY_GROUP,
                    Some(_) => {
                        self.delete_group(now, &group_id);
                        ErrorCode::NONE
                    }
                }
            };
            results.push(DeletableGroupResult {
                group_id,
                error_code: code.code(),
            });
        }
        self.answer(token, Answer::DeleteGroups(results));
    }

    /// Tombstones every offset of an empty group, then the group, and forgets it.
    fn delete_group(&mut self, now: Now, group_id: &str) {
        let Some(mut group) = self.groups.remove(group_id) else {
            return;
        };
        assert!(
            group.is(GroupState::Empty),
            "only an empty group is deleted"
        );
        for (topic, partition) in group.offsets.keys() {
            self.write_offset(group_id, topic, *partition, None);
        }
        let key = CoordinatorKey::GroupMetadata {
            group: group_id.to_string(),
        }
        .encode();
        self.push_record(key, None);
        group.transition(GroupState::Dead, now.wall_ms);
    }

    pub fn offset_delete(&mut self, token: Token, request: OffsetDeleteRequest) {
        let top = |code: ErrorCode| {
            Answer::OffsetDelete(OffsetDeleteResponse {
                error_code: code.code(),
                ..Default::default()
            })
        };
        if let Some(code) = self.unavailable() {
            return self.answer(token, top(code));
        }
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return self.answer(token, top(ErrorCode::GROUP_ID_NOT_FOUND));
        };
        // A non-empty group of another protocol type cannot say what it is subscribed to.
        if !group.is(GroupState::Empty)
            && group.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE)
        {
            return self.answer(token, top(ErrorCode::NON_EMPTY_GROUP));
        }
        let mut response = OffsetDeleteResponse::default();
        let mut deleted = Vec::new();
        for topic in &request.topics {
            let subscribed = !group.is(GroupState::Empty) && group.is_subscribed_to(&topic.name);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = if subscribed {
                        ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC
                    } else {
                        if group
                            .offsets
                            .remove(&(topic.name.clone(), p.partition_index))
                            .is_some()
                        {
                            deleted.push((topic.name.clone(), p.partition_index));
                        }
                        ErrorCode::NONE
                    };
                    OffsetDeleteResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                    }
                })
                .collect();
            response.topics.push(OffsetDeleteResponseTopic {
                name: topic.name.clone(),
                partitions,
            });
        }
        for (topic, partition) in deleted {
            self.write_offset(&request.group_id, &topic, partition, None);
        }
        self.answer(token, Answer::OffsetDelete(response));
    }

    // ---- time ---------------------------------------------------------------------------

    /// Runs every timer due at `now`: expired sessions and handed-out member ids, ended
    /// rebalance delays, and (every `offsets.retention.check.interval.ms`) offset expiry.
    pub fn tick(&mut self, now: Now) {
        if self.status != ShardStatus::Active {
            return;
        }
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in &ids {
            let Some(group) = self.groups.get_mut(group_id) else {
                continue;
            };
            group
                .pending_members
                .retain(|_, deadline| *deadline > now.monotonic_ms);
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| m.has_expired(now.monotonic_ms))
                .map(|m| m.member_id.clone())
                .collect();
            for member_id in expired {
                self.remove_member(now, group_id, &member_id, ErrorCode::UNKNOWN_MEMBER_ID);
            }
            self.tick_join(now, group_id);
            if let Some(group) = self.groups.get(group_id) {
                group.check();
            }
        }
        if now.monotonic_ms >= self.next_retention_check_ms {
            self.next_retention_check_ms =
                now.monotonic_ms + self.config.offsets_retention_check_interval_ms;
            self.expire_offsets(now);
        }
    }

    fn tick_join(&mut self, now: Now, group_id: &str) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(deadline) = group.join_deadline else {
            return;
        };
        if now.monotonic_ms < deadline.deadline_ms {
            // Every member in: a regular rebalance ends early (an initial delay does not).
            return self.try_complete_join(now, group_id);
        }
        match deadline.initial {
            Some(initial) if group.new_member_added && initial.remaining_ms > 0 => {
                // Kafka's InitialDelayedJoin: members are still arriving; wait once more.
                let delay_ms = initial.delay_ms.min(initial.remaining_ms);
                group.new_member_added = false;
                group.join_deadline = Some(JoinDeadline {
                    deadline_ms: now.monotonic_ms + delay_ms,
                    initial: Some(InitialDelay {
                        delay_ms: initial.delay_ms,
                        remaining_ms: initial.remaining_ms - delay_ms,
                    }),
                });
            }
            _ => self.complete_join(now, group_id),
        }
    }

    /// Offsets expire `offsets.retention.minutes` after the group became empty (KIP-211),
    /// or, for a consumer group that is not empty, for topics it no longer subscribes to,
    /// after their commit; an explicit expiry (OffsetCommit v2-4) wins. An empty group left
    /// without offsets is deleted.
    fn expire_offsets(&mut self, now: Now) {
        // Commit and state timestamps are wall-clock times from the log.
        let now_ms = now.wall_ms;
        let retention_ms = self.config.offsets_retention_ms;
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in ids {
            let Some(group) = self.groups.get_mut(&group_id) else {
                continue;
            };
            let empty = group.is(GroupState::Empty);
            let consumer = group.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE);
            let base_state_ms = group.current_state_timestamp_ms;
            let expired: Vec<(String, i32)> = group
                .offsets
                .iter()
                .filter(|((topic, _), o)| {
                    if let Some(expire) = o.expire_timestamp_ms {
                        return now_ms >= expire;
                    }
                    if empty {
                        now_ms >= base_state_ms.max(o.commit_timestamp_ms) + retention_ms
                    } else {
                        consumer
                            && !group.is_subscribed_to(topic)
                            && now_ms >= o.commit_timestamp_ms + retention_ms
                    }
                })
                .map(|(k, _)| k.clone())
                .collect();
            for key in &expired {
                group.offsets.remove(key);
            }
            let delete = empty && group.offsets.is_empty();
            for (topic, partition) in &expired {
                self.write_offset(&group_id, topic, *partition, None);
            }
            if delete {
                self.delete_group(now, &group_id);
            }
        }
    }
}

/// Whether `group.max.size` lets `member_id` join (Kafka's `acceptJoiningMember`): always
/// while the group is Empty or Dead; while PreparingRebalance, a member already waiting in
/// the join, or anyone while fewer than `max_size` members wait (the count of waiting members,
/// not the group's size, which may exceed a lowered limit); while CompletingRebalance or
/// Stable, a known member, or anyone while the group has fewer than `max_size` members.
/// Member ids handed out but not used yet (KIP-394) do not count, so clients that never come
/// back cannot keep real members out.
fn accept_joining_member(group: &ClassicGroup, member_id: &str, max_size: i32) -> bool {
    let max = usize::try_from(max_size).unwrap_or(0);
    match group.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            let awaiting = group
                .members
                .get(member_id)
                .is_some_and(|m| m.awaiting_join.is_some());
            let awaiting_count = group
                .members
                .values()
                .filter(|m| m.awaiting_join.is_some())
                .count();
            awaiting || awaiting_count < max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.members.contains_key(member_id) || group.members.len() < max
        }
    }
}

/// OffsetCommit's generation and member checks (Kafka's classic `validateOffsetCommit`).
fn validate_commit(
    group: &ClassicGroup,
    request: &OffsetCommitRequest,
    accept_stale: bool,
) -> ErrorCode {
    if group.is(GroupState::Dead) {
        return ErrorCode::COORDINATOR_NOT_AVAILABLE;
    }
    let generation = request.generation_id_or_member_epoch;
    if generation < 0 && group.is(GroupState::Empty) {
        // A commit from outside group management (an admin tool, a group-less consumer).
        return ErrorCode::NONE;
    }
    if generation >= 0 || !request.member_id.is_empty() || request.group_instance_id.is_some() {
        if group.is_fenced(&request.member_id, request.group_instance_id.as_deref()) {
            return ErrorCode::FENCED_INSTANCE_ID;
        }
        if !group.members.contains_key(&request.member_id) {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        }
        if generation != group.generation && !accept_stale {
            return ErrorCode::ILLEGAL_GENERATION;
        }
    } else if !group.is(GroupState::Empty) {
        return ErrorCode::UNKNOWN_MEMBER_ID;
    }
    if group.is(GroupState::CompletingRebalance) {
        return ErrorCode::REBALANCE_IN_PROGRESS;
    }
    ErrorCode::NONE
}

fn fetched_partition(index: i32, found: Option<&CommittedOffset>) -> OffsetFetchResponsePartitions {
    match found {
        Some(o) => OffsetFetchResponsePartitions {
            partition_index: index,
            committed_offset: Offset(o.offset),
            committed_leader_epoch: LeaderEpoch(o.leader_epoch),
            metadata: Some(o.metadata.clone()),
            ..Default::default()
        },
        None => OffsetFetchResponsePartitions {
            partition_index: index,
            committed_offset: Offset(-1),
            committed_leader_epoch: LeaderEpoch(-1),
            metadata: Some(String::new()),
            ..Default::default()
        },
    }
}

fn sync_answer(names: &(Option<String>, Option<String>), assignment: Bytes) -> Answer {
    Answer::SyncGroup(SyncGroupResponse {
        protocol_type: names.0.clone(),
        protocol_name: names.1.clone(),
        assignment,
        ..Default::default()
    })
}

/// The first JoinGroup version with KIP-814's `skip_assignment`.
pub const JOIN_SKIP_ASSIGNMENT_VERSION_MIN: i16 = 9;

/// The join answer of `member_id` in the current generation; `skip_assignment` for a static
/// leader that rejoined a stable group (KIP-814).
fn join_answer(group: &ClassicGroup, member_id: &str, skip_assignment: bool) -> JoinGroupResponse {
    let is_leader = group.leader.as_deref() == Some(member_id);
    let protocol = group.protocol_name.clone();
    let members = if is_leader {
        group
            .members
            .values()
            .map(|m| JoinGroupResponseMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: protocol
                    .as_deref()
                    .and_then(|p| m.metadata(p))
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect()
    } else {
        Vec::new()
    };
    JoinGroupResponse {
        generation_id: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol_name: protocol,
        leader: group.leader.clone().unwrap_or_default(),
        skip_assignment,
        member_id: member_id.to_string(),
        members,
        ..Default::default()
    }
}

fn update_member(existing: &mut Member, joined: &Member) {
    existing.protocols = joined.protocols.clone();
    existing.session_timeout_ms = joined.session_timeout_ms;
    existing.rebalance_timeout_ms = joined.rebalance_timeout_ms;
    existing.client_id = joined.client_id.clone();
    existing.client_host = joined.client_host.clone();
    existing.last_heartbeat_ms = joined.last_heartbeat_ms;
}

/// The record of a group's state (Kafka's `GroupMetadataValue`).
fn group_record(group: &ClassicGroup) -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        generation: group.generation,
        protocol: group.protocol_name.clone(),
        leader: group.leader.clone(),
        current_state_timestamp_ms: group.current_state_timestamp_ms,
        members: group
            .members
            .values()
            .map(|m| MemberMetadata {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                subscription: group
                    .protocol_name
                    .as_deref()
                    .and_then(|p| m.metadata(p))
                    .cloned()
                    .unwrap_or_default(),
                assignment: m.assignment.clone(),
            })
            .collect(),
    }
}

/// A group rebuilt from its record: `Empty` without members, else `Stable` (Kafka's
/// `GroupMetadata.loadGroup`).
fn group_from_record(group_id: String, value: GroupMetadataValue) -> ClassicGroup {
    let mut group = ClassicGroup::new(group_id, value.current_state_timestamp_ms);
    group.generation = value.generation;
    group.protocol_name = value.protocol.clone();
    for m in value.members {
        let protocols = match &value.protocol {
            Some(p) => vec![(p.clone(), m.subscription.clone())],
            None => Vec::new(),
        };
        let member = Member {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            protocol_type: value.protocol_type.clone(),
            protocols,
            assignment: m.assignment,
            last_heartbeat_ms: 0,
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
        };
        group.add(member);
    }
    group.leader = value
        .leader
        .filter(|l| group.members.contains_key(l))
        .or_else(|| group.members.keys().next().cloned());
    if !group.members.is_empty() {
        group.protocol_type = Some(value.protocol_type);
        group.state = GroupState::Stable;
        group.compute_subscribed_topics();
    } else if !value.protocol_type.is_empty() {
        group.protocol_type = None;
    }
    group
}

#[cfg(test)]
#[path = "shard_tests.rs"]
mod tests;
