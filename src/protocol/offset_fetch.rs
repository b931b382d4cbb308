//! OffsetFetch (key 9): read a group's committed offsets.
//!
//! This module owns the request and response descriptions, Kafka 4.1's versions as
//! `kafka-protocol` 0.18 implements them: requests v1-9 (v10, which names topics by id, is
//! unstable in 4.1), responses v1-10. Up to v7 a request names one group; from v8 it carries a
//! batch of groups, and the response mirrors that shape. Semantics the codec does not enforce
//! but the coordinator must: a null topic list (v2+) asks for every partition the group has
//! committed offsets for.

use crate::message;
use crate::protocol::types::LeaderEpoch;
use crate::protocol::wire::kt;

message! {
    /// Asks for the committed offsets of one group (v1-7) or several (v8+).
    pub struct OffsetFetchRequest {
        api_key: 9,
        versions: (1-9),
        flexible: (6+),
        fields {
            /// The group to fetch offsets for.
            group_id: kt::String, versions(0-7);
            /// The topics to fetch offsets for; null (v2+) for all topics.
            topics: kt::NullableArray<OffsetFetchRequestTopic>, versions(0-7), nullable(2-7);
            /// The groups to fetch offsets for.
            groups: kt::Array<OffsetFetchRequestGroup>, versions(8+);
            /// Whether the broker should hold back unstable (pending transactional) offsets
            /// and answer a retriable error instead.
            require_stable: kt::Bool, versions(7+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a single-group offset fetch (v1-7).
    pub struct OffsetFetchRequestTopic {
        versions: (1-9),
        flexible: (6+),
        fields {
            /// The topic name.
            name: kt::String, versions(0-7);
            /// The partitions to fetch offsets for.
            partition_indexes: kt::Array<kt::Int32>, versions(0-7);
        }
        tagged {}
    }
}

message! {
    /// One group of a batched offset fetch (v8+).
    pub struct OffsetFetchRequestGroup {
        versions: (1-9),
        flexible: (6+),
        fields {
            /// The group id.
            group_id: kt::String, versions(8+);
            /// The member id, when the member uses the consumer protocol (KIP-848); or null.
            member_id: kt::NullableString = None, versions(9+), nullable(9+), flags(ignorable);
            /// The member epoch, when the member uses the consumer protocol (KIP-848); or -1.
            member_epoch: kt::Int32 = -1, versions(9+), flags(ignorable);
            /// The topics to fetch offsets for; null for all topics.
            topics: kt::NullableArray<OffsetFetchRequestTopics>, versions(8+), nullable(8+);
        }
        tagged {}
    }
}

message! {
    /// One topic of one group of a batched offset fetch (v8+).
    pub struct OffsetFetchRequestTopics {
        versions: (1-9),
        flexible: (6+),
        fields {
            /// The topic name.
            name: kt::String, versions(8-9), flags(ignorable);
            /// The partitions to fetch offsets for.
            partition_indexes: kt::Array<kt::Int32>, versions(8+);
        }
        tagged {}
    }
}

message! {
    /// The committed offsets of one group (v1-7) or several (v8+).
    pub struct OffsetFetchResponse {
        api_key: 9,
        versions: (1-10),
        flexible: (6+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(3+), flags(ignorable);
            /// The offsets per topic.
            topics: kt::Array<OffsetFetchResponseTopic>, versions(0-7);
            /// The top-level error code, or 0.
            error_code: kt::Int16, versions(2-7), flags(ignorable);
            /// The offsets per group.
            groups: kt::Array<OffsetFetchResponseGroup>, versions(8+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a single-group offset fetch response (v1-7).
    pub struct OffsetFetchResponseTopic {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The topic name.
            name: kt::String, versions(0-7);
            /// The offsets per partition.
            partitions: kt::Array<OffsetFetchResponsePartition>, versions(0-7);
        }
        tagged {}
    }
}

message! {
    /// One partition's committed offset (v1-7).
    pub struct OffsetFetchResponsePartition {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0-7);
            /// The committed offset, or -1 if none.
            committed_offset: kt::Offset, versions(0-7);
            /// The leader epoch committed with the offset, or -1.
            committed_leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(5-7), flags(ignorable);
            /// The metadata committed with the offset, or null.
            metadata: kt::NullableString, versions(0-7), nullable(0-7);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0-7);
        }
        tagged {}
    }
}

message! {
    /// One group of a batched offset fetch response (v8+).
    pub struct OffsetFetchResponseGroup {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The group id.
            group_id: kt::String, versions(8+);
            /// The offsets per topic.
            topics: kt::Array<OffsetFetchResponseTopics>, versions(8+);
            /// The group-level error code, or 0.
            error_code: kt::Int16, versions(8+);
        }
        tagged {}
    }
}

message! {
    /// One topic of one group of a batched offset fetch response, by name (v8-9) or by id
    /// (v10+).
    pub struct OffsetFetchResponseTopics {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The topic name.
            name: kt::String, versions(8-9), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(10+), flags(ignorable);
            /// The offsets per partition.
            partitions: kt::Array<OffsetFetchResponsePartitions>, versions(8+);
        }
        tagged {}
    }
}

message! {
    /// One partition's committed offset in a batched response (v8+).
    pub struct OffsetFetchResponsePartitions {
        versions: (1-10),
        flexible: (6+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(8+);
            /// The committed offset, or -1 if none.
            committed_offset: kt::Offset, versions(8+);
            /// The leader epoch committed with the offset, or -1.
            committed_leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(8+), flags(ignorable);
            /// The metadata committed with the offset, or null.
            metadata: kt::NullableString, versions(8+), nullable(8+);
            /// The partition-level error code, or 0.
            error_code: kt::Int16, versions(8+);
        }
        tagged {}
    }
}
