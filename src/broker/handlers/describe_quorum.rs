//! DescribeQuorum (key 55) on the broker's client listener: the metadata quorum's leader,
//! epoch, high watermark and each voter's and observer's replication state, as
//! `kafka-metadata-quorum.sh --bootstrap-server` asks a broker for them. As Kafka's brokers
//! do, this one forwards the request to the active controller (the quorum's leader, over its
//! controller listener) and answers what it answered; a broker without a controller, or one
//! that reached none, answers the request's error with a message naming why.

use std::sync::Arc;

use crate::broker::Broker;
use crate::protocol::describe_quorum::{DescribeQuorumRequest, DescribeQuorumResponse};
use crate::protocol::error::ErrorCode;

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let Some(channel) = broker.topics.controller_channel() else {
        return failed(
            ErrorCode::INVALID_REQUEST,
            "this broker runs without a metadata quorum".to_string(),
        );
    };
    match channel.describe_quorum(&request).await {
        Ok(response) => response,
        Err(e) => failed(e.code(), e.to_string()),
    }
}

fn failed(code: ErrorCode, message: String) -> DescribeQuorumResponse {
    DescribeQuorumResponse {
        error_code: code.0,
        error_message: Some(message),
        ..Default::default()
    }
}
