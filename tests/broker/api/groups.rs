//! The classic group coordinator over real TCP, spoken to with hand-built requests: every
//! group API at its lowest and highest version, Kafka's rules and error codes as a client
//! sees them on the wire (the shard's own unit tests in `src/coordinator/shard_tests.rs`
//! cover the rules step by step), the settings under Kafka's names, what survives a restart,
//! and `__consumer_offsets` as an internal, compacted topic.
//!
//! Every wait is bounded: a call that gets no answer within [`WAIT`] fails the test.
//!
//! Not here, because a single node cannot show them deterministically: NOT_COORDINATOR (every
//! partition of `__consumer_offsets` is led here) and COORDINATOR_LOAD_IN_PROGRESS (a small
//! offsets topic loads before a client can ask), both tested on the shard
//! (`every_api_answers_load_in_progress_while_loading_and_not_coordinator_once_unloaded`);
//! and `offsets.commit.timeout.ms`, which needs a write that stays unsynced that long.

use std::time::Duration;

use bytes::{Buf, Bytes};
use samsa::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use samsa::protocol::delete_groups::{DeleteGroupsRequest, DeleteGroupsResponse};
use samsa::protocol::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResource, DescribeConfigsResponse,
};
use samsa::protocol::describe_groups::{
    DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup,
};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse};
use samsa::protocol::header::ResponseHeader;
use samsa::protocol::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use samsa::protocol::join_group::{JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse};
use samsa::protocol::leave_group::{LeaveGroupRequest, LeaveGroupResponse, MemberIdentity};
use samsa::protocol::list_groups::{ListGroupsRequest, ListGroupsResponse};
use samsa::protocol::message::Message;
use samsa::protocol::metadata::{MetadataRequest, MetadataRequestTopic, MetadataResponse};
use samsa::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use samsa::protocol::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
};
use samsa::protocol::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    OffsetFetchResponse,
};
use samsa::protocol::response_header_version;
use samsa::protocol::sync_group::{
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};
use samsa::protocol::types::{LeaderEpoch, NodeId, Offset};
use samsa::rt::time::now;

use super::test_broker::{self, topic, Conn, TestBroker};

/// The longest any one answer may take (a rebalance's answers included).
const WAIT: Duration = Duration::from_secs(10);
/// A session long enough that no test's member expires unless the test means it to.
const SESSION_MS: i32 = 30_000;
const REBALANCE_MS: i32 = 10_000;

/// Small settings: a few offsets partitions (quick to create), no initial rebalance delay,
/// and sessions allowed down to 200 ms.
fn settings<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all: Vec<(&str, &str)> = [
        ("offsets.topic.num.partitions", "3"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("group.min.session.timeout.ms", "200"),
    ]
    .into_iter()
    .filter(|(key, _)| !extra.iter().any(|(k, _)| k == key))
    .collect();
    all.extend_from_slice(extra);
    all
}

/// A broker on a fresh data directory with [`settings`]`(extra)`, a connection to it, and
/// `__consumer_offsets` created (by a FindCoordinator, as clients begin).
async fn start(extra: &[(&str, &str)]) -> (tempfile::TempDir, TestBroker, Conn) {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start_with_background(dir.path(), &settings(extra)).await;
    let mut conn = broker.connect().await;
    find_coordinator(&mut conn, "g").await;
    (dir, broker, conn)
}

fn code(name: ErrorCode) -> i16 {
    name.code()
}

async fn call<Req: Message, Resp: Message>(conn: &mut Conn, version: i16, request: &Req) -> Resp {
    tokio::time::timeout(WAIT, conn.call(version, request))
        .await
        .unwrap_or_else(|_| panic!("{} v{version}: no answer within {WAIT:?}", Req::NAME))
}

/// Sends a request whose answer the test collects later with [`receive`].
async fn send<Req: Message>(conn: &mut Conn, version: i16, request: &Req) {
    let frame = conn.request(version, request);
    conn.send_frame(&frame).await;
}

/// The next answer on `conn`, decoded as `Resp` at `version`.
async fn receive<Resp: Message>(conn: &mut Conn, version: i16) -> Resp {
    let mut frame = tokio::time::timeout(WAIT, conn.read_frame())
        .await
        .unwrap_or_else(|_| panic!("{} v{version}: no answer within {WAIT:?}", Resp::NAME))
        .expect("the broker answered");
    let header_version = response_header_version(Resp::API_KEY, version).unwrap();
    let header = ResponseHeader::decode(
        &mut samsa::protocol::wire::Reader::new(frame.clone()),
        header_version,
    )
    .unwrap();
    frame.advance(header.encoded_len(header_version));
    Resp::decode_exact(frame, version).expect("response decodes")
}

/// Whether `conn` stays without an answer for `ms`. (An answer arriving just as the wait
/// ends could be cut; the callers expect none at all.)
async fn silent_for(conn: &mut Conn, ms: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(ms), conn.read_frame())
        .await
        .is_err()
}

/// A consumer protocol subscription (`ConsumerProtocolSubscription` v0: topics, no user data).
fn subscription(topics: &[&str]) -> Bytes {
    let mut out = vec![0, 0];
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

fn join_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    protocols: &[&str],
    topics: &[&str],
) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.to_string(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        member_id: member_id.to_string(),
        group_instance_id: instance.map(str::to_string),
        protocol_type: "consumer".to_string(),
        protocols: protocols
            .iter()
            .map(|p| JoinGroupRequestProtocol {
                name: p.to_string(),
                metadata: subscription(topics),
            })
            .collect(),
        ..Default::default()
    }
}

/// A dynamic member's first JoinGroup (v4+): MEMBER_ID_REQUIRED with the id to join with.
async fn member_id_for(conn: &mut Conn, group: &str, protocols: &[&str]) -> String {
    let first: JoinGroupResponse =
        call(conn, 9, &join_request(group, "", None, protocols, &["t"])).await;
    assert_eq!(first.error_code, code(ErrorCode::MEMBER_ID_REQUIRED));
    assert!(
        first.member_id.starts_with("test-broker-"),
        "a member id is the client id, a dash and a unique part: {}",
        first.member_id
    );
    first.member_id
}

fn sync_request(
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: &[(&str, &[u8])],
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: group.to_string(),
        generation_id: generation,
        member_id: member_id.to_string(),
        assignments: assignments
            .iter()
            .map(|(m, a)| SyncGroupRequestAssignment {
                member_id: m.to_string(),
                assignment: Bytes::copy_from_slice(a),
            })
            .collect(),
        ..Default::default()
    }
}

/// A one-member group made Stable (v9 join, v5 sync) with `assignment`: its member id.
async fn stable_group(conn: &mut Conn, group: &str, topics: &[&str], assignment: &[u8]) -> String {
    let id = member_id_for(conn, group, &["range"]).await;
    let joined: JoinGroupResponse =
        call(conn, 9, &join_request(group, &id, None, &["range"], topics)).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    let synced: SyncGroupResponse =
        call(conn, 5, &sync_request(group, 1, &id, &[(&id, assignment)])).await;
    assert_eq!(synced.error_code, 0);
    id
}

