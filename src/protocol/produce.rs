//! Produce (key 0): record batches appended to partitions, and the offsets they were given.
//!
//! This module owns the request and response descriptions. Kafka 4 removed v0-2 (they are
//! still advertised, see design §4, but never decoded); v13 names topics by id instead of name.
//! `records` stays an undecoded zero-copy slice of the request frame.

use crate::message;
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::kt;

message! {
    /// Record batches to append.
    pub struct ProduceRequest {
        api_key: 0,
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The transactional id, or null if the producer is not transactional.
            transactional_id: kt::NullableString = None, versions(3+), nullable(3+);
            /// Acknowledgements required: 0 none, 1 the leader, -1 the full ISR.
            acks: kt::Int16, versions(0+);
            /// How long to wait for the acknowledgements, in milliseconds.
            timeout_ms: kt::Int32, versions(0+);
            /// Each topic to produce to.
            topic_data: kt::Array<TopicProduceData>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a produce request.
    pub struct TopicProduceData {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The topic name.
            name: kt::String, versions(0-12), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(13+), flags(ignorable);
            /// Each partition to produce to.
            partition_data: kt::Array<PartitionProduceData>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a produce request.
    pub struct PartitionProduceData {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The partition index.
            index: kt::Int32, versions(0+);
            /// The record batches, undecoded.
            records: kt::Records, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of a produce request, per partition.
    pub struct ProduceResponse {
        api_key: 0,
        versions: (3-13),
        flexible: (9+),
        fields {
            /// Each topic's results.
            responses: kt::Array<TopicProduceResponse>, versions(0+);
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
        }
        tagged {
            /// Endpoints of the brokers named in `current_leader` fields.
            0 => node_endpoints: kt::Array<NodeEndpoint>, versions(10+);
        }
    }
}

message! {
    /// One topic of a produce response.
    pub struct TopicProduceResponse {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The topic name.
            name: kt::String, versions(0-12), flags(ignorable);
            /// The topic id.
            topic_id: kt::Uuid, versions(13+), flags(ignorable);
            /// Each partition's result.
            partition_responses: kt::Array<PartitionProduceResponse>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a produce response.
    pub struct PartitionProduceResponse {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The partition index.
            index: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The offset given to the first record.
            base_offset: kt::Offset, versions(0+);
            /// The append time when the topic uses LogAppendTime, else -1.
            log_append_time_ms: kt::Int64 = -1, versions(2+), flags(ignorable);
            /// The partition's log start offset.
            log_start_offset: kt::Offset = Offset(-1), versions(5+), flags(ignorable);
            /// The records that made the batch fail.
            record_errors: kt::Array<BatchIndexAndErrorMessage>, versions(8+),
                flags(ignorable);
            /// A message summarising why the batch was dropped.
            error_message: kt::NullableString = None, versions(8+), nullable(8+),
                flags(ignorable);
        }
        tagged {
            /// The current leader, when the request reached a broker that is not it.
            0 => current_leader: LeaderIdAndEpoch, versions(10+);
        }
    }
}

message! {
    /// One record that made a batch fail.
    pub struct BatchIndexAndErrorMessage {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The index of the record in the batch.
            batch_index: kt::Int32, versions(8+);
            /// Why the record failed.
            batch_index_error_message: kt::NullableString = None, versions(8+), nullable(8+);
        }
        tagged {}
    }
}

message! {
    /// A partition leader and its epoch.
    pub struct LeaderIdAndEpoch {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The leader's broker id, or -1.
            leader_id: kt::NodeId = NodeId(-1), versions(10+);
            /// The leader epoch, or -1.
            leader_epoch: kt::LeaderEpoch = LeaderEpoch(-1), versions(10+);
        }
        tagged {}
    }
}

message! {
    /// A broker endpoint.
    pub struct NodeEndpoint {
        versions: (3-13),
        flexible: (9+),
        fields {
            /// The broker id.
            node_id: kt::NodeId, versions(10+);
            /// The host name.
            host: kt::String, versions(10+);
            /// The port.
            port: kt::Int32, versions(10+);
            /// The rack, or null.
            rack: kt::NullableString = None, versions(10+), nullable(10+);
        }
        tagged {}
    }
}
