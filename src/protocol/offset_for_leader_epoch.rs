//! OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, which a follower (or a
//! consumer after a leader change) uses to find where its log diverges from the leader's.
//!
//! This module owns the request and response descriptions. Kafka 4 dropped versions 0-1, so the
//! range starts at 2. Semantics the codec does not enforce but the broker must: a replica id of
//! -1 (or the default -2, before v3) means a consumer, and a current leader epoch of -1 skips
//! the fencing check.

use crate::message;
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::kt;

message! {
    /// Asks for the end offset of a leader epoch of each partition.
    pub struct OffsetForLeaderEpochRequest {
        api_key: 23,
        versions: (2-4),
        flexible: (4+),
        fields {
            /// The broker id of the follower, or -1 for a consumer.
            replica_id: kt::NodeId = NodeId(-2), versions(3+), flags(ignorable);
            /// Each topic to get offsets for.
            topics: kt::Array<OffsetForLeaderTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of an OffsetForLeaderEpoch request.
    pub struct OffsetForLeaderTopic {
        versions: (2-4),
        flexible: (4+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0+);
            /// Each partition to get offsets for.
            partitions: kt::Array<OffsetForLeaderPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of an OffsetForLeaderEpoch request.
    pub struct OffsetForLeaderPartition {
        versions: (2-4),
        flexible: (4+),
        fields {
            /// The partition index.
            partition: kt::Int32, versions(0+);
            /// The leader epoch the requester knows, to fence stale requesters; -1 for none.
            current_leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(2+), flags(ignorable);
            /// The epoch to look up an end offset for.
            leader_epoch: kt::LeaderEpoch, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The end offset of the requested epoch of each partition.
    pub struct OffsetForLeaderEpochResponse {
        api_key: 23,
        versions: (2-4),
        flexible: (4+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(2+), flags(ignorable);
            /// Each topic offsets were fetched for.
            topics: kt::Array<OffsetForLeaderTopicResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of an OffsetForLeaderEpoch response.
    pub struct OffsetForLeaderTopicResult {
        versions: (2-4),
        flexible: (4+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0+);
            /// Each partition of the topic.
            partitions: kt::Array<EpochEndOffset>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition's answer: the largest epoch not above the requested one and its end.
    pub struct EpochEndOffset {
        versions: (2-4),
        flexible: (4+),
        fields {
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The partition index.
            partition: kt::Int32, versions(0+);
            /// The leader epoch of the partition.
            leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(1+), flags(ignorable);
            /// The end offset of the epoch.
            end_offset: kt::Offset = Offset(-1), versions(0+);
        }
        tagged {}
    }
}
