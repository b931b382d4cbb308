//! DescribeConfigs (key 32): every config of a topic or of this broker, with its value,
//! source, synonyms (when asked), type and documentation (v3+, when asked), or only the
//! `configuration_keys` asked for.
//!
//! Resources: a topic (type 2) by name; a broker (type 4) by this node's id, or `""` for the
//! cluster-wide dynamic defaults. Another broker id, a name that is no integer, and any other
//! resource type answer INVALID_REQUEST, as Kafka does; an unknown topic
//! UNKNOWN_TOPIC_OR_PARTITION.

use std::sync::Arc;

use crate::broker::dynamic_config::{self, Described, Scope};
use crate::broker::Broker;
use crate::protocol::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResourceResult, DescribeConfigsResponse,
    DescribeConfigsResult, DescribeConfigsSynonym,
};
use crate::protocol::error::ErrorCode;

/// Kafka's `ConfigResource.Type` codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Which broker layer a broker resource name addresses, or the error message.
pub fn broker_scope(broker: &Broker, name: &str) -> Result<Scope, String> {
    if name.is_empty() {
        return Ok(Scope::ClusterDefault);
    }
    match name.parse::<i32>() {
        Ok(id) if id == broker.config.node_id => Ok(Scope::Node),
        Ok(_) => Err(format!(
            "Unexpected broker id, expected {} or empty string, but received {name}",
            broker.config.node_id
        )),
        Err(_) => Err(format!("Broker id must be an integer, but it is: {name}")),
    }
}

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let layers = broker.dynamic.layers().await;
    let static_config = broker.dynamic.static_config().clone();
    let mut results = Vec::with_capacity(request.resources.len());
    let (include_synonyms, include_documentation) =
        (request.include_synonyms, request.include_documentation);
    for resource in request.resources {
        let mut result = DescribeConfigsResult {
            resource_type: resource.resource_type,
            resource_name: resource.resource_name.clone(),
            ..Default::default()
        };
        let keys = resource.configuration_keys.as_deref();
        let described: Result<Vec<Described>, (ErrorCode, String)> = match resource.resource_type {
            RESOURCE_TOPIC => match broker.topics.get(&resource.resource_name).await {
                Some(topic) => dynamic_config::describe_topic(
                    &static_config,
                    &layers,
                    &broker.topics.broker_config(),
                    &topic.overrides,
                    keys,
                )
                .map_err(|e| (ErrorCode::UNKNOWN_SERVER_ERROR, e.to_string())),
                None => match crate::broker::topics::validate_name(&resource.resource_name) {
                    Err(e) => Err((ErrorCode::INVALID_TOPIC_EXCEPTION, e.to_string())),
                    Ok(()) => Err((
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        format!("topic '{}' does not exist", resource.resource_name),
                    )),
                },
            },
            RESOURCE_BROKER => match broker_scope(broker, &resource.resource_name) {
                Ok(scope) => Ok(dynamic_config::describe_broker(
                    &static_config,
                    &layers,
                    scope,
                    keys,
                )),
                Err(message) => Err((ErrorCode::INVALID_REQUEST, message)),
            },
            other => Err((
                ErrorCode::INVALID_REQUEST,
                format!("resource type {other} is not supported by this broker"),
            )),
        };
        match described {
            Ok(described) => {
                result.configs = described
                    .into_iter()
                    .map(|d| entry(d, version, include_synonyms, include_documentation))
                    .collect();
            }
            Err((code, message)) => {
                result.error_code = code.code();
                result.error_message = Some(message);
            }
        }
        results.push(result);
    }
    DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
    }
}

fn entry(
    d: Described,
    version: i16,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult {
        name: d.name,
        value: d.value,
        read_only: d.read_only,
        config_source: d.source as i8,
        is_sensitive: d.sensitive,
        synonyms: if include_synonyms {
            d.synonyms
                .into_iter()
                .map(|(name, value, source)| DescribeConfigsSynonym {
                    name,
                    value,
                    source: source as i8,
                })
                .collect()
        } else {
            Vec::new()
        },
        config_type: if version >= 3 { d.config_type as i8 } else { 0 },
        documentation: (version >= 3 && include_documentation).then(|| d.documentation.to_string()),
    }
}
