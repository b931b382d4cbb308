//! AlterConfigs (key 33): replaces the whole config of topics and of this broker's dynamic
//! layers. Also the shared machinery of IncrementalAlterConfigs.
//!
//! A topic's new overrides are validated exactly as at CreateTopics (a bad key or value is
//! INVALID_CONFIG naming both), written to its topic file (the commit point) and put in force
//! on the running partitions. A broker resource (this node's id, or `""` for the cluster-wide
//! default) takes only keys in `dynamic_config::DYNAMIC_BROKER_KEYS`: another broker key is
//! INVALID_REQUEST, an unknown key or a bad value INVALID_CONFIG. `validate_only` checks
//! everything and changes nothing. A resource named twice is INVALID_REQUEST.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::broker::dynamic_config::DynamicConfigError;
use crate::broker::handlers::describe_configs::{broker_scope, RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::broker::handlers::topic_error_code;
use crate::broker::Broker;
use crate::protocol::alter_configs::{
    AlterConfigsRequest, AlterConfigsResourceResponse, AlterConfigsResponse,
};
use crate::protocol::error::ErrorCode;

/// A refused resource: its error code and message.
pub type Refusal = (ErrorCode, String);

/// The error code of a dynamic broker config refusal.
pub fn dynamic_error(e: DynamicConfigError) -> Refusal {
    let code = match e {
        DynamicConfigError::NotDynamic { .. } => ErrorCode::INVALID_REQUEST,
        DynamicConfigError::UnknownKey { .. } | DynamicConfigError::Invalid(_) => {
            ErrorCode::INVALID_CONFIG
        }
        DynamicConfigError::Corrupt { .. } | DynamicConfigError::Io { .. } => {
            ErrorCode::UNKNOWN_SERVER_ERROR
        }
        DynamicConfigError::Controller(ref e) => e.code(),
    };
    (code, e.to_string())
}

/// Applies `change` to the configs of one resource (a topic's overrides or a broker layer).
pub async fn alter_resource(
    broker: &Arc<Broker>,
    resource_type: i8,
    resource_name: &str,
    validate_only: bool,
    change: impl FnOnce(&BTreeMap<String, String>) -> BTreeMap<String, String>,
) -> Result<(), Refusal> {
    match resource_type {
        RESOURCE_TOPIC => broker
            .topics
            .alter_overrides(resource_name, change, validate_only)
            .await
            .map(|_| ())
            .map_err(|e| (topic_error_code(&e), e.to_string())),
        RESOURCE_BROKER => {
            let scope =
                broker_scope(broker, resource_name).map_err(|m| (ErrorCode::INVALID_REQUEST, m))?;
            broker
                .dynamic
                .alter(&broker.topics, scope, validate_only, |current| {
                    Ok(change(current))
                })
                .await
                .map_err(dynamic_error)
        }
        other => Err((
            ErrorCode::INVALID_REQUEST,
            format!("resource type {other} cannot be altered on this broker"),
        )),
    }
}

/// The (type, name) pairs named more than once in a request.
fn duplicates<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> BTreeSet<(i8, String)> {
    let mut seen = BTreeSet::new();
    resources
        .filter(|(t, n)| !seen.insert((*t, n.to_string())))
        .map(|(t, n)| (t, n.to_string()))
        .collect()
}

/// Alters each resource of an AlterConfigs or IncrementalAlterConfigs request, in order, and
/// returns each with its response's error code and message. A resource named more than once
/// in the request (`key` gives its type and name) is refused before anything else; otherwise
/// `prepare` validates its configs and yields the change that [`alter_resource`] applies.
pub async fn alter_each<R, C>(
    broker: &Arc<Broker>,
    resources: Vec<R>,
    key: impl Fn(&R) -> (i8, &str),
    validate_only: bool,
    prepare: impl Fn(&R) -> Result<C, Refusal>,
) -> Vec<(R, i16, Option<String>)>
where
    C: FnOnce(&BTreeMap<String, String>) -> BTreeMap<String, String>,
{
    let twice = duplicates(resources.iter().map(&key));
    let mut answered = Vec::with_capacity(resources.len());
    for resource in resources {
        let (resource_type, resource_name) = key(&resource);
        let outcome = if twice.contains(&(resource_type, resource_name.to_owned())) {
            Err((
                ErrorCode::INVALID_REQUEST,
                format!(
                    "resource '{resource_name}' of type {resource_type} appears more than once in the request"
                ),
            ))
        } else {
            prepare(&resource)
        };
        let outcome = match outcome {
            Ok(change) => {
                alter_resource(broker, resource_type, resource_name, validate_only, change).await
            }
            Err(refusal) => Err(refusal),
        };
        let (error_code, error_message) = match outcome {
            Ok(()) => (0, None),
            Err((code, message)) => (code.code(), Some(message)),
        };
        answered.push((resource, error_code, error_message));
    }
    answered
}

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let answered = alter_each(
        broker,
        request.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        request.validate_only,
        |r| {
            let configs = new_configs(&r.configs)?;
            Ok(move |_: &BTreeMap<String, String>| configs)
        },
    )
    .await;
    let responses = answered
        .into_iter()
        .map(
            |(r, error_code, error_message)| AlterConfigsResourceResponse {
                error_code,
                error_message,
                resource_type: r.resource_type,
                resource_name: r.resource_name,
            },
        )
        .collect();
    AlterConfigsResponse {
        throttle_time_ms: 0,
        responses,
    }
}

/// The whole new config of a resource: every key once, none null.
fn new_configs(
    configs: &[crate::protocol::alter_configs::AlterableConfig],
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut out = BTreeMap::new();
    for config in configs {
        let Some(value) = &config.value else {
            return Err((
                ErrorCode::INVALID_REQUEST,
                format!("null value not supported for config '{}'", config.name),
            ));
        };
        if out.insert(config.name.clone(), value.clone()).is_some() {
            return Err((
                ErrorCode::INVALID_REQUEST,
                format!("config '{}' appears more than once", config.name),
            ));
        }
    }
    Ok(out)
}
