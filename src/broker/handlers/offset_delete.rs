//! OffsetDelete (key 47): deletes a group's committed offsets for some partitions, refused
//! per partition (GROUP_SUBSCRIBED_TO_TOPIC) while the group's members subscribe to the
//! topic. The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::error::ErrorCode;
use crate::protocol::offset_delete::{OffsetDeleteRequest, OffsetDeleteResponse};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: OffsetDeleteRequest,
) -> Reply {
    let fail = |code: ErrorCode| OffsetDeleteResponse {
        error_code: code.code(),
        ..Default::default()
    };
    let group_id = request.group_id.clone();
    let rx = broker
        .coordinator
        .call(&group_id, move |shard, _now, token| {
            shard.offset_delete(token, request)
        })
        .await;
    later(
        correlation_id,
        OffsetDeleteRequest::API_KEY,
        version,
        async move {
            await_answer(rx, fail, |a| match a {
                Answer::OffsetDelete(r) => Some(r),
                _ => None,
            })
            .await
        },
    )
}
