//! FindCoordinator (key 10): the broker coordinating a group or transactional id; one key per
//! request before v4, a batch of keys from v4. This module owns the request and response
//! descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for the coordinator of some keys.
    pub struct FindCoordinatorRequest {
        api_key: 10,
        versions: (0-6),
        flexible: (3+),
        fields {
            /// The key (v0-3).
            key: kt::String, versions(0-3);
            /// The key type: 0 group, 1 transaction, 2 share group.
            key_type: kt::Int8, versions(1+);
            /// The keys (v4+).
            coordinator_keys: kt::Array<kt::String>, versions(4+);
        }
        tagged {}
    }
}

message! {
    /// The coordinators found.
    pub struct FindCoordinatorResponse {
        api_key: 10,
        versions: (0-6),
        flexible: (3+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// The error code, or 0 (v0-3).
            error_code: kt::Int16, versions(0-3);
            /// The error message, or null (v1-3).
            error_message: kt::NullableString, versions(1-3), nullable(1-3), flags(ignorable);
            /// The coordinator's broker id (v0-3).
            node_id: kt::NodeId, versions(0-3);
            /// The coordinator's host name (v0-3).
            host: kt::String, versions(0-3);
            /// The coordinator's port (v0-3).
            port: kt::Int32, versions(0-3);
            /// Each key's coordinator (v4+).
            coordinators: kt::Array<Coordinator>, versions(4+);
        }
        tagged {}
    }
}

message! {
    /// The coordinator of one key.
    pub struct Coordinator {
        versions: (0-6),
        flexible: (3+),
        fields {
            /// The key.
            key: kt::String, versions(4+);
            /// The coordinator's broker id.
            node_id: kt::NodeId, versions(4+);
            /// The coordinator's host name.
            host: kt::String, versions(4+);
            /// The coordinator's port.
            port: kt::Int32, versions(4+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(4+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(4+), nullable(4+), flags(ignorable);
        }
        tagged {}
    }
}
