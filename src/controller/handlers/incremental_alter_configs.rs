//! IncrementalAlterConfigs (key 44) on the controller: SET (0), DELETE (1), APPEND (2) and
//! SUBTRACT (3) of single configs, APPEND and SUBTRACT only on list configs and starting from
//! the override or else Kafka's default. Refusals, as Kafka and the broker's handler: an
//! unknown operation, a key twice in one resource or a null value for SET, APPEND or
//! SUBTRACT is INVALID_REQUEST; APPEND or SUBTRACT on a config that is not a list is
//! INVALID_CONFIG; each for its resource only.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::broker::handlers::incremental_alter_configs::{list_items, LIST_CONFIGS};
use crate::controller::core::{ConfigOp, ControllerError, Request};
use crate::controller::image::ConfigResource;
use crate::protocol::incremental_alter_configs::{
    AlterConfigsResourceResponse, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};

use super::{encode_message, outcome, Decoded, HandlerError};

fn op(resource: &ConfigResource, seen: &mut BTreeSet<String>, config: AlterableConfig) -> ConfigOp {
    let name = config.name;
    let invalid = |reason: String| ConfigOp::Refuse(ControllerError::InvalidRequest { reason });
    if !seen.insert(name.clone()) {
        return invalid(format!("config '{name}' appears more than once"));
    }
    let list_default = LIST_CONFIGS
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, d)| d.to_string());
    let value = match (config.config_operation, config.value) {
        (1, _) => return ConfigOp::Delete(name),
        (0..=3, Some(value)) => value,
        (0..=3, None) => return invalid(format!("null value not supported for config '{name}'")),
        (other, _) => {
            return invalid(format!(
                "unknown config operation {other} for config '{name}'"
            ))
        }
    };
    match (config.config_operation, list_default) {
        (0, _) => ConfigOp::Set(name, value),
        (2, Some(default)) => ConfigOp::Append {
            key: name,
            items: list_items(&value),
            default,
        },
        (3, Some(default)) => ConfigOp::Subtract {
            key: name,
            items: list_items(&value),
            default,
        },
        (op @ (2 | 3), None) => ConfigOp::Refuse(ControllerError::InvalidConfig {
            resource: resource.clone(),
            reason: format!(
                "config value {} is not allowed for config key: {name}",
                if op == 2 { "append" } else { "subtract" }
            ),
        }),
        (other, _) => unreachable!("operation {other} was answered above"),
    }
}

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = IncrementalAlterConfigsRequest::decode_exact(body, version)?;
    let changes = request
        .resources
        .into_iter()
        .map(|r| {
            let resource = ConfigResource {
                resource_type: r.resource_type,
                name: r.resource_name,
            };
            let mut seen = BTreeSet::new();
            let ops = r
                .configs
                .into_iter()
                .map(|c| op(&resource, &mut seen, c))
                .collect();
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
    let response = IncrementalAlterConfigsResponse {
        responses,
        ..Default::default()
    };
    encode_message(&response, version)
}
