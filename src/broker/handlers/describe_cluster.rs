//! DescribeCluster (key 60): the cluster id (from `meta.properties`), this node as the only
//! broker and as the controller, at the advertised address of the listener the metadata
//! names first. v1+ carries an endpoint type: Samsa answers as a broker, so a request for
//! controller endpoints (2) gets UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers it.

use std::sync::Arc;

use crate::broker::Broker;
use crate::protocol::describe_cluster::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::types::NodeId;

/// `endpoint_type` values.
pub const ENDPOINT_TYPE_BROKER: i8 = 1;

/// The cluster operations a client may perform without an authorizer (Kafka's bit per
/// `AclOperation` on the cluster resource: ALTER, CREATE, DESCRIBE, CLUSTER_ACTION,
/// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE).
const CLUSTER_OPERATIONS: i32 =
    (1 << 4) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

pub fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let node_id = broker.config.node_id;
    if version >= 1 && request.endpoint_type != ENDPOINT_TYPE_BROKER {
        return DescribeClusterResponse {
            error_code: ErrorCode::UNSUPPORTED_ENDPOINT_TYPE.code(),
            error_message: Some(format!(
                "endpoint type {} is not served by a broker",
                request.endpoint_type
            )),
            endpoint_type: request.endpoint_type,
            cluster_id: broker.cluster_id.clone(),
            ..Default::default()
        };
    }
    let brokers = broker
        .config
        .advertised_listeners
        .first()
        .map(|endpoint| DescribeClusterBroker {
            broker_id: NodeId(node_id),
            host: endpoint.host.clone(),
            port: i32::from(endpoint.port),
            rack: None,
            is_fenced: false,
        })
        .into_iter()
        .collect();
    DescribeClusterResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        endpoint_type: ENDPOINT_TYPE_BROKER,
        cluster_id: broker.cluster_id.clone(),
        controller_id: NodeId(node_id),
        brokers,
        cluster_authorized_operations: if request.include_cluster_authorized_operations {
            CLUSTER_OPERATIONS
        } else {
            i32::MIN
        },
    }
}
