//! CreateTopics (key 19) on the controller: the topics' records (TopicRecord, a
//! PartitionRecord per partition, ConfigRecords for the overrides) are written as one batch,
//! so a request's topics appear together or not at all; with `validate_only` nothing is
//! written. Each topic's outcome carries its id, partition count and replication factor.

use bytes::Bytes;

use crate::controller::core::{ControllerError, CreatedTopic, NewTopic, Request};
use crate::protocol::create_topics::{
    CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};

use super::{encode_message, outcome, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = CreateTopicsRequest::decode_exact(body, version)?;
    let topics = request
        .topics
        .into_iter()
        .map(|t| NewTopic {
            name: t.name,
            num_partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            assignments: t
                .assignments
                .into_iter()
                .map(|a| {
                    (
                        a.partition_index,
                        a.broker_ids.into_iter().map(|id| id.0).collect(),
                    )
                })
                .collect(),
            configs: t.configs.into_iter().map(|c| (c.name, c.value)).collect(),
        })
        .collect();
    Ok(Decoded::Request(Request::CreateTopics {
        topics,
        validate_only: request.validate_only,
    }))
}

pub fn encode(
    version: i16,
    reply: Vec<(String, Result<CreatedTopic, ControllerError>)>,
) -> Result<Bytes, HandlerError> {
    let topics = reply
        .into_iter()
        .map(|(name, result)| {
            let (error_code, error_message) = outcome(&result);
            let mut topic = CreatableTopicResult {
                name,
                error_code,
                error_message,
                ..Default::default()
            };
            if let Ok(created) = result {
                topic.topic_id = created.id;
                topic.num_partitions = created.num_partitions;
                topic.replication_factor = created.replication_factor;
            }
            topic
        })
        .collect();
    let response = CreateTopicsResponse {
        topics,
        ..Default::default()
    };
    encode_message(&response, version)
}
