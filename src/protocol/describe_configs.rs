//! DescribeConfigs (key 32): the configs of topics and brokers, with their sources and
//! synonyms. This module owns the request and response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for the configs of some resources.
    pub struct DescribeConfigsRequest {
        api_key: 32,
        versions: (1-4),
        flexible: (4+),
        fields {
            /// The resources to describe.
            resources: kt::Array<DescribeConfigsResource>, versions(0+);
            /// Whether to include synonyms.
            include_synonyms: kt::Bool, versions(1+);
            /// Whether to include documentation.
            include_documentation: kt::Bool, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// One resource to describe.
    pub struct DescribeConfigsResource {
        versions: (1-4),
        flexible: (4+),
        fields {
            /// The resource type (2 topic, 4 broker, ...).
            resource_type: kt::Int8, versions(0+);
            /// The resource name.
            resource_name: kt::String, versions(0+);
            /// The config keys to describe, or null for all.
            configuration_keys: kt::NullableArray<kt::String>, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The configs of each resource.
    pub struct DescribeConfigsResponse {
        api_key: 32,
        versions: (1-4),
        flexible: (4+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// Each resource's result.
            results: kt::Array<DescribeConfigsResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One resource's configs.
    pub struct DescribeConfigsResult {
        versions: (1-4),
        flexible: (4+),
        fields {
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(0+), nullable(0+);
            /// The resource type.
            resource_type: kt::Int8, versions(0+);
            /// The resource name.
            resource_name: kt::String, versions(0+);
            /// Each config.
            configs: kt::Array<DescribeConfigsResourceResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One config of a resource.
    pub struct DescribeConfigsResourceResult {
        versions: (1-4),
        flexible: (4+),
        fields {
            /// The config name.
            name: kt::String, versions(0+);
            /// The config value, or null.
            value: kt::NullableString, versions(0+), nullable(0+);
            /// Whether the config is read-only.
            read_only: kt::Bool, versions(0+);
            /// Where the config comes from.
            config_source: kt::Int8 = -1, versions(1+), flags(ignorable);
            /// Whether the config is sensitive.
            is_sensitive: kt::Bool, versions(0+);
            /// The config's synonyms, by precedence.
            synonyms: kt::Array<DescribeConfigsSynonym>, versions(1+), flags(ignorable);
            /// The config's type.
            config_type: kt::Int8, versions(3+), flags(ignorable);
            /// The config's documentation, or null.
            documentation: kt::NullableString, versions(3+), nullable(0+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// A synonym of a config.
    pub struct DescribeConfigsSynonym {
        versions: (1-4),
        flexible: (4+),
        fields {
            /// The synonym name.
            name: kt::String, versions(1+);
            /// The synonym value, or null.
            value: kt::NullableString, versions(1+), nullable(0+);
            /// The synonym's source.
            source: kt::Int8, versions(1+);
        }
        tagged {}
    }
}
