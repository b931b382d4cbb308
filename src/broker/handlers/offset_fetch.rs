//! OffsetFetch (key 9): the committed offsets of one group (v0-7) or several (v8+), all of a
//! group's or those of the partitions named. Only durable commits are returned: the answer is
//! held behind the shard's writes in flight. `require_stable` (v7+) asks for no pending
//! transactional offsets, which this broker never has (transactions come later), so it
//! changes nothing. The rules are the coordinator's (`coordinator::shard`).

use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::{Answer, OffsetQuestion};
use crate::protocol::error::ErrorCode;
use crate::protocol::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: OffsetFetchRequest,
) -> Reply {
    let questions: Vec<OffsetQuestion> = if version >= 8 {
        request
            .groups
            .into_iter()
            .map(|g| {
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                });
                (g.group_id, topics)
            })
            .collect()
    } else {
        let topics = request.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.name, t.partition_indexes))
                .collect()
        });
        vec![(request.group_id, topics)]
    };
    let mut pending = Vec::new();
    for (group_id, topics) in questions {
        let question = (group_id.clone(), topics);
        let rx = broker
            .coordinator
            .call(&group_id, move |shard, _now, token| {
                shard.offset_fetch(token, vec![question])
            })
            .await;
        pending.push((group_id, rx));
    }
    later(
        correlation_id,
        OffsetFetchRequest::API_KEY,
        version,
        async move {
            let mut groups = Vec::new();
            for (group_id, rx) in pending {
                let id = group_id.clone();
                let fail = move |code: ErrorCode| {
                    vec![OffsetFetchResponseGroup {
                        group_id: id.clone(),
                        error_code: code.code(),
                        ..Default::default()
                    }]
                };
                let answer = await_answer(rx, fail, |a| match a {
                    Answer::OffsetFetch(r) => Some(r),
                    _ => None,
                })
                .await;
                groups.extend(answer);
            }
            if version >= 8 {
                return OffsetFetchResponse {
                    groups,
                    ..Default::default()
                };
            }
            // v0-7: one group, its error at the top (v2+) and, before v2, on every partition.
            let group = groups.into_iter().next().unwrap_or_default();
            let partition_code = if version < 2 { group.error_code } else { 0 };
            OffsetFetchResponse {
                error_code: group.error_code,
                topics: group
                    .topics
                    .into_iter()
                    .map(|t| OffsetFetchResponseTopic {
                        name: t.name,
                        partitions: t
                            .partitions
                            .into_iter()
                            .map(|p| OffsetFetchResponsePartition {
                                partition_index: p.partition_index,
                                committed_offset: p.committed_offset,
                                committed_leader_epoch: p.committed_leader_epoch,
                                metadata: p.metadata,
                                error_code: if p.error_code != 0 {
                                    p.error_code
                                } else {
                                    partition_code
                                },
                            })
                            .collect(),
                    })
                    .collect(),
                ..Default::default()
            }
        },
    )
}
