//! DeleteGroups (key 42): delete empty groups and their committed offsets.
//!
//! This module owns the request and response descriptions, v0-2.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks to delete some groups.
    pub struct DeleteGroupsRequest {
        api_key: 42,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The ids of the groups to delete.
            groups_names: kt::Array<kt::String>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of a group deletion, per group.
    pub struct DeleteGroupsResponse {
        api_key: 42,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The result for each group.
            results: kt::Array<DeletableGroupResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One group's deletion result.
    pub struct DeletableGroupResult {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The group id.
            group_id: kt::String, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
        }
        tagged {}
    }
}
