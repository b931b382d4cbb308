//! ListGroups (key 16): the groups a broker coordinates, optionally filtered by state (v4+)
//! and type (v5+).
//!
//! This module owns the request and response descriptions, v0-5. An empty filter means no
//! filtering.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for the groups this broker coordinates.
    pub struct ListGroupsRequest {
        api_key: 16,
        versions: (0-5),
        flexible: (3+),
        fields {
            /// The states of the groups to list; empty for all.
            states_filter: kt::Array<kt::String>, versions(4+);
            /// The types of the groups to list; empty for all.
            types_filter: kt::Array<kt::String>, versions(5+);
        }
        tagged {}
    }
}

message! {
    /// The groups this broker coordinates.
    pub struct ListGroupsResponse {
        api_key: 16,
        versions: (0-5),
        flexible: (3+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// Each group.
            groups: kt::Array<ListedGroup>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One listed group.
    pub struct ListedGroup {
        versions: (0-5),
        flexible: (3+),
        fields {
            /// The group id.
            group_id: kt::String, versions(0+);
            /// The group's protocol type.
            protocol_type: kt::String, versions(0+);
            /// The group's state.
            group_state: kt::String, versions(4+), flags(ignorable);
            /// The group's type (classic, consumer, share, ...).
            group_type: kt::String, versions(5+), flags(ignorable);
        }
        tagged {}
    }
}
