//! The BrokerRegistration and BrokerHeartbeat requests of a broker that does nothing else:
//! what the controller's cluster tests, its simulation suite and its bench send to register
//! a broker and keep it unfenced.

#![allow(dead_code)]

use samsa::controller::records::{METADATA_VERSION_FEATURE, METADATA_VERSION_LEVEL};
use samsa::protocol::broker_heartbeat::BrokerHeartbeatRequest;
use samsa::protocol::broker_registration::{
    BrokerRegistrationFeature, BrokerRegistrationListener, BrokerRegistrationRequest,
};
use samsa::protocol::types::{NodeId, Offset};
use samsa::protocol::wire::Uuid;

/// A registration of `broker_id` in `cluster_id`, with one PLAINTEXT listener on `host:9092`
/// and every metadata.version the controller writes.
pub fn registration(
    broker_id: i32,
    cluster_id: &str,
    incarnation_id: Uuid,
    host: &str,
) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id: NodeId(broker_id),
        cluster_id: cluster_id.into(),
        incarnation_id,
        listeners: vec![BrokerRegistrationListener {
            name: "PLAINTEXT".into(),
            host: host.into(),
            port: 9092,
            security_protocol: 0,
        }],
        features: vec![BrokerRegistrationFeature {
            name: METADATA_VERSION_FEATURE.into(),
            min_supported_version: 1,
            max_supported_version: METADATA_VERSION_LEVEL,
        }],
        ..Default::default()
    }
}

/// A heartbeat of a broker that has applied every metadata record (so it is unfenced).
pub fn caught_up_heartbeat(broker_id: i32, broker_epoch: i64) -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest {
        broker_id: NodeId(broker_id),
        broker_epoch,
        current_metadata_offset: Offset(i64::MAX / 2),
        ..Default::default()
    }
}
