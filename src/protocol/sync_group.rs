//! SyncGroup (key 14): after a join, the leader hands in the assignment and every member
//! receives its own share of it.
//!
//! This module owns the request and response descriptions, v0-5. Assignments are opaque
//! bytes to the broker (for consumers, the consumer protocol's assignment).

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Sends the leader's assignment (followers send none) and waits for one's own.
    pub struct SyncGroupRequest {
        api_key: 14,
        versions: (0-5),
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
            /// The group's protocol type, or null.
            protocol_type: kt::NullableString = None, versions(5+), nullable(5+),
                flags(ignorable);
            /// The group's chosen protocol name, or null.
            protocol_name: kt::NullableString = None, versions(5+), nullable(5+),
                flags(ignorable);
            /// Each member's assignment; sent by the leader only.
            assignments: kt::Array<SyncGroupRequestAssignment>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One member's assignment, as the leader computed it.
    pub struct SyncGroupRequestAssignment {
        versions: (0-5),
        flexible: (4+),
        fields {
            /// The member id.
            member_id: kt::String, versions(0+);
            /// The member's assignment.
            assignment: kt::Bytes, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// A member's assignment.
    pub struct SyncGroupResponse {
        api_key: 14,
        versions: (0-5),
        flexible: (4+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The group's protocol type, or null.
            protocol_type: kt::NullableString = None, versions(5+), nullable(5+),
                flags(ignorable);
            /// The group's chosen protocol name, or null.
            protocol_name: kt::NullableString = None, versions(5+), nullable(5+),
                flags(ignorable);
            /// The member's assignment.
            assignment: kt::Bytes, versions(0+);
        }
        tagged {}
    }
}
