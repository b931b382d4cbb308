//! CreatePartitions (key 37): grows topics to a new partition count, served at once. The
//! count never decreases (INVALID_PARTITIONS, also for an unchanged count); explicit
//! assignments must give one replica list per new partition, each naming only this node
//! (INVALID_REPLICA_ASSIGNMENT otherwise); a topic named twice is INVALID_REQUEST;
//! `validate_only` checks and changes nothing. The new count is committed through the topic
//! file (see `Topics::create_partitions`).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::broker::handlers::topic_error_code;
use crate::broker::Broker;
use crate::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::types::NodeId;

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut seen = BTreeSet::new();
    let twice: BTreeSet<String> = request
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.clone()))
        .map(|t| t.name.clone())
        .collect();
    let node_id = broker.config.node_id;
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let outcome: Result<(), (ErrorCode, String)> = async {
            if twice.contains(&topic.name) {
                return Err((
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "topic '{}' appears more than once in the request",
                        topic.name
                    ),
                ));
            }
            let Some(existing) = broker.topics.get(&topic.name).await else {
                return Err((
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("topic '{}' does not exist", topic.name),
                ));
            };
            let current = existing.partitions.len() as i32;
            if let Some(assignments) = &topic.assignments {
                let added = i64::from(topic.count) - i64::from(current);
                if added > 0 && assignments.len() as i64 != added {
                    return Err((
                        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                        format!(
                            "{} assignments given for {added} new partitions of topic '{}'",
                            assignments.len(),
                            topic.name
                        ),
                    ));
                }
                if let Some(bad) = assignments
                    .iter()
                    .find(|a| a.broker_ids != [NodeId(node_id)])
                {
                    let ids: Vec<i32> = bad.broker_ids.iter().map(|b| b.0).collect();
                    return Err((
                        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                        format!(
                            "assignment {ids:?} for topic '{}' must name only broker {node_id}",
                            topic.name
                        ),
                    ));
                }
            }
            broker
                .topics
                .create_partitions(&topic.name, topic.count, request.validate_only)
                .await
                .map(|_| ())
                .map_err(|e| (topic_error_code(&e), e.to_string()))
        }
        .await;
        let (error_code, error_message) = match outcome {
            Ok(()) => (0, None),
            Err((code, message)) => (code.code(), Some(message)),
        };
        results.push(CreatePartitionsTopicResult {
            name: topic.name,
            error_code,
            error_message,
        });
    }
    CreatePartitionsResponse {
        throttle_time_ms: 0,
        results,
    }
}
