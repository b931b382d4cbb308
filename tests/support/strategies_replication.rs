//! Proptest strategies for the replication and KRaft messages (OffsetForLeaderEpoch,
//! ElectLeaders, the partition reassignments, Vote, BeginQuorumEpoch, EndQuorumEpoch,
//! DescribeQuorum, AlterPartition, FetchSnapshot, BrokerRegistration, BrokerHeartbeat,
//! DescribeTopicPartitions, AllocateProducerIds), shared by the replication codec tests through `#[path]`.
//!
//! As in `codec_strategies.rs` (whose [`Msg`] trait and helpers this reuses), each strategy
//! takes a version and sets only the fields present in it, using null only where the version
//! allows it, so every value is valid in that version. Collections stay small.
#![allow(dead_code)]

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use samsa::protocol::allocate_producer_ids::*;
use samsa::protocol::alter_partition::*;
use samsa::protocol::alter_partition_reassignments::*;
use samsa::protocol::begin_quorum_epoch::*;
use samsa::protocol::broker_heartbeat::*;
use samsa::protocol::broker_registration::*;
use samsa::protocol::describe_quorum::*;
use samsa::protocol::describe_topic_partitions::*;
use samsa::protocol::elect_leaders::*;
use samsa::protocol::end_quorum_epoch::*;
use samsa::protocol::fetch_snapshot::*;
use samsa::protocol::list_partition_reassignments::*;
use samsa::protocol::offset_for_leader_epoch::*;
use samsa::protocol::types::{LeaderEpoch, NodeId, Offset};
use samsa::protocol::vote::*;
use samsa::protocol::wire::Uuid;

#[path = "codec_strategies.rs"]
mod base;
// Each test uses part of these.
#[allow(unused_imports)]
pub use base::{encoded, string, versioned, Msg};
use base::{nullable_string, when};

macro_rules! msg {
    ($t:ident, $strategy:ident) => {
        impl Msg for $t {
            fn strategy(version: i16) -> BoxedStrategy<Self> {
                $strategy(version)
            }
        }
    };
}

msg!(OffsetForLeaderEpochRequest, offset_for_leader_epoch_request);
msg!(
    OffsetForLeaderEpochResponse,
    offset_for_leader_epoch_response
);
msg!(ElectLeadersRequest, elect_leaders_request);
msg!(ElectLeadersResponse, elect_leaders_response);
msg!(
    AlterPartitionReassignmentsRequest,
    alter_partition_reassignments_request
);
msg!(
    AlterPartitionReassignmentsResponse,
    alter_partition_reassignments_response
);
msg!(
    ListPartitionReassignmentsRequest,
    list_partition_reassignments_request
);
msg!(
    ListPartitionReassignmentsResponse,
    list_partition_reassignments_response
);
msg!(VoteRequest, vote_request);
msg!(VoteResponse, vote_response);
msg!(BeginQuorumEpochRequest, begin_quorum_epoch_request);
msg!(BeginQuorumEpochResponse, begin_quorum_epoch_response);
msg!(EndQuorumEpochRequest, end_quorum_epoch_request);
msg!(EndQuorumEpochResponse, end_quorum_epoch_response);
msg!(DescribeQuorumRequest, describe_quorum_request);
msg!(DescribeQuorumResponse, describe_quorum_response);
msg!(AlterPartitionRequest, alter_partition_request);
msg!(AlterPartitionResponse, alter_partition_response);
msg!(FetchSnapshotRequest, fetch_snapshot_request);
msg!(FetchSnapshotResponse, fetch_snapshot_response);
msg!(BrokerRegistrationRequest, broker_registration_request);
msg!(BrokerRegistrationResponse, broker_registration_response);
msg!(BrokerHeartbeatRequest, broker_heartbeat_request);
msg!(BrokerHeartbeatResponse, broker_heartbeat_response);
msg!(
    DescribeTopicPartitionsRequest,
    describe_topic_partitions_request
);
msg!(
    DescribeTopicPartitionsResponse,
    describe_topic_partitions_response
);
msg!(AllocateProducerIdsRequest, allocate_producer_ids_request);
msg!(AllocateProducerIdsResponse, allocate_producer_ids_response);

