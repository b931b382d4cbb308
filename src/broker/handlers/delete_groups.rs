//! DeleteGroups (key 42): deletes empty groups with their offsets (NON_EMPTY_GROUP for a
//! group with members, GROUP_ID_NOT_FOUND for an unknown one), answered once the tombstones
//! are durable. The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::delete_groups::{
    DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse,
};
use crate::protocol::error::ErrorCode;

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: DeleteGroupsRequest,
) -> Reply {
    let mut pending = Vec::new();
    for group_id in request.groups_names {
        let id = group_id.clone();
        let rx = broker
            .coordinator
            .call(&group_id, move |shard, now, token| {
                shard.delete_groups(now, token, vec![id])
            })
            .await;
        pending.push((group_id, rx));
    }
    later(
        correlation_id,
        DeleteGroupsRequest::API_KEY,
        version,
        async move {
            let mut results = Vec::new();
            for (group_id, rx) in pending {
                let id = group_id.clone();
                let fail = move |code: ErrorCode| {
                    vec![DeletableGroupResult {
                        group_id: id.clone(),
                        error_code: code.code(),
                    }]
                };
                results.extend(
                    await_answer(rx, fail, |a| match a {
                        Answer::DeleteGroups(r) => Some(r),
                        _ => None,
                    })
                    .await,
                );
            }
            DeleteGroupsResponse {
                results,
                ..Default::default()
            }
        },
    )
}
