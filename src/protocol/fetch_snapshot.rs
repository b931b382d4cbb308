//! FetchSnapshot (key 59): a KRaft follower that fell behind the log start fetches a snapshot
//! of the metadata log from the leader, chunk by chunk.
//!
//! This module owns the request and response descriptions. All versions are flexible; the
//! cluster id, the replica directory id, the current leader and the endpoints are tagged
//! fields. The snapshot chunk is `records` that are not record-batch aligned: it is carried as
//! opaque bytes and, not being nullable, is never null.

use bytes::Bytes;

use crate::message;
use crate::protocol::types::NodeId;
use crate::protocol::wire::kt;

message! {
    /// Asks for a chunk of a snapshot of each partition.
    pub struct FetchSnapshotRequest {
        api_key: 59,
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The id of the requesting replica.
            replica_id: kt::NodeId = NodeId(-1), versions(0+);
            /// The most bytes to return.
            max_bytes: kt::Int32 = i32::MAX, versions(0+);
            /// The topics.
            topics: kt::Array<FetchSnapshotRequestTopic>, versions(0+);
        }
        tagged {
            /// The cluster id, or null.
            0 => cluster_id: kt::NullableString = None, versions(0+), nullable(0+);
        }
    }
}

message! {
    /// One topic of a FetchSnapshot request.
    pub struct FetchSnapshotRequestTopic {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<FetchSnapshotRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The snapshot chunk wanted of one partition.
    pub struct FetchSnapshotRequestPartition {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The partition index.
            partition: kt::Int32, versions(0+);
            /// The leader epoch the requester knows.
            current_leader_epoch: kt::LeaderEpoch, versions(0+);
            /// The snapshot.
            snapshot_id: SnapshotId, versions(0+);
            /// The byte position within the snapshot to fetch from.
            position: kt::Int64, versions(0+);
        }
        tagged {
            /// The directory id of the requesting follower.
            0 => replica_directory_id: kt::Uuid, versions(1+), flags(ignorable);
        }
    }
}

message! {
    /// A snapshot's id: the end offset and epoch it covers.
    pub struct SnapshotId {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The end offset.
            end_offset: kt::Offset, versions(0+);
            /// The epoch.
            epoch: kt::LeaderEpoch, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The snapshot chunks.
    pub struct FetchSnapshotResponse {
        api_key: 59,
        versions: (0-1),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+), flags(ignorable);
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The topics.
            topics: kt::Array<FetchSnapshotResponseTopic>, versions(0+);
        }
        tagged {
            /// The endpoints of the nodes the response mentions.
            0 => node_endpoints: kt::Array<FetchSnapshotNodeEndpoint>, versions(1+);
        }
    }
}

message! {
    /// One topic of a FetchSnapshot response.
    pub struct FetchSnapshotResponseTopic {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The partitions.
            partitions: kt::Array<FetchSnapshotResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// A chunk of the snapshot of one partition.
    pub struct FetchSnapshotResponsePartition {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The partition index.
            index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The snapshot.
            snapshot_id: SnapshotId, versions(0+);
            /// The total size of the snapshot.
            size: kt::Int64, versions(0+);
            /// The starting byte position of this chunk within the snapshot.
            position: kt::Int64, versions(0+);
            /// The chunk: snapshot bytes, not aligned to record batches.
            unaligned_records: kt::Records = Some(Bytes::new()), versions(0+);
        }
        tagged {
            /// The current leader and epoch.
            0 => current_leader: FetchSnapshotLeaderIdAndEpoch, versions(0+);
        }
    }
}

message! {
    /// A leader and its epoch.
    pub struct FetchSnapshotLeaderIdAndEpoch {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The id of the current leader, or -1.
            leader_id: kt::NodeId, versions(0+);
            /// The latest known leader epoch.
            leader_epoch: kt::LeaderEpoch, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The endpoint of one node.
    pub struct FetchSnapshotNodeEndpoint {
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The node id.
            node_id: kt::NodeId, versions(1+);
            /// The node's host name.
            host: kt::String, versions(1+);
            /// The node's port.
            port: kt::Uint16, versions(1+);
        }
        tagged {}
    }
}
