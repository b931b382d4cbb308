//! ListGroups (key 16): every group this node coordinates, filtered by state (v4+) and type
//! (v5+). A broker without `__consumer_offsets` has no groups. While a partition of it loads
//! the answer is COORDINATOR_LOAD_IN_PROGRESS with the groups of the others, as in Kafka; a
//! partition another node coordinates is skipped (Kafka 4's GroupCoordinatorService drops
//! NOT_COORDINATOR parts). The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::error::ErrorCode;
use crate::protocol::list_groups::{ListGroupsRequest, ListGroupsResponse};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: ListGroupsRequest,
) -> Reply {
    let states = request.states_filter;
    let types = request.types_filter;
    let parts = broker
        .coordinator
        .call_all(|shard, _now, token| shard.list_groups(token, &states, &types))
        .await;
    later(
        correlation_id,
        ListGroupsRequest::API_KEY,
        version,
        async move {
            let mut response = ListGroupsResponse::default();
            let Ok(parts) = parts else {
                // No offsets topic yet: no groups, and nothing is wrong.
                return response;
            };
            for rx in parts {
                let part = await_answer(
                    Ok(rx),
                    |code: ErrorCode| ListGroupsResponse {
                        error_code: code.code(),
                        ..Default::default()
                    },
                    |a| match a {
                        Answer::ListGroups(r) => Some(r),
                        _ => None,
                    },
                )
                .await;
                let skipped = part.error_code == ErrorCode::NOT_COORDINATOR.code();
                if response.error_code == 0 && !skipped {
                    response.error_code = part.error_code;
                }
                response.groups.extend(part.groups);
            }
            response
        },
    )
}
