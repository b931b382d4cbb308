//! AlterPartition (key 56): a partition leader asks the controller to change the partition's
//! in-sync replicas.
//!
//! This module owns the request and response descriptions. Kafka 4 dropped versions 0-1 (which
//! named topics instead of identifying them), so the range starts at 2; v3 gives each ISR
//! member with its broker epoch.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks to change the ISR of some partitions.
    pub struct AlterPartitionRequest {
        api_key: 56,
        versions: (2-3),
        flexible: (0+),
        fields {
            /// The id of the requesting broker.
            broker_id: kt::NodeId, versions(0+);
            /// The epoch of the requesting broker.
            broker_epoch: kt::Int64 = -1, versions(0+);
            /// The topics.
            topics: kt::Array<AlterPartitionRequestTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of an AlterPartition request.
    pub struct AlterPartitionRequestTopic {
        versions: (2-3),
        flexible: (0+),
        fields {
            /// The topic id.
            topic_id: kt::Uuid, versions(2+), flags(ignorable);
            /// The partitions.
            partitions: kt::Array<AlterPartitionRequestPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The requested ISR of one partition.
    pub struct AlterPartitionRequestPartition {
        versions: (2-3),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The leader epoch of the requesting leader.
            leader_epoch: kt::LeaderEpoch, versions(0+);
            /// The requested ISR (up to v2).
            new_isr: kt::Array<kt::NodeId>, versions(0-2);
            /// The requested ISR with each member's broker epoch (v3+).
            new_isr_with_epochs: kt::Array<AlterPartitionBrokerState>, versions(3+);
            /// 0 recovered, 1 recovering (after an unclean election).
            leader_recovery_state: kt::Int8, versions(1+);
            /// The partition epoch the leader knows.
            partition_epoch: kt::Int32, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One ISR member and its broker epoch.
    pub struct AlterPartitionBrokerState {
        versions: (2-3),
        flexible: (0+),
        fields {
            /// The broker id.
            broker_id: kt::NodeId, versions(3+);
            /// The broker's epoch, or -1 if unknown.
            broker_epoch: kt::Int64 = -1, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// The controller's answer: the resulting state of each partition.
    pub struct AlterPartitionResponse {
        api_key: 56,
        versions: (2-3),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The topics.
            topics: kt::Array<AlterPartitionResponseTopic>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of an AlterPartition response.
    pub struct AlterPartitionResponseTopic {
        versions: (2-3),
        flexible: (0+),
        fields {
            /// The topic id.
            topic_id: kt::Uuid, versions(2+), flags(ignorable);
            /// The partitions.
            partitions: kt::Array<AlterPartitionResponsePartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The resulting state of one partition.
    pub struct AlterPartitionResponsePartition {
        versions: (2-3),
        flexible: (0+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The leader id.
            leader_id: kt::NodeId, versions(0+);
            /// The leader epoch.
            leader_epoch: kt::LeaderEpoch, versions(0+);
            /// The in-sync replicas.
            isr: kt::Array<kt::NodeId>, versions(0+);
            /// 0 recovered, 1 recovering.
            leader_recovery_state: kt::Int8, versions(1+), flags(ignorable);
            /// The partition epoch.
            partition_epoch: kt::Int32, versions(0+);
        }
        tagged {}
    }
}
