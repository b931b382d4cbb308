//! CreatePartitions (key 37) on the controller: a topic grows to its new count with a
//! PartitionRecord per new partition, placed over the live brokers or where the request's
//! assignments say.

use bytes::Bytes;

use crate::controller::core::{ControllerError, NewPartitions, Request};
use crate::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};

use super::{encode_message, outcome, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = CreatePartitionsRequest::decode_exact(body, version)?;
    let topics = request
        .topics
        .into_iter()
        .map(|t| NewPartitions {
            name: t.name,
            count: t.count,
            assignments: t.assignments.map(|assignments| {
                assignments
                    .into_iter()
                    .map(|a| a.broker_ids.into_iter().map(|id| id.0).collect())
                    .collect()
            }),
        })
        .collect();
    Ok(Decoded::Request(Request::CreatePartitions {
        topics,
        validate_only: request.validate_only,
    }))
}

pub fn encode(
    version: i16,
    reply: Vec<(String, Result<(), ControllerError>)>,
) -> Result<Bytes, HandlerError> {
    let results = reply
        .into_iter()
        .map(|(name, result)| {
            let (error_code, error_message) = outcome(&result);
            CreatePartitionsTopicResult {
                name,
                error_code,
                error_message,
            }
        })
        .collect();
    let response = CreatePartitionsResponse {
        results,
        ..Default::default()
    };
    encode_message(&response, version)
}
