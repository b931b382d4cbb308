//! Heartbeat (key 12): a member of a classic group tells the coordinator it is alive, and
//! learns whether a rebalance is under way.
//!
//! This module owns the request and response descriptions, v0-4.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Keeps a member's session alive.
    pub struct HeartbeatRequest {
        api_key: 12,
        versions: (0-4),
        flexible: (4+),
        fields {
            /// The group id.
            group_id: kt::String, versions(0+);
            /// The generation the member belongs to.
            generation_id: kt::Int32, versions(0+);
            /// The member id.
            member_id: kt::String, versions(0+);
            /// The static member's instance id, or null.
            group_instance_id: kt::NullableString = None, versions(3+), nullable(3+);
        }
        tagged {}
    }
}

message! {
    /// The answer to a heartbeat: REBALANCE_IN_PROGRESS tells the member to rejoin.
    pub struct HeartbeatResponse {
        api_key: 12,
        versions: (0-4),
        flexible: (4+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
        }
        tagged {}
    }
}
