//! Metadata (key 3): the brokers of the cluster and the partitions and leaders of topics.
//!
//! This module owns the request and response descriptions. Semantics the codec does not
//! enforce but the broker must: a null topic list (v1+) means all topics, an empty one (v0)
//! means all topics too, and topics may be named or (v10+) identified by id.

use crate::message;
use crate::protocol::types::{LeaderEpoch, NodeId};
use crate::protocol::wire::kt;

message! {
    /// Asks for metadata about some or all topics.
    pub struct MetadataRequest {
        api_key: 3,
        versions: (0-13),
        flexible: (9+),
        fields {
            /// The topics to describe; null for all topics.
            topics: kt::NullableArray<MetadataRequestTopic>, versions(0+), nullable(1+);
            /// Whether the broker may auto-create requested topics that do not exist.
            allow_auto_topic_creation: kt::Bool = true, versions(4+);
            /// Whether to include the cluster's authorized operations.
            include_cluster_authorized_operations: kt::Bool, versions(8-10);
            /// Whether to include each topic's authorized operations.
            include_topic_authorized_operations: kt::Bool, versions(8+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a metadata request, by name or (v10+) by id.
    pub struct MetadataRequestTopic {
        versions: (0-13),
        flexible: (9+),
        fields {
            /// The topic id.
            topic_id: kt::Uuid, versions(10+), flags(ignorable);
            /// The topic name; null when the topic is given by id.
            name: kt::NullableString, versions(0+), nullable(10+);
        }
        tagged {}
    }
}

message! {
    /// The brokers and the requested topics.
    pub struct MetadataResponse {
        api_key: 3,
        versions: (0-13),
        flexible: (9+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(3+), flags(ignorable);
            /// The brokers of the cluster.
            brokers: kt::Array<MetadataResponseBroker>, versions(0+);
            /// The cluster id.
            cluster_id: kt::NullableString = None, versions(2+), nullable(2+), flags(ignorable);
            /// The id of the controller broker.
            controller_id: kt::NodeId = NodeId(-1), versions(1+), flags(ignorable);
            /// Each requested topic.
            topics: kt::Array<MetadataResponseTopic>, versions(0+);
            /// The cluster's authorized operations, as a bit field.
            cluster_authorized_operations: kt::Int32 = i32::MIN, versions(8-10);
            /// The top-level error code.
            error_code: kt::Int16, versions(13+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One broker of the cluster.
    pub struct MetadataResponseBroker {
        versions: (0-13),
        flexible: (9+),
        fields {
            /// The broker id.
            node_id: kt::NodeId, versions(0+);
            /// The broker's host name.
            host: kt::String, versions(0+);
            /// The broker's port.
            port: kt::Int32, versions(0+);
            /// The broker's rack, or null.
            rack: kt::NullableString = None, versions(1+), nullable(1+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One topic of a metadata response.
    pub struct MetadataResponseTopic {
        versions: (0-13),
        flexible: (9+),
        fields {
            /// The topic error code.
            error_code: kt::Int16, versions(0+);
            /// The topic name; null (v12+) for an unknown topic asked for by id.
            name: kt::NullableString, versions(0+), nullable(12+);
            /// The topic id.
            topic_id: kt::Uuid, versions(10+), flags(ignorable);
            /// Whether the topic is internal.
            is_internal: kt::Bool, versions(1+), flags(ignorable);
            /// Each partition of the topic.
            partitions: kt::Array<MetadataResponsePartition>, versions(0+);
            /// The topic's authorized operations, as a bit field.
            topic_authorized_operations: kt::Int32 = i32::MIN, versions(8+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a topic in a metadata response.
    pub struct MetadataResponsePartition {
        versions: (0-13),
        flexible: (9+),
        fields {
            /// The partition error code.
            error_code: kt::Int16, versions(0+);
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The id of the leader broker.
            leader_id: kt::NodeId, versions(0+);
            /// The leader epoch.
            leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(7+), flags(ignorable);
            /// All replicas of the partition.
            replica_nodes: kt::Array<kt::NodeId>, versions(0+);
            /// The in-sync replicas.
            isr_nodes: kt::Array<kt::NodeId>, versions(0+);
            /// The offline replicas.
            offline_replicas: kt::Array<kt::NodeId>, versions(5+), flags(ignorable);
        }
        tagged {}
    }
}
