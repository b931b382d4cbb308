//! AllocateProducerIds (key 67): a broker asks the active controller for a block of producer
//! ids, which the controller takes by committing a ProducerIdsRecord to the metadata log
//! (KIP-730). The broker hands ids of the block to InitProducerId until it runs out.
//!
//! This module owns the request and response descriptions. The one version is flexible.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// A broker's request for a block of producer ids.
    pub struct AllocateProducerIdsRequest {
        api_key: 67,
        versions: (0-0),
        flexible: (0+),
        fields {
            /// The id of the requesting broker.
            broker_id: kt::NodeId, versions(0+);
            /// The epoch of the requesting broker.
            broker_epoch: kt::Int64 = -1, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The controller's answer: the first id of the block and its length.
    pub struct AllocateProducerIdsResponse {
        api_key: 67,
        versions: (0-0),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The first producer id of the block.
            producer_id_start: kt::Int64, versions(0+);
            /// The number of ids in the block.
            producer_id_len: kt::Int32, versions(0+);
        }
        tagged {}
    }
}
