//! LeaveGroup (key 13): members leave (v3+: a batch of them, static ones by instance id,
//! KIP-345), and the others rebalance. The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::error::ErrorCode;
use crate::protocol::leave_group::{LeaveGroupRequest, LeaveGroupResponse};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: LeaveGroupRequest,
) -> Reply {
    let fail = |code: ErrorCode| LeaveGroupResponse {
        error_code: code.code(),
        ..Default::default()
    };
    let group_id = request.group_id.clone();
    let rx = broker
        .coordinator
        .call(&group_id, move |shard, now, token| {
            shard.leave_group(now, token, version, request)
        })
        .await;
    later(
        correlation_id,
        LeaveGroupRequest::API_KEY,
        version,
        async move {
            await_answer(rx, fail, |a| match a {
                Answer::LeaveGroup(r) => Some(r),
                _ => None,
            })
            .await
        },
    )
}
