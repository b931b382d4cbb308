//! ListPartitionReassignments (key 46): the partition reassignments in progress.
//!
//! This module owns the request and response descriptions. A null topic list asks for every
//! ongoing reassignment.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for the ongoing reassignments of some or all partitions.
    pub struct ListPartitionReassignmentsRequest {
        api_key: 46,
        versions: (0),
        flexible: (0+),
        fields {
            /// How long to wait for the request to complete, in milliseconds.
            timeout_ms: kt::Int32 = 60000, versions(0+);
            /// The topics to list reassignments of, or null for all.
            topics: kt::NullableArray<ListPartitionReassignmentsTopics> = None, versions(0+),
                nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The partitions of one topic to list reassignments of.
    pub struct ListPartitionReassignmentsTopics {
        versions: (0),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The partition indexes.
            partition_indexes: kt::Array<kt::Int32>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The ongoing reassignments.
    pub struct ListPartitionReassignmentsResponse {
        api_key: 46,
        versions: (0),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The top-level error message, or null.
            error_message: kt::NullableString, versions(0+), nullable(0+);
            /// The ongoing reassignments of each topic.
            topics: kt::Array<OngoingTopicReassignment>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The ongoing reassignments of one topic.
    pub struct OngoingTopicReassignment {
        versions: (0),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The ongoing reassignment of each partition.
            partitions: kt::Array<OngoingPartitionReassignment>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The ongoing reassignment of one partition.
    pub struct OngoingPartitionReassignment {
        versions: (0),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The current replicas.
            replicas: kt::Array<kt::NodeId>, versions(0+);
            /// The replicas being added.
            adding_replicas: kt::Array<kt::NodeId>, versions(0+);
            /// The replicas being removed.
            removing_replicas: kt::Array<kt::NodeId>, versions(0+);
        }
        tagged {}
    }
}
