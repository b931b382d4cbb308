//! Fetch (key 1): reading record batches from partitions, for consumers and followers,
//! including incremental fetch sessions (KIP-227).
//!
//! This module owns the request and response descriptions. v13+ names topics by id; `records`
//! in the response is written from segment bytes and stays an undecoded slice here.

use crate::message;
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::kt;

message! {
    /// Asks for records from some partitions.
    pub struct FetchRequest {
        api_key: 1,
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The follower's broker id, or -1 for a consumer (moved to `replica_state` in v15).
            replica_id: kt::NodeId = NodeId(-1), versions(0-14);
            /// The longest to wait for `min_bytes`, in milliseconds.
            max_wait_ms: kt::Int32, versions(0+);
            /// The fewest bytes to accumulate before answering.
            min_bytes: kt::Int32, versions(0+);
            /// The most bytes to return (KIP-74: at least one batch is returned anyway).
            max_bytes: kt::Int32 = 0x7fff_ffff, versions(3+), flags(ignorable);
            /// 0 read uncommitted, 1 read committed.
            isolation_level: kt::Int8, versions(4+), flags(ignorable);
            /// The fetch session id.
            session_id: kt::Int32, versions(7+), flags(ignorable);
            /// The fetch session epoch.
            session_epoch: kt::Int32 = -1, versions(7+), flags(ignorable);
            /// The topics to fetch.
            topics: kt::Array<FetchTopic>, versions(0+);
            /// In an incremental fetch, the partitions to remove from the session.
            forgotten_topics_data: kt::Array<ForgottenTopic>, versions(7+);
            /// The consumer's rack.
            rack_id: kt::String, versions(11+), flags(ignorable);
        }
        tagged {
            /// The cluster id, if known.
            0 => cluster_id: kt::NullableString = None, versions(12+), nullable(12+),
                flags(ignorable);
            /// The fetching replica's state (followers).
            1 => replica_state: ReplicaState, versions(15+);
        }
    }
}

message! {
    /// The state of a fetching follower.
    pub struct ReplicaState {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The follower's replica id, or -1 for a consumer.
            replica_id: kt::NodeId = NodeId(-1), versions(15+);
            /// The follower's broker epoch, or -1.
            replica_epoch: kt::Int64 = -1, versions(15+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a fetch request.
    pub struct FetchTopic {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0-12), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(13+), flags(ignorable);
            /// The partitions to fetch.
            partitions: kt::Array<FetchPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a fetch request.
    pub struct FetchPartition {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The partition index.
            partition: kt::Int32, versions(0+);
            /// The fetcher's current leader epoch.
            current_leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(9+), flags(ignorable);
            /// The offset to fetch from.
            fetch_offset: kt::Offset, versions(0+);
            /// The epoch of the last fetched record, or -1.
            last_fetched_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(12+);
            /// The follower's log start offset (followers only).
            log_start_offset: kt::Offset = Offset(-1), versions(5+), flags(ignorable);
            /// The most bytes to return from this partition (KIP-74).
            partition_max_bytes: kt::Int32, versions(0+);
        }
        tagged {
            /// The follower's log directory id.
            0 => replica_directory_id: kt::Uuid, versions(17+), flags(ignorable);
            /// The high watermark the follower knows; -1 unknown, i64::MAX unsupported.
            1 => high_watermark: kt::Offset = Offset(i64::MAX), versions(18+), flags(ignorable);
        }
    }
}

message! {
    /// Partitions an incremental fetch removes from its session.
    pub struct ForgottenTopic {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The topic name.
            topic: kt::String, versions(7-12), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(13+), flags(ignorable);
            /// The partition indexes to forget.
            partitions: kt::Array<kt::Int32>, versions(7+);
        }
        tagged {}
    }
}

message! {
    /// The records fetched, per partition.
    pub struct FetchResponse {
        api_key: 1,
        versions: (4-18),
        flexible: (12+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// The top-level error code.
            error_code: kt::Int16, versions(7+), flags(ignorable);
            /// The fetch session id, or 0.
            session_id: kt::Int32, versions(7+);
            /// Each topic's data.
            responses: kt::Array<FetchableTopicResponse>, versions(0+);
        }
        tagged {
            /// Endpoints of the brokers named in `current_leader` fields.
            0 => node_endpoints: kt::Array<NodeEndpoint>, versions(16+);
        }
    }
}

message! {
    /// One topic of a fetch response.
    pub struct FetchableTopicResponse {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0-12), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(13+), flags(ignorable);
            /// Each partition's data.
            partitions: kt::Array<PartitionData>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a fetch response.
    pub struct PartitionData {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The high watermark.
            high_watermark: kt::Offset, versions(0+);
            /// The last stable offset.
            last_stable_offset: kt::Offset = Offset(-1), versions(4+), flags(ignorable);
            /// The log start offset.
            log_start_offset: kt::Offset = Offset(-1), versions(5+), flags(ignorable);
            /// The aborted transactions in the returned range, or null.
            aborted_transactions: kt::NullableArray<AbortedTransaction>, versions(4+),
                nullable(4+), flags(ignorable);
            /// The replica to fetch from instead, or -1.
            preferred_read_replica: kt::NodeId = NodeId(-1), versions(11+);
            /// The record batches, undecoded.
            records: kt::Records, versions(0+), nullable(0+);
        }
        tagged {
            /// Where the follower's log diverges from the leader's.
            0 => diverging_epoch: EpochEndOffset, versions(12+);
            /// The current leader, when this broker is not it.
            1 => current_leader: LeaderIdAndEpoch, versions(12+);
            /// The snapshot to fetch when the offset is below the log start (KRaft).
            2 => snapshot_id: SnapshotId, versions(12+);
        }
    }
}

message! {
    /// An epoch and its end offset.
    pub struct EpochEndOffset {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The epoch.
            epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(12+);
            /// The end offset of the epoch.
            end_offset: kt::Offset = Offset(-1), versions(12+);
        }
        tagged {}
    }
}

message! {
    /// A partition leader and its epoch.
    pub struct LeaderIdAndEpoch {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The leader's broker id, or -1.
            leader_id: kt::NodeId = NodeId(-1), versions(12+);
            /// The leader epoch, or -1.
            leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(12+);
        }
        tagged {}
    }
}

message! {
    /// A snapshot id.
    pub struct SnapshotId {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The snapshot's end offset.
            end_offset: kt::Offset = Offset(-1), versions(0+);
            /// The snapshot's epoch.
            epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(0+);
        }
        tagged {}
    }
}

message! {
    /// An aborted transaction in a fetched range.
    pub struct AbortedTransaction {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The producer id.
            producer_id: kt::ProducerId, versions(4+);
            /// The first offset of the transaction.
            first_offset: kt::Offset, versions(4+);
        }
        tagged {}
    }
}

message! {
    /// A broker endpoint.
    pub struct NodeEndpoint {
        versions: (4-18),
        flexible: (12+),
        fields {
            /// The broker id.
            node_id: kt::NodeId, versions(16+);
            /// The host name.
            host: kt::String, versions(16+);
            /// The port.
            port: kt::Int32, versions(16+);
            /// The rack, or null.
            rack: kt::NullableString = None, versions(16+), nullable(16+);
        }
        tagged {}
    }
}
