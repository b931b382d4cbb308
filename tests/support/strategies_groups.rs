//! Proptest strategies for the classic consumer group APIs (OffsetCommit, OffsetFetch,
//! JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups,
//! OffsetDelete), shared by the group codec tests through `#[path]`.
//!
//! As in `codec_strategies.rs` (included below for its [`Msg`] trait and helpers), each
//! strategy takes a version and sets only the fields present in that version (others keep
//! their defaults), using null only where the version allows it, so every value is valid in
//! that version. Collections stay small to keep cases fast.
#![allow(dead_code)]

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use samsa::protocol::delete_groups::*;
use samsa::protocol::describe_groups::*;
use samsa::protocol::heartbeat::*;
use samsa::protocol::join_group::*;
use samsa::protocol::leave_group::*;
use samsa::protocol::list_groups::*;
use samsa::protocol::offset_commit::*;
use samsa::protocol::offset_delete::*;
use samsa::protocol::offset_fetch::*;
use samsa::protocol::sync_group::*;
use samsa::protocol::types::{LeaderEpoch, Offset};
use samsa::protocol::wire::Uuid;

#[path = "codec_strategies.rs"]
pub mod base;
#[allow(unused_imports)]
pub use base::{encoded, string, versioned, Msg};
use base::{nullable_string, uuid, when};

macro_rules! msg {
    ($t:ident, $strategy:ident) => {
        impl Msg for $t {
            fn strategy(version: i16) -> BoxedStrategy<Self> {
                $strategy(version)
            }
        }
    };
}

msg!(OffsetCommitRequest, offset_commit_request);
msg!(OffsetCommitResponse, offset_commit_response);
msg!(OffsetFetchRequest, offset_fetch_request);
msg!(OffsetFetchResponse, offset_fetch_response);
msg!(JoinGroupRequest, join_group_request);
msg!(JoinGroupResponse, join_group_response);
msg!(HeartbeatRequest, heartbeat_request);
msg!(HeartbeatResponse, heartbeat_response);
msg!(LeaveGroupRequest, leave_group_request);
msg!(LeaveGroupResponse, leave_group_response);
msg!(SyncGroupRequest, sync_group_request);
msg!(SyncGroupResponse, sync_group_response);
msg!(DescribeGroupsRequest, describe_groups_request);
msg!(DescribeGroupsResponse, describe_groups_response);
msg!(ListGroupsRequest, list_groups_request);
msg!(ListGroupsResponse, list_groups_response);
msg!(DeleteGroupsRequest, delete_groups_request);
msg!(DeleteGroupsResponse, delete_groups_response);
msg!(OffsetDeleteRequest, offset_delete_request);
msg!(OffsetDeleteResponse, offset_delete_response);

/// A nullable string with default null that exists only when `present`.
fn opt_string(present: bool) -> BoxedStrategy<Option<String>> {
    when(present, option::of(string()), None)
}

/// A string that exists only when `present`; otherwise empty.
fn string_when(present: bool) -> BoxedStrategy<String> {
    when(present, string(), String::new())
}

fn bytes() -> BoxedStrategy<Bytes> {
    vec(any::<u8>(), 0..12).prop_map(Bytes::from).boxed()
}

fn strings() -> BoxedStrategy<Vec<String>> {
    vec(string(), 0..4).boxed()
}

pub fn offset_commit_request(v: i16) -> BoxedStrategy<OffsetCommitRequest> {
    let partition = (
        any::<i32>(),
        any::<i64>(),
        when(v >= 6, any::<i32>(), -1),
        nullable_string(true),
    )
        .prop_map(
            |(index, offset, epoch, metadata)| OffsetCommitRequestPartition {
                partition_index: index,
                committed_offset: Offset(offset),
                committed_leader_epoch: LeaderEpoch(epoch),
                committed_metadata: metadata,
            },
        );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| OffsetCommitRequestTopic { name, partitions });
    (
        string(),
        any::<i32>(),
        string(),
        opt_string(v >= 7),
        when(v <= 4, any::<i64>(), -1),
        vec(topic, 0..3),
    )
        .prop_map(
            |(group, generation, member, instance, retention, topics)| OffsetCommitRequest {
                group_id: group,
                generation_id_or_member_epoch: generation,
                member_id: member,
                group_instance_id: instance,
                retention_time_ms: retention,
                topics,
            },
        )
        .boxed()
}

