//! ListGroups (key 16): every group this node coordinates, filtered by state (v4+) and type
//! (v5+). A broker without `__consumer_offsets` has no groups. The rules are the
//! coordinator's (`coordinator::shard`).

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
        .call_all(|shard, _now_ms, token| shard.list_groups(token, &states, &types))
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
                let listed = await_answer(
                    Ok(rx),
                    |_code: ErrorCode| Vec::new(),
                    |a| match a {
                        Answer::ListGroups(r) => Some(r),
                        _ => None,
                    },
                )
                .await;
                response.groups.extend(listed);
            }
            response
        },
    )
}
