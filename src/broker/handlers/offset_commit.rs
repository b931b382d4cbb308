//! OffsetCommit (key 8): commits offsets for a group (a member of its generation, or, with
//! generation -1, a group-less consumer or an admin tool). Answered once the commit's records
//! are durable in `__consumer_offsets`; partitions of unknown topics get
//! UNKNOWN_TOPIC_OR_PARTITION, as in Kafka. The rules are the coordinator's
//! (`coordinator::shard`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::handlers::{await_answer, later, Reply};
use crate::broker::Broker;
use crate::coordinator::shard::Answer;
use crate::protocol::error::ErrorCode;
use crate::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};

pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: OffsetCommitRequest,
) -> Reply {
    // The partition counts of the topics named, read before the step (the core does no IO).
    let mut partitions: BTreeMap<String, i32> = BTreeMap::new();
    for topic in &request.topics {
        if let Some(t) = broker.topics.get(&topic.name).await {
            partitions.insert(
                topic.name.clone(),
                i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            );
        }
    }
    let shape: Vec<(String, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let fail = move |code: ErrorCode| OffsetCommitResponse {
        topics: shape
            .iter()
            .map(|(name, partitions)| OffsetCommitResponseTopic {
                name: name.clone(),
                partitions: partitions
                    .iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: *p,
                        error_code: code.code(),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let group_id = request.group_id.clone();
    let exists = move |topic: &str, partition: i32| {
        partition >= 0
            && partitions
                .get(topic)
                .is_some_and(|count| partition < *count)
    };
    let rx = broker
        .coordinator
        .call(&group_id, move |shard, now, token| {
            shard.offset_commit(now, token, version, request, &exists)
        })
        .await;
    later(
        correlation_id,
        OffsetCommitRequest::API_KEY,
        version,
        async move {
            await_answer(rx, fail, |a| match a {
                Answer::OffsetCommit(r) => Some(r),
                _ => None,
            })
            .await
        },
    )
}
