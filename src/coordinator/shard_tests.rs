//! Tests of the group shard without a runtime: requests stepped by hand, writes completed (or
//! not) by the test, and the log of records replayed into a fresh shard.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::coordinator::group::{GroupState, Now, Token};
use crate::coordinator::shard::*;
use crate::protocol::error::ErrorCode;
use crate::protocol::heartbeat::HeartbeatRequest;
use crate::protocol::join_group::{JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse};
use crate::protocol::leave_group::{LeaveGroupRequest, MemberIdentity};
use crate::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use crate::protocol::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use crate::protocol::types::{LeaderEpoch, Offset};

const SESSION_MS: i32 = 10_000;
/// The harness's wall clock at monotonic 0 (any instant well after the epoch).
const WALL_START_MS: i64 = 1_700_000_000_000;
const START: Now = Now {
    monotonic_ms: 0,
    wall_ms: WALL_START_MS,
};
const DELAY_MS: i32 = 3_000;

/// A shard with its partition's log, completing writes at once unless told otherwise.
struct Harness {
    shard: GroupShard,
    log: Vec<(Bytes, Option<Bytes>)>,
    answers: BTreeMap<Token, Answer>,
    in_flight: Vec<u64>,
    auto_complete: bool,
    next_token: u64,
    now: Now,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(GroupConfig::default(), CoordinatorBugs::default())
    }

    fn with(config: GroupConfig, bugs: CoordinatorBugs) -> Harness {
        let mut shard = GroupShard::new(0, config, bugs);
        shard.finish_loading(START);
        Harness {
            shard,
            log: Vec::new(),
            answers: BTreeMap::new(),
            in_flight: Vec::new(),
            auto_complete: true,
            next_token: 0,
            now: START,
        }
    }

    fn token(&mut self) -> Token {
        self.next_token += 1;
        Token(self.next_token)
    }

    fn pump(&mut self) {
        loop {
            let ready = self.shard.ready();
            if ready.writes.is_empty() && ready.answers.is_empty() {
                break;
            }
            for write in ready.writes {
                self.log.extend(write.records);
                self.in_flight.push(write.id);
            }
            self.answers.extend(ready.answers);
            if self.auto_complete {
                self.complete_all();
            }
        }
    }

    fn complete_all(&mut self) {
        for id in std::mem::take(&mut self.in_flight) {
            self.shard.write_completed(id, Ok(()));
        }
        let ready = self.shard.ready();
        assert!(ready.writes.is_empty());
        self.answers.extend(ready.answers);
    }

    fn advance(&mut self, ms: i64) {
        self.now.monotonic_ms += ms;
        self.now.wall_ms += ms;
        self.shard.tick(self.now);
        self.pump();
    }

    /// Steps the wall clock alone by `ms` (an NTP step, a VM resumed), as a node's clock
    /// jumps; the monotonic clock does not move.
    fn jump_wall_clock(&mut self, ms: i64) {
        self.now.wall_ms += ms;
        self.shard.tick(self.now);
        self.pump();
    }

    fn join(
        &mut self,
        version: i16,
        member_id: &str,
        instance: Option<&str>,
        protocols: &[&str],
    ) -> Token {
        let token = self.token();
        let request = JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: 30_000,
            member_id: member_id.into(),
            group_instance_id: instance.map(str::to_string),
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| JoinGroupRequestProtocol {
                    name: p.to_string(),
                    metadata: subscription(&["t"]),
                })
                .collect(),
            ..Default::default()
        };
        let client = ClientContext {
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            new_member_id: format!("client-{}", token.0),
        };
        self.shard
            .join_group(self.now, token, version, client, request);
        self.pump();
        token
    }

    fn join_answer(&mut self, token: Token) -> Option<JoinGroupResponse> {
        match self.answers.remove(&token)? {
            Answer::JoinGroup(r) => Some(r),
            other => panic!("not a join answer: {other:?}"),
        }
    }

    fn sync(&mut self, member_id: &str, generation: i32, assignments: &[(&str, &[u8])]) -> Token {
        let token = self.token();
        let request = SyncGroupRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: member_id.into(),
            assignments: assignments
                .iter()
                .map(|(m, a)| SyncGroupRequestAssignment {
                    member_id: m.to_string(),
                    assignment: Bytes::copy_from_slice(a),
                })
                .collect(),
            ..Default::default()
        };
        self.shard.sync_group(self.now, token, 5, request);
        self.pump();
        token
    }

    fn sync_answer(&mut self, token: Token) -> Option<(i16, Bytes)> {
        match self.answers.remove(&token)? {
            Answer::SyncGroup(r) => Some((r.error_code, r.assignment)),
            other => panic!("not a sync answer: {other:?}"),
        }
    }

    fn heartbeat(&mut self, member_id: &str, generation: i32) -> i16 {
        let token = self.token();
        let request = HeartbeatRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: member_id.into(),
            ..Default::default()
        };
        self.shard.heartbeat(self.now, token, request);
        self.pump();
        match self.answers.remove(&token) {
            Some(Answer::Heartbeat(r)) => r.error_code,
            other => panic!("no heartbeat answer: {other:?}"),
        }
    }

    fn commit(&mut self, member_id: &str, generation: i32, offset: i64, metadata: &str) -> Token {
        let token = self.token();
        let request = OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: generation,
            member_id: member_id.into(),
            topics: vec![OffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: Offset(offset),
                    committed_leader_epoch: LeaderEpoch(-1),
                    committed_metadata: Some(metadata.into()),
                }],
            }],
            ..Default::default()
        };
        self.shard
            .offset_commit(self.now, token, 9, request, &|t, p| t == "t" && p == 0);
        self.pump();
        token
    }

    fn commit_code(&mut self, token: Token) -> Option<i16> {
        match self.answers.remove(&token)? {
            Answer::OffsetCommit(r) => Some(r.topics[0].partitions[0].error_code),
            other => panic!("not a commit answer: {other:?}"),
        }
    }

    fn fetched(&mut self) -> i64 {
        let token = self.token();
        self.shard
            .offset_fetch(token, vec![("g".into(), Some(vec![("t".into(), vec![0])]))]);
        self.pump();
        match self.answers.remove(&token) {
            Some(Answer::OffsetFetch(groups)) => {
                groups[0].topics[0].partitions[0].committed_offset.0
            }
            other => panic!("no fetch answer: {other:?}"),
        }
    }

    fn state(&self) -> GroupState {
        self.shard.group("g").map_or(GroupState::Dead, |g| g.state)
    }

    /// Two members joined and synced: generation 1, Stable. Returns their ids (leader first).
    fn stable_pair(&mut self) -> (String, String) {
        let a = self.join(5, "", None, &["range"]);
        let a_id = self.join_answer(a).unwrap().member_id;
        let b = self.join(5, "", None, &["range"]);
        let b_id = self.join_answer(b).unwrap().member_id;
        let a = self.join(5, &a_id, None, &["range"]);
        let b = self.join(5, &b_id, None, &["range"]);
        // The second member joined during the initial delay, which is extended once.
        self.advance(i64::from(DELAY_MS));
        self.advance(i64::from(DELAY_MS));
        let ja = self.join_answer(a).unwrap();
        let jb = self.join_answer(b).unwrap();
        assert_eq!((ja.error_code, jb.error_code), (0, 0));
        assert_eq!(ja.generation_id, 1);
        let (leader, follower) = if ja.leader == a_id {
            (a_id, b_id)
        } else {
            (b_id, a_id)
        };
        let fs = self.sync(&follower, 1, &[]);
        let ls = self.sync(&leader, 1, &[(&leader, b"L"), (&follower, b"F")]);
        assert_eq!(self.sync_answer(ls), Some((0, Bytes::from_static(b"L"))));
        assert_eq!(self.sync_answer(fs), Some((0, Bytes::from_static(b"F"))));
        assert_eq!(self.state(), GroupState::Stable);
        (leader, follower)
    }
}

