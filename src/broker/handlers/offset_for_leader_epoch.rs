//! OffsetForLeaderEpoch (key 23): where a leader epoch ends in this leader's log (Kafka's
//! `Partition.lastOffsetForLeaderEpoch`), for followers finding where their log diverges
//! (KIP-101, KIP-279) and for consumers checking their position after a leader change
//! (KIP-320).
//!
//! Answers: the largest epoch at or below the requested one that the log has, and where it
//! ends (the log end for the latest epoch); an epoch the log does not know ends undefined
//! (-1, -1). A request whose `current_leader_epoch` is older than this leader's is
//! FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (this broker has not seen the change yet);
//! a partition this broker does not lead is NOT_LEADER_OR_FOLLOWER.

use std::sync::Arc;

use crate::broker::handlers::partition_error_code;
use crate::broker::Broker;
use crate::protocol::error::ErrorCode;
use crate::protocol::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
};
use crate::protocol::types::{LeaderEpoch, Offset};

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let resolved = broker.topics.get(&topic.topic).await;
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in topic.partitions {
            let mut answer = EpochEndOffset {
                partition: wanted.partition,
                ..Default::default()
            };
            let partition = resolved
                .as_ref()
                .and_then(|t| t.partition(wanted.partition));
            let code = match partition {
                None => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                Some(partition) => {
                    match partition.check_leader_epoch(wanted.current_leader_epoch.0) {
                        Err(e) => partition_error_code(&e),
                        Ok(()) => {
                            let end = partition
                                .log()
                                .end_offset_for_epoch(wanted.leader_epoch.0)
                                .await;
                            answer.leader_epoch = LeaderEpoch(end.epoch);
                            answer.end_offset = Offset(end.end_offset);
                            ErrorCode::NONE
                        }
                    }
                }
            };
            answer.error_code = code.code();
            partitions.push(answer);
        }
        topics.push(OffsetForLeaderTopicResult {
            topic: topic.topic,
            partitions,
        });
    }
    OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics,
    }
}
