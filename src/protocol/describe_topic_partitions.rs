//! DescribeTopicPartitions (key 75): topic and partition metadata, paginated by a cursor
//! (KIP-966), including the eligible leader replicas.
//!
//! This module owns the request and response descriptions. The cursors are nullable structs
//! ([`kt::NullableStruct`]): null in a request starts from the beginning, null in a response
//! means there is nothing more.

use crate::message;
use crate::protocol::types::LeaderEpoch;
use crate::protocol::wire::kt;

message! {
    /// Asks for the partitions of some topics, from a cursor on.
    pub struct DescribeTopicPartitionsRequest {
        api_key: 75,
        versions: (0),
        flexible: (0+),
        fields {
            /// The topics to describe.
            topics: kt::Array<DescribeTopicPartitionsTopicRequest>, versions(0+);
            /// The most partitions to return.
            response_partition_limit: kt::Int32 = 2000, versions(0+);
            /// Where to start, or null for the beginning.
            cursor: kt::NullableStruct<DescribeTopicPartitionsCursor>, versions(0+),
                nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic to describe.
    pub struct DescribeTopicPartitionsTopicRequest {
        versions: (0),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// A position in the list of partitions: a topic and a partition of it.
    pub struct DescribeTopicPartitionsCursor {
        versions: (0),
        flexible: (0+),
        fields {
            /// The topic name.
            topic_name: kt::String, versions(0+);
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The described topics and partitions.
    pub struct DescribeTopicPartitionsResponse {
        api_key: 75,
        versions: (0),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+), flags(ignorable);
            /// Each described topic.
            topics: kt::Array<DescribeTopicPartitionsResponseTopic>, versions(0+);
            /// Where the next page starts, or null if there is none.
            next_cursor: kt::NullableStruct<DescribeTopicPartitionsCursor>, versions(0+),
                nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// One described topic.
    pub struct DescribeTopicPartitionsResponseTopic {
        versions: (0),
        flexible: (0+),
        fields {
            /// The topic error code.
            error_code: kt::Int16, versions(0+);
            /// The topic name, or null.
            name: kt::NullableString, versions(0+), nullable(0+);
            /// The topic id.
            topic_id: kt::Uuid, versions(0+), flags(ignorable);
            /// Whether the topic is internal.
            is_internal: kt::Bool, versions(0+), flags(ignorable);
            /// Each partition of the topic.
            partitions: kt::Array<DescribeTopicPartitionsResponsePartition>, versions(0+);
            /// The topic's authorized operations, as a bit field.
            topic_authorized_operations: kt::Int32 = i32::MIN, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One described partition.
    pub struct DescribeTopicPartitionsResponsePartition {
        versions: (0),
        flexible: (0+),
        fields {
            /// The partition error code.
            error_code: kt::Int16, versions(0+);
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The leader id.
            leader_id: kt::NodeId, versions(0+);
            /// The leader epoch.
            leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(0+), flags(ignorable);
            /// All replicas.
            replica_nodes: kt::Array<kt::NodeId>, versions(0+);
            /// The in-sync replicas.
            isr_nodes: kt::Array<kt::NodeId>, versions(0+);
            /// The eligible leader replicas, or null.
            eligible_leader_replicas: kt::NullableArray<kt::NodeId> = None, versions(0+),
                nullable(0+);
            /// The last known eligible leader replicas, or null.
            last_known_elr: kt::NullableArray<kt::NodeId> = None, versions(0+), nullable(0+);
            /// The offline replicas.
            offline_replicas: kt::Array<kt::NodeId>, versions(0+), flags(ignorable);
        }
        tagged {}
    }
}
