//! BeginQuorumEpoch (key 53): a newly elected KRaft leader announces its epoch to the voters.
//!
//! This module owns the request and response descriptions. Flexible from v1, which also adds
//! directory ids and endpoints (the response's in a tagged field).

use crate::message;
use crate::protocol::types::NodeId;
use crate::protocol::wire::kt;

message! {
    /// Announces a new leader and epoch.
    pub struct BeginQuorumEpochRequest {
        api_key: 53,
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The cluster id, or null.
            cluster_id: kt::NullableString = None, versions(0+), nullable(0+);
            /// The replica id of the voter receiving the request.
            voter_id: kt::NodeId = NodeId(-1), versions(1+), flags(ignorable);
            /// The topics (the metadata log's).
            topics: kt::Array<BeginQuorumEpochRequestTopic>, versions(0+);
            /// The endpoints of the leader.
            leader_endpoints: kt::Array<BeginQuorumEpochLeaderEndpoint>, versions(1+),
                flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One topic of a BeginQuorumEpoch request.
    pub struct BeginQuorumEpochRequestTopic {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<BeginQuorumEpochRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a BeginQuorumEpoch request.
    pub struct BeginQuorumEpochRequestPartition {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The directory id of the voter receiving the request.
            voter_directory_id: kt::Uuid, versions(1+), flags(ignorable);
            /// The id of the newly elected leader.
            leader_id: kt::NodeId, versions(0+);
            /// The epoch of the newly elected leader.
            leader_epoch: kt::LeaderEpoch, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One listener of the leader.
    pub struct BeginQuorumEpochLeaderEndpoint {
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
    /// A voter's acknowledgement of the new epoch.
    pub struct BeginQuorumEpochResponse {
        api_key: 53,
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The topics.
            topics: kt::Array<BeginQuorumEpochResponseTopic>, versions(0+);
        }
        tagged {
            /// The endpoints of the nodes the response mentions.
            0 => node_endpoints: kt::Array<BeginQuorumEpochNodeEndpoint>, versions(1+);
        }
    }
}

message! {
    /// One topic of a BeginQuorumEpoch response.
    pub struct BeginQuorumEpochResponseTopic {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<BeginQuorumEpochResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a BeginQuorumEpoch response.
    pub struct BeginQuorumEpochResponsePartition {
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
    pub struct BeginQuorumEpochNodeEndpoint {
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
