//! InitProducerId (key 22): a producer id and epoch for idempotent or transactional producers.
//!
//! This module owns the request and response descriptions. Kafka 4.1's request v6 (2PC,
//! KIP-939) is still marked unstable and is not described; the response's v6 is.

use crate::message;
use crate::protocol::types::{ProducerEpoch, ProducerId};
use crate::protocol::wire::kt;

message! {
    /// Asks for a producer id.
    pub struct InitProducerIdRequest {
        api_key: 22,
        versions: (0-5),
        flexible: (2+),
        fields {
            /// The transactional id, or null for an idempotent producer.
            transactional_id: kt::NullableString, versions(0+), nullable(0+);
            /// How long an idle transaction may stay open, in milliseconds.
            transaction_timeout_ms: kt::Int32, versions(0+);
            /// The current producer id, or -1.
            producer_id: kt::ProducerId = ProducerId(-1), versions(3+);
            /// The current producer epoch, or -1.
            producer_epoch: kt::ProducerEpoch = ProducerEpoch(-1), versions(3+);
        }
        tagged {}
    }
}

message! {
    /// The producer id and epoch granted.
    pub struct InitProducerIdResponse {
        api_key: 22,
        versions: (0-6),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The producer id.
            producer_id: kt::ProducerId = ProducerId(-1), versions(0+);
            /// The producer epoch.
            producer_epoch: kt::ProducerEpoch, versions(0+);
            /// The producer id of an ongoing prepared transaction, or -1.
            ongoing_txn_producer_id: kt::ProducerId = ProducerId(-1), versions(6+);
            /// The producer epoch of an ongoing prepared transaction, or -1.
            ongoing_txn_producer_epoch: kt::ProducerEpoch = ProducerEpoch(-1), versions(6+);
        }
        tagged {}
    }
}
