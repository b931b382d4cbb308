//! The controller's config policy on a real node: topic overrides are checked as the broker
//! resolves them over its own config (`TopicConfig::resolve`), broker configs by the dynamic
//! rules (only dynamic keys, values of their types, as `BrokerConfig::with_dynamic` applies
//! them). One rule set for the broker's own checks and the controller's, so a config the
//! controller accepts is one every broker can run with.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::config::{BrokerConfig, TopicConfig};
use crate::broker::dynamic_config::check_keys;

use super::core::ConfigPolicy;
use super::image::ConfigResource;
use super::records::CONFIG_RESOURCE_TOPIC;

/// Checks configs against this node's static broker config.
#[derive(Debug)]
pub struct BrokerConfigPolicy {
    pub broker: Arc<BrokerConfig>,
}

impl ConfigPolicy for BrokerConfigPolicy {
    fn check(
        &self,
        resource: &ConfigResource,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        for (key, value) in overrides {
            if key.contains(['\n', '\r', '=']) || value.contains(['\n', '\r']) {
                return Err(format!(
                    "'{key}' has a line break or '=' in its name or value"
                ));
            }
        }
        if resource.resource_type == CONFIG_RESOURCE_TOPIC {
            TopicConfig::resolve(&self.broker, overrides)
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            check_keys(overrides.keys()).map_err(|e| e.to_string())?;
            self.broker
                .with_dynamic(overrides)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    }
}
