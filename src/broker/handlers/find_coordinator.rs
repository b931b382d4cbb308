//! FindCoordinator (key 10): names the node that coordinates a group (key type 0): the
//! leader of the group's `__consumer_offsets` partition in the metadata image
//! (`broker::cluster_view`); COORDINATOR_NOT_AVAILABLE while that partition has no reachable
//! leader.
//! The first question creates `__consumer_offsets` (once `offsets.topic.replication.factor`
//! brokers are alive; COORDINATOR_NOT_AVAILABLE until then, which clients retry).
//! Transaction coordinators (key type 1) do not exist yet: COORDINATOR_NOT_AVAILABLE.
//! v4+ asks about a batch of keys at once.

use std::sync::Arc;

use crate::broker::cluster_view::{self, BrokerEndpoint};
use crate::broker::Broker;
use crate::coordinator::driver::OFFSETS_TOPIC;
use crate::coordinator::records::partition_for;
use crate::protocol::error::ErrorCode;
use crate::protocol::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::types::NodeId;

/// FindCoordinator's key types.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys = if version >= 4 {
        request.coordinator_keys.clone()
    } else {
        vec![request.key.clone()]
    };
    let mut found = Vec::new();
    for key in keys {
        let outcome = match request.key_type {
            KEY_TYPE_GROUP => match broker
                .coordinator
                .ensure_started(&broker.topics, cluster_view::live_brokers(broker).len())
                .await
            {
                Ok(()) => Ok(()),
                Err(code) => Err((
                    code,
                    "the group coordinator is not available yet".to_string(),
                )),
            },
            KEY_TYPE_TRANSACTION => Err((
                ErrorCode::COORDINATOR_NOT_AVAILABLE,
                "this broker has no transaction coordinator yet".to_string(),
            )),
            other => Err((
                ErrorCode::INVALID_REQUEST,
                format!("unknown coordinator key type {other}"),
            )),
        };
        let coordinator = match outcome {
            Ok(()) => match group_coordinator(broker, &key).await {
                Some(endpoint) => Coordinator {
                    key,
                    node_id: NodeId(endpoint.id),
                    host: endpoint.host,
                    port: i32::from(endpoint.port),
                    error_code: 0,
                    error_message: None,
                },
                None => not_found(
                    key,
                    ErrorCode::COORDINATOR_NOT_AVAILABLE,
                    "the group's __consumer_offsets partition has no leader".to_string(),
                ),
            },
            Err((code, why)) => not_found(key, code, why),
        };
        found.push(coordinator);
    }
    if version >= 4 {
        return FindCoordinatorResponse {
            coordinators: found,
            ..Default::default()
        };
    }
    let c = found.into_iter().next().unwrap_or_default();
    FindCoordinatorResponse {
        error_code: c.error_code,
        error_message: c.error_message,
        node_id: c.node_id,
        host: c.host,
        port: c.port,
        ..Default::default()
    }
}

/// The broker that leads `group`'s partition of `__consumer_offsets`, if it is reachable.
async fn group_coordinator(broker: &Broker, group: &str) -> Option<BrokerEndpoint> {
    let topic = broker.topics.get(OFFSETS_TOPIC).await?;
    let count = i32::try_from(topic.partitions.len()).ok()?;
    if count == 0 {
        return None;
    }
    let index = partition_for(group, count);
    let leader = cluster_view::partition(broker, OFFSETS_TOPIC, index)?.leader;
    if leader < 0 {
        return None;
    }
    cluster_view::endpoint(broker, leader)
}

fn not_found(key: String, code: ErrorCode, why: String) -> Coordinator {
    Coordinator {
        key,
        node_id: NodeId::NONE,
        host: String::new(),
        port: -1,
        error_code: code.code(),
        error_message: Some(why),
    }
}