async fn heartbeat(
    conn: &mut Conn,
    version: i16,
    group: &str,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
) -> i16 {
    let response: HeartbeatResponse = call(
        conn,
        version,
        &HeartbeatRequest {
            group_id: group.to_string(),
            generation_id: generation,
            member_id: member_id.to_string(),
            group_instance_id: instance.map(str::to_string),
        },
    )
    .await;
    response.error_code
}

async fn find_coordinator(conn: &mut Conn, group: &str) -> FindCoordinatorResponse {
    call(
        conn,
        0,
        &FindCoordinatorRequest {
            key: group.to_string(),
            ..Default::default()
        },
    )
    .await
}

async fn describe(conn: &mut Conn, version: i16, groups: &[&str]) -> Vec<DescribedGroup> {
    let response: DescribeGroupsResponse = call(
        conn,
        version,
        &DescribeGroupsRequest {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            include_authorized_operations: version >= 3,
        },
    )
    .await;
    response.groups
}

fn commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[(&str, i32, i64, &str)],
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (name, partition, offset, metadata) in offsets {
        let p = OffsetCommitRequestPartition {
            partition_index: *partition,
            committed_offset: Offset(*offset),
            committed_leader_epoch: LeaderEpoch(-1),
            committed_metadata: Some(metadata.to_string()),
        };
        match topics.last_mut() {
            Some(t) if t.name == *name => t.partitions.push(p),
            _ => topics.push(OffsetCommitRequestTopic {
                name: name.to_string(),
                partitions: vec![p],
            }),
        }
    }
    OffsetCommitRequest {
        group_id: group.to_string(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.to_string(),
        topics,
        ..Default::default()
    }
}

/// Commits and returns (topic, partition, error code) per partition, in request order.
async fn commit(
    conn: &mut Conn,
    version: i16,
    request: &OffsetCommitRequest,
) -> Vec<(String, i32, i16)> {
    let response: OffsetCommitResponse = call(conn, version, request).await;
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.clone(), p.partition_index, p.error_code))
        })
        .collect()
}

/// The error codes of a commit, flattened.
async fn commit_codes(conn: &mut Conn, version: i16, request: &OffsetCommitRequest) -> Vec<i16> {
    commit(conn, version, request)
        .await
        .into_iter()
        .map(|(_, _, c)| c)
        .collect()
}

/// One group's committed offsets (v8+ form): (topic, partition, offset, metadata) and the
/// group's error code.
type Fetched = (i16, Vec<(String, i32, i64, String)>);

/// One group of an OffsetFetch question: its id and the partitions asked for by topic
/// (`None`: all).
type Question<'a> = (&'a str, Option<&'a [(&'a str, &'a [i32])]>);

/// OffsetFetch v8+ for several groups.
async fn fetch_groups(
    conn: &mut Conn,
    version: i16,
    groups: &[Question<'_>],
    require_stable: bool,
) -> Vec<(String, Fetched)> {
    let request = OffsetFetchRequest {
        groups: groups
            .iter()
            .map(|(g, topics)| OffsetFetchRequestGroup {
                group_id: g.to_string(),
                topics: topics.map(|ts| {
                    ts.iter()
                        .map(|(name, partitions)| OffsetFetchRequestTopics {
                            name: name.to_string(),
                            partition_indexes: partitions.to_vec(),
                        })
                        .collect()
                }),
                ..Default::default()
            })
            .collect(),
        require_stable,
        ..Default::default()
    };
    let response: OffsetFetchResponse = call(conn, version, &request).await;
    response
        .groups
        .into_iter()
        .map(|g| {
            let offsets = g
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| {
                        assert_eq!(p.error_code, 0);
                        (
                            t.name.clone(),
                            p.partition_index,
                            p.committed_offset.0,
                            p.metadata.clone().unwrap_or_default(),
                        )
                    })
                })
                .collect();
            (g.group_id, (g.error_code, offsets))
        })
        .collect()
}

/// One group's committed offset of one partition (OffsetFetch v9).
async fn fetched(conn: &mut Conn, group: &str, topic: &str, partition: i32) -> (i16, i64) {
    let groups = fetch_groups(conn, 9, &[(group, Some(&[(topic, &[partition])]))], false).await;
    let (error, offsets) = &groups[0].1;
    (*error, offsets.first().map_or(-2, |o| o.2))
}

