//! DeleteTopics (key 20) on the controller: a RemoveTopicRecord per topic, named by name (v0
//! to v5, and v6 without an id) or by id (v6), all in one batch.

use bytes::Bytes;

use crate::controller::core::{DeletedTopic, Request, TopicRef};
use crate::protocol::delete_topics::{
    DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
};
use crate::protocol::wire::Uuid;

use super::{encode_message, outcome, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = DeleteTopicsRequest::decode_exact(body, version)?;
    let mut topics: Vec<TopicRef> = request
        .topic_names
        .into_iter()
        .map(TopicRef::Name)
        .collect();
    for state in request.topics {
        topics.push(match state.name {
            Some(name) if state.topic_id == Uuid::ZERO => TopicRef::Name(name),
            _ => TopicRef::Id(state.topic_id),
        });
    }
    Ok(Decoded::Request(Request::DeleteTopics(topics)))
}

pub fn encode(version: i16, reply: Vec<(TopicRef, DeletedTopic)>) -> Result<Bytes, HandlerError> {
    let responses = reply
        .into_iter()
        .map(|(asked, result)| {
            let (error_code, error_message) = outcome(&result);
            let (name, topic_id) = match (result, asked) {
                (Ok((name, id)), _) => (Some(name), id),
                (Err(_), TopicRef::Name(name)) => (Some(name), Uuid::ZERO),
                (Err(_), TopicRef::Id(id)) => (None, id),
            };
            DeletableTopicResult {
                name,
                topic_id,
                error_code,
                error_message,
            }
        })
        .collect();
    let response = DeleteTopicsResponse {
        responses,
        ..Default::default()
    };
    encode_message(&response, version)
}
