//! AlterPartitionReassignments (key 45): starts or cancels moving partitions' replicas.
//!
//! This module owns the request and response descriptions. Semantics the codec does not
//! enforce but the controller must: a null replica list cancels the partition's pending
//! reassignment, and (v1+) a reassignment that changes the replication factor is refused
//! unless allowed.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks to reassign (or stop reassigning) partitions.
    pub struct AlterPartitionReassignmentsRequest {
        api_key: 45,
        versions: (0-1),
        flexible: (0+),
        fields {
            /// How long to wait for the request to complete, in milliseconds.
            timeout_ms: kt::Int32 = 60000, versions(0+);
            /// Whether the reassignments may change a partition's replication factor.
            allow_replication_factor_change: kt::Bool = true, versions(1+);
            /// The topics to reassign.
            topics: kt::Array<ReassignableTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic to reassign.
    pub struct ReassignableTopic {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The partitions to reassign.
            partitions: kt::Array<ReassignablePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition to reassign.
    pub struct ReassignablePartition {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The new replicas, or null to cancel a pending reassignment.
            replicas: kt::NullableArray<kt::NodeId> = None, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of each reassignment.
    pub struct AlterPartitionReassignmentsResponse {
        api_key: 45,
        versions: (0-1),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// Whether replication factor changes were allowed.
            allow_replication_factor_change: kt::Bool = true, versions(1+), flags(ignorable);
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The top-level error message, or null.
            error_message: kt::NullableString, versions(0+), nullable(0+);
            /// The result of each topic.
            responses: kt::Array<ReassignableTopicResponse>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The reassignment results of one topic.
    pub struct ReassignableTopicResponse {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The result of each partition.
            partitions: kt::Array<ReassignablePartitionResponse>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The reassignment result of one partition.
    pub struct ReassignablePartitionResponse {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(0+), nullable(0+);
        }
        tagged {}
    }
}
