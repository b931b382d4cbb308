//! ListOffsets (key 2): the offset for a timestamp, or the earliest/latest offsets, per
//! partition. This module owns the request and response descriptions; the special timestamps
//! (-1 latest, -2 earliest, -3 max timestamp, ...) are the broker's business.

use crate::message;
use crate::protocol::types::{LeaderEpoch, Offset};
use crate::protocol::wire::kt;

message! {
    /// Asks for offsets by timestamp.
    pub struct ListOffsetsRequest {
        api_key: 2,
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The requesting broker's id, or -1 for a consumer.
            replica_id: kt::NodeId, versions(0+);
            /// 0 read uncommitted, 1 read committed.
            isolation_level: kt::Int8, versions(2+);
            /// Each topic.
            topics: kt::Array<ListOffsetsTopic>, versions(0+);
            /// How long to wait for tiered-storage lookups, in milliseconds.
            timeout_ms: kt::Int32, versions(10+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One topic of a list-offsets request.
    pub struct ListOffsetsTopic {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// Each partition.
            partitions: kt::Array<ListOffsetsPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a list-offsets request.
    pub struct ListOffsetsPartition {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The requester's current leader epoch.
            current_leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(4+), flags(ignorable);
            /// The timestamp to look up, or a special negative value.
            timestamp: kt::Int64, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The offsets found.
    pub struct ListOffsetsResponse {
        api_key: 2,
        versions: (1-10),
        flexible: (6+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(2+), flags(ignorable);
            /// Each topic.
            topics: kt::Array<ListOffsetsTopicResponse>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a list-offsets response.
    pub struct ListOffsetsTopicResponse {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// Each partition.
            partitions: kt::Array<ListOffsetsPartitionResponse>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a list-offsets response.
    pub struct ListOffsetsPartitionResponse {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The timestamp of the returned offset.
            timestamp: kt::Int64 = -1, versions(1+);
            /// The returned offset.
            offset: kt::Offset = Offset(-1), versions(1+);
            /// The leader epoch of the returned offset.
            leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(4+);
        }
        tagged {}
    }
}
