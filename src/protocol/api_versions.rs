//! ApiVersions (key 18), the first exchange on every connection: which versions of which APIs
//! the broker supports.
//!
//! This module owns the request and response descriptions. The rules around them live with
//! the header versions ([`super::response_header_version`]): the response always goes out with
//! response header v0, and its body is encoded in the request's version, flexible from v3.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks the broker which API versions it supports.
    pub struct ApiVersionsRequest {
        api_key: 18,
        versions: (0-4),
        flexible: (3+),
        fields {
            /// The name of the client software.
            client_software_name: kt::String, versions(3+), flags(ignorable);
            /// The version of the client software.
            client_software_version: kt::String, versions(3+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// The broker's supported API versions and features.
    pub struct ApiVersionsResponse {
        api_key: 18,
        versions: (0-4),
        flexible: (3+),
        fields {
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The supported version range of each API.
            api_keys: kt::Array<ApiVersion>, versions(0+);
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
        }
        tagged {
            /// Features the broker supports.
            0 => supported_features: kt::Array<SupportedFeatureKey>, versions(3+),
                flags(ignorable);
            /// The epoch of the finalized features; -1 when unknown.
            1 => finalized_features_epoch: kt::Int64 = -1, versions(3+), flags(ignorable);
            /// The cluster-wide finalized features, valid when the epoch is >= 0.
            2 => finalized_features: kt::Array<FinalizedFeatureKey>, versions(3+),
                flags(ignorable);
            /// Set by a KRaft controller ready for ZooKeeper migration.
            3 => zk_migration_ready: kt::Bool, versions(3+), flags(ignorable);
        }
    }
}

message! {
    /// One API's supported version range.
    pub struct ApiVersion {
        versions: (0-4),
        flexible: (3+),
        fields {
            /// The API key.
            api_key: kt::Int16, versions(0+);
            /// The lowest supported version, inclusive.
            min_version: kt::Int16, versions(0+);
            /// The highest supported version, inclusive.
            max_version: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One feature the broker supports, with its version range.
    pub struct SupportedFeatureKey {
        versions: (0-4),
        flexible: (3+),
        fields {
            /// The feature name.
            name: kt::String, versions(3+);
            /// The lowest supported version of the feature.
            min_version: kt::Int16, versions(3+);
            /// The highest supported version of the feature.
            max_version: kt::Int16, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// One cluster-wide finalized feature.
    pub struct FinalizedFeatureKey {
        versions: (0-4),
        flexible: (3+),
        fields {
            /// The feature name.
            name: kt::String, versions(3+);
            /// The finalized highest version level.
            max_version_level: kt::Int16, versions(3+);
            /// The finalized lowest version level.
            min_version_level: kt::Int16, versions(3+);
        }
        tagged {}
    }
}
