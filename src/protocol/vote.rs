//! Vote (key 52): a KRaft candidate (or, v2+, a pre-vote prospective candidate) asks the
//! voters of the metadata quorum for their vote.
//!
//! This module owns the request and response descriptions. All versions are flexible. The
//! leader's endpoints travel in a tagged field of the response (v1+).

use crate::message;
use crate::protocol::types::NodeId;
use crate::protocol::wire::kt;

message! {
    /// Asks a voter for its vote.
    pub struct VoteRequest {
        api_key: 52,
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The cluster id, or null.
            cluster_id: kt::NullableString = None, versions(0+), nullable(0+);
            /// The replica id of the voter receiving the request.
            voter_id: kt::NodeId = NodeId(-1), versions(1+), flags(ignorable);
            /// The topics (the metadata log's).
            topics: kt::Array<VoteRequestTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a vote request.
    pub struct VoteRequestTopic {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<VoteRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a vote request: the sender's epoch and log end.
    pub struct VoteRequestPartition {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The epoch of the replica sending the request.
            replica_epoch: kt::LeaderEpoch, versions(0+);
            /// The id of the replica sending the request.
            replica_id: kt::NodeId, versions(0+);
            /// The directory id of the replica sending the request.
            replica_directory_id: kt::Uuid, versions(1+), flags(ignorable);
            /// The directory id of the voter receiving the request.
            voter_directory_id: kt::Uuid, versions(1+), flags(ignorable);
            /// The epoch of the last record of the sender's metadata log.
            last_offset_epoch: kt::LeaderEpoch, versions(0+);
            /// The end offset of the sender's metadata log.
            last_offset: kt::Offset, versions(0+);
            /// Whether this is a pre-vote, which changes no persisted state.
            pre_vote: kt::Bool, versions(2+);
        }
        tagged {}
    }
}

message! {
    /// The voter's answer.
    pub struct VoteResponse {
        api_key: 52,
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The topics.
            topics: kt::Array<VoteResponseTopic>, versions(0+);
        }
        tagged {
            /// The endpoints of the nodes the response mentions.
            0 => node_endpoints: kt::Array<VoteNodeEndpoint>, versions(1+);
        }
    }
}

message! {
    /// One topic of a vote response.
    pub struct VoteResponseTopic {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<VoteResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a vote response.
    pub struct VoteResponsePartition {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The id of the current leader, or -1.
            leader_id: kt::NodeId, versions(0+);
            /// The latest known leader epoch.
            leader_epoch: kt::LeaderEpoch, versions(0+);
            /// Whether the vote was granted.
            vote_granted: kt::Bool, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The endpoint of one node.
    pub struct VoteNodeEndpoint {
        versions: (0-2),
        flexible: (0+),
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