fn subscription(topics: &[&str]) -> Bytes {
    let mut out = vec![0, 1];
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for topic in topics {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

#[test]
fn a_dynamic_member_first_gets_its_id_then_joins_after_the_initial_delay() {
    let mut h = Harness::new();
    let first = h.join(5, "", None, &["range"]);
    let answer = h.join_answer(first).unwrap();
    assert_eq!(answer.error_code, ErrorCode::MEMBER_ID_REQUIRED.code());
    assert!(answer.member_id.starts_with("client-"));
    let join = h.join(5, &answer.member_id, None, &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.advance(i64::from(DELAY_MS) - 1);
    assert!(
        h.join_answer(join).is_none(),
        "the initial delay holds the join"
    );
    h.advance(1);
    let joined = h.join_answer(join).unwrap();
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, answer.member_id);
    assert_eq!(joined.members.len(), 1, "the leader sees the members");
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn version_3_joins_without_member_id_required() {
    let mut h = Harness::new();
    let join = h.join(3, "", None, &["range"]);
    h.advance(i64::from(DELAY_MS));
    let joined = h.join_answer(join).unwrap();
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
}

#[test]
fn the_initial_delay_is_extended_while_members_keep_joining() {
    let mut h = Harness::new();
    let a = h.join(3, "", None, &["range"]);
    h.advance(i64::from(DELAY_MS) - 10);
    let b = h.join(3, "", None, &["range"]);
    h.advance(10);
    assert!(
        h.join_answer(a).is_none(),
        "a member joined during the delay: it is extended"
    );
    h.advance(i64::from(DELAY_MS));
    assert_eq!(h.join_answer(a).unwrap().generation_id, 1);
    assert_eq!(h.join_answer(b).unwrap().generation_id, 1);
}

/// Seed 296 of the group simulation: a backward step of the broker's wall clock (-478 s)
/// held a rebalance for as long, because the join deadline ran on the wall clock.
#[test]
fn a_wall_clock_step_back_does_not_hold_the_initial_delay() {
    let mut h = Harness::new();
    let join = h.join(3, "", None, &["range"]);
    h.advance(10);
    h.jump_wall_clock(-478_000);
    h.advance(i64::from(DELAY_MS) - 10);
    let joined = h.join_answer(join).unwrap();
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn a_wall_clock_step_forward_expires_no_session() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    h.jump_wall_clock(10 * i64::from(SESSION_MS));
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.heartbeat(&leader, 1), 0);
    assert_eq!(h.heartbeat(&follower, 1), 0);
    // Sessions still end on the monotonic clock: the follower, silent from here, expires.
    h.advance(i64::from(SESSION_MS) / 2);
    assert_eq!(h.heartbeat(&leader, 1), 0);
    h.advance(i64::from(SESSION_MS) / 2);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(!h.shard.group("g").unwrap().members.contains_key(&follower));
}

#[test]
fn answers_wait_for_their_records_to_be_durable() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    h.auto_complete = false;
    let commit = h.commit(&leader, 1, 42, "m");
    assert_eq!(h.commit_code(commit), None, "not durable yet: no answer");
    // A heartbeat behind the commit waits too: nothing is told before what precedes it.
    let token = h.token();
    h.shard.heartbeat(
        h.now,
        token,
        HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: follower.clone(),
            ..Default::default()
        },
    );
    h.pump();
    assert!(!h.answers.contains_key(&token));
    h.complete_all();
    assert_eq!(h.commit_code(commit), Some(0));
    assert!(h.answers.contains_key(&token));
    assert_eq!(h.fetched(), 42);
}

