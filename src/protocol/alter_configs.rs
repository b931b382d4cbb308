//! AlterConfigs (key 33): replacing the whole config of resources. This module owns the
//! request and response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for configs to be replaced.
    pub struct AlterConfigsRequest {
        api_key: 33,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The resources to alter.
            resources: kt::Array<AlterConfigsResource>, versions(0+);
            /// Only validate the request, altering nothing.
            validate_only: kt::Bool, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One resource to alter.
    pub struct AlterConfigsResource {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The resource type.
            resource_type: kt::Int8, versions(0+);
            /// The resource name.
            resource_name: kt::String, versions(0+);
            /// The resource's new configs.
            configs: kt::Array<AlterableConfig>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One config to set.
    pub struct AlterableConfig {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The config name.
            name: kt::String, versions(0+);
            /// The config value, or null.
            value: kt::NullableString, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome for each resource.
    pub struct AlterConfigsResponse {
        api_key: 33,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// Each resource's result.
            responses: kt::Array<AlterConfigsResourceResponse>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One resource's result.
    pub struct AlterConfigsResourceResponse {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(0+), nullable(0+);
            /// The resource type.
            resource_type: kt::Int8, versions(0+);
            /// The resource name.
            resource_name: kt::String, versions(0+);
        }
        tagged {}
    }
}
