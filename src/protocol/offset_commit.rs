//! OffsetCommit (key 8): a group member (or an admin client) commits consumed offsets.
//!
//! This module owns the request and response descriptions, Kafka 4.1's versions as
//! `kafka-protocol` 0.18 implements them: requests v2-9 (v0-1 are gone in Kafka 4; v10, which
//! names topics by id, is unstable in 4.1), responses v2-10. Semantics the codec does not
//! enforce but the coordinator must: a generation id of -1 with an empty member id is a commit
//! from outside the group (admin tools), and `retention_time_ms` (v2-4) of -1 means the
//! broker's default retention.

use crate::message;
use crate::protocol::types::LeaderEpoch;
use crate::protocol::wire::kt;

message! {
    /// Commits offsets for some partitions on behalf of a group.
    pub struct OffsetCommitRequest {
        api_key: 8,
        versions: (2-9),
        flexible: (8+),
        fields {
            /// The unique group identifier.
            group_id: kt::String, versions(0+);
            /// The generation of the group (classic protocol) or the member epoch (consumer
            /// protocol).
            generation_id_or_member_epoch: kt::Int32 = -1, versions(1+), flags(ignorable);
            /// The member id assigned by the group coordinator.
            member_id: kt::String, versions(1+), flags(ignorable);
            /// The static member's instance id, or null.
            group_instance_id: kt::NullableString = None, versions(7+), nullable(7+);
            /// How long to retain the offsets in milliseconds; -1 for the broker's default.
            retention_time_ms: kt::Int64 = -1, versions(2-4), flags(ignorable);
            /// The topics to commit offsets for.
            topics: kt::Array<OffsetCommitRequestTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of an offset commit.
    pub struct OffsetCommitRequestTopic {
        versions: (2-9),
        flexible: (8+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// Each partition to commit offsets for.
            partitions: kt::Array<OffsetCommitRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition's offset to commit.
    pub struct OffsetCommitRequestPartition {
        versions: (2-9),
        flexible: (8+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The offset to commit: the next one the group will consume.
            committed_offset: kt::Offset, versions(0+);
            /// The leader epoch of the last consumed record, or -1.
            committed_leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(6+), flags(ignorable);
            /// Metadata the client wants kept with the offset, or null.
            committed_metadata: kt::NullableString, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The result of an offset commit, per partition.
    pub struct OffsetCommitResponse {
        api_key: 8,
        versions: (2-10),
        flexible: (8+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(3+), flags(ignorable);
            /// The results for each topic.
            topics: kt::Array<OffsetCommitResponseTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of an offset commit response, by name (v2-9) or by id (v10+).
    pub struct OffsetCommitResponseTopic {
        versions: (2-10),
        flexible: (8+),
        fields {
            /// The topic name.
            name: kt::String, versions(0-9), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(10+), flags(ignorable);
            /// The results for each partition of the topic.
            partitions: kt::Array<OffsetCommitResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition's commit result.
    pub struct OffsetCommitResponsePartition {
        versions: (2-10),
        flexible: (8+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
        }
        tagged {}
    }
}
