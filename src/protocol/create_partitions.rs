//! CreatePartitions (key 37): adding partitions to topics. This module owns the request and
//! response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for partitions to be added.
    pub struct CreatePartitionsRequest {
        api_key: 37,
        versions: (0-3),
        flexible: (2+),
        fields {
            /// Each topic to grow.
            topics: kt::Array<CreatePartitionsTopic>, versions(0+);
            /// How long to wait for the creation, in milliseconds.
            timeout_ms: kt::Int32, versions(0+);
            /// Only validate the request, creating nothing.
            validate_only: kt::Bool, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic to grow.
    pub struct CreatePartitionsTopic {
        versions: (0-3),
        flexible: (2+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The new total partition count.
            count: kt::Int32, versions(0+);
            /// The replicas of each new partition, or null for automatic placement.
            assignments: kt::NullableArray<CreatePartitionsAssignment>, versions(0+),
                nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The replicas of one new partition.
    pub struct CreatePartitionsAssignment {
        versions: (0-3),
        flexible: (2+),
        fields {
            /// The brokers to place replicas on.
            broker_ids: kt::Array<kt::NodeId>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome for each topic.
    pub struct CreatePartitionsResponse {
        api_key: 37,
        versions: (0-3),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// Each topic's result.
            results: kt::Array<CreatePartitionsTopicResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic's result.
    pub struct CreatePartitionsTopicResult {
        versions: (0-3),
        flexible: (2+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString = None, versions(0+), nullable(0+);
        }
        tagged {}
    }
}