pub fn offset_commit_response(v: i16) -> BoxedStrategy<OffsetCommitResponse> {
    let partition =
        (any::<i32>(), any::<i16>()).prop_map(|(index, e)| OffsetCommitResponsePartition {
            partition_index: index,
            error_code: e,
        });
    let topic = (
        string_when(v <= 9),
        when(v >= 10, uuid(), Uuid::ZERO),
        vec(partition, 0..3),
    )
        .prop_map(|(name, id, partitions)| OffsetCommitResponseTopic {
            name,
            topic_id: id,
            partitions,
        });
    (when(v >= 3, any::<i32>(), 0), vec(topic, 0..3))
        .prop_map(|(throttle, topics)| OffsetCommitResponse {
            throttle_time_ms: throttle,
            topics,
        })
        .boxed()
}

pub fn offset_fetch_request(v: i16) -> BoxedStrategy<OffsetFetchRequest> {
    let topic = (
        string_when(v <= 7),
        when(v <= 7, vec(any::<i32>(), 0..4), Vec::new()),
    )
        .prop_map(|(name, partitions)| OffsetFetchRequestTopic {
            name,
            partition_indexes: partitions,
        });
    let topics = match v {
        ..=1 => vec(topic, 0..3).prop_map(Some).boxed(),
        2..=7 => option::of(vec(topic, 0..3)).boxed(),
        _ => Just(Some(Vec::new())).boxed(),
    };
    let group_topic = (
        string_when((8..=9).contains(&v)),
        when(v >= 8, vec(any::<i32>(), 0..4), Vec::new()),
    )
        .prop_map(|(name, partitions)| OffsetFetchRequestTopics {
            name,
            partition_indexes: partitions,
        });
    let group_topics = if v >= 8 {
        option::of(vec(group_topic, 0..3)).boxed()
    } else {
        Just(Some(Vec::new())).boxed()
    };
    let group = (
        string_when(v >= 8),
        opt_string(v >= 9),
        when(v >= 9, any::<i32>(), -1),
        group_topics,
    )
        .prop_map(|(id, member, epoch, topics)| OffsetFetchRequestGroup {
            group_id: id,
            member_id: member,
            member_epoch: epoch,
            topics,
        });
    (
        string_when(v <= 7),
        topics,
        when(v >= 8, vec(group, 0..3), Vec::new()),
        when(v >= 7, any::<bool>(), false),
    )
        .prop_map(|(group_id, topics, groups, stable)| OffsetFetchRequest {
            group_id,
            topics,
            groups,
            require_stable: stable,
        })
        .boxed()
}

pub fn offset_fetch_response(v: i16) -> BoxedStrategy<OffsetFetchResponse> {
    let old = v <= 7;
    let partition = (
        when(old, any::<i32>(), 0),
        when(old, any::<i64>(), 0),
        when((5..=7).contains(&v), any::<i32>(), -1),
        when(old, nullable_string(true), Some(String::new())),
        when(old, any::<i16>(), 0),
    )
        .prop_map(
            |(index, offset, epoch, metadata, e)| OffsetFetchResponsePartition {
                partition_index: index,
                committed_offset: Offset(offset),
                committed_leader_epoch: LeaderEpoch(epoch),
                metadata,
                error_code: e,
            },
        );
    let topic = (
        string_when(old),
        when(old, vec(partition, 0..3), Vec::new()),
    )
        .prop_map(|(name, partitions)| OffsetFetchResponseTopic { name, partitions });
    let new = v >= 8;
    let group_partition = (
        when(new, any::<i32>(), 0),
        when(new, any::<i64>(), 0),
        when(new, any::<i32>(), -1),
        when(new, nullable_string(true), Some(String::new())),
        when(new, any::<i16>(), 0),
    )
        .prop_map(
            |(index, offset, epoch, metadata, e)| OffsetFetchResponsePartitions {
                partition_index: index,
                committed_offset: Offset(offset),
                committed_leader_epoch: LeaderEpoch(epoch),
                metadata,
                error_code: e,
            },
        );
    let group_topic = (
        string_when((8..=9).contains(&v)),
        when(v >= 10, uuid(), Uuid::ZERO),
        when(new, vec(group_partition, 0..3), Vec::new()),
    )
        .prop_map(|(name, id, partitions)| OffsetFetchResponseTopics {
            name,
            topic_id: id,
            partitions,
        });
    let group = (
        string_when(new),
        when(new, vec(group_topic, 0..3), Vec::new()),
        when(new, any::<i16>(), 0),
    )
        .prop_map(|(id, topics, e)| OffsetFetchResponseGroup {
            group_id: id,
            topics,
            error_code: e,
        });
    (
        when(v >= 3, any::<i32>(), 0),
        when(old, vec(topic, 0..3), Vec::new()),
        when((2..=7).contains(&v), any::<i16>(), 0),
        when(new, vec(group, 0..3), Vec::new()),
    )
        .prop_map(|(throttle, topics, e, groups)| OffsetFetchResponse {
            throttle_time_ms: throttle,
            topics,
            error_code: e,
            groups,
        })
        .boxed()
}

