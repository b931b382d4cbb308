//! DeleteTopics (key 20): deletes topics by name (v0-5) or by name or id (v6+).

use std::sync::Arc;

use crate::broker::handlers::topic_error_code;
use crate::broker::Broker;
use crate::protocol::delete_topics::{
    DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::wire::Uuid;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|name| (Some(name), Uuid::ZERO))
            .collect()
    };
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, id) in wanted {
        let name = match name {
            Some(name) => Some(name),
            None => broker.topics.get_by_id(id).await.map(|t| t.name.clone()),
        };
        let mut result = DeletableTopicResult {
            name: name.clone(),
            topic_id: id,
            ..Default::default()
        };
        match name {
            None => {
                result.error_code = ErrorCode::UNKNOWN_TOPIC_ID.code();
                result.error_message = Some(format!("no topic has id {}", id.to_base64()));
            }
            Some(name) => match broker.topics.delete(&name).await {
                Ok(topic) => result.topic_id = topic.id,
                Err(e) => {
                    result.error_code = topic_error_code(&e).code();
                    result.error_message = Some(e.to_string());
                }
            },
        }
        responses.push(result);
    }
    DeleteTopicsResponse {
        responses,
        ..Default::default()
    }
}