#[test]
fn a_failed_write_unloads_the_shard_and_errors_what_it_held() {
    let mut h = Harness::new();
    let (leader, _) = h.stable_pair();
    h.auto_complete = false;
    let commit = h.commit(&leader, 1, 7, "");
    let id = h.in_flight.remove(0);
    h.shard.write_completed(id, Err(ErrorCode::NOT_COORDINATOR));
    h.pump();
    assert_eq!(
        h.commit_code(commit),
        Some(ErrorCode::NOT_COORDINATOR.code())
    );
    assert_eq!(h.shard.status(), ShardStatus::Unloaded);
    assert_eq!(h.heartbeat(&leader, 1), ErrorCode::NOT_COORDINATOR.code());
}

#[test]
fn the_bug_answers_commits_before_they_are_durable() {
    let bugs = CoordinatorBugs {
        answer_commit_before_durable: true,
        ..Default::default()
    };
    let mut h = Harness::with(GroupConfig::default(), bugs);
    let (leader, _) = h.stable_pair();
    h.auto_complete = false;
    let commit = h.commit(&leader, 1, 42, "");
    assert_eq!(h.commit_code(commit), Some(0));
}

#[test]
fn heartbeats_follow_kafkas_rules() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    assert_eq!(h.heartbeat(&leader, 1), 0);
    assert_eq!(
        h.heartbeat(&leader, 0),
        ErrorCode::ILLEGAL_GENERATION.code()
    );
    assert_eq!(
        h.heartbeat("nobody", 1),
        ErrorCode::UNKNOWN_MEMBER_ID.code()
    );
    // The follower rejoins with other protocols: a rebalance starts.
    let rejoin = h.join(5, &follower, None, &["roundrobin", "range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(&leader, 1),
        ErrorCode::REBALANCE_IN_PROGRESS.code()
    );
    let lead = h.join(5, &leader, None, &["range"]);
    let a = h.join_answer(rejoin).unwrap();
    let b = h.join_answer(lead).unwrap();
    assert_eq!((a.generation_id, b.generation_id), (2, 2));
}