pub fn join_group_request(v: i16) -> BoxedStrategy<JoinGroupRequest> {
    let protocol = (string(), bytes())
        .prop_map(|(name, metadata)| JoinGroupRequestProtocol { name, metadata });
    (
        string(),
        any::<i32>(),
        when(v >= 1, any::<i32>(), -1),
        string(),
        opt_string(v >= 5),
        string(),
        vec(protocol, 0..3),
        opt_string(v >= 8),
    )
        .prop_map(
            |(group, session, rebalance, member, instance, ptype, protocols, reason)| {
                JoinGroupRequest {
                    group_id: group,
                    session_timeout_ms: session,
                    rebalance_timeout_ms: rebalance,
                    member_id: member,
                    group_instance_id: instance,
                    protocol_type: ptype,
                    protocols,
                    reason,
                }
            },
        )
        .boxed()
}

pub fn join_group_response(v: i16) -> BoxedStrategy<JoinGroupResponse> {
    let member = (string(), opt_string(v >= 5), bytes()).prop_map(|(id, instance, metadata)| {
        JoinGroupResponseMember {
            member_id: id,
            group_instance_id: instance,
            metadata,
        }
    });
    (
        when(v >= 2, any::<i32>(), 0),
        any::<i16>(),
        any::<i32>(),
        opt_string(v >= 7),
        nullable_string(v >= 7),
        string(),
        when(v >= 9, any::<bool>(), false),
        string(),
        vec(member, 0..3),
    )
        .prop_map(
            |(throttle, e, generation, ptype, pname, leader, skip, member, members)| {
                JoinGroupResponse {
                    throttle_time_ms: throttle,
                    error_code: e,
                    generation_id: generation,
                    protocol_type: ptype,
                    protocol_name: pname,
                    leader,
                    skip_assignment: skip,
                    member_id: member,
                    members,
                }
            },
        )
        .boxed()
}

pub fn heartbeat_request(v: i16) -> BoxedStrategy<HeartbeatRequest> {
    (string(), any::<i32>(), string(), opt_string(v >= 3))
        .prop_map(|(group, generation, member, instance)| HeartbeatRequest {
            group_id: group,
            generation_id: generation,
            member_id: member,
            group_instance_id: instance,
        })
        .boxed()
}

pub fn heartbeat_response(v: i16) -> BoxedStrategy<HeartbeatResponse> {
    (when(v >= 1, any::<i32>(), 0), any::<i16>())
        .prop_map(|(throttle, e)| HeartbeatResponse {
            throttle_time_ms: throttle,
            error_code: e,
        })
        .boxed()
}

pub fn leave_group_request(v: i16) -> BoxedStrategy<LeaveGroupRequest> {
    let member = (string_when(v >= 3), opt_string(v >= 3), opt_string(v >= 5)).prop_map(
        |(id, instance, reason)| MemberIdentity {
            member_id: id,
            group_instance_id: instance,
            reason,
        },
    );
    (
        string(),
        string_when(v <= 2),
        when(v >= 3, vec(member, 0..3), Vec::new()),
    )
        .prop_map(|(group, member, members)| LeaveGroupRequest {
            group_id: group,
            member_id: member,
            members,
        })
        .boxed()
}

pub fn leave_group_response(v: i16) -> BoxedStrategy<LeaveGroupResponse> {
    let member = (
        string_when(v >= 3),
        when(v >= 3, option::of(string()), Some(String::new())),
        when(v >= 3, any::<i16>(), 0),
    )
        .prop_map(|(id, instance, e)| MemberResponse {
            member_id: id,
            group_instance_id: instance,
            error_code: e,
        });
    (
        when(v >= 1, any::<i32>(), 0),
        any::<i16>(),
        when(v >= 3, vec(member, 0..3), Vec::new()),
    )
        .prop_map(|(throttle, e, members)| LeaveGroupResponse {
            throttle_time_ms: throttle,
            error_code: e,
            members,
        })
        .boxed()
}

pub fn sync_group_request(v: i16) -> BoxedStrategy<SyncGroupRequest> {
    let assignment = (string(), bytes()).prop_map(|(id, assignment)| SyncGroupRequestAssignment {
        member_id: id,
        assignment,
    });
    (
        string(),
        any::<i32>(),
        string(),
        opt_string(v >= 3),
        opt_string(v >= 5),
        opt_string(v >= 5),
        vec(assignment, 0..3),
    )
        .prop_map(
            |(group, generation, member, instance, ptype, pname, assignments)| SyncGroupRequest {
                group_id: group,
                generation_id: generation,
                member_id: member,
                group_instance_id: instance,
                protocol_type: ptype,
                protocol_name: pname,
                assignments,
            },
        )
        .boxed()
}

