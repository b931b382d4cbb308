//! IncrementalAlterConfigs (key 44): changes single configs of topics and of this broker's
//! dynamic layers: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for
//! list configs (`cleanup.policy`, `log.cleanup.policy`). Validation, persistence and
//! `validate_only` are AlterConfigs' (see `alter_configs`).
//!
//! Refusals, as Kafka: an unknown operation, a key named twice in one resource, a null value
//! for SET/APPEND/SUBTRACT or a resource named twice is INVALID_REQUEST; APPEND or SUBTRACT on
//! a config that is not a list is INVALID_CONFIG. APPEND and SUBTRACT start from the current
//! override, or else from Kafka's default of the key.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::broker::dynamic_config;
use crate::broker::handlers::alter_configs::{alter_each, dynamic_error, Refusal};
use crate::broker::handlers::describe_configs::RESOURCE_BROKER;
use crate::broker::Broker;
use crate::protocol::error::ErrorCode;
use crate::protocol::incremental_alter_configs::{
    AlterConfigsResourceResponse, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};

/// One validated operation.
#[derive(Clone, Debug)]
enum Op {
    Set(String, String),
    Delete(String),
    Append(String, Vec<String>),
    Subtract(String, Vec<String>),
}

/// List-typed configs and Kafka's default of each.
pub const LIST_CONFIGS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("log.cleanup.policy", "delete"),
];

/// The items of a list config's value.
pub fn list_items(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_ops(configs: &[AlterableConfig]) -> Result<Vec<Op>, Refusal> {
    let mut seen = BTreeSet::new();
    let mut ops = Vec::with_capacity(configs.len());
    for config in configs {
        let name = config.name.clone();
        if !seen.insert(name.clone()) {
            return Err((
                ErrorCode::INVALID_REQUEST,
                format!("config '{name}' appears more than once"),
            ));
        }
        let value = || {
            config.value.clone().ok_or_else(|| {
                (
                    ErrorCode::INVALID_REQUEST,
                    format!("null value not supported for config '{name}'"),
                )
            })
        };
        let list = |op: &str| {
            if LIST_CONFIGS.iter().any(|(k, _)| *k == name) {
                Ok(())
            } else {
                Err((
                    ErrorCode::INVALID_CONFIG,
                    format!("config value {op} is not allowed for config key: {name}"),
                ))
            }
        };
        ops.push(match config.config_operation {
            0 => Op::Set(name.clone(), value()?),
            1 => Op::Delete(name),
            2 => {
                list("append")?;
                Op::Append(name.clone(), list_items(&value()?))
            }
            3 => {
                list("subtract")?;
                Op::Subtract(name.clone(), list_items(&value()?))
            }
            other => {
                return Err((
                    ErrorCode::INVALID_REQUEST,
                    format!("unknown config operation {other} for config '{name}'"),
                ))
            }
        });
    }
    Ok(ops)
}

/// The configs after applying `ops` to `current`.
fn apply(current: &BTreeMap<String, String>, ops: Vec<Op>) -> BTreeMap<String, String> {
    let mut out = current.clone();
    let list_of = |out: &BTreeMap<String, String>, name: &str| -> Vec<String> {
        match out.get(name) {
            Some(v) => list_items(v),
            None => LIST_CONFIGS
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, d)| list_items(d))
                .unwrap_or_default(),
        }
    };
    for op in ops {
        match op {
            Op::Set(name, value) => {
                out.insert(name, value);
            }
            Op::Delete(name) => {
                out.remove(&name);
            }
            Op::Append(name, add) => {
                let mut list = list_of(&out, &name);
                for item in add {
                    if !list.contains(&item) {
                        list.push(item);
                    }
                }
                out.insert(name, list.join(","));
            }
            Op::Subtract(name, remove) => {
                let list: Vec<String> = list_of(&out, &name)
                    .into_iter()
                    .filter(|item| !remove.contains(item))
                    .collect();
                out.insert(name, list.join(","));
            }
        }
    }
    out
}

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let answered = alter_each(
        broker,
        request.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        request.validate_only,
        |r| {
            if r.resource_type == RESOURCE_BROKER {
                // Every key named, DELETE included, must be one that may change dynamically.
                dynamic_config::check_keys(r.configs.iter().map(|c| &c.name))
                    .map_err(dynamic_error)?;
            }
            let ops = parse_ops(&r.configs)?;
            Ok(move |current: &BTreeMap<String, String>| apply(current, ops))
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
    IncrementalAlterConfigsResponse {
        throttle_time_ms: 0,
        responses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, op: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig {
            name: name.to_string(),
            config_operation: op,
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn operations_edit_the_current_overrides() {
        let current = BTreeMap::from([
            ("retention.ms".to_string(), "1000".to_string()),
            ("segment.bytes".to_string(), "2000000".to_string()),
        ]);
        let ops = parse_ops(&[
            config("retention.ms", 0, Some("5000")),
            config("segment.bytes", 1, None),
            config("cleanup.policy", 2, Some("compact")),
        ])
        .unwrap();
        let out = apply(&current, ops);
        assert_eq!(out.get("retention.ms").map(String::as_str), Some("5000"));
        assert!(!out.contains_key("segment.bytes"));
        assert_eq!(
            out.get("cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        let out = apply(
            &out,
            parse_ops(&[config("cleanup.policy", 3, Some("delete"))]).unwrap(),
        );
        assert_eq!(
            out.get("cleanup.policy").map(String::as_str),
            Some("compact")
        );
    }

    #[test]
    fn bad_operations_are_refused_with_kafkas_codes() {
        let code = |configs: &[AlterableConfig]| parse_ops(configs).unwrap_err().0;
        assert_eq!(
            code(&[config("retention.ms", 2, Some("1"))]),
            ErrorCode::INVALID_CONFIG
        );
        assert_eq!(
            code(&[config("retention.ms", 9, Some("1"))]),
            ErrorCode::INVALID_REQUEST
        );
        assert_eq!(
            code(&[config("retention.ms", 0, None)]),
            ErrorCode::INVALID_REQUEST
        );
        assert_eq!(
            code(&[
                config("retention.ms", 0, Some("1")),
                config("retention.ms", 1, None)
            ]),
            ErrorCode::INVALID_REQUEST
        );
    }
}