#[test]
fn an_expired_member_is_removed_and_the_generation_bumped() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    // Only the leader heartbeats.
    for _ in 0..4 {
        h.advance(i64::from(SESSION_MS) / 4);
        let _ = h.heartbeat(&leader, 1);
    }
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(!h.shard.group("g").unwrap().members.contains_key(&follower));
    let rejoin = h.join(5, &leader, None, &["range"]);
    let answer = h.join_answer(rejoin).unwrap();
    assert_eq!(answer.generation_id, 2);
    assert_eq!(answer.members.len(), 1);
}

#[test]
fn the_bug_skips_the_generation_bump() {
    let bugs = CoordinatorBugs {
        skip_generation_bump: true,
        ..Default::default()
    };
    let mut h = Harness::with(GroupConfig::default(), bugs);
    let (leader, follower) = h.stable_pair();
    let t = h.token();
    h.shard.leave_group(
        h.now,
        t,
        3,
        LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![MemberIdentity {
                member_id: follower,
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    h.pump();
    let rejoin = h.join(5, &leader, None, &["range"]);
    assert_eq!(h.join_answer(rejoin).unwrap().generation_id, 1);
}

#[test]
fn offset_commits_check_generation_and_membership() {
    let mut h = Harness::new();
    // A group-less commit (an admin tool) to a group that does not exist creates it.
    let c = h.commit("", -1, 5, "");
    assert_eq!(h.commit_code(c), Some(0));
    assert_eq!(h.fetched(), 5);
    let (leader, _) = h.stable_pair();
    let c = h.commit("", -1, 6, "");
    assert_eq!(
        h.commit_code(c),
        Some(ErrorCode::UNKNOWN_MEMBER_ID.code()),
        "the group is active"
    );
    let c = h.commit(&leader, 0, 6, "");
    assert_eq!(h.commit_code(c), Some(ErrorCode::ILLEGAL_GENERATION.code()));
    let c = h.commit("stranger", 1, 6, "");
    assert_eq!(h.commit_code(c), Some(ErrorCode::UNKNOWN_MEMBER_ID.code()));
    let big = "x".repeat(5000);
    let c = h.commit(&leader, 1, 6, &big);
    assert_eq!(
        h.commit_code(c),
        Some(ErrorCode::OFFSET_METADATA_TOO_LARGE.code())
    );
    let c = h.commit(&leader, 1, 6, "");
    assert_eq!(h.commit_code(c), Some(0));
    assert_eq!(h.fetched(), 6);
}

#[test]
fn the_bug_accepts_a_stale_generation() {
    let bugs = CoordinatorBugs {
        accept_stale_generation: true,
        ..Default::default()
    };
    let mut h = Harness::with(GroupConfig::default(), bugs);
    let (leader, _) = h.stable_pair();
    let c = h.commit(&leader, 0, 6, "");
    assert_eq!(h.commit_code(c), Some(0));
}

#[test]
fn a_static_member_restarted_within_its_session_keeps_its_assignment_without_a_rebalance() {
    let mut h = Harness::new();
    let a = h.join(5, "", Some("inst-a"), &["range"]);
    let b = h.join(5, "", Some("inst-b"), &["range"]);
    h.advance(i64::from(DELAY_MS));
    h.advance(i64::from(DELAY_MS));
    let ja = h.join_answer(a).unwrap();
    let jb = h.join_answer(b).unwrap();
    let (leader, follower) = (
        ja.leader.clone(),
        if ja.leader == ja.member_id {
            jb.member_id.clone()
        } else {
            ja.member_id.clone()
        },
    );
    let fs = h.sync(&follower, 1, &[]);
    let ls = h.sync(&leader, 1, &[(&leader, b"L"), (&follower, b"F")]);
    h.sync_answer(fs).unwrap();
    h.sync_answer(ls).unwrap();
    let follower_instance = h.shard.group("g").unwrap().members[&follower]
        .group_instance_id
        .clone()
        .unwrap();
    // The follower's process restarts: it joins with no member id and its instance id.
    let again = h.join(5, "", Some(&follower_instance), &["range"]);
    let answer = h.join_answer(again).unwrap();
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.generation_id, 1, "no rebalance");
    assert_ne!(answer.member_id, follower, "a new member id");
    assert_eq!(h.state(), GroupState::Stable);
    let s = h.sync(&answer.member_id, 1, &[]);
    assert_eq!(h.sync_answer(s), Some((0, Bytes::from_static(b"F"))));
    // The old member id is fenced.
    let token = h.token();
    h.shard.heartbeat(
        h.now,
        token,
        HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: follower,
            group_instance_id: Some(follower_instance),
        },
    );
    h.pump();
    match h.answers.remove(&token) {
        Some(Answer::Heartbeat(r)) => {
            assert_eq!(r.error_code, ErrorCode::FENCED_INSTANCE_ID.code())
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn joins_with_bad_settings_are_refused() {
    let mut h = Harness::new();
    let token = h.token();
    let client = ClientContext {
        client_id: "c".into(),
        client_host: "h".into(),
        new_member_id: "c-1".into(),
    };
    h.shard.join_group(
        h.now,
        token,
        5,
        client.clone(),
        JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10,
            protocol_type: "consumer".into(),
            ..Default::default()
        },
    );
    h.pump();
    assert_eq!(
        h.join_answer(token).unwrap().error_code,
        ErrorCode::INVALID_SESSION_TIMEOUT.code()
    );
    let (_, _) = h.stable_pair();
    let token = h.token();
    h.shard.join_group(
        h.now,
        token,
        5,
        client,
        JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: SESSION_MS,
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "other".into(),
                metadata: Bytes::new(),
            }],
            ..Default::default()
        },
    );
    h.pump();
    assert_eq!(
        h.join_answer(token).unwrap().error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code()
    );
}

