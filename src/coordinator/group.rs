//! One classic consumer group's state (IO-free): its members, its generation, the protocol
//! chosen for it, its state in Kafka's state machine, and its committed offsets.
//!
//! States, with Kafka's names (`ClassicGroupState`):
//! - `Empty`: no members; offsets may remain (and expire after `offsets.retention.minutes`).
//! - `PreparingRebalance`: a rebalance started; members are (re)joining; JoinGroup answers
//!   wait until every known member has rejoined or the rebalance timeout passed.
//! - `CompletingRebalance`: the generation was bumped and the join answers went out; the
//!   leader's SyncGroup with the assignment is awaited.
//! - `Stable`: the leader's assignment is in force.
//! - `Dead`: the group was deleted or expired; nothing more happens to it.
//!
//! Invariants (checked by [`ClassicGroup::check`] after every transition the shard makes):
//! - `Empty` has no members; every other live state has at least one, and a leader that is
//!   one of them, except `PreparingRebalance`, whose leader may have left.
//! - the generation never decreases;
//! - each static member's `group.instance.id` maps to exactly one member id, and back;
//! - a member awaits a join answer only in `PreparingRebalance`, a sync answer only in
//!   `CompletingRebalance`.
//!
//! The request handling lives in `shard.rs`; this file owns the data and the transitions that
//! do not produce answers.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

/// The coordinator's two clocks at one instant. Timers (sessions, rebalance delays and
/// timeouts, pending member ids, the retention check's schedule) run on `monotonic_ms`, which
/// never jumps, so a node whose wall clock steps back or forward neither stalls a rebalance
/// nor expires every session at once. Only what is written to the log or compared with what
/// was written (commit and state timestamps, offset expiry) uses `wall_ms`, as Kafka does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds since an arbitrary origin fixed for the node's process (the driver's
    /// start); only differences mean anything.
    pub monotonic_ms: i64,
    /// Milliseconds since the Unix epoch by the node's wall clock.
    pub wall_ms: i64,
}

/// A request awaiting its answer, named by the driver (unique among the shard's waiters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(pub u64);

/// Kafka's classic group states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka reports in DescribeGroups and ListGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// The transitions Kafka's `ClassicGroupState` allows (`validPreviousStates`).
    pub fn may_follow(self, previous: GroupState) -> bool {
        use GroupState::*;
        match self {
            Empty => matches!(previous, PreparingRebalance),
            PreparingRebalance => matches!(previous, Stable | CompletingRebalance | Empty),
            CompletingRebalance => matches!(previous, PreparingRebalance),
            Stable => matches!(previous, CompletingRebalance),
            Dead => matches!(
                previous,
                Stable | PreparingRebalance | CompletingRebalance | Empty
            ),
        }
    }
}

/// One member of a classic group.
#[derive(Clone, Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// The protocols the member supports, in its order of preference, with its metadata for
    /// each (for consumers: assignor name and subscription).
    pub protocols: Vec<(String, Bytes)>,
    /// The member's part of the leader's assignment in the current generation (empty until
    /// the leader's SyncGroup).
    pub assignment: Bytes,
    /// When the member last proved it is alive (a heartbeat, a join, a sync), monotonic.
    pub last_heartbeat_ms: i64,
    /// The JoinGroup waiting for the rebalance to complete, and its request version.
    pub awaiting_join: Option<(Token, i16)>,
    /// The SyncGroup waiting for the leader's assignment, and its request version.
    pub awaiting_sync: Option<(Token, i16)>,
    /// Joined in the current rebalance (for the initial delay's extension).
    pub is_new: bool,
}

impl Member {
    /// The member's metadata for `protocol`, if it supports it.
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata)
    }

    /// Whether the member's protocols are exactly `protocols` (names and metadata, in order).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Whether the session timeout passed since the member's last sign of life. A member
    /// awaiting an answer is alive: it is waiting on the coordinator, not the other way round.
    pub fn has_expired(&self, monotonic_ms: i64) -> bool {
        self.awaiting_join.is_none()
            && self.awaiting_sync.is_none()
            && monotonic_ms >= self.last_heartbeat_ms + i64::from(self.session_timeout_ms)
    }
}

/// A committed offset of one partition (Kafka's `OffsetAndMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// An explicit expiry (OffsetCommit v2-4 `retention_time_ms`), else the group's rules.
    pub expire_timestamp_ms: Option<i64>,
}

/// The rebalance's delayed join (Kafka's `DelayedJoin` and `InitialDelayedJoin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinDeadline {
    /// Monotonic.
    pub deadline_ms: i64,
    /// Only for the initial delay of a group that was empty: the delay, extended while new
    /// members keep joining, until the rebalance timeout is used up (`remaining_ms`).
    pub initial: Option<InitialDelay>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitialDelay {
    pub delay_ms: i64,
    pub remaining_ms: i64,
}

