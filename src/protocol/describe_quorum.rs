//! DescribeQuorum (key 55): the state of the KRaft metadata quorum: leader, epoch, high
//! watermark, and how far each voter and observer has replicated.
//!
//! This module owns the request and response descriptions. All versions are flexible.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for the state of the quorum of each partition.
    pub struct DescribeQuorumRequest {
        api_key: 55,
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The topics (the metadata log's).
            topics: kt::Array<DescribeQuorumRequestTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a DescribeQuorum request.
    pub struct DescribeQuorumRequestTopic {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<DescribeQuorumRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a DescribeQuorum request.
    pub struct DescribeQuorumRequestPartition {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The state of the quorum.
    pub struct DescribeQuorumResponse {
        api_key: 55,
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The top-level error message, or null.
            error_message: kt::NullableString, versions(2+), nullable(2+), flags(ignorable);
            /// The topics.
            topics: kt::Array<DescribeQuorumResponseTopic>, versions(0+);
            /// The nodes of the quorum and their listeners.
            nodes: kt::Array<DescribeQuorumNode>, versions(2+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a DescribeQuorum response.
    pub struct DescribeQuorumResponseTopic {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<DescribeQuorumResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The quorum state of one partition.
    pub struct DescribeQuorumResponsePartition {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(2+), nullable(2+), flags(ignorable);
            /// The id of the current leader, or -1.
            leader_id: kt::NodeId, versions(0+);
            /// The latest known leader epoch.
            leader_epoch: kt::LeaderEpoch, versions(0+);
            /// The high watermark.
            high_watermark: kt::Offset, versions(0+);
            /// The voters.
            current_voters: kt::Array<DescribeQuorumReplicaState>, versions(0+);
            /// The observers.
            observers: kt::Array<DescribeQuorumReplicaState>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// How far one replica has replicated.
    pub struct DescribeQuorumReplicaState {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The replica id.
            replica_id: kt::NodeId, versions(0+);
            /// The replica's directory id.
            replica_directory_id: kt::Uuid, versions(2+);
            /// The last known log end offset of the replica.
            log_end_offset: kt::Offset, versions(0+);
            /// When the leader last received a fetch from the replica, or -1.
            last_fetch_timestamp: kt::Int64 = -1, versions(1+), flags(ignorable);
            /// When the replica was last caught up with the leader, or -1.
            last_caught_up_timestamp: kt::Int64 = -1, versions(1+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One node of the quorum.
    pub struct DescribeQuorumNode {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The node id.
            node_id: kt::NodeId, versions(2+);
            /// The node's listeners.
            listeners: kt::Array<DescribeQuorumListener>, versions(2+);
        }
        tagged {}
    }
}

message! {
    /// One listener of a node.
    pub struct DescribeQuorumListener {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The listener name.
            name: kt::String, versions(2+);
            /// The host name.
            host: kt::String, versions(2+);
            /// The port.
            port: kt::Uint16, versions(2+);
        }
        tagged {}
    }
}
