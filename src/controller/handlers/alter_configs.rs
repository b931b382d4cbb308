//! AlterConfigs (key 33) on the controller: each resource's overrides are replaced whole by
//! the request's (a Set of every given key, a delete of every other), written as
//! ConfigRecords after the policy accepted the result. A null value is refused as Kafka
//! refuses it (INVALID_REQUEST), for that resource only.

use bytes::Bytes;

use crate::controller::core::{ConfigOp, ControllerError, Request};
use crate::controller::image::ConfigResource;
use crate::protocol::alter_configs::{
    AlterConfigsRequest, AlterConfigsResourceResponse, AlterConfigsResponse,
};

use super::{encode_message, outcome, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = AlterConfigsRequest::decode_exact(body, version)?;
    let changes = request
        .resources
        .into_iter()
        .map(|r| {
            let mut ops: Vec<ConfigOp> = r
                .configs
                .into_iter()
                .map(|c| match c.value {
                    Some(value) => ConfigOp::Set(c.name, value),
                    None => ConfigOp::Refuse(ControllerError::InvalidRequest {
                        reason: format!("null value not supported for config '{}'", c.name),
                    }),
                })
                .collect();
            ops.push(ConfigOp::DeleteOthers);
            let resource = ConfigResource {
                resource_type: r.resource_type,
                name: r.resource_name,
            };
            (resource, ops)
        })
        .collect();
    Ok(Decoded::Request(Request::AlterConfigs {
        changes,
        validate_only: request.validate_only,
    }))
}

pub fn encode(
    version: i16,
    reply: Vec<(ConfigResource, Result<(), ControllerError>)>,
) -> Result<Bytes, HandlerError> {
    let responses = reply
        .into_iter()
        .map(|(resource, result)| {
            let (error_code, error_message) = outcome(&result);
            AlterConfigsResourceResponse {
                error_code,
                error_message,
                resource_type: resource.resource_type,
                resource_name: resource.name,
            }
        })
        .collect();
    let response = AlterConfigsResponse {
        responses,
        ..Default::default()
    };
    encode_message(&response, version)
}