/// One classic group.
#[derive(Clone, Debug)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// `group.instance.id` to member id, for static members.
    pub static_members: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED (KIP-394) that have not joined yet,
    /// with the (monotonic) time by which they must (their session timeout).
    pub pending_members: BTreeMap<String, i64>,
    pub current_state_timestamp_ms: i64,
    /// Set while the group is in `PreparingRebalance`.
    pub join_deadline: Option<JoinDeadline>,
    /// A member joined since the last initial delay started (extends the delay).
    pub new_member_added: bool,
    /// The topics the members subscribe to, parsed from the consumer protocol's metadata
    /// when the generation completed; `None` when it could not be parsed (every topic then
    /// counts as subscribed, as in Kafka).
    pub subscribed_topics: Option<BTreeSet<String>>,
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
}

impl ClassicGroup {
    /// An Empty group; `state_timestamp_ms` is wall-clock time (it is written in the group's
    /// metadata record and bounds offset retention).
    pub fn new(group_id: String, state_timestamp_ms: i64) -> ClassicGroup {
        ClassicGroup {
            group_id,
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            current_state_timestamp_ms: state_timestamp_ms,
            join_deadline: None,
            new_member_added: false,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
        }
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// Moves to `next` at wall-clock time `wall_ms`, asserting Kafka's allowed transitions.
    pub fn transition(&mut self, next: GroupState, wall_ms: i64) {
        assert!(
            next.may_follow(self.state),
            "group {}: {} may not follow {}",
            self.group_id,
            next.name(),
            self.state.name()
        );
        self.state = next;
        self.current_state_timestamp_ms = wall_ms;
    }

    /// The member id a static member's instance id maps to.
    pub fn static_member(&self, instance_id: &str) -> Option<&String> {
        self.static_members.get(instance_id)
    }

    /// Kafka's static-member fencing: a request naming an instance id that maps to another
    /// member id comes from a fenced (replaced) instance.
    pub fn is_fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        match instance_id.and_then(|id| self.static_members.get(id)) {
            Some(current) => current != member_id,
            None => false,
        }
    }

    /// The protocols every member supports, in no particular order.
    fn candidate_protocols(&self) -> BTreeSet<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else {
            return BTreeSet::new();
        };
        let mut candidates: BTreeSet<String> =
            first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for member in members {
            candidates.retain(|name| member.metadata(name).is_some());
        }
        candidates
    }

    /// Whether a member with these protocols may join (Kafka's `supportsProtocols`).
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols.iter().any(|(name, _)| candidates.contains(name))
    }

    /// Kafka's protocol vote: each member votes for its most preferred protocol among those
    /// every member supports; the most votes wins, ties going to the name that sorts first
    /// (Kafka breaks ties by its map's order; a fixed rule keeps the choice deterministic).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(n))
            {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, count)| *count == best)
            .map(|(name, _)| name.to_string())
    }

    /// The longest rebalance timeout of the members (how long a rebalance waits for them).
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Whether every known member has rejoined and no handed-out member id is outstanding.
    pub fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// Whether the group is subscribed to `topic` (Kafka's `isSubscribedToTopic`).
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => true,
        }
    }

    /// Recomputes the subscribed topics from the members' metadata for the chosen protocol,
    /// for groups of the consumer protocol type.
    pub fn compute_subscribed_topics(&mut self) {
        self.subscribed_topics = match (&self.protocol_type, &self.protocol_name) {
            (Some(kind), Some(protocol)) if kind == CONSUMER_PROTOCOL_TYPE => {
                let mut topics = BTreeSet::new();
                let mut parsed = true;
                for member in self.members.values() {
                    match member.metadata(protocol).map(|m| subscription_topics(m)) {
                        Some(Some(list)) => topics.extend(list),
                        _ => parsed = false,
                    }
                }
                parsed.then_some(topics)
            }
            _ => None,
        };
    }

    /// Adds a member (the caller has checked it may join).
    pub fn add(&mut self, member: Member) {
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member, returning it; the leader moves to the first remaining member.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        if self.members.is_empty() {
            self.protocol_type = None;
        }
        Some(member)
    }

    /// Checks the invariants of the module doc. Panics (in release too) on a violation: a
    /// coordinator that broke one would otherwise hand out wrong assignments.
    pub fn check(&self) {
        let live = self.state != GroupState::Dead;
        if self.state == GroupState::Empty {
            assert!(
                self.members.is_empty(),
                "group {}: Empty with members",
                self.group_id
            );
        }
        if live
            && matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
        {
            assert!(
                !self.members.is_empty(),
                "group {}: {} without members",
                self.group_id,
                self.state.name()
            );
            let leader = self.leader.as_deref().unwrap_or("");
            assert!(
                self.members.contains_key(leader),
                "group {}: leader {leader} is not a member",
                self.group_id
            );
        }
        assert!(
            self.generation >= 0,
            "group {}: negative generation",
            self.group_id
        );
        for (instance, member_id) in &self.static_members {
            let member = self.members.get(member_id);
            assert!(
                member.is_some(),
                "group {}: static member {instance} maps to unknown member {member_id}",
                self.group_id
            );
            assert!(
                member.and_then(|m| m.group_instance_id.as_deref()) == Some(instance.as_str()),
                "group {}: static member {instance} maps to a member of another instance",
                self.group_id
            );
        }
        for member in self.members.values() {
            if member.awaiting_join.is_some() {
                assert!(
                    self.state == GroupState::PreparingRebalance,
                    "group {}: a join awaits in {}",
                    self.group_id,
                    self.state.name()
                );
            }
            if member.awaiting_sync.is_some() {
                assert!(
                    self.state == GroupState::CompletingRebalance,
                    "group {}: a sync awaits in {}",
                    self.group_id,
                    self.state.name()
                );
            }
        }
        assert_eq!(
            self.join_deadline.is_some(),
            self.state == GroupState::PreparingRebalance,
            "group {}: a join deadline exists exactly while preparing a rebalance",
            self.group_id
        );
    }
}