#[test]
fn the_group_max_size_is_enforced() {
    let config = GroupConfig {
        max_size: 1,
        ..Default::default()
    };
    let mut h = Harness::with(config, CoordinatorBugs::default());
    let a = h.join(5, "", None, &["range"]);
    let id = h.join_answer(a).unwrap().member_id;
    let _ = h.join(5, &id, None, &["range"]);
    let b = h.join(5, "", None, &["range"]);
    assert_eq!(
        h.join_answer(b).unwrap().error_code,
        ErrorCode::GROUP_MAX_SIZE_REACHED.code()
    );
}

/// Kafka's `acceptJoiningMember`: member ids handed out but never used (KIP-394) do not
/// count toward `group.max.size`, so clients that never rejoin cannot keep a real member
/// out; the limit bites when the second member rejoins with its id.
#[test]
fn pending_member_ids_do_not_count_toward_the_group_max_size() {
    let config = GroupConfig {
        max_size: 1,
        ..Default::default()
    };
    let mut h = Harness::with(config, CoordinatorBugs::default());
    let a = h.join(5, "", None, &["range"]);
    let a_id = h.join_answer(a).unwrap().member_id;
    let b = h.join(5, "", None, &["range"]);
    let b_answer = h.join_answer(b).unwrap();
    assert_eq!(b_answer.error_code, ErrorCode::MEMBER_ID_REQUIRED.code());
    let _ = h.join(5, &a_id, None, &["range"]);
    let b = h.join(5, &b_answer.member_id, None, &["range"]);
    assert_eq!(
        h.join_answer(b).unwrap().error_code,
        ErrorCode::GROUP_MAX_SIZE_REACHED.code()
    );
    // The refused id is forgotten, so the join need not wait for it to expire.
    let group = h.shard.group("g").unwrap();
    assert_eq!(group.members.len(), 1);
    assert!(group.members.contains_key(&a_id));
    assert!(group.pending_members.is_empty());
}