pub fn sync_group_response(v: i16) -> BoxedStrategy<SyncGroupResponse> {
    (
        when(v >= 1, any::<i32>(), 0),
        any::<i16>(),
        opt_string(v >= 5),
        opt_string(v >= 5),
        bytes(),
    )
        .prop_map(
            |(throttle, e, ptype, pname, assignment)| SyncGroupResponse {
                throttle_time_ms: throttle,
                error_code: e,
                protocol_type: ptype,
                protocol_name: pname,
                assignment,
            },
        )
        .boxed()
}

pub fn describe_groups_request(v: i16) -> BoxedStrategy<DescribeGroupsRequest> {
    (strings(), when(v >= 3, any::<bool>(), false))
        .prop_map(|(groups, ops)| DescribeGroupsRequest {
            groups,
            include_authorized_operations: ops,
        })
        .boxed()
}

pub fn describe_groups_response(v: i16) -> BoxedStrategy<DescribeGroupsResponse> {
    let member = (
        string(),
        opt_string(v >= 4),
        string(),
        string(),
        bytes(),
        bytes(),
    )
        .prop_map(
            |(id, instance, client, host, metadata, assignment)| DescribedGroupMember {
                member_id: id,
                group_instance_id: instance,
                client_id: client,
                client_host: host,
                member_metadata: metadata,
                member_assignment: assignment,
            },
        );
    let group = (
        any::<i16>(),
        opt_string(v >= 6),
        string(),
        string(),
        string(),
        string(),
        vec(member, 0..3),
        when(v >= 3, any::<i32>(), i32::MIN),
    )
        .prop_map(
            |(e, message, id, state, ptype, pdata, members, ops)| DescribedGroup {
                error_code: e,
                error_message: message,
                group_id: id,
                group_state: state,
                protocol_type: ptype,
                protocol_data: pdata,
                members,
                authorized_operations: ops,
            },
        );
    (when(v >= 1, any::<i32>(), 0), vec(group, 0..3))
        .prop_map(|(throttle, groups)| DescribeGroupsResponse {
            throttle_time_ms: throttle,
            groups,
        })
        .boxed()
}

pub fn list_groups_request(v: i16) -> BoxedStrategy<ListGroupsRequest> {
    (
        when(v >= 4, strings(), Vec::new()),
        when(v >= 5, strings(), Vec::new()),
    )
        .prop_map(|(states, types)| ListGroupsRequest {
            states_filter: states,
            types_filter: types,
        })
        .boxed()
}

pub fn list_groups_response(v: i16) -> BoxedStrategy<ListGroupsResponse> {
    let group = (string(), string(), string_when(v >= 4), string_when(v >= 5)).prop_map(
        |(id, ptype, state, gtype)| ListedGroup {
            group_id: id,
            protocol_type: ptype,
            group_state: state,
            group_type: gtype,
        },
    );
    (
        when(v >= 1, any::<i32>(), 0),
        any::<i16>(),
        vec(group, 0..3),
    )
        .prop_map(|(throttle, e, groups)| ListGroupsResponse {
            throttle_time_ms: throttle,
            error_code: e,
            groups,
        })
        .boxed()
}

pub fn delete_groups_request(_v: i16) -> BoxedStrategy<DeleteGroupsRequest> {
    strings()
        .prop_map(|names| DeleteGroupsRequest {
            groups_names: names,
        })
        .boxed()
}

pub fn delete_groups_response(_v: i16) -> BoxedStrategy<DeleteGroupsResponse> {
    let result = (string(), any::<i16>()).prop_map(|(id, e)| DeletableGroupResult {
        group_id: id,
        error_code: e,
    });
    (any::<i32>(), vec(result, 0..3))
        .prop_map(|(throttle, results)| DeleteGroupsResponse {
            throttle_time_ms: throttle,
            results,
        })
        .boxed()
}

pub fn offset_delete_request(_v: i16) -> BoxedStrategy<OffsetDeleteRequest> {
    let partition = any::<i32>().prop_map(|index| OffsetDeleteRequestPartition {
        partition_index: index,
    });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| OffsetDeleteRequestTopic { name, partitions });
    (string(), vec(topic, 0..3))
        .prop_map(|(group, topics)| OffsetDeleteRequest {
            group_id: group,
            topics,
        })
        .boxed()
}

pub fn offset_delete_response(_v: i16) -> BoxedStrategy<OffsetDeleteResponse> {
    let partition =
        (any::<i32>(), any::<i16>()).prop_map(|(index, e)| OffsetDeleteResponsePartition {
            partition_index: index,
            error_code: e,
        });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| OffsetDeleteResponseTopic { name, partitions });
    (any::<i16>(), any::<i32>(), vec(topic, 0..3))
        .prop_map(|(e, throttle, topics)| OffsetDeleteResponse {
            error_code: e,
            throttle_time_ms: throttle,
            topics,
        })
        .boxed()
}