/// The protocol type of Kafka consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics of a consumer protocol subscription (Kafka's `ConsumerProtocolSubscription`,
/// any version: `version: i16`, then `topics: [string]`, then fields this does not need), or
/// `None` if the bytes are not one.
pub fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let end = at.checked_add(n)?;
        let slice = metadata.get(*at..end)?;
        *at = end;
        Some(slice)
    };
    let version = i16::from_be_bytes(take(&mut at, 2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let count = i32::from_be_bytes(take(&mut at, 4)?.try_into().ok()?);
    let count = usize::try_from(count).ok()?;
    // Each topic takes at least its two length bytes: a count the bytes cannot hold is bogus.
    if count > metadata.len().saturating_sub(at) / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let len = i16::from_be_bytes(take(&mut at, 2)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        let name = std::str::from_utf8(take(&mut at, len)?).ok()?;
        topics.push(name.to_string());
    }
    Some(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscription(topics: &[&str]) -> Vec<u8> {
        let mut out = vec![0, 1];
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for topic in topics {
            out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            out.extend_from_slice(topic.as_bytes());
        }
        out.extend_from_slice(&(-1i32).to_be_bytes()); // user data: null
        out
    }

    #[test]
    fn parses_consumer_subscriptions_and_refuses_garbage() {
        assert_eq!(
            subscription_topics(&subscription(&["a", "bc"])),
            Some(vec!["a".to_string(), "bc".to_string()])
        );
        assert_eq!(subscription_topics(&[0, 0, 0x7f, 0, 0, 0]), None);
        assert_eq!(subscription_topics(&[0]), None);
        assert_eq!(subscription_topics(&[0xff, 0xff, 0, 0, 0, 0]), None);
    }

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            member_id: id.to_string(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 1000,
            protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::new()))
                .collect(),
            assignment: Bytes::new(),
            last_heartbeat_ms: 0,
            awaiting_join: None,
            awaiting_sync: None,
            is_new: true,
        }
    }

    #[test]
    fn protocol_vote_picks_the_common_preference() {
        let mut group = ClassicGroup::new("g".into(), 0);
        group.add(member("a", &["range", "roundrobin"]));
        group.add(member("b", &["roundrobin", "range"]));
        group.add(member("c", &["roundrobin", "sticky"]));
        // Only roundrobin is common to all three.
        assert_eq!(group.select_protocol().as_deref(), Some("roundrobin"));
        assert!(group.supports_protocols("consumer", &[("roundrobin".into(), Bytes::new())]));
        assert!(!group.supports_protocols("consumer", &[("range".into(), Bytes::new())]));
        assert!(!group.supports_protocols("connect", &[("roundrobin".into(), Bytes::new())]));
    }

    #[test]
    fn removing_the_leader_moves_leadership() {
        let mut group = ClassicGroup::new("g".into(), 0);
        group.add(member("a", &["range"]));
        group.add(member("b", &["range"]));
        assert_eq!(group.leader.as_deref(), Some("a"));
        group.remove("a");
        assert_eq!(group.leader.as_deref(), Some("b"));
        group.remove("b");
        assert_eq!(group.leader, None);
        assert_eq!(group.protocol_type, None);
    }

    #[test]
    fn transitions_follow_kafkas_table() {
        assert!(GroupState::PreparingRebalance.may_follow(GroupState::Empty));
        assert!(!GroupState::Stable.may_follow(GroupState::PreparingRebalance));
        assert!(!GroupState::CompletingRebalance.may_follow(GroupState::Stable));
    }
}