#[test]
fn offsets_cannot_be_deleted_while_subscribed_and_groups_only_when_empty() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    let c = h.commit(&leader, 1, 9, "");
    assert_eq!(h.commit_code(c), Some(0));
    let token = h.token();
    h.shard.offset_delete(
        token,
        OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![OffsetDeleteRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetDeleteRequestPartition { partition_index: 0 }],
            }],
        },
    );
    h.pump();
    match h.answers.remove(&token) {
        Some(Answer::OffsetDelete(r)) => assert_eq!(
            r.topics[0].partitions[0].error_code,
            ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC.code()
        ),
        other => panic!("{other:?}"),
    }
    let token = h.token();
    h.shard
        .delete_groups(h.now, token, vec!["g".into(), "nope".into()]);
    h.pump();
    match h.answers.remove(&token) {
        Some(Answer::DeleteGroups(r)) => {
            assert_eq!(r[0].error_code, ErrorCode::NON_EMPTY_GROUP.code());
            assert_eq!(r[1].error_code, ErrorCode::GROUP_ID_NOT_FOUND.code());
        }
        other => panic!("{other:?}"),
    }
    // Both leave; the group becomes Empty after the rebalance completes, then is deleted.
    let token = h.token();
    h.shard.leave_group(
        h.now,
        token,
        3,
        LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![
                MemberIdentity {
                    member_id: leader,
                    ..Default::default()
                },
                MemberIdentity {
                    member_id: follower,
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
    );
    h.pump();
    assert_eq!(h.state(), GroupState::Empty);
    let token = h.token();
    h.shard.delete_groups(h.now, token, vec!["g".into()]);
    h.pump();
    match h.answers.remove(&token) {
        Some(Answer::DeleteGroups(r)) => assert_eq!(r[0].error_code, 0),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.state(), GroupState::Dead);
    assert_eq!(h.fetched(), -1);
}

/// A harness whose offsets expire a minute after commit (checked every second), with offset
/// 5 of `t`-0 committed by an empty group.
fn committed_with_a_minute_of_retention() -> Harness {
    let config = GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 1_000,
        ..Default::default()
    };
    let mut h = Harness::with(config, CoordinatorBugs::default());
    let c = h.commit("", -1, 5, "");
    assert_eq!(h.commit_code(c), Some(0));
    h
}

#[test]
fn offsets_of_an_empty_group_expire_after_the_retention() {
    let mut h = committed_with_a_minute_of_retention();
    h.advance(59_000);
    assert_eq!(h.fetched(), 5);
    h.advance(2_000);
    assert_eq!(h.fetched(), -1);
    assert_eq!(
        h.state(),
        GroupState::Dead,
        "an empty group without offsets is deleted"
    );
}

/// Retention compares the wall clock with the commit's wall-clock timestamp, as Kafka does:
/// the check runs on its monotonic schedule, but what expires is decided by wall time.
#[test]
fn offset_retention_runs_on_the_wall_clock() {
    let mut h = committed_with_a_minute_of_retention();
    h.jump_wall_clock(-120_000);
    h.advance(61_000);
    assert_eq!(h.fetched(), 5, "the wall clock went back: not yet expired");
    h.jump_wall_clock(120_000);
    h.advance(1_000);
    assert_eq!(h.fetched(), -1);
}