/// Waits (at most 3 s: the retention check runs every 50 ms) until `group`'s offset of t-0
/// is gone.
async fn until_expired(conn: &mut Conn, group: &str) {
    let deadline = now() + Duration::from_secs(3);
    while fetched(conn, group, "t", 0).await != (0, -1) {
        assert!(now() < deadline, "the offset of {group} did not expire");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn list(
    conn: &mut Conn,
    version: i16,
    states: &[&str],
    types: &[&str],
) -> Vec<(String, String)> {
    let response: ListGroupsResponse = call(
        conn,
        version,
        &ListGroupsRequest {
            states_filter: states.iter().map(|s| s.to_string()).collect(),
            types_filter: types.iter().map(|s| s.to_string()).collect(),
        },
    )
    .await;
    assert_eq!(response.error_code, 0);
    let mut out: Vec<(String, String)> = response
        .groups
        .into_iter()
        .map(|g| (g.group_id, g.group_state))
        .collect();
    out.sort();
    out
}

async fn leave(
    conn: &mut Conn,
    version: i16,
    group: &str,
    members: &[(&str, Option<&str>)],
) -> LeaveGroupResponse {
    let request = if version < 3 {
        LeaveGroupRequest {
            group_id: group.to_string(),
            member_id: members[0].0.to_string(),
            ..Default::default()
        }
    } else {
        LeaveGroupRequest {
            group_id: group.to_string(),
            members: members
                .iter()
                .map(|(m, i)| MemberIdentity {
                    member_id: m.to_string(),
                    group_instance_id: i.map(str::to_string),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    call(conn, version, &request).await
}

/// Heartbeats every 50 ms until the answer is `expected`, for at most `within`.
async fn heartbeat_until(
    conn: &mut Conn,
    group: &str,
    generation: i32,
    member_id: &str,
    expected: ErrorCode,
    within: Duration,
) {
    let deadline = now() + within;
    loop {
        let got = heartbeat(conn, 4, group, generation, member_id, None).await;
        if got == expected.code() {
            return;
        }
        assert!(
            now() < deadline,
            "heartbeat still answers {} after {within:?}, not {expected}",
            ErrorCode(got)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---- the tests ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_names_this_node_for_each_group_key() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start_with_background(dir.path(), &settings(&[])).await;
    let mut conn = broker.connect().await;
    // Every group API is advertised with the versions the codec has.
    let versions: ApiVersionsResponse = call(&mut conn, 3, &ApiVersionsRequest::default()).await;
    for (key, min, max) in [
        (8, 2, 9),
        (9, 1, 9),
        (10, 0, 6),
        (11, 0, 9),
        (12, 0, 4),
        (13, 0, 5),
        (14, 0, 5),
        (15, 0, 6),
        (16, 0, 5),
        (42, 0, 2),
        (47, 0, 0),
    ] {
        let api = versions.api_keys.iter().find(|k| k.api_key == key);
        assert_eq!(
            api.map(|k| (k.min_version, k.max_version)),
            Some((min, max)),
            "api key {key}"
        );
    }
    // Before `__consumer_offsets` exists a group request finds no coordinator, and there
    // are no groups to list.
    let early: HeartbeatResponse = call(
        &mut conn,
        4,
        &HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: "m".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(early.error_code, code(ErrorCode::COORDINATOR_NOT_AVAILABLE));
    assert_eq!(list(&mut conn, 0, &[], &[]).await, []);

    // v0 (the lowest): one key, this node.
    let port = i32::from(broker.addr.port());
    let found = find_coordinator(&mut conn, "g").await;
    assert_eq!(
        (
            found.error_code,
            found.node_id,
            found.host.as_str(),
            found.port
        ),
        (0, NodeId(1), "127.0.0.1", port)
    );
    // v4+ batches keys, answered each in order; v6 is the highest.
    for version in [4, 6] {
        let batch: FindCoordinatorResponse = call(
            &mut conn,
            version,
            &FindCoordinatorRequest {
                key_type: 0,
                coordinator_keys: vec!["a".into(), "b".into(), "c".into()],
                ..Default::default()
            },
        )
        .await;
        let keys: Vec<(&str, i16, NodeId, i32)> = batch
            .coordinators
            .iter()
            .map(|c| (c.key.as_str(), c.error_code, c.node_id, c.port))
            .collect();
        assert_eq!(
            keys,
            [
                ("a", 0, NodeId(1), port),
                ("b", 0, NodeId(1), port),
                ("c", 0, NodeId(1), port)
            ]
        );
    }
    // No transaction coordinator yet; an unknown key type is an invalid request.
    for (key_type, expected) in [
        (1, ErrorCode::COORDINATOR_NOT_AVAILABLE),
        (7, ErrorCode::INVALID_REQUEST),
    ] {
        let other: FindCoordinatorResponse = call(
            &mut conn,
            6,
            &FindCoordinatorRequest {
                key_type,
                coordinator_keys: vec!["x".into()],
                ..Default::default()
            },
        )
        .await;
        assert_eq!(other.coordinators[0].error_code, code(expected));
        assert_eq!(other.coordinators[0].node_id, NodeId::NONE);
    }
    let v1: FindCoordinatorResponse = call(
        &mut conn,
        1,
        &FindCoordinatorRequest {
            key: "tx".into(),
            key_type: 1,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(v1.error_code, code(ErrorCode::COORDINATOR_NOT_AVAILABLE));
    // Now the group's coordinator answers.
    let now = heartbeat(&mut conn, 4, "g", 1, "m", None).await;
    assert_eq!(now, code(ErrorCode::UNKNOWN_MEMBER_ID));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offsets_topic_is_internal_compacted_and_closed_to_producers() {
    let (_dir, broker, mut conn) = start(&[]).await;
    let metadata: MetadataResponse = call(
        &mut conn,
        12,
        &MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some("__consumer_offsets".into()),
                ..Default::default()
            }]),
            allow_auto_topic_creation: false,
            ..Default::default()
        },
    )
    .await;
    let offsets = &metadata.topics[0];
    assert_eq!(offsets.error_code, 0);
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions.len(), 3, "offsets.topic.num.partitions");
    let configs: DescribeConfigsResponse = call(
        &mut conn,
        4,
        &DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource_type: 2,
                resource_name: "__consumer_offsets".into(),
                configuration_keys: Some(vec!["cleanup.policy".into()]),
            }],
            ..Default::default()
        },
    )
    .await;
    let result = &configs.results[0];
    assert_eq!(result.error_code, 0);
    let policy: Vec<(&str, Option<&str>)> = result
        .configs
        .iter()
        .map(|c| (c.name.as_str(), c.value.as_deref()))
        .collect();
    assert_eq!(policy, [("cleanup.policy", Some("compact"))]);
    let mut builder = samsa::protocol::record_batch::BatchBuilder::new(0);
    builder.push(1, Some(b"k"), Some(b"v"), &[]);
    let (error, _) =
        test_broker::produce(&mut conn, "__consumer_offsets", 0, builder.build().freeze()).await;
    assert_eq!(error, code(ErrorCode::INVALID_TOPIC_EXCEPTION));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_member_gets_its_id_joins_syncs_and_is_described_while_stable() {
    let (_dir, broker, mut conn) = start(&[]).await;
    // KIP-394 (v4+): the first join only hands out the member id.
    let id = member_id_for(&mut conn, "g", &["range"]).await;
    let joined: JoinGroupResponse = call(
        &mut conn,
        9,
        &join_request("g", &id, None, &["range"], &["t"]),
    )
    .await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.member_id, id);
    assert_eq!(joined.leader, id);
    assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert!(!joined.skip_assignment);
    let members: Vec<(&str, &Bytes)> = joined
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), &m.metadata))
        .collect();
    assert_eq!(members, [(id.as_str(), &subscription(&["t"]))]);
    // CompletingRebalance: heartbeats are fine, the group is not described as Stable yet.
    assert_eq!(heartbeat(&mut conn, 4, "g", 1, &id, None).await, 0);
    let completing = describe(&mut conn, 6, &["g"]).await;
    assert_eq!(completing[0].group_state, "CompletingRebalance");
    assert_eq!(completing[0].protocol_data, "");
    // SyncGroup's checks: member, generation, and (v5) the protocol type and name.
    let refused = [
        (
            sync_request("g", 1, "nobody", &[]),
            ErrorCode::UNKNOWN_MEMBER_ID,
        ),
        (
            sync_request("g", 7, &id, &[]),
            ErrorCode::ILLEGAL_GENERATION,
        ),
        (
            SyncGroupRequest {
                protocol_type: Some("connect".into()),
                ..sync_request("g", 1, &id, &[])
            },
            ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            SyncGroupRequest {
                protocol_type: Some("consumer".into()),
                protocol_name: Some("roundrobin".into()),
                ..sync_request("g", 1, &id, &[])
            },
            ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
        ),
    ];
    for (request, expected) in refused {
        let response: SyncGroupResponse = call(&mut conn, 5, &request).await;
        assert_eq!(response.error_code, code(expected), "{request:?}");
    }
    let synced: SyncGroupResponse = call(
        &mut conn,
        5,
        &SyncGroupRequest {
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            ..sync_request("g", 1, &id, &[(&id, b"my-part")])
        },
    )
    .await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"my-part");
    assert_eq!(synced.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(synced.protocol_name.as_deref(), Some("range"));
    // Stable: members are described with their metadata and assignment; v6 (the highest)
    // reports an unknown group as GROUP_ID_NOT_FOUND, v0 (the lowest) as Dead.
    let described = describe(&mut conn, 6, &["g", "unknown"]).await;
    let g = &described[0];
    assert_eq!(
        (g.error_code, g.group_id.as_str(), g.group_state.as_str()),
        (0, "g", "Stable")
    );
    assert_eq!(
        (g.protocol_type.as_str(), g.protocol_data.as_str()),
        ("consumer", "range")
    );
    // Without an authorizer, every operation a group supports: READ (3), DELETE (6),
    // DESCRIBE (8), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11), as Kafka's
    // `AclEntry.supportedOperations(GROUP)`.
    assert_eq!(
        g.authorized_operations,
        (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
    );
    assert_eq!(g.members.len(), 1);
    let m = &g.members[0];
    assert_eq!(m.member_id, id);
    assert_eq!(m.client_id, "test-broker");
    assert!(m.client_host.contains("127.0.0.1"), "{}", m.client_host);
    assert_eq!(m.member_metadata, subscription(&["t"]));
    assert_eq!(&m.member_assignment[..], b"my-part");
    assert_eq!(m.group_instance_id, None);
    assert_eq!(described[1].error_code, code(ErrorCode::GROUP_ID_NOT_FOUND));
    let old = describe(&mut conn, 0, &["g", "unknown"]).await;
    assert_eq!(old[0].group_state, "Stable");
    assert_eq!(&old[0].members[0].member_assignment[..], b"my-part");
    assert_eq!(
        (old[1].error_code, old[1].group_state.as_str()),
        (0, "Dead")
    );
    // A repeated sync in Stable hands back the member's assignment.
    let again: SyncGroupResponse = call(&mut conn, 0, &sync_request("g", 1, &id, &[])).await;
    assert_eq!(
        (again.error_code, &again.assignment[..]),
        (0, &b"my-part"[..])
    );
    // Heartbeat's checks, at v0 and v4.
    for version in [0, 4] {
        assert_eq!(heartbeat(&mut conn, version, "g", 1, &id, None).await, 0);
        assert_eq!(
            heartbeat(&mut conn, version, "g", 2, &id, None).await,
            code(ErrorCode::ILLEGAL_GENERATION)
        );
        assert_eq!(
            heartbeat(&mut conn, version, "g", 1, "stranger", None).await,
            code(ErrorCode::UNKNOWN_MEMBER_ID)
        );
        assert_eq!(
            heartbeat(&mut conn, version, "no-such-group", 1, &id, None).await,
            code(ErrorCode::UNKNOWN_MEMBER_ID)
        );
    }
    // A known member id in a group that does not exist, and an empty group id.
    let unknown: JoinGroupResponse = call(
        &mut conn,
        9,
        &join_request("other", &id, None, &["range"], &["t"]),
    )
    .await;
    assert_eq!(unknown.error_code, code(ErrorCode::UNKNOWN_MEMBER_ID));
    let no_id: JoinGroupResponse = call(
        &mut conn,
        9,
        &join_request("", "", None, &["range"], &["t"]),
    )
    .await;
    assert_eq!(no_id.error_code, code(ErrorCode::INVALID_GROUP_ID));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_before_v4_get_a_member_id_at_once_and_v0_leaves() {
    let (_dir, broker, mut conn) = start(&[]).await;
    for (version, group) in [(0, "g0"), (3, "g3")] {
        let joined: JoinGroupResponse = call(
            &mut conn,
            version,
            &join_request(group, "", None, &["range"], &["t"]),
        )
        .await;
        assert_eq!(
            joined.error_code, 0,
            "v{version} joins without MEMBER_ID_REQUIRED"
        );
        assert!(joined.member_id.starts_with("test-broker-"));
        assert_eq!(joined.generation_id, 1);
        assert_eq!(joined.leader, joined.member_id);
        assert_eq!(joined.protocol_name.as_deref(), Some("range"));
        let id = joined.member_id;
        let synced: SyncGroupResponse =
            call(&mut conn, 0, &sync_request(group, 1, &id, &[(&id, b"a")])).await;
        assert_eq!((synced.error_code, &synced.assignment[..]), (0, &b"a"[..]));
        assert_eq!(heartbeat(&mut conn, 0, group, 1, &id, None).await, 0);
        // LeaveGroup v0 (the lowest) names one member; the group is left Empty.
        let left = leave(&mut conn, 0, group, &[(&id, None)]).await;
        assert_eq!(left.error_code, 0);
        let described = describe(&mut conn, 0, &[group]).await;
        assert_eq!(described[0].group_state, "Empty");
        assert!(described[0].members.is_empty());
        assert_eq!(
            heartbeat(&mut conn, 0, group, 1, &id, None).await,
            code(ErrorCode::UNKNOWN_MEMBER_ID)
        );
        let again = leave(&mut conn, 0, group, &[(&id, None)]).await;
        assert_eq!(again.error_code, code(ErrorCode::UNKNOWN_MEMBER_ID));
    }
    let unknown_group = leave(&mut conn, 5, "never", &[("m", None)]).await;
    assert_eq!(unknown_group.error_code, code(ErrorCode::UNKNOWN_MEMBER_ID));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_member_rebalances_the_group_onto_the_common_protocol() {
    let (_dir, broker, mut a) = start(&[]).await;
    let mut b = broker.connect().await;
    test_broker::create(&mut a, topic("t", 1, &[])).await;
    let a_id = member_id_for(&mut a, "g", &["range", "roundrobin"]).await;
    let joined: JoinGroupResponse = call(
        &mut a,
        9,
        &join_request("g", &a_id, None, &["range", "roundrobin"], &["t"]),
    )
    .await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    let synced: SyncGroupResponse =
        call(&mut a, 5, &sync_request("g", 1, &a_id, &[(&a_id, b"all")])).await;
    assert_eq!(synced.error_code, 0);
    // A member without a protocol in common, or of another protocol type, is refused.
    let sticky: JoinGroupResponse =
        call(&mut b, 9, &join_request("g", "", None, &["sticky"], &["t"])).await;
    assert_eq!(
        sticky.error_code,
        code(ErrorCode::INCONSISTENT_GROUP_PROTOCOL)
    );
    let connect: JoinGroupResponse = call(
        &mut b,
        9,
        &JoinGroupRequest {
            protocol_type: "connect".into(),
            ..join_request("g", "", None, &["range"], &["t"])
        },
    )
    .await;
    assert_eq!(
        connect.error_code,
        code(ErrorCode::INCONSISTENT_GROUP_PROTOCOL)
    );
    // B, which only speaks roundrobin, joins: a rebalance starts and waits for A.
    let b_id = member_id_for(&mut b, "g", &["roundrobin"]).await;
    send(
        &mut b,
        9,
        &join_request("g", &b_id, None, &["roundrobin"], &["t", "u"]),
    )
    .await;
    heartbeat_until(
        &mut a,
        "g",
        1,
        &a_id,
        ErrorCode::REBALANCE_IN_PROGRESS,
        WAIT,
    )
    .await;
    let preparing = describe(&mut a, 6, &["g"]).await;
    assert_eq!(preparing[0].group_state, "PreparingRebalance");
    let resync: SyncGroupResponse = call(&mut a, 5, &sync_request("g", 1, &a_id, &[])).await;
    assert_eq!(resync.error_code, code(ErrorCode::REBALANCE_IN_PROGRESS));
    assert!(
        silent_for(&mut b, 200).await,
        "B's join waits for A to rejoin"
    );
    // A rejoins: both hear generation 2, with the only protocol both support.
    let rejoined: JoinGroupResponse = call(
        &mut a,
        9,
        &join_request("g", &a_id, None, &["range", "roundrobin"], &["t"]),
    )
    .await;
    let b_joined: JoinGroupResponse = receive(&mut b, 9).await;
    for r in [&rejoined, &b_joined] {
        assert_eq!((r.error_code, r.generation_id), (0, 2));
        assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
        assert_eq!(r.leader, a_id, "the leader stays the leader");
    }
    // Only the leader gets the members, each with its metadata for the chosen protocol.
    let mut members: Vec<(String, Bytes)> = rejoined
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.metadata.clone()))
        .collect();
    members.sort();
    let mut expected = vec![
        (a_id.clone(), subscription(&["t"])),
        (b_id.clone(), subscription(&["t", "u"])),
    ];
    expected.sort();
    assert_eq!(members, expected);
    assert!(b_joined.members.is_empty());
    // CompletingRebalance: a commit of the new generation is told to wait for the sync.
    let early = commit_request("g", 2, &b_id, &[("t", 0, 1, "")]);
    assert_eq!(
        commit_codes(&mut b, 9, &early).await,
        [code(ErrorCode::REBALANCE_IN_PROGRESS)]
    );
    // B's sync waits for the leader's assignment; each member gets its own part.
    send(&mut b, 5, &sync_request("g", 2, &b_id, &[])).await;
    assert!(
        silent_for(&mut b, 200).await,
        "B's sync waits for the leader's"
    );
    let a_synced: SyncGroupResponse = call(
        &mut a,
        5,
        &sync_request("g", 2, &a_id, &[(&a_id, b"for-a"), (&b_id, b"for-b")]),
    )
    .await;
    let b_synced: SyncGroupResponse = receive(&mut b, 5).await;
    assert_eq!(
        (a_synced.error_code, &a_synced.assignment[..]),
        (0, &b"for-a"[..])
    );
    assert_eq!(
        (b_synced.error_code, &b_synced.assignment[..]),
        (0, &b"for-b"[..])
    );
    // Stable: OffsetCommit's generation and member checks.
    let cases = [
        (
            commit_request("g", 2, &b_id, &[("t", 0, 5, "")]),
            ErrorCode::NONE,
        ),
        (
            commit_request("g", 1, &b_id, &[("t", 0, 5, "")]),
            ErrorCode::ILLEGAL_GENERATION,
        ),
        (
            commit_request("g", 2, "stranger", &[("t", 0, 5, "")]),
            ErrorCode::UNKNOWN_MEMBER_ID,
        ),
        // Generation -1 from outside the group: only while the group is empty.
        (
            commit_request("g", -1, "", &[("t", 0, 5, "")]),
            ErrorCode::UNKNOWN_MEMBER_ID,
        ),
    ];
    for (request, expected) in cases {
        for version in [2, 9] {
            assert_eq!(
                commit_codes(&mut a, version, &request).await,
                [code(expected)],
                "v{version} {request:?}"
            );
        }
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_rebalance_delay_is_extended_while_members_keep_joining() {
    const DELAY_MS: u64 = 600;
    let (_dir, broker, first) = start(&[("group.initial.rebalance.delay.ms", "600")]).await;
    let mut conns = [first, broker.connect().await, broker.connect().await];
    let mut ids = Vec::new();
    for conn in conns.iter_mut() {
        ids.push(member_id_for(conn, "g", &["range"]).await);
    }
    // A joins at 0 (the delay ends at 600), B at 200 (extended to 1200), C at 800 (to 1800):
    // without the extension C would come after generation 1 and start generation 2.
    let started = now();
    for (i, at_ms) in [0u64, 200, 800].into_iter().enumerate() {
        let wait = Duration::from_millis(at_ms).saturating_sub(started.elapsed());
        tokio::time::sleep(wait).await;
        send(
            &mut conns[i],
            9,
            &join_request("g", &ids[i], None, &["range"], &["t"]),
        )
        .await;
    }
    let mut answers = Vec::new();
    for conn in conns.iter_mut() {
        let answer: JoinGroupResponse = receive(conn, 9).await;
        answers.push((answer, started.elapsed()));
    }
    for (answer, _) in &answers {
        assert_eq!((answer.error_code, answer.generation_id), (0, 1));
    }
    let leader = answers
        .iter()
        .find(|(a, _)| !a.members.is_empty())
        .expect("one member leads");
    assert_eq!(leader.0.members.len(), 3, "every member is in generation 1");
    assert!(
        leader.1 >= Duration::from_millis(3 * DELAY_MS - 100),
        "the join completed after {:?}: the delay was not extended twice",
        leader.1
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_group_size_follow_the_settings() {
    let (_dir, broker, mut a) = start(&[
        ("group.max.session.timeout.ms", "60000"),
        ("group.max.size", "2"),
        // Long enough for both members to make generation 1.
        ("group.initial.rebalance.delay.ms", "500"),
    ])
    .await;
    let mut b = broker.connect().await;
    // group.min.session.timeout.ms / group.max.session.timeout.ms, at v0 and v9.
    for (session_ms, version) in [(199, 0), (60_001, 9), (199, 9)] {
        let refused: JoinGroupResponse = call(
            &mut a,
            version,
            &JoinGroupRequest {
                session_timeout_ms: session_ms,
                ..join_request("g", "", None, &["range"], &["t"])
            },
        )
        .await;
        assert_eq!(
            refused.error_code,
            code(ErrorCode::INVALID_SESSION_TIMEOUT),
            "session {session_ms} ms at v{version}"
        );
    }
    // A with a long session, B with one of 1 s: two members, the group's maximum.
    let a_id = member_id_for(&mut a, "g", &["range"]).await;
    send(
        &mut a,
        9,
        &join_request("g", &a_id, None, &["range"], &["t"]),
    )
    .await;
    let b_id = member_id_for(&mut b, "g", &["range"]).await;
    let b_join = JoinGroupRequest {
        session_timeout_ms: 1_000,
        ..join_request("g", &b_id, None, &["range"], &["t"])
    };
    let b_joined: JoinGroupResponse = call(&mut b, 9, &b_join).await;
    let a_joined: JoinGroupResponse = receive(&mut a, 9).await;
    assert_eq!((a_joined.error_code, b_joined.error_code), (0, 0));
    let generation = a_joined.generation_id;
    assert_eq!(b_joined.generation_id, generation);
    let leader = if a_joined.leader == a_id {
        &mut a
    } else {
        &mut b
    };
    let synced: SyncGroupResponse = call(
        leader,
        5,
        &sync_request(
            "g",
            generation,
            &a_joined.leader,
            &[(&a_id, b"a"), (&b_id, b"b")],
        ),
    )
    .await;
    assert_eq!(synced.error_code, 0);
    // group.max.size: a third member is refused, whether it asks for an id (v4+) or not.
    let mut c = broker.connect().await;
    for version in [3, 9] {
        let third: JoinGroupResponse = call(
            &mut c,
            version,
            &join_request("g", "", None, &["range"], &["t"]),
        )
        .await;
        assert_eq!(
            third.error_code,
            code(ErrorCode::GROUP_MAX_SIZE_REACHED),
            "v{version}"
        );
    }
    // B falls silent: after its 1 s session the coordinator removes it and A is told to
    // rejoin, which it then does alone, in the next generation.
    heartbeat_until(
        &mut a,
        "g",
        generation,
        &a_id,
        ErrorCode::REBALANCE_IN_PROGRESS,
        Duration::from_secs(3),
    )
    .await;
    let alone: JoinGroupResponse = call(
        &mut a,
        9,
        &join_request("g", &a_id, None, &["range"], &["t"]),
    )
    .await;
    assert_eq!((alone.error_code, alone.generation_id), (0, generation + 1));
    assert_eq!(alone.members.len(), 1);
    assert_eq!(
        heartbeat(&mut b, 4, "g", generation, &b_id, None).await,
        code(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_is_replaced_without_a_rebalance_and_the_old_instance_is_fenced() {
    let (_dir, broker, mut conn) = start(&[]).await;
    let as_i1 = |request: SyncGroupRequest| SyncGroupRequest {
        group_instance_id: Some("i1".into()),
        ..request
    };
    test_broker::create(&mut conn, topic("t", 1, &[])).await;
    // v5 (the first with group.instance.id): a static member joins without MEMBER_ID_REQUIRED.
    let first: JoinGroupResponse = call(
        &mut conn,
        5,
        &join_request("g", "", Some("i1"), &["range"], &["t"]),
    )
    .await;
    assert_eq!((first.error_code, first.generation_id), (0, 1));
    let old_id = first.member_id.clone();
    let synced: SyncGroupResponse = call(
        &mut conn,
        3,
        &as_i1(sync_request("g", 1, &old_id, &[(&old_id, b"kept")])),
    )
    .await;
    assert_eq!(synced.error_code, 0);
    // The instance restarts and joins again with no member id: a new id, the same
    // generation, and (KIP-814, v9) the leader skips the assignment it already made.
    let back: JoinGroupResponse = call(
        &mut conn,
        9,
        &join_request("g", "", Some("i1"), &["range"], &["t"]),
    )
    .await;
    assert_eq!((back.error_code, back.generation_id), (0, 1));
    let new_id = back.member_id.clone();
    assert_ne!(new_id, old_id);
    assert_eq!(back.leader, new_id);
    assert!(back.skip_assignment);
    let described = describe(&mut conn, 6, &["g"]).await;
    assert_eq!(described[0].group_state, "Stable");
    assert_eq!(described[0].members[0].member_id, new_id);
    assert_eq!(
        described[0].members[0].group_instance_id.as_deref(),
        Some("i1")
    );
    let kept: SyncGroupResponse =
        call(&mut conn, 5, &as_i1(sync_request("g", 1, &new_id, &[]))).await;
    assert_eq!((kept.error_code, &kept.assignment[..]), (0, &b"kept"[..]));
    // The old instance is fenced everywhere it shows up.
    let fenced = code(ErrorCode::FENCED_INSTANCE_ID);
    assert_eq!(
        heartbeat(&mut conn, 3, "g", 1, &old_id, Some("i1")).await,
        fenced
    );
    assert_eq!(
        heartbeat(&mut conn, 4, "g", 1, &old_id, Some("i1")).await,
        fenced
    );
    let sync: SyncGroupResponse =
        call(&mut conn, 5, &as_i1(sync_request("g", 1, &old_id, &[]))).await;
    assert_eq!(sync.error_code, fenced);
    let join: JoinGroupResponse = call(
        &mut conn,
        9,
        &join_request("g", &old_id, Some("i1"), &["range"], &["t"]),
    )
    .await;
    assert_eq!(join.error_code, fenced);
    let commit = OffsetCommitRequest {
        group_instance_id: Some("i1".into()),
        ..commit_request("g", 1, &old_id, &[("t", 0, 3, "")])
    };
    assert_eq!(commit_codes(&mut conn, 7, &commit).await, [fenced]);
    let current = OffsetCommitRequest {
        group_instance_id: Some("i1".into()),
        ..commit_request("g", 1, &new_id, &[("t", 0, 3, "")])
    };
    assert_eq!(commit_codes(&mut conn, 9, &current).await, [0]);
    // Before v9 there is no skip_assignment: as Kafka, the returning leader gets no members
    // and the leader id from before its replacement, so it acts as a follower and asks for
    // the assignment in force.
    let old_client: JoinGroupResponse = call(
        &mut conn,
        5,
        &join_request("g", "", Some("i1"), &["range"], &["t"]),
    )
    .await;
    assert_eq!((old_client.error_code, old_client.generation_id), (0, 1));
    assert_ne!(old_client.member_id, new_id);
    assert_eq!(old_client.leader, new_id);
    assert!(old_client.members.is_empty());
    assert!(!old_client.skip_assignment);
    let kept: SyncGroupResponse = call(
        &mut conn,
        5,
        &as_i1(sync_request("g", 1, &old_client.member_id, &[])),
    )
    .await;
    assert_eq!((kept.error_code, &kept.assignment[..]), (0, &b"kept"[..]));
    // LeaveGroup v3+ answers each member of its batch: the old id is fenced, an unknown one
    // is unknown, and the instance leaves by its instance id alone.
    for version in [3, 5] {
        let group = format!("batch-{version}");
        let joined: JoinGroupResponse = call(
            &mut conn,
            5,
            &join_request(&group, "", Some("s"), &["range"], &["t"]),
        )
        .await;
        assert_eq!(joined.error_code, 0);
        let left = leave(
            &mut conn,
            version,
            &group,
            &[("not-its-id", Some("s")), ("ghost", None), ("", Some("s"))],
        )
        .await;
        assert_eq!(left.error_code, 0);
        let results: Vec<(&str, Option<&str>, i16)> = left
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.as_str(),
                    m.group_instance_id.as_deref(),
                    m.error_code,
                )
            })
            .collect();
        assert_eq!(
            results,
            [
                ("not-its-id", Some("s"), fenced),
                ("ghost", None, code(ErrorCode::UNKNOWN_MEMBER_ID)),
                ("", Some("s"), 0),
            ],
            "v{version}"
        );
        let after = describe(&mut conn, 5, &[&group]).await;
        assert_eq!(after[0].group_state, "Empty");
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_from_outside_a_group_and_offset_fetch_in_every_form() {
    let (_dir, broker, mut conn) = start(&[("offset.metadata.max.bytes", "16")]).await;
    test_broker::create(&mut conn, topic("t", 3, &[])).await;
    // v2 (the lowest), generation -1 and no member: a group-less consumer or an admin tool.
    let long = "m".repeat(17);
    let request = commit_request(
        "simple",
        -1,
        "",
        &[
            ("t", 0, 5, "meta"),
            ("t", 1, 6, &long),
            ("t", 9, 1, ""),
            ("nope", 0, 1, ""),
        ],
    );
    let results = commit(&mut conn, 2, &request).await;
    assert_eq!(
        results,
        [
            ("t".to_string(), 0, 0),
            (
                "t".to_string(),
                1,
                code(ErrorCode::OFFSET_METADATA_TOO_LARGE)
            ),
            (
                "t".to_string(),
                9,
                code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
            ),
            (
                "nope".to_string(),
                0,
                code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
            ),
        ]
    );
    // v9 (the highest), with a leader epoch; a second simple group.
    let with_epoch = OffsetCommitRequest {
        topics: vec![OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 2,
                committed_offset: Offset(8),
                committed_leader_epoch: LeaderEpoch(3),
                committed_metadata: None,
            }],
        }],
        ..commit_request("other", -1, "", &[])
    };
    assert_eq!(commit_codes(&mut conn, 9, &with_epoch).await, [0]);
    let empty_id = commit_request("", -1, "", &[("t", 0, 1, "")]);
    assert_eq!(
        commit_codes(&mut conn, 9, &empty_id).await,
        [code(ErrorCode::INVALID_GROUP_ID)]
    );
    // OffsetFetch v1 (the lowest): one group, named partitions; none committed is -1.
    let v1: OffsetFetchResponse = call(
        &mut conn,
        1,
        &OffsetFetchRequest {
            group_id: "simple".into(),
            topics: Some(vec![OffsetFetchRequestTopic {
                name: "t".into(),
                partition_indexes: vec![0, 1, 2],
            }]),
            ..Default::default()
        },
    )
    .await;
    let got: Vec<(i32, i64, Option<&str>, i16)> = v1.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.committed_offset.0,
                p.metadata.as_deref(),
                p.error_code,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 5, Some("meta"), 0),
            (1, -1, Some(""), 0),
            (2, -1, Some(""), 0)
        ]
    );
    // v7 with require_stable, and a null topic list (v2+): every committed partition.
    let v7: OffsetFetchResponse = call(
        &mut conn,
        7,
        &OffsetFetchRequest {
            group_id: "other".into(),
            topics: None,
            require_stable: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(v7.error_code, 0);
    let p = &v7.topics[0].partitions[0];
    assert_eq!(
        (
            v7.topics[0].name.as_str(),
            p.partition_index,
            p.committed_offset.0,
            p.committed_leader_epoch.0
        ),
        ("t", 2, 8, 3)
    );
    // v8+ asks about several groups at once: all of one, some of another, an unknown one.
    for version in [8, 9] {
        let groups = fetch_groups(
            &mut conn,
            version,
            &[
                ("simple", None),
                ("other", Some(&[("t", &[2, 0])])),
                ("unknown", Some(&[("t", &[0])])),
            ],
            version == 9,
        )
        .await;
        let s = |v: &str| v.to_string();
        assert_eq!(
            groups,
            [
                (s("simple"), (0, vec![(s("t"), 0, 5, s("meta"))])),
                (
                    s("other"),
                    (0, vec![(s("t"), 2, 8, s("")), (s("t"), 0, -1, s(""))])
                ),
                (s("unknown"), (0, vec![(s("t"), 0, -1, s(""))])),
            ],
            "v{version}"
        );
    }
    // A generation other than -1 for a group that does not exist: before v9
    // ILLEGAL_GENERATION, from v9 GROUP_ID_NOT_FOUND (Kafka's OffsetMetadataManager).
    let stale = commit_request("nobody-home", 1, "m", &[("t", 0, 1, "")]);
    assert_eq!(
        commit_codes(&mut conn, 8, &stale).await,
        [code(ErrorCode::ILLEGAL_GENERATION)]
    );
    assert_eq!(
        commit_codes(&mut conn, 9, &stale).await,
        [code(ErrorCode::GROUP_ID_NOT_FOUND)]
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_groups_filters_by_state_and_type() {
    let (_dir, broker, mut conn) = start(&[]).await;
    test_broker::create(&mut conn, topic("t", 1, &[])).await;
    stable_group(&mut conn, "live", &["t"], b"x").await;
    let simple = commit_request("idle", -1, "", &[("t", 0, 1, "")]);
    assert_eq!(commit_codes(&mut conn, 9, &simple).await, [0]);
    let s = |g: &str, state: &str| (g.to_string(), state.to_string());
    // v0 (the lowest) lists every group, with its protocol type.
    let all: ListGroupsResponse = call(&mut conn, 0, &ListGroupsRequest::default()).await;
    let mut listed: Vec<(&str, &str)> = all
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.protocol_type.as_str()))
        .collect();
    listed.sort();
    assert_eq!(listed, [("idle", ""), ("live", "consumer")]);
    // v4: by state, case-insensitively; v5 (the highest): by type too.
    assert_eq!(
        list(&mut conn, 4, &[], &[]).await,
        [s("idle", "Empty"), s("live", "Stable")]
    );
    assert_eq!(
        list(&mut conn, 4, &["Stable"], &[]).await,
        [s("live", "Stable")]
    );
    assert_eq!(
        list(&mut conn, 4, &["EMPTY"], &[]).await,
        [s("idle", "Empty")]
    );
    assert_eq!(
        list(&mut conn, 5, &["stable", "empty"], &["classic"]).await,
        [s("idle", "Empty"), s("live", "Stable")]
    );
    assert_eq!(list(&mut conn, 4, &["PreparingRebalance"], &[]).await, []);
    assert_eq!(list(&mut conn, 5, &[], &["consumer"]).await, []);
    let typed: ListGroupsResponse = call(
        &mut conn,
        5,
        &ListGroupsRequest {
            states_filter: vec![],
            types_filter: vec!["Classic".into()],
        },
    )
    .await;
    assert!(typed.groups.iter().all(|g| g.group_type == "classic"));
    assert_eq!(typed.groups.len(), 2);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_deleted_only_when_empty_and_offsets_only_when_unsubscribed() {
    let (_dir, broker, mut conn) = start(&[]).await;
    test_broker::create(&mut conn, topic("t", 1, &[])).await;
    test_broker::create(&mut conn, topic("u", 1, &[])).await;
    let id = stable_group(&mut conn, "g", &["t"], b"x").await;
    let both = commit_request("g", 1, &id, &[("t", 0, 10, ""), ("u", 0, 20, "")]);
    assert_eq!(commit_codes(&mut conn, 9, &both).await, [0, 0]);
    // OffsetDelete (v0, its only version): refused for the topic the group subscribes to.
    let delete_offsets = |group: &str, topics: &[&str]| OffsetDeleteRequest {
        group_id: group.to_string(),
        topics: topics
            .iter()
            .map(|t| OffsetDeleteRequestTopic {
                name: t.to_string(),
                partitions: vec![OffsetDeleteRequestPartition { partition_index: 0 }],
            })
            .collect(),
    };
    let deleted: OffsetDeleteResponse = call(&mut conn, 0, &delete_offsets("g", &["t", "u"])).await;
    assert_eq!(deleted.error_code, 0);
    let per_topic: Vec<(&str, i16)> = deleted
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions[0].error_code))
        .collect();
    assert_eq!(
        per_topic,
        [("t", code(ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC)), ("u", 0)]
    );
    assert_eq!(fetched(&mut conn, "g", "t", 0).await, (0, 10));
    assert_eq!(fetched(&mut conn, "g", "u", 0).await, (0, -1));
    let unknown: OffsetDeleteResponse = call(&mut conn, 0, &delete_offsets("nobody", &["t"])).await;
    assert_eq!(unknown.error_code, code(ErrorCode::GROUP_ID_NOT_FOUND));
    // DeleteGroups: a group with members is not deleted; an unknown one is not found.
    for version in [0, 2] {
        let refused: DeleteGroupsResponse = call(
            &mut conn,
            version,
            &DeleteGroupsRequest {
                groups_names: vec!["g".into(), "nobody".into()],
            },
        )
        .await;
        let results: Vec<(&str, i16)> = refused
            .results
            .iter()
            .map(|r| (r.group_id.as_str(), r.error_code))
            .collect();
        assert_eq!(
            results,
            [
                ("g", code(ErrorCode::NON_EMPTY_GROUP)),
                ("nobody", code(ErrorCode::GROUP_ID_NOT_FOUND))
            ]
        );
    }
    // Once empty, any offset may go, and the group with the rest of them.
    assert_eq!(
        leave(&mut conn, 5, "g", &[(&id, None)]).await.members[0].error_code,
        0
    );
    let empty_delete: OffsetDeleteResponse = call(&mut conn, 0, &delete_offsets("g", &["t"])).await;
    assert_eq!(empty_delete.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetched(&mut conn, "g", "t", 0).await, (0, -1));
    let again = commit_request("g", -1, "", &[("t", 0, 11, "")]);
    assert_eq!(commit_codes(&mut conn, 9, &again).await, [0]);
    let gone: DeleteGroupsResponse = call(
        &mut conn,
        2,
        &DeleteGroupsRequest {
            groups_names: vec!["g".into()],
        },
    )
    .await;
    assert_eq!(gone.results[0].error_code, 0);
    assert_eq!(fetched(&mut conn, "g", "t", 0).await, (0, -1));
    let described = describe(&mut conn, 6, &["g"]).await;
    assert_eq!(described[0].error_code, code(ErrorCode::GROUP_ID_NOT_FOUND));
    assert_eq!(list(&mut conn, 4, &[], &[]).await, []);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_offsets_survive_a_restart() {
    let (dir, broker, mut conn) = start(&[]).await;
    test_broker::create(&mut conn, topic("t", 2, &[])).await;
    let id = stable_group(&mut conn, "g", &["t"], b"part").await;
    let member = commit_request("g", 1, &id, &[("t", 0, 42, "x"), ("t", 1, 43, "")]);
    assert_eq!(commit_codes(&mut conn, 9, &member).await, [0, 0]);
    let simple = commit_request("simple", -1, "", &[("t", 1, 7, "s")]);
    assert_eq!(commit_codes(&mut conn, 2, &simple).await, [0]);
    drop(conn);
    broker.stop().await;

    let broker = TestBroker::start_with_background(dir.path(), &settings(&[])).await;
    let mut conn = broker.connect().await;
    find_coordinator(&mut conn, "g").await;
    // The shards load in the background: wait (bounded) until the group's answers.
    let deadline = now() + WAIT;
    let offsets = loop {
        let groups = fetch_groups(&mut conn, 9, &[("g", None), ("simple", None)], false).await;
        let retriable = [
            code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
            code(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        ];
        if groups
            .iter()
            .all(|(_, (error, _))| !retriable.contains(error))
        {
            break groups;
        }
        assert!(now() < deadline, "still loading after {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let s = |v: &str| v.to_string();
    assert_eq!(
        offsets,
        [
            (
                s("g"),
                (0, vec![(s("t"), 0, 42, s("x")), (s("t"), 1, 43, s(""))])
            ),
            (s("simple"), (0, vec![(s("t"), 1, 7, s("s"))])),
        ]
    );
    // The group is back as it was: Stable, its member and assignment, its generation.
    let described = describe(&mut conn, 6, &["g"]).await;
    assert_eq!(described[0].group_state, "Stable");
    assert_eq!(described[0].members[0].member_id, id);
    assert_eq!(&described[0].members[0].member_assignment[..], b"part");
    assert_eq!(heartbeat(&mut conn, 4, "g", 1, &id, None).await, 0);
    let synced: SyncGroupResponse = call(&mut conn, 5, &sync_request("g", 1, &id, &[])).await;
    assert_eq!(
        (synced.error_code, &synced.assignment[..]),
        (0, &b"part"[..])
    );
    // The generation carries on from where it was, never from 0 again.
    let mut other = broker.connect().await;
    let newcomer = member_id_for(&mut other, "g", &["range"]).await;
    send(
        &mut other,
        9,
        &join_request("g", &newcomer, None, &["range"], &["t"]),
    )
    .await;
    heartbeat_until(
        &mut conn,
        "g",
        1,
        &id,
        ErrorCode::REBALANCE_IN_PROGRESS,
        WAIT,
    )
    .await;
    let rejoined: JoinGroupResponse = call(
        &mut conn,
        9,
        &join_request("g", &id, None, &["range"], &["t"]),
    )
    .await;
    assert_eq!((rejoined.error_code, rejoined.generation_id), (0, 2));
    let newcomer_joined: JoinGroupResponse = receive(&mut other, 9).await;
    assert_eq!(newcomer_joined.generation_id, 2);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_of_empty_groups_expire_after_the_retention() {
    let (_dir, broker, mut conn) = start(&[
        ("offsets.retention.minutes", "1"),
        ("offsets.retention.check.interval.ms", "50"),
    ])
    .await;
    test_broker::create(&mut conn, topic("t", 1, &[])).await;
    // The broker's clock jumps instead of the test waiting a minute.
    let clock = broker.broker.clock.clone();
    let commit_to = |group: &str| commit_request(group, -1, "", &[("t", 0, 1, "")]);
    assert_eq!(commit_codes(&mut conn, 9, &commit_to("old")).await, [0]);
    // OffsetCommit v2-4 may set its own retention: 10 s here.
    let explicit = OffsetCommitRequest {
        retention_time_ms: 10_000,
        ..commit_to("explicit")
    };
    assert_eq!(commit_codes(&mut conn, 2, &explicit).await, [0]);
    clock.jump(30_000);
    until_expired(&mut conn, "explicit").await;
    assert_eq!(fetched(&mut conn, "old", "t", 0).await, (0, 1));
    assert_eq!(commit_codes(&mut conn, 9, &commit_to("young")).await, [0]);
    clock.jump(31_000);
    // 61 s after its commit "old" expires, and the group with it; "young" (31 s) stays.
    until_expired(&mut conn, "old").await;
    assert_eq!(fetched(&mut conn, "young", "t", 0).await, (0, 1));
    let s = |g: &str| (g.to_string(), "Empty".to_string());
    assert_eq!(list(&mut conn, 4, &[], &[]).await, [s("young")]);
    broker.stop().await;
}
