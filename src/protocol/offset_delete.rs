//! OffsetDelete (key 47): delete a group's committed offsets for some partitions (KIP-496).
//!
//! This module owns the request and response descriptions: a single version, 0, never
//! flexible. Semantics the coordinator must enforce: offsets of topics the group is still
//! subscribed to are not deleted (GROUP_SUBSCRIBED_TO_TOPIC for those partitions).

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks to delete a group's offsets for some partitions.
    pub struct OffsetDeleteRequest {
        api_key: 47,
        versions: (0),
        flexible: (none),
        fields {
            /// The group id.
            group_id: kt::String, versions(0+);
            /// The topics to delete offsets for.
            topics: kt::Array<OffsetDeleteRequestTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic to delete offsets for.
    pub struct OffsetDeleteRequestTopic {
        versions: (0),
        flexible: (none),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The partitions to delete offsets for.
            partitions: kt::Array<OffsetDeleteRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition to delete the offset of.
    pub struct OffsetDeleteRequestPartition {
        versions: (0),
        flexible: (none),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of an offset deletion, overall and per partition.
    pub struct OffsetDeleteResponse {
        api_key: 47,
        versions: (0),
        flexible: (none),
        fields {
            /// The top-level error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+), flags(ignorable);
            /// The results for each topic.
            topics: kt::Array<OffsetDeleteResponseTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic's deletion results.
    pub struct OffsetDeleteResponseTopic {
        versions: (0),
        flexible: (none),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The results for each partition.
            partitions: kt::Array<OffsetDeleteResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition's deletion result.
    pub struct OffsetDeleteResponsePartition {
        versions: (0),
        flexible: (none),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
        }
        tagged {}
    }
}
