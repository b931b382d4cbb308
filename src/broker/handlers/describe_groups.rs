//! DescribeGroups (key 15): each group's state, protocol and members (with their metadata
//! and assignment while Stable, as Kafka). Without an authorizer, the authorized operations
//! asked for (v3+) are every operation a group supports. The rules are the coordinator's
//! (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::describe_groups::{
    DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup,
};
use crate::protocol::error::ErrorCode;

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: DescribeGroupsRequest,
) -> Reply {
    let include = request.include_authorized_operations;
    let mut pending = Vec::new();
    for group_id in request.groups {
        let id = group_id.clone();
        let rx = broker
            .coordinator
            .call(&group_id, move |shard, _now, token| {
                shard.describe_groups(token, version, vec![id], include)
            })
            .await;
        pending.push((group_id, rx));
    }
    later(
        correlation_id,
        DescribeGroupsRequest::API_KEY,
        version,
        async move {
            let mut groups = Vec::new();
            for (group_id, rx) in pending {
                let id = group_id.clone();
                let fail = move |code: ErrorCode| {
                    vec![DescribedGroup {
                        group_id: id.clone(),
                        error_code: code.code(),
                        ..Default::default()
                    }]
                };
                groups.extend(
                    await_answer(rx, fail, |a| match a {
                        Answer::DescribeGroups(r) => Some(r),
                        _ => None,
                    })
                    .await,
                );
            }
            DescribeGroupsResponse {
                groups,
                ..Default::default()
            }
        },
    )
}
