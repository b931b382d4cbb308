//! Heartbeat (key 12): a member says it is alive and learns whether a rebalance started
//! (REBALANCE_IN_PROGRESS). The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::error::ErrorCode;
use crate::protocol::heartbeat::{HeartbeatRequest, HeartbeatResponse};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: HeartbeatRequest,
) -> Reply {
    let fail = |code: ErrorCode| HeartbeatResponse {
        error_code: code.code(),
        ..Default::default()
    };
    let group_id = request.group_id.clone();
    let rx = broker
        .coordinator
        .call(&group_id, move |shard, now, token| {
            shard.heartbeat(now, token, request)
        })
        .await;
    later(
        correlation_id,
        HeartbeatRequest::API_KEY,
        version,
        async move {
            await_answer(rx, fail, |a| match a {
                Answer::Heartbeat(r) => Some(r),
                _ => None,
            })
            .await
        },
    )
}