fn uuid() -> BoxedStrategy<Uuid> {
    prop_oneof![1 => Just(Uuid::ZERO), 3 => any::<[u8; 16]>().prop_map(Uuid)].boxed()
}

fn ids() -> BoxedStrategy<Vec<i32>> {
    vec(any::<i32>(), 0..4).boxed()
}

fn node_ids() -> BoxedStrategy<Vec<NodeId>> {
    vec(any::<i32>().prop_map(NodeId), 0..4).boxed()
}

fn uuids() -> BoxedStrategy<Vec<Uuid>> {
    vec(uuid(), 0..3).boxed()
}

fn bytes() -> BoxedStrategy<Bytes> {
    vec(any::<u8>(), 0..16).prop_map(Bytes::from).boxed()
}

// OffsetForLeaderEpoch (23).

pub fn offset_for_leader_epoch_request(v: i16) -> BoxedStrategy<OffsetForLeaderEpochRequest> {
    let partition = (any::<i32>(), any::<i32>(), any::<i32>()).prop_map(|(p, cur, e)| {
        OffsetForLeaderPartition {
            partition: p,
            current_leader_epoch: LeaderEpoch(cur),
            leader_epoch: LeaderEpoch(e),
        }
    });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| OffsetForLeaderTopic { topic, partitions });
    (when(v >= 3, any::<i32>(), -2), vec(topic, 0..3))
        .prop_map(|(replica_id, topics)| OffsetForLeaderEpochRequest {
            replica_id: NodeId(replica_id),
            topics,
        })
        .boxed()
}

pub fn offset_for_leader_epoch_response(v: i16) -> BoxedStrategy<OffsetForLeaderEpochResponse> {
    let _ = v;
    let partition = (any::<i16>(), any::<i32>(), any::<i32>(), any::<i64>()).prop_map(
        |(error_code, partition, leader_epoch, end_offset)| EpochEndOffset {
            error_code,
            partition,
            leader_epoch: LeaderEpoch(leader_epoch),
            end_offset: Offset(end_offset),
        },
    );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| OffsetForLeaderTopicResult { topic, partitions });
    (any::<i32>(), vec(topic, 0..3))
        .prop_map(|(throttle_time_ms, topics)| OffsetForLeaderEpochResponse {
            throttle_time_ms,
            topics,
        })
        .boxed()
}

// ElectLeaders (43).

pub fn elect_leaders_request(v: i16) -> BoxedStrategy<ElectLeadersRequest> {
    let topic = (string(), ids())
        .prop_map(|(topic, partitions)| ElectLeadersTopicPartitions { topic, partitions });
    (
        when(v >= 1, any::<i8>(), 0),
        option::of(vec(topic, 0..3)),
        any::<i32>(),
    )
        .prop_map(
            |(election_type, topic_partitions, timeout_ms)| ElectLeadersRequest {
                election_type,
                topic_partitions,
                timeout_ms,
            },
        )
        .boxed()
}

pub fn elect_leaders_response(v: i16) -> BoxedStrategy<ElectLeadersResponse> {
    let partition = (any::<i32>(), any::<i16>(), nullable_string(true)).prop_map(
        |(partition_id, error_code, error_message)| ElectLeadersPartitionResult {
            partition_id,
            error_code,
            error_message,
        },
    );
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic, partition_result)| {
        ReplicaElectionResult {
            topic,
            partition_result,
        }
    });
    (
        any::<i32>(),
        when(v >= 1, any::<i16>(), 0),
        vec(topic, 0..3),
    )
        .prop_map(
            |(throttle_time_ms, error_code, replica_election_results)| ElectLeadersResponse {
                throttle_time_ms,
                error_code,
                replica_election_results,
            },
        )
        .boxed()
}

// AlterPartitionReassignments (45).

