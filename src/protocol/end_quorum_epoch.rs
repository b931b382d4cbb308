//! EndQuorumEpoch (key 54): a KRaft leader resigning tells the voters, naming its preferred
//! successors.
//!
//! This module owns the request and response descriptions. Flexible from v1, which replaces
//! the successor ids with candidates carrying directory ids, and adds endpoints (the
//! response's in a tagged field).

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Announces that the leader gives up its epoch.
    pub struct EndQuorumEpochRequest {
        api_key: 54,
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The cluster id, or null.
            cluster_id: kt::NullableString = None, versions(0+), nullable(0+);
            /// The topics (the metadata log's).
            topics: kt::Array<EndQuorumEpochRequestTopic>, versions(0+);
            /// The endpoints of the leader.
            leader_endpoints: kt::Array<EndQuorumEpochLeaderEndpoint>, versions(1+),
                flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One topic of an EndQuorumEpoch request.
    pub struct EndQuorumEpochRequestTopic {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<EndQuorumEpochRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of an EndQuorumEpoch request.
    pub struct EndQuorumEpochRequestPartition {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The id of the resigning leader.
            leader_id: kt::NodeId, versions(0+);
            /// The epoch being ended.
            leader_epoch: kt::LeaderEpoch, versions(0+);
            /// The preferred successors, best first (v0).
            preferred_successors: kt::Array<kt::NodeId>, versions(0), flags(ignorable);
            /// The preferred candidates, best first (v1+).
            preferred_candidates: kt::Array<EndQuorumEpochReplicaInfo>, versions(1+),
                flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One preferred candidate.
    pub struct EndQuorumEpochReplicaInfo {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The candidate's replica id.
            candidate_id: kt::NodeId, versions(1+);
            /// The candidate's directory id.
            candidate_directory_id: kt::Uuid, versions(1+);
        }
        tagged {}
    }
}

message! {
    /// One listener of the leader.
    pub struct EndQuorumEpochLeaderEndpoint {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The listener name.
            name: kt::String, versions(1+);
            /// The host name.
            host: kt::String, versions(1+);
            /// The port.
            port: kt::Uint16, versions(1+);
        }
        tagged {}
    }
}

message! {
    /// A voter's acknowledgement.
    pub struct EndQuorumEpochResponse {
        api_key: 54,
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The topics.
            topics: kt::Array<EndQuorumEpochResponseTopic>, versions(0+);
        }
        tagged {
            /// The endpoints of the nodes the response mentions.
            0 => node_endpoints: kt::Array<EndQuorumEpochNodeEndpoint>, versions(1+);
        }
    }
}

message! {
    /// One topic of an EndQuorumEpoch response.
    pub struct EndQuorumEpochResponseTopic {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<EndQuorumEpochResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of an EndQuorumEpoch response.
    pub struct EndQuorumEpochResponsePartition {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The id of the current leader, or -1.
            leader_id: kt::NodeId, versions(0+);
            /// The latest known leader epoch.
            leader_epoch: kt::LeaderEpoch, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The endpoint of one node.
    pub struct EndQuorumEpochNodeEndpoint {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The node id.
            node_id: kt::NodeId, versions(1+);
            /// The node's host name.
            host: kt::String, versions(1+);
            /// The node's port.
            port: kt::Uint16, versions(1+);
        }
        tagged {}
    }
}
