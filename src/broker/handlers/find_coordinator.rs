//! FindCoordinator (key 10): until the group coordinator arrives (step 6) every key is
//! answered COORDINATOR_NOT_AVAILABLE, which clients treat as retriable.

use std::sync::Arc;

use crate::broker::Broker;
use crate::protocol::error::ErrorCode;
use crate::protocol::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::types::NodeId;

const NOT_YET: &str = "this broker has no group or transaction coordinator yet";

pub fn handle(
    _broker: &Arc<Broker>,
    version: i16,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let code = ErrorCode::COORDINATOR_NOT_AVAILABLE.code();
    if version >= 4 {
        FindCoordinatorResponse {
            coordinators: request
                .coordinator_keys
                .into_iter()
                .map(|key| Coordinator {
                    key,
                    node_id: NodeId::NONE,
                    host: String::new(),
                    port: -1,
                    error_code: code,
                    error_message: Some(NOT_YET.to_string()),
                })
                .collect(),
            ..Default::default()
        }
    } else {
        FindCoordinatorResponse {
            error_code: code,
            error_message: Some(NOT_YET.to_string()),
            node_id: NodeId::NONE,
            port: -1,
            ..Default::default()
        }
    }
}
