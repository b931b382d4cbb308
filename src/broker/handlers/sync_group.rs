//! SyncGroup (key 14): the leader hands out the assignment; every member gets its part. A
//! follower's answer waits in the group's shard for the leader's; all go out once the group's
//! record with the assignment is durable. The rules are the coordinator's
//! (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::error::ErrorCode;
use crate::protocol::sync_group::{SyncGroupRequest, SyncGroupResponse};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: SyncGroupRequest,
) -> Reply {
    let fail = |code: ErrorCode| SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    };
    let group_id = request.group_id.clone();
    let rx = broker
        .coordinator
        .call(&group_id, move |shard, now, token| {
            shard.sync_group(now, token, version, request)
        })
        .await;
    later(
        correlation_id,
        SyncGroupRequest::API_KEY,
        version,
        async move {
            await_answer(rx, fail, |a| match a {
                Answer::SyncGroup(r) => Some(r),
                _ => None,
            })
            .await
        },
    )
}