#[test]
fn replaying_the_log_rebuilds_groups_and_offsets() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    let c = h.commit(&leader, 1, 11, "meta");
    assert_eq!(h.commit_code(c), Some(0));
    let mut other = GroupShard::new(0, GroupConfig::default(), CoordinatorBugs::default());
    for (key, value) in &h.log {
        other.replay(key, value.as_deref()).unwrap();
    }
    other.finish_loading(h.now);
    let before = h.shard.group("g").unwrap();
    let after = other.group("g").unwrap();
    assert_eq!(after.state, GroupState::Stable);
    assert_eq!(after.generation, before.generation);
    assert_eq!(after.leader, before.leader);
    assert_eq!(after.offsets, before.offsets);
    assert_eq!(
        after.members[&follower].assignment,
        Bytes::from_static(b"F")
    );
    assert_eq!(after.members[&leader].assignment, Bytes::from_static(b"L"));
    // The reloaded group serves its members in the same generation.
    let mut h2 = Harness {
        shard: other,
        log: Vec::new(),
        answers: BTreeMap::new(),
        in_flight: Vec::new(),
        auto_complete: true,
        next_token: 100,
        now: h.now,
    };
    assert_eq!(h2.heartbeat(&follower, 1), 0);
    assert_eq!(h2.fetched(), 11);
}

#[test]
fn a_completed_join_is_stored_only_with_its_assignment() {
    let mut h = Harness::new();
    let (leader, follower) = h.stable_pair();
    let stored = h.log.len();
    // Both rejoin: a rebalance to generation 2, whose join completes without a write.
    let l = h.join(5, &leader, None, &["range"]);
    let f = h.join(5, &follower, None, &["range"]);
    h.advance(i64::from(DELAY_MS));
    let (jl, jf) = (h.join_answer(l).unwrap(), h.join_answer(f).unwrap());
    assert_eq!((jl.error_code, jf.error_code), (0, 0));
    assert_eq!((jl.generation_id, jf.generation_id), (2, 2));
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(
        h.log.len(),
        stored,
        "nothing is stored before the assignment"
    );
    // A reload now finds generation 1 and its assignment, never a stable generation 2
    // whose members were all assigned nothing.
    let mut other = GroupShard::new(0, GroupConfig::default(), CoordinatorBugs::default());
    for (key, value) in &h.log {
        other.replay(key, value.as_deref()).unwrap();
    }
    other.finish_loading(h.now);
    let reloaded = other.group("g").unwrap();
    assert_eq!(
        (reloaded.state, reloaded.generation),
        (GroupState::Stable, 1)
    );
    assert_eq!(
        reloaded.members[&follower].assignment,
        Bytes::from_static(b"F")
    );
    // The leader's sync stores generation 2 with its assignment.
    let leader_id = jl.leader.clone();
    let other_id = if leader_id == leader {
        &follower
    } else {
        &leader
    };
    let ls = h.sync(&leader_id, 2, &[(&leader_id, b"L2"), (other_id, b"F2")]);
    assert_eq!(h.sync_answer(ls), Some((0, Bytes::from_static(b"L2"))));
    assert_eq!(h.log.len(), stored + 1);
}

/// Every error code an answer carries (per member, group or partition where it has them).
fn error_codes(answer: &Answer) -> Vec<i16> {
    match answer {
        Answer::JoinGroup(r) => vec![r.error_code],
        Answer::SyncGroup(r) => vec![r.error_code],
        Answer::Heartbeat(r) => vec![r.error_code],
        Answer::LeaveGroup(r) => std::iter::once(r.error_code)
            .chain(r.members.iter().map(|m| m.error_code))
            .collect(),
        Answer::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        Answer::OffsetDelete(r) => vec![r.error_code],
        Answer::OffsetFetch(groups) => groups.iter().map(|g| g.error_code).collect(),
        Answer::DescribeGroups(groups) => groups.iter().map(|g| g.error_code).collect(),
        Answer::DeleteGroups(results) => results.iter().map(|r| r.error_code).collect(),
        Answer::ListGroups(r) => {
            assert!(r.groups.is_empty(), "an unavailable shard lists no groups");
            vec![r.error_code]
        }
    }
}

