//! ElectLeaders (key 43): asks the controller to elect the preferred (or, unclean, any live)
//! replica as leader of some or all partitions.
//!
//! This module owns the request and response descriptions. Semantics the codec does not
//! enforce but the controller must: a null partition list means every partition, and election
//! type 0 is preferred, 1 unclean.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for leader elections.
    pub struct ElectLeadersRequest {
        api_key: 43,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The type of election: 0 preferred replica, 1 first live replica (unclean).
            election_type: kt::Int8, versions(1+);
            /// The partitions to elect leaders for; null for all partitions.
            topic_partitions: kt::NullableArray<ElectLeadersTopicPartitions>, versions(0+),
                nullable(0+);
            /// How long to wait for the elections to complete, in milliseconds.
            timeout_ms: kt::Int32 = 60000, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The partitions of one topic whose leaders should be elected.
    pub struct ElectLeadersTopicPartitions {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0+);
            /// The partition indexes.
            partitions: kt::Array<kt::Int32>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of each election.
    pub struct ElectLeadersResponse {
        api_key: 43,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The top-level error code.
            error_code: kt::Int16, versions(1+);
            /// The results per topic; empty when unauthorized for an all-partitions request.
            replica_election_results: kt::Array<ReplicaElectionResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The election results of one topic.
    pub struct ReplicaElectionResult {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0+);
            /// The result of each partition.
            partition_result: kt::Array<ElectLeadersPartitionResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The election result of one partition.
    pub struct ElectLeadersPartitionResult {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The partition index.
            partition_id: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(0+), nullable(0+);
        }
        tagged {}
    }
}