pub fn alter_partition_reassignments_request(
    v: i16,
) -> BoxedStrategy<AlterPartitionReassignmentsRequest> {
    let partition =
        (any::<i32>(), option::of(node_ids())).prop_map(|(partition_index, replicas)| {
            ReassignablePartition {
                partition_index,
                replicas,
            }
        });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| ReassignableTopic { name, partitions });
    (
        any::<i32>(),
        when(v >= 1, any::<bool>(), true),
        vec(topic, 0..3),
    )
        .prop_map(
            |(timeout_ms, allow, topics)| AlterPartitionReassignmentsRequest {
                timeout_ms,
                allow_replication_factor_change: allow,
                topics,
            },
        )
        .boxed()
}

pub fn alter_partition_reassignments_response(
    v: i16,
) -> BoxedStrategy<AlterPartitionReassignmentsResponse> {
    let partition = (any::<i32>(), any::<i16>(), nullable_string(true)).prop_map(
        |(partition_index, error_code, error_message)| ReassignablePartitionResponse {
            partition_index,
            error_code,
            error_message,
        },
    );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| ReassignableTopicResponse { name, partitions });
    (
        any::<i32>(),
        when(v >= 1, any::<bool>(), true),
        any::<i16>(),
        nullable_string(true),
        vec(topic, 0..3),
    )
        .prop_map(
            |(throttle_time_ms, allow, error_code, error_message, responses)| {
                AlterPartitionReassignmentsResponse {
                    throttle_time_ms,
                    allow_replication_factor_change: allow,
                    error_code,
                    error_message,
                    responses,
                }
            },
        )
        .boxed()
}

// ListPartitionReassignments (46).

pub fn list_partition_reassignments_request(
    _v: i16,
) -> BoxedStrategy<ListPartitionReassignmentsRequest> {
    let topic =
        (string(), ids()).prop_map(
            |(name, partition_indexes)| ListPartitionReassignmentsTopics {
                name,
                partition_indexes,
            },
        );
    (any::<i32>(), option::of(vec(topic, 0..3)))
        .prop_map(|(timeout_ms, topics)| ListPartitionReassignmentsRequest { timeout_ms, topics })
        .boxed()
}

pub fn list_partition_reassignments_response(
    _v: i16,
) -> BoxedStrategy<ListPartitionReassignmentsResponse> {
    let partition = (any::<i32>(), ids(), ids(), ids()).prop_map(
        |(partition_index, replicas, adding_replicas, removing_replicas)| {
            OngoingPartitionReassignment {
                partition_index,
                replicas: replicas.into_iter().map(NodeId).collect(),
                adding_replicas: adding_replicas.into_iter().map(NodeId).collect(),
                removing_replicas: removing_replicas.into_iter().map(NodeId).collect(),
            }
        },
    );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| OngoingTopicReassignment { name, partitions });
    (
        any::<i32>(),
        any::<i16>(),
        nullable_string(true),
        vec(topic, 0..3),
    )
        .prop_map(|(throttle_time_ms, error_code, error_message, topics)| {
            ListPartitionReassignmentsResponse {
                throttle_time_ms,
                error_code,
                error_message,
                topics,
            }
        })
        .boxed()
}

// Vote (52).

pub fn vote_request(v: i16) -> BoxedStrategy<VoteRequest> {
    let partition = (
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        when(v >= 1, uuid(), Uuid::ZERO),
        when(v >= 1, uuid(), Uuid::ZERO),
        any::<i32>(),
        any::<i64>(),
        when(v >= 2, any::<bool>(), false),
    )
        .prop_map(|p| VoteRequestPartition {
            partition_index: p.0,
            replica_epoch: LeaderEpoch(p.1),
            replica_id: NodeId(p.2),
            replica_directory_id: p.3,
            voter_directory_id: p.4,
            last_offset_epoch: LeaderEpoch(p.5),
            last_offset: Offset(p.6),
            pre_vote: p.7,
        });
    let topic =
        (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| VoteRequestTopic {
            topic_name,
            partitions,
        });
    (
        nullable_string(true),
        when(v >= 1, any::<i32>(), -1),
        vec(topic, 0..3),
    )
        .prop_map(|(cluster_id, voter_id, topics)| VoteRequest {
            cluster_id,
            voter_id: NodeId(voter_id),
            topics,
        })
        .boxed()
}

