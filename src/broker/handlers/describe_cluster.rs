//! DescribeCluster (key 60): the cluster id (from `meta.properties`), the live brokers as
//! Metadata lists them (`cluster_view::live_brokers`: registered and unfenced in the image
//! this broker applied, each at its advertised listener; this node alone before any image),
//! and this node as the controller (KRaft hides the controllers from clients). v1+ carries an endpoint type (KIP-919), refused as a Kafka broker listener
//! refuses it: controllers (2) get MISMATCHED_ENDPOINT_TYPE, a type Kafka does not define
//! UNSUPPORTED_ENDPOINT_TYPE; a refusal carries only the code and the message. Asked for
//! (`include_cluster_authorized_operations`), the cluster's authorized operations are every
//! operation the cluster resource supports, as Kafka answers without an authorizer.

use std::sync::Arc;

use crate::broker::Broker;
use crate::protocol::acl::{self, ResourceType};
use crate::protocol::describe_cluster::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::types::NodeId;

/// `endpoint_type` values.
pub const ENDPOINT_TYPE_BROKER: i8 = 1;
pub const ENDPOINT_TYPE_CONTROLLER: i8 = 2;

pub fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let node_id = broker.config.node_id;
    let refusal = match request.endpoint_type {
        _ if version == 0 => None,
        ENDPOINT_TYPE_BROKER => None,
        ENDPOINT_TYPE_CONTROLLER => Some((
            ErrorCode::MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of \
             type CONTROLLER"
                .to_string(),
        )),
        other => Some((
            ErrorCode::UNSUPPORTED_ENDPOINT_TYPE,
            format!("Unsupported endpoint type {other}"),
        )),
    };
    if let Some((code, message)) = refusal {
        return DescribeClusterResponse {
            error_code: code.code(),
            error_message: Some(message),
            ..Default::default()
        };
    }
    let brokers = crate::broker::cluster_view::live_brokers(broker)
        .into_iter()
        .map(|b| DescribeClusterBroker {
            broker_id: NodeId(b.id),
            host: b.host,
            port: i32::from(b.port),
            rack: b.rack,
            is_fenced: false,
        })
        .collect();
    DescribeClusterResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        endpoint_type: ENDPOINT_TYPE_BROKER,
        cluster_id: broker.cluster_id.clone(),
        controller_id: NodeId(node_id),
        brokers,
        cluster_authorized_operations: acl::authorized_operations_if(
            request.include_cluster_authorized_operations,
            ResourceType::Cluster,
        ),
    }
}
