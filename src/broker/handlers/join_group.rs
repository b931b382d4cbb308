//! JoinGroup (key 11): a member joins or rejoins a classic group. The answer waits in the
//! group's shard until the rebalance completes (or comes at once: MEMBER_ID_REQUIRED, an
//! error, a member whose join changes nothing), and goes out once the group's record for
//! the new generation is durable. The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Caller, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::{Answer, ClientContext, JOIN_SKIP_ASSIGNMENT_VERSION_MIN};
use crate::protocol::error::ErrorCode;
use crate::protocol::join_group::{JoinGroupRequest, JoinGroupResponse};

pub async fn start(
    broker: &Arc<Broker>,
    caller: &Caller,
    correlation_id: i32,
    version: i16,
    request: JoinGroupRequest,
) -> Reply {
    let member_id = request.member_id.clone();
    let fail = move |code: ErrorCode| JoinGroupResponse {
        error_code: code.code(),
        member_id: member_id.clone(),
        ..Default::default()
    };
    let client = ClientContext {
        client_id: caller.client_id.clone(),
        client_host: caller.client_host.clone(),
        new_member_id: caller.new_member_id(),
    };
    let group_id = request.group_id.clone();
    let rx = broker
        .coordinator
        .call(&group_id, move |shard, now, token| {
            shard.join_group(now, token, version, client, request)
        })
        .await;
    later(
        correlation_id,
        JoinGroupRequest::API_KEY,
        version,
        async move {
            let response = await_answer(rx, fail, |a| match a {
                Answer::JoinGroup(r) => Some(r),
                _ => None,
            })
            .await;
            // The shard sets skip_assignment only from v9, the first version that has it
            // (an older returning static leader is answered as Kafka answers it).
            assert!(
                version >= JOIN_SKIP_ASSIGNMENT_VERSION_MIN || !response.skip_assignment,
                "skip_assignment in a JoinGroup v{version} answer"
            );
            response
        },
    )
}