/// Steps every group API once for group "g" and returns each answer, by API name.
fn every_api(shard: &mut GroupShard) -> Vec<(&'static str, Answer)> {
    let client = ClientContext {
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        new_member_id: "c-1".into(),
    };
    let join = JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: SESSION_MS,
        member_id: "m".into(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: subscription(&["t"]),
        }],
        ..Default::default()
    };
    let member = |api: &str| format!("{api}-member");
    shard.join_group(START, Token(1), 9, client, join);
    shard.sync_group(
        START,
        Token(2),
        5,
        SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: member("sync"),
            ..Default::default()
        },
    );
    shard.heartbeat(
        START,
        Token(3),
        HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: member("heartbeat"),
            ..Default::default()
        },
    );
    shard.leave_group(
        START,
        Token(4),
        3,
        LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![MemberIdentity {
                member_id: member("leave"),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    let commit = OffsetCommitRequest {
        group_id: "g".into(),
        topics: vec![OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: Offset(1),
                committed_leader_epoch: LeaderEpoch(-1),
                committed_metadata: None,
            }],
        }],
        ..Default::default()
    };
    shard.offset_commit(START, Token(5), 9, commit, &|_, _| true);
    shard.offset_fetch(Token(6), vec![("g".into(), None)]);
    shard.describe_groups(Token(7), 6, vec!["g".into()], false);
    shard.delete_groups(START, Token(8), vec!["g".into()]);
    shard.offset_delete(
        Token(9),
        OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![OffsetDeleteRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetDeleteRequestPartition { partition_index: 0 }],
            }],
        },
    );
    shard.list_groups(Token(10), &[], &[]);
    let ready = shard.ready();
    assert!(
        ready.writes.is_empty(),
        "an unavailable shard writes nothing"
    );
    let names = [
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
        "DescribeGroups",
        "DeleteGroups",
        "OffsetDelete",
        "ListGroups",
    ];
    let mut answers: BTreeMap<Token, Answer> = ready.answers.into_iter().collect();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let answer = answers
                .remove(&Token(i as u64 + 1))
                .unwrap_or_else(|| panic!("{name} was not answered at once"));
            (*name, answer)
        })
        .collect()
}

#[test]
fn every_api_answers_load_in_progress_while_loading_and_not_coordinator_once_unloaded() {
    let mut shard = GroupShard::new(0, GroupConfig::default(), CoordinatorBugs::default());
    // A group read back already, but the partition is not loaded to its end: nothing of it
    // may be served yet (Kafka's COORDINATOR_LOAD_IN_PROGRESS).
    let key = crate::coordinator::records::CoordinatorKey::OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 0,
    }
    .encode()
    .unwrap();
    let value = crate::coordinator::records::OffsetCommitValue {
        offset: 42,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 0,
        expire_timestamp_ms: None,
    }
    .encode()
    .unwrap();
    shard.replay(&key, Some(&value)).unwrap();
    let expect_all = |shard: &mut GroupShard, code: ErrorCode| {
        for (api, answer) in every_api(shard) {
            let codes = error_codes(&answer);
            assert!(
                !codes.is_empty() && codes.iter().all(|c| *c == code.code()),
                "{api}: {codes:?}, not {code}"
            );
        }
    };
    expect_all(&mut shard, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
    assert_eq!(shard.status(), ShardStatus::Loading);
    // Loaded: the group is served.
    shard.finish_loading(START);
    let token = Token(100);
    shard.offset_fetch(token, vec![("g".into(), None)]);
    match shard.ready().answers.pop() {
        Some((t, Answer::OffsetFetch(groups))) if t == token => {
            assert_eq!(groups[0].error_code, 0);
            assert_eq!(
                groups[0].topics[0].partitions[0].committed_offset,
                Offset(42)
            );
        }
        other => panic!("{other:?}"),
    }
    // The partition moved away (or a write failed): another node coordinates its groups.
    shard.unload(ErrorCode::NOT_COORDINATOR);
    expect_all(&mut shard, ErrorCode::NOT_COORDINATOR);
}
