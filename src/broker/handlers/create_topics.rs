//! CreateTopics (key 19): creates topics with a partition count, a replication factor (1 on
//! a single node) and config overrides, or with `validate_only` checks them and creates
//! nothing. Explicit replica assignments may only name this node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::broker::handlers::topic_error_code;
use crate::broker::topics::NewTopic;
use crate::broker::Broker;
use crate::protocol::create_topics::{
    CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::types::NodeId;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut seen = BTreeSet::new();
    let duplicates: BTreeSet<String> = request
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.clone()))
        .map(|t| t.name.clone())
        .collect();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut result = CreatableTopicResult {
            name: topic.name.clone(),
            ..Default::default()
        };
        let fail = |mut result: CreatableTopicResult, code: ErrorCode, message: String| {
            result.error_code = code.code();
            result.error_message = Some(message);
            result
        };
        if duplicates.contains(&topic.name) {
            results.push(fail(
                result,
                ErrorCode::INVALID_REQUEST,
                format!(
                    "topic '{}' appears more than once in the request",
                    topic.name
                ),
            ));
            continue;
        }
        let node_id = broker.config.node_id;
        let mut partitions = (topic.num_partitions != -1).then_some(topic.num_partitions);
        let mut replication_factor =
            (topic.replication_factor != -1).then_some(topic.replication_factor);
        if !topic.assignments.is_empty() {
            if partitions.is_some() || replication_factor.is_some() {
                results.push(fail(
                    result,
                    ErrorCode::INVALID_REQUEST,
                    "with replica assignments, numPartitions and replicationFactor must be -1"
                        .to_string(),
                ));
                continue;
            }
            let mut indexes: Vec<i32> = topic
                .assignments
                .iter()
                .map(|a| a.partition_index)
                .collect();
            indexes.sort_unstable();
            let contiguous = indexes.iter().enumerate().all(|(i, p)| *p == i as i32);
            let only_us = topic
                .assignments
                .iter()
                .all(|a| a.broker_ids == [NodeId(node_id)]);
            if !contiguous || !only_us {
                results.push(fail(
                    result,
                    ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                    format!(
                        "assignments must number partitions from 0 and name only broker {node_id}"
                    ),
                ));
                continue;
            }
            partitions = Some(indexes.len() as i32);
            replication_factor = Some(1);
        }
        let mut overrides = BTreeMap::new();
        let mut null_config = None;
        for config in topic.configs {
            match config.value {
                Some(value) => {
                    overrides.insert(config.name, value);
                }
                None => null_config = Some(config.name),
            }
        }
        if let Some(name) = null_config {
            results.push(fail(
                result,
                ErrorCode::INVALID_CONFIG,
                format!("config '{name}' has a null value"),
            ));
            continue;
        }
        let new = NewTopic {
            id: None,
            name: topic.name,
            partitions,
            replication_factor,
            overrides,
        };
        let outcome = if request.validate_only {
            broker
                .topics
                .validate_new(&new)
                .await
                .map(|(partitions, factor, _)| (None, partitions, factor))
        } else {
            broker
                .topics
                .create(new)
                .await
                .map(|t| (Some(t.id), t.partitions.len() as i32, t.replication_factor))
        };
        match outcome {
            Ok((id, partitions, factor)) => {
                if let Some(id) = id {
                    result.topic_id = id;
                }
                if version >= 5 {
                    result.num_partitions = partitions;
                    result.replication_factor = factor;
                }
                results.push(result);
            }
            Err(e) => {
                let code = topic_error_code(&e);
                results.push(fail(result, code, e.to_string()));
            }
        }
    }
    CreateTopicsResponse {
        topics: results,
        ..Default::default()
    }
}