pub fn vote_response(v: i16) -> BoxedStrategy<VoteResponse> {
    let partition = (
        any::<i32>(),
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        any::<bool>(),
    )
        .prop_map(|p| VoteResponsePartition {
            partition_index: p.0,
            error_code: p.1,
            leader_id: NodeId(p.2),
            leader_epoch: LeaderEpoch(p.3),
            vote_granted: p.4,
        });
    let topic =
        (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| VoteResponseTopic {
            topic_name,
            partitions,
        });
    let endpoint =
        (any::<i32>(), string(), any::<u16>()).prop_map(|(node_id, host, port)| VoteNodeEndpoint {
            node_id: NodeId(node_id),
            host,
            port,
        });
    (
        any::<i16>(),
        vec(topic, 0..3),
        when(v >= 1, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(|(error_code, topics, node_endpoints)| VoteResponse {
            error_code,
            topics,
            node_endpoints,
        })
        .boxed()
}

// BeginQuorumEpoch (53).

pub fn begin_quorum_epoch_request(v: i16) -> BoxedStrategy<BeginQuorumEpochRequest> {
    let partition = (
        any::<i32>(),
        when(v >= 1, uuid(), Uuid::ZERO),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(|p| BeginQuorumEpochRequestPartition {
            partition_index: p.0,
            voter_directory_id: p.1,
            leader_id: NodeId(p.2),
            leader_epoch: LeaderEpoch(p.3),
        });
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| {
        BeginQuorumEpochRequestTopic {
            topic_name,
            partitions,
        }
    });
    let endpoint = (string(), string(), any::<u16>())
        .prop_map(|(name, host, port)| BeginQuorumEpochLeaderEndpoint { name, host, port });
    (
        nullable_string(true),
        when(v >= 1, any::<i32>(), -1),
        vec(topic, 0..3),
        when(v >= 1, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(cluster_id, voter_id, topics, leader_endpoints)| BeginQuorumEpochRequest {
                cluster_id,
                voter_id: NodeId(voter_id),
                topics,
                leader_endpoints,
            },
        )
        .boxed()
}

pub fn begin_quorum_epoch_response(v: i16) -> BoxedStrategy<BeginQuorumEpochResponse> {
    let partition = (any::<i32>(), any::<i16>(), any::<i32>(), any::<i32>()).prop_map(|p| {
        BeginQuorumEpochResponsePartition {
            partition_index: p.0,
            error_code: p.1,
            leader_id: NodeId(p.2),
            leader_epoch: LeaderEpoch(p.3),
        }
    });
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| {
        BeginQuorumEpochResponseTopic {
            topic_name,
            partitions,
        }
    });
    let endpoint = (any::<i32>(), string(), any::<u16>()).prop_map(|(node_id, host, port)| {
        BeginQuorumEpochNodeEndpoint {
            node_id: NodeId(node_id),
            host,
            port,
        }
    });
    (
        any::<i16>(),
        vec(topic, 0..3),
        when(v >= 1, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(error_code, topics, node_endpoints)| BeginQuorumEpochResponse {
                error_code,
                topics,
                node_endpoints,
            },
        )
        .boxed()
}

// EndQuorumEpoch (54).

pub fn end_quorum_epoch_request(v: i16) -> BoxedStrategy<EndQuorumEpochRequest> {
    let candidate = (any::<i32>(), uuid()).prop_map(|(candidate_id, candidate_directory_id)| {
        EndQuorumEpochReplicaInfo {
            candidate_id: NodeId(candidate_id),
            candidate_directory_id,
        }
    });
    let partition = (
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        when(v == 0, ids(), Vec::new()),
        when(v >= 1, vec(candidate, 0..3), Vec::new()),
    )
        .prop_map(|p| EndQuorumEpochRequestPartition {
            partition_index: p.0,
            leader_id: NodeId(p.1),
            leader_epoch: LeaderEpoch(p.2),
            preferred_successors: p.3.into_iter().map(NodeId).collect(),
            preferred_candidates: p.4,
        });
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| {
        EndQuorumEpochRequestTopic {
            topic_name,
            partitions,
        }
    });
    let endpoint = (string(), string(), any::<u16>())
        .prop_map(|(name, host, port)| EndQuorumEpochLeaderEndpoint { name, host, port });
    (
        nullable_string(true),
        vec(topic, 0..3),
        when(v >= 1, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(cluster_id, topics, leader_endpoints)| EndQuorumEpochRequest {
                cluster_id,
                topics,
                leader_endpoints,
            },
        )
        .boxed()
}

pub fn end_quorum_epoch_response(v: i16) -> BoxedStrategy<EndQuorumEpochResponse> {
    let partition = (any::<i32>(), any::<i16>(), any::<i32>(), any::<i32>()).prop_map(|p| {
        EndQuorumEpochResponsePartition {
            partition_index: p.0,
            error_code: p.1,
            leader_id: NodeId(p.2),
            leader_epoch: LeaderEpoch(p.3),
        }
    });
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| {
        EndQuorumEpochResponseTopic {
            topic_name,
            partitions,
        }
    });
    let endpoint = (any::<i32>(), string(), any::<u16>()).prop_map(|(node_id, host, port)| {
        EndQuorumEpochNodeEndpoint {
            node_id: NodeId(node_id),
            host,
            port,
        }
    });
    (
        any::<i16>(),
        vec(topic, 0..3),
        when(v >= 1, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(error_code, topics, node_endpoints)| EndQuorumEpochResponse {
                error_code,
                topics,
                node_endpoints,
            },
        )
        .boxed()
}

// DescribeQuorum (55).

pub fn describe_quorum_request(_v: i16) -> BoxedStrategy<DescribeQuorumRequest> {
    let partition =
        any::<i32>().prop_map(|partition_index| DescribeQuorumRequestPartition { partition_index });
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| {
        DescribeQuorumRequestTopic {
            topic_name,
            partitions,
        }
    });
    vec(topic, 0..3)
        .prop_map(|topics| DescribeQuorumRequest { topics })
        .boxed()
}

pub fn describe_quorum_response(v: i16) -> BoxedStrategy<DescribeQuorumResponse> {
    let replica = || {
        (
            any::<i32>(),
            when(v >= 2, uuid(), Uuid::ZERO),
            any::<i64>(),
            when(v >= 1, any::<i64>(), -1),
            when(v >= 1, any::<i64>(), -1),
        )
            .prop_map(|p| DescribeQuorumReplicaState {
                replica_id: NodeId(p.0),
                replica_directory_id: p.1,
                log_end_offset: Offset(p.2),
                last_fetch_timestamp: p.3,
                last_caught_up_timestamp: p.4,
            })
    };
    let message = move || when(v >= 2, nullable_string(true), Some(String::new()));
    let partition = (
        any::<i32>(),
        any::<i16>(),
        message(),
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        vec(replica(), 0..3),
        vec(replica(), 0..3),
    )
        .prop_map(|p| DescribeQuorumResponsePartition {
            partition_index: p.0,
            error_code: p.1,
            error_message: p.2,
            leader_id: NodeId(p.3),
            leader_epoch: LeaderEpoch(p.4),
            high_watermark: Offset(p.5),
            current_voters: p.6,
            observers: p.7,
        });
    let topic = (string(), vec(partition, 0..3)).prop_map(|(topic_name, partitions)| {
        DescribeQuorumResponseTopic {
            topic_name,
            partitions,
        }
    });
    let listener = (string(), string(), any::<u16>())
        .prop_map(|(name, host, port)| DescribeQuorumListener { name, host, port });
    let node =
        (any::<i32>(), vec(listener, 0..3)).prop_map(|(node_id, listeners)| DescribeQuorumNode {
            node_id: NodeId(node_id),
            listeners,
        });
    (
        any::<i16>(),
        message(),
        vec(topic, 0..3),
        when(v >= 2, vec(node, 0..3), Vec::new()),
    )
        .prop_map(
            |(error_code, error_message, topics, nodes)| DescribeQuorumResponse {
                error_code,
                error_message,
                topics,
                nodes,
            },
        )
        .boxed()
}

// AlterPartition (56).

pub fn alter_partition_request(v: i16) -> BoxedStrategy<AlterPartitionRequest> {
    let broker = (any::<i32>(), any::<i64>()).prop_map(|(broker_id, broker_epoch)| {
        AlterPartitionBrokerState {
            broker_id: NodeId(broker_id),
            broker_epoch,
        }
    });
    let partition = (
        any::<i32>(),
        any::<i32>(),
        when(v <= 2, ids(), Vec::new()),
        when(v >= 3, vec(broker, 0..3), Vec::new()),
        any::<i8>(),
        any::<i32>(),
    )
        .prop_map(|p| AlterPartitionRequestPartition {
            partition_index: p.0,
            leader_epoch: LeaderEpoch(p.1),
            new_isr: p.2.into_iter().map(NodeId).collect(),
            new_isr_with_epochs: p.3,
            leader_recovery_state: p.4,
            partition_epoch: p.5,
        });
    let topic = (uuid(), vec(partition, 0..3)).prop_map(|(topic_id, partitions)| {
        AlterPartitionRequestTopic {
            topic_id,
            partitions,
        }
    });
    (any::<i32>(), any::<i64>(), vec(topic, 0..3))
        .prop_map(|(broker_id, broker_epoch, topics)| AlterPartitionRequest {
            broker_id: NodeId(broker_id),
            broker_epoch,
            topics,
        })
        .boxed()
}

pub fn alter_partition_response(_v: i16) -> BoxedStrategy<AlterPartitionResponse> {
    let partition = (
        any::<i32>(),
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        ids(),
        any::<i8>(),
        any::<i32>(),
    )
        .prop_map(|p| AlterPartitionResponsePartition {
            partition_index: p.0,
            error_code: p.1,
            leader_id: NodeId(p.2),
            leader_epoch: LeaderEpoch(p.3),
            isr: p.4.into_iter().map(NodeId).collect(),
            leader_recovery_state: p.5,
            partition_epoch: p.6,
        });
    let topic = (uuid(), vec(partition, 0..3)).prop_map(|(topic_id, partitions)| {
        AlterPartitionResponseTopic {
            topic_id,
            partitions,
        }
    });
    (any::<i32>(), any::<i16>(), vec(topic, 0..3))
        .prop_map(
            |(throttle_time_ms, error_code, topics)| AlterPartitionResponse {
                throttle_time_ms,
                error_code,
                topics,
            },
        )
        .boxed()
}

// FetchSnapshot (59).

fn snapshot_id() -> BoxedStrategy<SnapshotId> {
    (any::<i64>(), any::<i32>())
        .prop_map(|(end_offset, epoch)| SnapshotId {
            end_offset: Offset(end_offset),
            epoch: LeaderEpoch(epoch),
        })
        .boxed()
}

pub fn fetch_snapshot_request(v: i16) -> BoxedStrategy<FetchSnapshotRequest> {
    let partition = (
        any::<i32>(),
        any::<i32>(),
        snapshot_id(),
        any::<i64>(),
        when(v >= 1, uuid(), Uuid::ZERO),
    )
        .prop_map(|p| FetchSnapshotRequestPartition {
            partition: p.0,
            current_leader_epoch: LeaderEpoch(p.1),
            snapshot_id: p.2,
            position: p.3,
            replica_directory_id: p.4,
        });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| FetchSnapshotRequestTopic { name, partitions });
    (
        nullable_string(true),
        any::<i32>(),
        any::<i32>(),
        vec(topic, 0..3),
    )
        .prop_map(
            |(cluster_id, replica_id, max_bytes, topics)| FetchSnapshotRequest {
                cluster_id,
                replica_id: NodeId(replica_id),
                max_bytes,
                topics,
            },
        )
        .boxed()
}

pub fn fetch_snapshot_response(v: i16) -> BoxedStrategy<FetchSnapshotResponse> {
    let leader = prop_oneof![
        1 => Just(FetchSnapshotLeaderIdAndEpoch::default()),
        2 => (any::<i32>(), any::<i32>()).prop_map(|(leader_id, leader_epoch)| {
            FetchSnapshotLeaderIdAndEpoch {
                leader_id: NodeId(leader_id),
                leader_epoch: LeaderEpoch(leader_epoch),
            }
        }),
    ];
    let partition = (
        any::<i32>(),
        any::<i16>(),
        snapshot_id(),
        leader,
        any::<i64>(),
        any::<i64>(),
        bytes(),
    )
        .prop_map(|p| FetchSnapshotResponsePartition {
            index: p.0,
            error_code: p.1,
            snapshot_id: p.2,
            current_leader: p.3,
            size: p.4,
            position: p.5,
            unaligned_records: Some(p.6),
        });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| FetchSnapshotResponseTopic { name, partitions });
    let endpoint = (any::<i32>(), string(), any::<u16>()).prop_map(|(node_id, host, port)| {
        FetchSnapshotNodeEndpoint {
            node_id: NodeId(node_id),
            host,
            port,
        }
    });
    (
        any::<i32>(),
        any::<i16>(),
        vec(topic, 0..3),
        when(v >= 1, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(throttle_time_ms, error_code, topics, node_endpoints)| FetchSnapshotResponse {
                throttle_time_ms,
                error_code,
                topics,
                node_endpoints,
            },
        )
        .boxed()
}

// BrokerRegistration (62).

pub fn broker_registration_request(v: i16) -> BoxedStrategy<BrokerRegistrationRequest> {
    let listener = (string(), string(), any::<u16>(), any::<i16>()).prop_map(
        |(name, host, port, security_protocol)| BrokerRegistrationListener {
            name,
            host,
            port,
            security_protocol,
        },
    );
    let feature = (string(), any::<i16>(), any::<i16>()).prop_map(|(name, lo, hi)| {
        BrokerRegistrationFeature {
            name,
            min_supported_version: lo,
            max_supported_version: hi,
        }
    });
    (
        any::<i32>(),
        string(),
        uuid(),
        vec(listener, 0..3),
        vec(feature, 0..3),
        nullable_string(true),
        when(v >= 1, any::<bool>(), false),
        when(v >= 2, uuids(), Vec::new()),
        when(v >= 3, any::<i64>(), -1),
    )
        .prop_map(|p| BrokerRegistrationRequest {
            broker_id: NodeId(p.0),
            cluster_id: p.1,
            incarnation_id: p.2,
            listeners: p.3,
            features: p.4,
            rack: p.5,
            is_migrating_zk_broker: p.6,
            log_dirs: p.7,
            previous_broker_epoch: p.8,
        })
        .boxed()
}

pub fn broker_registration_response(_v: i16) -> BoxedStrategy<BrokerRegistrationResponse> {
    (any::<i32>(), any::<i16>(), any::<i64>())
        .prop_map(
            |(throttle_time_ms, error_code, broker_epoch)| BrokerRegistrationResponse {
                throttle_time_ms,
                error_code,
                broker_epoch,
            },
        )
        .boxed()
}

// BrokerHeartbeat (63).

pub fn broker_heartbeat_request(v: i16) -> BoxedStrategy<BrokerHeartbeatRequest> {
    (
        any::<i32>(),
        any::<i64>(),
        any::<i64>(),
        any::<bool>(),
        any::<bool>(),
        when(v >= 1, uuids(), Vec::new()),
    )
        .prop_map(|p| BrokerHeartbeatRequest {
            broker_id: NodeId(p.0),
            broker_epoch: p.1,
            current_metadata_offset: Offset(p.2),
            want_fence: p.3,
            want_shut_down: p.4,
            offline_log_dirs: p.5,
        })
        .boxed()
}

pub fn broker_heartbeat_response(_v: i16) -> BoxedStrategy<BrokerHeartbeatResponse> {
    (
        any::<i32>(),
        any::<i16>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|p| BrokerHeartbeatResponse {
            throttle_time_ms: p.0,
            error_code: p.1,
            is_caught_up: p.2,
            is_fenced: p.3,
            should_shut_down: p.4,
        })
        .boxed()
}

// DescribeTopicPartitions (75).

fn cursor() -> BoxedStrategy<Option<DescribeTopicPartitionsCursor>> {
    option::of(
        (string(), any::<i32>()).prop_map(|(topic_name, partition_index)| {
            DescribeTopicPartitionsCursor {
                topic_name,
                partition_index,
            }
        }),
    )
    .boxed()
}

pub fn describe_topic_partitions_request(_v: i16) -> BoxedStrategy<DescribeTopicPartitionsRequest> {
    let topic = string().prop_map(|name| DescribeTopicPartitionsTopicRequest { name });
    (vec(topic, 0..3), any::<i32>(), cursor())
        .prop_map(
            |(topics, response_partition_limit, cursor)| DescribeTopicPartitionsRequest {
                topics,
                response_partition_limit,
                cursor,
            },
        )
        .boxed()
}

pub fn describe_topic_partitions_response(
    _v: i16,
) -> BoxedStrategy<DescribeTopicPartitionsResponse> {
    let partition = (
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        ids(),
        ids(),
        option::of(node_ids()),
        option::of(node_ids()),
        ids(),
    )
        .prop_map(|p| DescribeTopicPartitionsResponsePartition {
            error_code: p.0,
            partition_index: p.1,
            leader_id: NodeId(p.2),
            leader_epoch: LeaderEpoch(p.3),
            replica_nodes: p.4.into_iter().map(NodeId).collect(),
            isr_nodes: p.5.into_iter().map(NodeId).collect(),
            eligible_leader_replicas: p.6,
            last_known_elr: p.7,
            offline_replicas: p.8.into_iter().map(NodeId).collect(),
        });
    let topic = (
        any::<i16>(),
        nullable_string(true),
        uuid(),
        any::<bool>(),
        vec(partition, 0..3),
        any::<i32>(),
    )
        .prop_map(|p| DescribeTopicPartitionsResponseTopic {
            error_code: p.0,
            name: p.1,
            topic_id: p.2,
            is_internal: p.3,
            partitions: p.4,
            topic_authorized_operations: p.5,
        });
    (any::<i32>(), vec(topic, 0..3), cursor())
        .prop_map(
            |(throttle_time_ms, topics, next_cursor)| DescribeTopicPartitionsResponse {
                throttle_time_ms,
                topics,
                next_cursor,
            },
        )
        .boxed()
}

// AllocateProducerIds (67).

pub fn allocate_producer_ids_request(_v: i16) -> BoxedStrategy<AllocateProducerIdsRequest> {
    (any::<i32>(), any::<i64>())
        .prop_map(|(broker_id, broker_epoch)| AllocateProducerIdsRequest {
            broker_id: NodeId(broker_id),
            broker_epoch,
        })
        .boxed()
}

pub fn allocate_producer_ids_response(_v: i16) -> BoxedStrategy<AllocateProducerIdsResponse> {
    (any::<i32>(), any::<i16>(), any::<i64>(), any::<i32>())
        .prop_map(|p| AllocateProducerIdsResponse {
            throttle_time_ms: p.0,
            error_code: p.1,
            producer_id_start: p.2,
            producer_id_len: p.3,
        })
        .boxed()
}
